// amla/backend/cuda/detail/combine.cuh: the split-KV combine (Flash-Decoding; the CPU mirror is
// attention/split_kv.hpp). Split s of a row wrote its normalised partial output O_s (FP32) and its
// lse_s (natural log, -inf for a split that saw no key). The row's result is
//   lse = log(sum_s exp(lse_s)),   out = sum_s exp(lse_s - lse) O_s,
// computed around the largest lse_s so that no exponential overflows. A row whose every split is
// empty gets out = 0 and lse = -inf, as the unsplit kernels write.
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/rescale.cuh"

#include <cuda_bf16.h>

#include <cstdint>

#include "amla/problem/shape.hpp"

namespace amla::cuda::detail::combine {

inline constexpr int threads = 128;
inline constexpr int max_splits = 64;

struct params {
  DecodeShape shape;
  int num_splits;
  const float* out_part;  ///< [num_splits, batch, s_q * h_q, d_v]
  const float* lse_part;  ///< [num_splits, batch, s_q * h_q]
  __nv_bfloat16* out;     ///< [batch, s_q, h_q, d_v]
  float* lse;             ///< [batch, h_q, s_q]
};

/// Grid (s_q * h_q, batch): one CTA per query row r = t * h_q + h.
__global__ void __launch_bounds__(threads) combine_kernel(const params p) {
  __shared__ float weight[max_splits];
  __shared__ float lse_row;
  const int r = blockIdx.x, b = blockIdx.y;
  const int rows = p.shape.s_q * p.shape.h_q;
  const std::int64_t row_index = static_cast<std::int64_t>(b) * rows + r;
  const std::int64_t split_stride = static_cast<std::int64_t>(p.shape.batch) * rows;
  if (threadIdx.x == 0) {
    float mx = neg_inf_f;
    for (int s = 0; s < p.num_splits; ++s) mx = fmaxf(mx, p.lse_part[s * split_stride + row_index]);
    float sum = 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
      const float ls = p.lse_part[s * split_stride + row_index];
      const float w = mx == neg_inf_f ? 0.0f : expf(ls - mx);
      weight[s] = w;
      sum += w;
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int s = 0; s < p.num_splits; ++s) weight[s] *= inv;
    lse_row = mx == neg_inf_f ? neg_inf_f : mx + logf(sum);
  }
  __syncthreads();
  const int d_v = p.shape.d_v;
  const int t = r / p.shape.h_q, h = r % p.shape.h_q;
  __nv_bfloat16* out_row = p.out + p.shape.out_offset(b, t, h);
  for (int d = threadIdx.x; d < d_v; d += threads) {
    float acc = 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
      const float w = weight[s];
      if (w != 0.0f) acc = fmaf(w, p.out_part[(s * split_stride + row_index) * d_v + d], acc);
    }
    out_row[d] = __float2bfloat16_rn(acc);
  }
  if (threadIdx.x == 0) p.lse[p.shape.lse_offset(b, t, h)] = lse_row;
}

}  // namespace amla::cuda::detail::combine
