// amla/mla/typhoon.hpp: TyphoonMLA (Yuzuguler et al., Algorithm 1): naive attention over the
// shared prefix, absorb attention over each request's own suffix, the two partial outputs merged
// with their log-sum-exps.
//
// Stage 1 (naive): the prefix is stored decompressed (mla/decompress.hpp), K [L_s, H, D_qk] and
// V [L_s, H, D_v], once for all requests. (Algorithm 1 writes C_K with a leading B dimension and
// no H; Table 1, which reads it once per step, and the text mean one per-head copy shared by all
// requests, which is what is stored here.) The softmax scale, which Algorithm 1 leaves out, is
// 1 / sqrt(D_n + D_r) in both stages. Each head h attends it with the queries of every request
// and token at once, B * s_q rows, so the prefix is read once per step: this reuse is what makes
// the naive form cheaper than absorb on a shared prefix at large batch (mla/cost.hpp).
// Stage 2 (absorb): each request's suffix through mla/absorb.hpp's path (q_A = q_N W_KVb1,
// attention on [C_N, C_R], W_KVb2 after).
// Combine: for each (request, token, head), the two partial outputs o_1, o_2 (each normalised by
// its own softmax sum) and their lse_1, lse_2 merge into the softmax over the union of the keys:
//   lse = log(e^lse_1 + e^lse_2),  o = e^(lse_1 - lse) o_1 + e^(lse_2 - lse) o_2,
// the split-KV combine of attention/split_kv.hpp (an empty part has lse = -inf and weight 0).
// With a causal mask a token's window may end inside the prefix; each stage then sees the part
// of the window that falls in its keys.
//
// Fall-back: below the batch size where the mixed kernel pays off, TyphoonMLA runs absorb alone
// over prefix and suffix (the prefix's latent cache must then be present too, as it is in
// MlaDecodeInputs). TyphoonOptions::plan picks: automatic asks the cost model (mla/cost.hpp,
// `typhoon_choice`) for the chosen chip with the step's B, s_q, L_s and mean suffix length; mixed
// and absorb_only force one plan. MlaResult::ran says which ran.
//
// bf16 mode: every tensor that one kernel writes and the next reads is stored in BF16 (the
// decompressed prefix, q_A, o_A, the W_KVb2 projection's output, stage 1's output); lse stays
// FP32; the combine runs in FP32 and its result is the output (cast to BF16 with
// round_output_bf16). float64 mode: everything in float64, golden attention in both stages.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "amla/attention/split_kv.hpp"
#include "amla/config.hpp"
#include "amla/detail/parallel.hpp"
#include "amla/mla/absorb.hpp"
#include "amla/mla/cost.hpp"
#include "amla/mla/decode_problem.hpp"
#include "amla/mla/decompress.hpp"
#include "amla/mla/detail/dense.hpp"
#include "amla/mla/detail/partial.hpp"
#include "amla/mla/model.hpp"
#include "amla/mla/roofline.hpp"

namespace amla::mla {

/// Which plan TyphoonMLA runs.
enum class typhoon_plan : std::uint8_t {
  automatic,    ///< the cost model's choice for TyphoonOptions::hw
  mixed,        ///< always naive prefix + absorb suffix + combine
  absorb_only,  ///< always the absorb fall-back
};

/// TyphoonMLA's plan selection.
struct TyphoonOptions {
  typhoon_plan plan = typhoon_plan::automatic;
  Hardware hw = hardware::typhoon_npu;  ///< the chip the cost model prices the plans for
  CostOptions cost{};
};

namespace detail {

template <prefix_element P, mla_element T>
void validate_prefix(const char* fn, const MlaModel<T>& model, const MlaDecodeInputs<T>& in,
                     const PrefixKVView<P>& prefix) {
  if (prefix.len != in.prefix_len) {
    amla::detail::throw_invalid(fn, "prefix.len", std::to_string(prefix.len),
                                "must equal inputs.prefix_len = " + std::to_string(in.prefix_len));
  }
  const DecodeShape shape = prefix_kv_shape(model.dims, prefix.len);
  amla::detail::check_span(fn, "prefix.k", prefix.k, shape.kv_elems(), "[len, H, D_n + D_r]");
  amla::detail::check_span(fn, "prefix.v", prefix.v, shape.v_elems(), "[len, H, D_v]");
}

inline void validate_typhoon_options(const char* fn, const TyphoonOptions& o) {
  if (o.plan != typhoon_plan::automatic && o.plan != typhoon_plan::mixed &&
      o.plan != typhoon_plan::absorb_only) {
    amla::detail::throw_invalid(fn, "typhoon.plan", std::to_string(static_cast<int>(o.plan)),
                                "must be automatic, mixed or absorb_only");
  }
  if (o.plan == typhoon_plan::automatic) {
    validate_hardware(fn, o.hw);
    validate_options(fn, o.cost);
  }
}

/// Stage 1: every head attends the decompressed prefix with all B * s_q query rows.
template <class S, prefix_element P, mla_element T>
Partial<S> typhoon_prefix_stage(const MlaModel<T>& model, const MlaDecodeInputs<T>& in,
                                const PrefixKVView<P>& prefix, const MlaOptions& opt,
                                double scale) {
  const MlaDims& d = model.dims;
  constexpr bool round = std::is_same_v<S, float>;
  Partial<S> res(io_shape(d, in.batch, in.s_q));
  const int rows = in.batch * in.s_q;
  std::vector<int> visible(static_cast<std::size_t>(rows));
  for (int b = 0; b < in.batch; ++b) {
    const int context = context_len(in, b);
    for (int t = 0; t < in.s_q; ++t) {
      visible[static_cast<std::size_t>(b * in.s_q + t)] =
          std::min(in.prefix_len, visible_keys(context, in.s_q, t, opt.causal));
    }
  }
  amla::detail::parallel_for(
      static_cast<std::size_t>(d.heads), amla::detail::resolve_threads(opt.threads),
      [&](std::size_t task) {
        const int h = static_cast<int>(task);
        const DecodeShape shape = prefix_kv_shape(d, prefix.len);
        Mat<S> k(prefix.len, d.d_qk()), v(prefix.len, d.d_v);
        for (int s = 0; s < prefix.len; ++s) {
          const P* ks = prefix.k.data() + shape.slot_index(0, s, h) * shape.d_qk;
          const P* vs = prefix.v.data() + shape.slot_index(0, s, h) * shape.d_v;
          for (int c = 0; c < d.d_qk(); ++c) k(s, c) = element_as<S>(ks[c], round);
          for (int c = 0; c < d.d_v; ++c) v(s, c) = element_as<S>(vs[c], round);
        }
        Mat<S> q(rows, d.d_qk());
        for (int b = 0; b < in.batch; ++b) {
          for (int t = 0; t < in.s_q; ++t) {
            gather_query<S>(d, in, b, t, h, round, q.row(b * in.s_q + t).data());
          }
        }
        KeyValues<S> kv(prefix.len, d.d_qk(), d.d_v);
        kv.set_rows(0, k, v);
        DenseResult<S> r = kv.attend(q, prefix.len, visible, scale, opt.kv_block);
        store_rounded<S>(r.out);  // stage 1's output as its kernel writes it
        for (int b = 0; b < in.batch; ++b) {
          for (int t = 0; t < in.s_q; ++t) {
            res.set(b, t, h, r.out.row(b * in.s_q + t), r.lse(b * in.s_q + t));
          }
        }
      });
  return res;
}

/// The mixed plan in scalar S.
template <class S, prefix_element P, mla_element T>
Partial<S> typhoon_mixed(const MlaModel<T>& model, const MlaDecodeInputs<T>& in,
                         const PrefixKVView<P>& prefix, const MlaOptions& opt, double scale) {
  const Partial<S> naive = typhoon_prefix_stage<S>(model, in, prefix, opt, scale);
  Partial<S> absorb = absorb_run<S>(model, in, opt, scale, absorb_keys::suffix_only);
  if constexpr (std::is_same_v<S, float>) {
    for (float& x : absorb.out) x = round_bf16(x);  // the W_KVb2 projection's BF16 output
  }
  // The split-KV combine, one head at a time over its B * s_q rows.
  const MlaDims& d = model.dims;
  const int rows = in.batch * in.s_q;
  Partial<S> res(io_shape(d, in.batch, in.s_q));
  std::vector<attention::SplitPartial<S>> parts(2);
  for (auto& part : parts) {
    part.out.resize(rows, d.d_v);
    part.lse.resize(rows);
  }
  Mat<S> out(rows, d.d_v);
  std::vector<S> lse(static_cast<std::size_t>(rows));
  for (int h = 0; h < d.heads; ++h) {
    for (int b = 0; b < in.batch; ++b) {
      for (int t = 0; t < in.s_q; ++t) {
        const int r = b * in.s_q + t;
        const std::size_t o = res.shape.out_offset(b, t, h), l = res.shape.lse_offset(b, t, h);
        for (int c = 0; c < d.d_v; ++c) {
          parts[0].out(r, c) = naive.out[o + static_cast<std::size_t>(c)];
          parts[1].out(r, c) = absorb.out[o + static_cast<std::size_t>(c)];
        }
        parts[0].lse(r) = naive.lse[l];
        parts[1].lse(r) = absorb.lse[l];
      }
    }
    attention::combine_splits<S>(parts, out, lse);
    for (int b = 0; b < in.batch; ++b) {
      for (int t = 0; t < in.s_q; ++t) {
        const int r = b * in.s_q + t;
        res.set(b, t, h, out.row(r), lse[static_cast<std::size_t>(r)]);
      }
    }
  }
  return res;
}

}  // namespace detail

/// Whether TyphoonMLA takes its mixed plan for this step under `typhoon` (see the file comment).
template <mla_element T>
bool typhoon_runs_mixed(const MlaModel<T>& model, const MlaDecodeInputs<T>& inputs,
                        const TyphoonOptions& typhoon = {}) {
  switch (typhoon.plan) {
    case typhoon_plan::mixed:
      return true;
    case typhoon_plan::absorb_only:
      return false;
    case typhoon_plan::automatic:
      break;
  }
  return typhoon_choice(model.dims, decode_step(model.dims, inputs), typhoon.hw, typhoon.cost)
      .mixed;
}

/// TyphoonMLA decode (see the file comment): `prefix` is the decompressed shared prefix
/// (decompress_prefix), `inputs` the queries, the prefix's latent cache (for the fall-back) and
/// the requests' own latent caches. Throws amla::invalid_argument for an inconsistent model,
/// inputs, prefix or options.
template <prefix_element P, mla_element T>
MlaResult typhoon_decode(const MlaModel<T>& model, const MlaDecodeInputs<T>& inputs,
                         const PrefixKVView<P>& prefix, const MlaOptions& options = {},
                         const TyphoonOptions& typhoon = {}) {
  const char* fn = "amla::mla::typhoon_decode";
  const double scale = detail::validate_decode(fn, model, inputs, options);
  detail::validate_prefix(fn, model, inputs, prefix);
  detail::validate_typhoon_options(fn, typhoon);
  if (!typhoon_runs_mixed(model, inputs, typhoon)) {
    return detail::absorb_in_mode(model, inputs, options, scale);
  }
  return detail::run_in_mode(options, formulation::typhoon, [&](auto s) {
    return detail::typhoon_mixed<decltype(s)>(model, inputs, prefix, options, scale);
  });
}

/// TyphoonMLA decode with an owned decompressed prefix.
template <prefix_element P, mla_element T>
MlaResult typhoon_decode(const MlaModel<T>& model, const MlaDecodeInputs<T>& inputs,
                         const PrefixKV<P>& prefix, const MlaOptions& options = {},
                         const TyphoonOptions& typhoon = {}) {
  return typhoon_decode(model, inputs, prefix.view(), options, typhoon);
}

}  // namespace amla::mla
