// amla/mla/absorb.hpp: MLA decode with W_KVb1 absorbed into the query and W_KVb2 applied after
// attention, as FlashMLA and AMLA compute it.
//
// For each query head h the no-RoPE query is projected into the latent space,
//   q_A(h) = [q_N(h) W_KVb1[h] (D_l), q_R(h) (D_r)]        (576 columns for DeepSeek-V3),
// and attends the latent cache [C_N, C_R] directly: one KV head shared by all H query heads, with
// keys of D_l + D_r columns and values C_N (the first D_l columns of the same rows):
//   o_A(h) = softmax(scale q_A(h) [C_N, C_R]^T) C_N,   out(h) = W_KVb2[h] o_A(h)   (D_v).
// The scores equal the naive ones (q_N W_KVb1 c_n = q_N (W_KVb1 c_n)), so the softmax scale stays
// 1 / sqrt(D_n + D_r), not 1 / sqrt(D_l + D_r). All H heads (and the s_q tokens) of a request form
// one head group of s_q * H rows, ordered t * H + h as attention/head_group.hpp describes.
//
// bf16 mode: q_A is a BF16 GEMM result (FP32 accumulation) stored in BF16, the query an absorb
// kernel takes; attention is the Base recurrence on the BF16 latent cache; o_A is stored in BF16
// (the attention kernel's output) and the W_KVb2 projection is a BF16 GEMM with FP32
// accumulation, whose FP32 result is the output (cast to BF16 with round_output_bf16).
// float64 mode: every product in float64, attention by the golden recurrence.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/parallel.hpp"
#include "amla/mla/cost.hpp"
#include "amla/mla/decode_problem.hpp"
#include "amla/mla/decompress.hpp"
#include "amla/mla/detail/dense.hpp"
#include "amla/mla/detail/partial.hpp"
#include "amla/mla/model.hpp"

namespace amla::mla {

namespace detail {

/// Which keys an absorb run attends: the whole context, or only the requests' suffixes (the
/// second stage of TyphoonMLA).
enum class absorb_keys : std::uint8_t { prefix_and_suffix, suffix_only };

/// The absorb formulation in scalar S (double: float64 mode, float: bf16 mode), in three phases:
/// q_A for every request (one task per head, so each head's W_KVb1 is converted once), attention
/// (one task per request), the W_KVb2 projection (one task per head).
template <class S, mla_element T>
Partial<S> absorb_run(const MlaModel<T>& model, const MlaDecodeInputs<T>& in, const MlaOptions& opt,
                      double scale, absorb_keys keys) {
  const MlaDims& d = model.dims;
  constexpr bool round = std::is_same_v<S, float>;
  const unsigned threads = amla::detail::resolve_threads(opt.threads);
  const int tokens = in.batch * in.s_q;  // query rows of one head over the batch, b * s_q + t
  const int rows = in.s_q * d.heads;     // rows of one request's head group, t * H + h
  const bool with_prefix = keys == absorb_keys::prefix_and_suffix;
  const int skipped = with_prefix ? 0 : in.prefix_len;  // keys before the first one attended

  // Phase 1: q_A = [q_N W_KVb1[h], q_R], for request b at rows t * H + h of q_a[b].
  std::vector<Mat<S>> q_a(static_cast<std::size_t>(in.batch), Mat<S>(rows, d.absorb_d_qk()));
  amla::detail::parallel_for(static_cast<std::size_t>(d.heads), threads, [&](std::size_t task) {
    const int h = static_cast<int>(task);
    Mat<S> q(tokens, d.d_qk());
    for (int b = 0; b < in.batch; ++b) {
      for (int t = 0; t < in.s_q; ++t) {
        gather_query<S>(d, in, b, t, h, round, q.row(b * in.s_q + t).data());
      }
    }
    Mat<S> qn = project<S>(q.leftCols(d.d_nope), w_kvb1_head<S>(model, h, round));
    store_rounded<S>(qn);  // the absorbed query as the attention kernel receives it
    for (int b = 0; b < in.batch; ++b) {
      for (int t = 0; t < in.s_q; ++t) {
        auto row = q_a[static_cast<std::size_t>(b)].row(t * d.heads + h);
        row.head(d.d_latent) = qn.row(b * in.s_q + t);
        row.tail(d.d_rope) = q.row(b * in.s_q + t).tail(d.d_rope);
      }
    }
  });

  // Phase 2: attention of each request's head group on its latent cache.
  std::vector<Mat<S>> o_a(static_cast<std::size_t>(in.batch));
  std::vector<Eigen::Matrix<S, Eigen::Dynamic, 1>> lse(static_cast<std::size_t>(in.batch));
  amla::detail::parallel_for(static_cast<std::size_t>(in.batch), threads, [&](std::size_t task) {
    const int b = static_cast<int>(task);
    const Mat<S> latent = gather_latent<S>(d, in, b, with_prefix, true, round);
    std::vector<int> visible(static_cast<std::size_t>(rows));
    const int context = context_len(in, b);
    for (int t = 0; t < in.s_q; ++t) {
      const int vis = std::max(0, visible_keys(context, in.s_q, t, opt.causal) - skipped);
      for (int h = 0; h < d.heads; ++h) visible[static_cast<std::size_t>(t * d.heads + h)] = vis;
    }
    KeyValues<S> kv(latent.rows(), d.absorb_d_qk(), d.absorb_d_v());
    kv.set_rows(0, latent, latent.leftCols(d.d_latent));
    DenseResult<S> r = kv.attend(q_a[task], latent.rows(), visible, scale, opt.kv_block);
    store_rounded<S>(r.out);  // o_A as the attention kernel writes it
    o_a[task] = std::move(r.out);
    lse[task] = std::move(r.lse);
  });

  // Phase 3: out(h) = W_KVb2[h] o_A(h).
  Partial<S> res(io_shape(d, in.batch, in.s_q));
  amla::detail::parallel_for(static_cast<std::size_t>(d.heads), threads, [&](std::size_t task) {
    const int h = static_cast<int>(task);
    Mat<S> o(tokens, d.d_latent);
    for (int b = 0; b < in.batch; ++b) {
      for (int t = 0; t < in.s_q; ++t) {
        o.row(b * in.s_q + t) = o_a[static_cast<std::size_t>(b)].row(t * d.heads + h);
      }
    }
    const Mat<S> up = project<S>(o, w_kvb2_head<S>(model, h, round).transpose());
    for (int b = 0; b < in.batch; ++b) {
      for (int t = 0; t < in.s_q; ++t) {
        res.set(b, t, h, up.row(b * in.s_q + t), lse[static_cast<std::size_t>(b)](t * d.heads + h));
      }
    }
  });
  return res;
}

/// The absorb formulation over the prefix and the suffix in the mode of `options`, for inputs that
/// validate_decode passed (`scale`: what it returned).
template <mla_element T>
MlaResult absorb_in_mode(const MlaModel<T>& model, const MlaDecodeInputs<T>& in,
                         const MlaOptions& options, double scale) {
  return run_in_mode(options, formulation::absorb, [&](auto s) {
    return absorb_run<decltype(s)>(model, in, options, scale, absorb_keys::prefix_and_suffix);
  });
}

}  // namespace detail

/// MLA decode in the absorb formulation (see the file comment). Throws amla::invalid_argument
/// for an inconsistent model, inputs or options.
template <mla_element T>
MlaResult absorb_decode(const MlaModel<T>& model, const MlaDecodeInputs<T>& inputs,
                        const MlaOptions& options = {}) {
  const double scale = detail::validate_decode("amla::mla::absorb_decode", model, inputs, options);
  return detail::absorb_in_mode(model, inputs, options, scale);
}

}  // namespace amla::mla
