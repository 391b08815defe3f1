// amla/mla/naive.hpp: MLA decode by decompression, as a standard MHA kernel computes it.
//
// The latent cache of each request (the shared prefix, then its own suffix) is decompressed to
// per-head keys and values (mla/decompress.hpp), and every head attends them as ordinary
// multi-head attention with d_qk = D_n + D_r (192 for DeepSeek-V3) and d_v = D_v (128):
//   out[b, t, h] = softmax(scale q[b, t, h] K_h^T) V_h,  K_h = [C_N W_KVb1[h]^T, C_R],
//                                                       V_h = C_N W_KVb2[h]^T.
// The prefix is decompressed once per head and shared by the requests (the cost model's naive
// reads it once too); each suffix is decompressed for its own request.
//
// bf16 mode: the latent cache, queries and weights are read as BF16; K_h and V_h are BF16 GEMM
// results (FP32 accumulation) stored in BF16, the cache a naive kernel reads; attention is the
// Base recurrence; the output is its FP32 result (cast to BF16 with round_output_bf16).
// float64 mode: every product in float64, attention by the golden recurrence.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
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

/// The naive formulation in scalar S (double: float64 mode, float: bf16 mode).
template <class S, mla_element T>
Partial<S> naive_run(const MlaModel<T>& model, const MlaDecodeInputs<T>& in, const MlaOptions& opt,
                     double scale) {
  const MlaDims& d = model.dims;
  constexpr bool round = std::is_same_v<S, float>;
  Partial<S> res(io_shape(d, in.batch, in.s_q));
  // The prefix's latent rows, shared by every request (request 0's gather, prefix part only).
  const Mat<S> prefix = gather_latent<S>(d, in, 0, true, false, round);
  int longest = 0;
  for (const std::int32_t len : in.suffix.seqlens)
    longest = std::max(longest, static_cast<int>(len));
  amla::detail::parallel_for(
      static_cast<std::size_t>(d.heads), amla::detail::resolve_threads(opt.threads),
      [&](std::size_t task) {
        const int h = static_cast<int>(task);
        const Mat<S> w1 = w_kvb1_head<S>(model, h, round);
        const Mat<S> w2 = w_kvb2_head<S>(model, h, round);
        // Head h's keys and values: the prefix's rows once, then each request's own after them.
        KeyValues<S> kv(in.prefix_len + longest, d.d_qk(), d.d_v);
        Mat<S> k, v;
        decompress_head<S>(d, prefix, w1, w2, k, v);
        kv.set_rows(0, k, v);
        Mat<S> q(in.s_q, d.d_qk());
        std::vector<int> visible(static_cast<std::size_t>(in.s_q));
        for (int b = 0; b < in.batch; ++b) {
          decompress_head<S>(d, gather_latent<S>(d, in, b, false, true, round), w1, w2, k, v);
          kv.set_rows(in.prefix_len, k, v);
          const int context = context_len(in, b);
          for (int t = 0; t < in.s_q; ++t) {
            gather_query<S>(d, in, b, t, h, round, q.row(t).data());
            visible[static_cast<std::size_t>(t)] = visible_keys(context, in.s_q, t, opt.causal);
          }
          const DenseResult<S> r = kv.attend(q, context, visible, scale, opt.kv_block);
          for (int t = 0; t < in.s_q; ++t) res.set(b, t, h, r.out.row(t), r.lse(t));
        }
      });
  return res;
}

}  // namespace detail

/// MLA decode by decompressing the latent cache to per-head K and V (see the file comment).
/// Throws amla::invalid_argument for an inconsistent model, inputs or options.
template <mla_element T>
MlaResult naive_decode(const MlaModel<T>& model, const MlaDecodeInputs<T>& inputs,
                       const MlaOptions& options = {}) {
  const double scale = detail::validate_decode("amla::mla::naive_decode", model, inputs, options);
  return detail::run_in_mode(options, formulation::naive, [&](auto s) {
    return detail::naive_run<decltype(s)>(model, inputs, options, scale);
  });
}

}  // namespace amla::mla
