// amla/mla/decode_problem.hpp: the inputs and outputs of one MLA decode step, shared by the naive,
// absorb and TyphoonMLA formulations.
//
// Tensors (row-major, last index fastest), views over the caller's memory:
//   q              [batch, s_q, H, D_n + D_r]   queries after W_Qb and RoPE: per head the no-RoPE
//                                               part Q_N (D_n) then the RoPE part Q_R (D_r)
//   prefix_latent  [prefix_len, D_l + D_r]      the shared prefix's latent cache, one copy for all
//                                               requests: C_N (D_l) then C_R (D_r) per token
//   suffix.data    [num_pages, page_size, D_l + D_r]   each request's own latent cache, paged as
//                                               problem/shape.hpp pages a kv cache of one KV head
//                                               (`suffix_shape` is that DecodeShape)
//   suffix.block_table [batch, max_pages_per_seq], suffix.seqlens [batch]   (int32)
//   out            [batch, s_q, H, D_v],  lse [batch, H, s_q]   (natural log)
// Request b attends L_b = prefix_len + seqlens[b] keys: the prefix, then its suffix. Key s of the
// suffix lives in page block_table[b][s / page_size], slot s % page_size; pages and block-table
// entries past a request's length are never read.
//
// Masking. With causal = false every query token sees all L_b keys. With causal = true the s_q
// query tokens are the last s_q positions of the context: token t sees keys
// [0, L_b - s_q + t], i.e. clamp(L_b - s_q + t + 1, 0, L_b) keys, which may end inside the prefix.
// A row that sees no key (L_b = 0, or a causal window that is empty) gives out = 0 and
// lse = -inf, as in the attention recurrences.
//
// Softmax scale. All three formulations use 1 / sqrt(D_n + D_r) by default: the scores are the
// naive per-head dot products whichever way they are computed.
//
// Numerics. `numerics::float64` is the truth: every projection in float64 and the attention by
// the golden recurrence on the float64 operands (mla/detail/dense.hpp). `numerics::bf16` is what a
// kernel computes: inputs rounded to BF16 when read, projections as BF16 GEMMs with FP32
// accumulation whose results a kernel stores in BF16, attention by the Base recurrence (BF16
// operands, FP32 accumulation and online softmax, P cast to BF16). Each formulation's header states
// exactly where it rounds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/checked.hpp"
#include "amla/mla/cost.hpp"
#include "amla/mla/model.hpp"
#include "amla/mla/presets.hpp"
#include "amla/problem/shape.hpp"
#include "amla/problem/validate.hpp"
#include "amla/problem/workload.hpp"

namespace amla::mla {

/// Float64 truth, or a kernel's BF16 arithmetic.
enum class numerics : std::uint8_t {
  float64,  ///< float64 projections, golden attention
  bf16,     ///< BF16 operands and stores, FP32 accumulation, Base attention
};

/// Each request's own (non-shared) latent cache, paged with one KV head of D_l + D_r columns.
template <mla_element T>
struct LatentCache {
  int num_pages = 1;
  int page_size = 64;
  int max_pages_per_seq = 1;
  std::span<const T> data;                    ///< [num_pages, page_size, D_l + D_r]
  std::span<const std::int32_t> block_table;  ///< [batch, max_pages_per_seq]
  std::span<const std::int32_t> seqlens;      ///< [batch]: suffix tokens of each request (L_n)
};

/// The inputs of one decode step (see the file comment for layouts).
template <mla_element T>
struct MlaDecodeInputs {
  int batch = 1;                     ///< B
  int s_q = 1;                       ///< query tokens per request
  std::span<const T> q;              ///< [batch, s_q, H, D_n + D_r]
  int prefix_len = 0;                ///< L_s: tokens of the shared prefix (0: none)
  std::span<const T> prefix_latent;  ///< [prefix_len, D_l + D_r]
  LatentCache<T> suffix;             ///< each request's own tokens
};

/// What a formulation computes and how the host runs it.
struct MlaOptions {
  numerics mode = numerics::float64;
  bool causal = false;                  ///< mask aligned to the end of each context
  std::optional<double> softmax_scale;  ///< default 1 / sqrt(D_n + D_r); finite and > 0
  bool round_output_bf16 = false;       ///< bf16 mode: cast the final output to BF16
  int kv_block = 512;                   ///< bf16 mode: the Base recurrence's KV block size
  int threads = 0;                      ///< host threads; 0 = hardware concurrency
};

/// The layouts of an MLA step's queries and outputs, as the DecodeShape of its naive view (per-head
/// attention with d_qk = D_n + D_r and d_v = D_v): q [batch, s_q, H, D_n + D_r],
/// out [batch, s_q, H, D_v] and lse [batch, H, s_q], addressed by its q_offset, out_offset and
/// lse_offset. Its paging fields (one page of one slot) describe no cache.
inline DecodeShape io_shape(const MlaDims& d, int batch, int s_q) {
  return {batch, s_q, d.heads, 1, d.d_qk(), d.d_v, 1, 1, 1};
}

/// The requests' own latent cache as the DecodeShape of the absorb view's attention problem: one
/// KV head of d_qk = D_l + D_r columns whose first d_v = D_l columns are the values, paged by
/// `in.suffix`. Its kv_elems, block_table_elems, slot_index and table_offset address the suffix
/// cache; amla::validate_tables checks its block table and seqlens.
template <mla_element T>
DecodeShape suffix_shape(const MlaDims& d, const MlaDecodeInputs<T>& in) {
  const LatentCache<T>& c = in.suffix;
  return {in.batch,    in.s_q,          d.heads,
          1,           d.absorb_d_qk(), d.absorb_d_v(),
          c.num_pages, c.page_size,     c.max_pages_per_seq};
}

/// The step's attention as a problem-layer Workload in the absorb view (one latent head,
/// d_qk = D_l + D_r, d_v = D_l, V in K): request b attends L_b = prefix_len + seqlens[b] keys.
/// The inputs' sizes are not validated here (the decode functions do that).
template <mla_element T>
Workload workload(const MlaDims& d, const MlaDecodeInputs<T>& in, bool causal = false) {
  std::vector<int> contexts(in.suffix.seqlens.size());
  for (std::size_t b = 0; b < contexts.size(); ++b) {
    contexts[b] = in.prefix_len + in.suffix.seqlens[b];
  }
  return view_workload(d, formulation::absorb, in.s_q, std::move(contexts), causal);
}

/// The decode step as the cost model sees it: B, s_q, L_s and the mean suffix length (rounded to
/// the nearest token).
template <mla_element T>
DecodeStep decode_step(const MlaDims& d, const MlaDecodeInputs<T>& in) {
  return decode_step(workload(d, in), in.prefix_len);
}

/// Outputs of a decode step: out [batch, s_q, H, D_v] and lse [batch, H, s_q] (natural log), held
/// in double (FP32 results of the bf16 mode are exact in it), laid out by `shape` (io_shape).
struct MlaResult {
  DecodeShape shape;                     ///< io_shape of the step
  formulation ran = formulation::naive;  ///< for TyphoonMLA: typhoon (mixed) or absorb (fall-back)
  std::vector<double> out;
  std::vector<double> lse;

  MlaResult() = default;
  MlaResult(const DecodeShape& s, formulation f)
      : shape(s),
        ran(f),
        out(amla::detail::allocate<double>("amla::mla::MlaResult", "out", s.out_elems())),
        lse(amla::detail::allocate<double>("amla::mla::MlaResult", "lse", s.lse_elems())) {}

  double* out_row(int b, int t, int h) { return out.data() + shape.out_offset(b, t, h); }
  const double* out_row(int b, int t, int h) const {
    return out.data() + shape.out_offset(b, t, h);
  }
  double& lse_at(int b, int t, int h) { return lse[shape.lse_offset(b, t, h)]; }
  double lse_at(int b, int t, int h) const { return lse[shape.lse_offset(b, t, h)]; }
};

/// Keys token t (of s_q) of a request with `context` keys may attend: the attention data model's
/// rule (all of them, or clamp(context - s_q + t + 1, 0, context) with a causal mask).
using ::amla::visible_keys;

namespace detail {

/// Validates inputs and options against the model; throws amla::invalid_argument naming `fn`,
/// the argument, its value and the rule. Returns the softmax scale.
template <mla_element T>
double validate_decode(const char* fn, const MlaModel<T>& model, const MlaDecodeInputs<T>& in,
                       const MlaOptions& opt) {
  validate_model(fn, model);
  const MlaDims& d = model.dims;
  using amla::detail::check_dim;
  using amla::detail::check_span;
  check_dim(fn, "inputs.batch", in.batch);
  check_dim(fn, "inputs.s_q", in.s_q);
  check_span(
      fn, "inputs.q", in.q,
      static_cast<std::size_t>(amla::detail::checked_product(
          fn, "inputs.q", "[batch, s_q, H, D_n + D_r]", in.batch, in.s_q, d.heads, d.d_qk())),
      "[batch, s_q, H, D_n + D_r]");
  if (in.prefix_len < 0) {
    amla::detail::throw_invalid(fn, "inputs.prefix_len", std::to_string(in.prefix_len),
                                "must be >= 0");
  }
  check_span(
      fn, "inputs.prefix_latent", in.prefix_latent,
      static_cast<std::size_t>(amla::detail::checked_product(
          fn, "inputs.prefix_latent", "[prefix_len, D_l + D_r]", in.prefix_len, d.absorb_d_qk())),
      "[prefix_len, D_l + D_r]");
  const LatentCache<T>& c = in.suffix;
  check_dim(fn, "inputs.suffix.num_pages", c.num_pages);
  check_dim(fn, "inputs.suffix.page_size", c.page_size);
  check_dim(fn, "inputs.suffix.max_pages_per_seq", c.max_pages_per_seq);
  const DecodeShape s = suffix_shape(d, in);
  validate_shape(fn, s, true);
  check_span(fn, "inputs.suffix.data", c.data, s.kv_elems(), "[num_pages, page_size, D_l + D_r]");
  check_span(fn, "inputs.suffix.block_table", c.block_table, s.block_table_elems(),
             "[batch, max_pages_per_seq]");
  check_span(fn, "inputs.suffix.seqlens", c.seqlens, s.seqlens_elems(), "[batch]");
  validate_tables(fn, s, c.block_table, c.seqlens);
  for (int b = 0; b < in.batch; ++b) {
    const std::int32_t len = c.seqlens[static_cast<std::size_t>(b)];
    if (static_cast<long long>(len) + in.prefix_len > 0x7FFFFFFFLL) {
      amla::detail::throw_invalid(fn, "inputs.suffix.seqlens",
                                  "seqlens[" + std::to_string(b) + "] = " + std::to_string(len),
                                  "prefix_len + seqlen must fit in int32");
    }
  }
  if (opt.softmax_scale) {
    amla::detail::require_finite_positive(fn, "options.softmax_scale", *opt.softmax_scale);
  }
  if (opt.mode != numerics::float64 && opt.mode != numerics::bf16) {
    amla::detail::throw_invalid(fn, "options.mode", std::to_string(static_cast<int>(opt.mode)),
                                "must be numerics::float64 or numerics::bf16");
  }
  amla::detail::check_dim(fn, "options.kv_block", opt.kv_block);
  if (opt.threads < 0) {
    amla::detail::throw_invalid(fn, "options.threads", std::to_string(opt.threads),
                                "must be >= 0 (0 = hardware concurrency)");
  }
  return opt.softmax_scale ? *opt.softmax_scale : 1.0 / std::sqrt(static_cast<double>(d.d_qk()));
}

/// Request b's context length L_b = prefix_len + seqlens[b].
template <mla_element T>
int context_len(const MlaDecodeInputs<T>& in, int b) {
  return in.prefix_len + in.suffix.seqlens[static_cast<std::size_t>(b)];
}

/// Latent rows [C_N, C_R] of request b as a matrix of scalar S: the prefix (when `prefix`), then
/// the request's suffix (when `suffix`), BF16-rounded when `round`.
template <class S, mla_element T>
Mat<S> gather_latent(const MlaDims& d, const MlaDecodeInputs<T>& in, int b, bool prefix,
                     bool suffix, bool round) {
  const int cols = d.absorb_d_qk();
  const int lp = prefix ? in.prefix_len : 0;
  const int ls = suffix ? in.suffix.seqlens[static_cast<std::size_t>(b)] : 0;
  Mat<S> m(lp + ls, cols);
  for (int s = 0; s < lp; ++s) {
    const T* src = in.prefix_latent.data() + static_cast<std::size_t>(s) * cols;
    for (int c = 0; c < cols; ++c) m(s, c) = element_as<S>(src[c], round);
  }
  const DecodeShape shape = suffix_shape(d, in);
  for (int s = 0; s < ls; ++s) {
    const int page = in.suffix.block_table[shape.table_offset(b, s / shape.page_size)];
    const T* src =
        in.suffix.data.data() + shape.slot_index(page, s % shape.page_size, 0) * shape.d_qk;
    for (int c = 0; c < cols; ++c) m(lp + s, c) = element_as<S>(src[c], round);
  }
  return m;
}

/// Query of (b, t, h) as a row of D_n + D_r values of scalar S.
template <class S, mla_element T>
void gather_query(const MlaDims& d, const MlaDecodeInputs<T>& in, int b, int t, int h, bool round,
                  S* dst) {
  const int cols = d.d_qk();
  const T* src = in.q.data() + io_shape(d, in.batch, in.s_q).q_offset(b, t, h);
  for (int c = 0; c < cols; ++c) dst[c] = element_as<S>(src[c], round);
}

}  // namespace detail

}  // namespace amla::mla
