// amla/backend/cuda/detail/combine.cuh: the split-KV combine (Flash-Decoding; the CPU mirror is
// attention/split_kv.hpp). Each piece s of a request cut by the schedule wrote its normalised
// partial output O_s (FP32) and its lse_s (natural log; -inf where the piece saw no key of the
// row, NaN where the row's result is NaN) to a slot. The row's result is
//   lse = log(sum_s exp(lse_s)),   out = sum_s exp(lse_s - lse) O_s,
// computed around the largest lse_s so that no exponential overflows. A row every piece saw
// empty gets out = 0 and lse = -inf, as unsplit kernels write; a NaN lse_s makes the row NaN; and
// every O_s enters the sum, even at weight 0, so that a NaN column of a piece (a NaN in a visible
// V column) stays NaN (problem/conventions.hpp).
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/detail/ptx.cuh"
#include "amla/backend/cuda/detail/split_plan.cuh"
#include "amla/backend/cuda/rescale.cuh"

#include <cuda_bf16.h>

#include <cstdint>

#include "amla/problem/shape.hpp"
#include "amla/problem/split_schedule.hpp"

namespace amla::cuda::detail::combine {

inline constexpr int threads = 128;
static_assert(threads >= 32, "warp 0 reduces the lse");

struct params {
  DecodeShape shape;
  int rows;  ///< s_q * h_q
  /// The schedule: fixed (num_splits k > 1: request b owns slots [b k, b k + k)) or balanced
  /// (slot_prefix, and the split requests listed by the plan).
  SplitScheduleView schedule;
  const split_plan::header* plan;
  const std::int32_t* split_list;
  const float* out_part;  ///< [slots, rows, d_v]
  const float* lse_part;  ///< [slots, rows]
  __nv_bfloat16* out;     ///< [batch, s_q, h_q, d_v]
  float* lse;             ///< [batch, h_q, s_q]
};

/// Slots whose weights one pass holds in shared memory.
inline constexpr int slots_per_pass = 256;
/// Output columns per thread (d_v = 512, the Hopper kernel's, over 128 threads).
inline constexpr int columns_per_thread = 4;

/// Grid (rows, split requests the launch allows for): CTA (r, i) merges row r = t * h_q + h of
/// the i-th split request. Warp 0 reduces the slots' lse (max, then the sum around it); the
/// weights of up to slots_per_pass slots at a time go to shared memory; each thread accumulates
/// its columns over the slots.
__global__ void __launch_bounds__(threads) combine_kernel(const params p) {
  __shared__ float weight[slots_per_pass];
  __shared__ float row_max, row_sum;
  ptx::griddep_wait();  // the partials of the decode kernel before this one
  const int r = blockIdx.x, i = blockIdx.y;
  int b, first, count;
  if (p.schedule.num_splits > 0) {
    b = i;
    count = p.schedule.num_splits;
    first = b * count;
  } else {
    if (i >= p.plan->num_split_requests) return;
    b = p.split_list[i];
    first = p.schedule.slot_prefix[b];
    count = p.schedule.slot_prefix[b + 1] - first;
  }
  const float* lse_s = p.lse_part + static_cast<std::int64_t>(first) * p.rows + r;
  const auto lse_of = [&](int s) { return lse_s[static_cast<std::int64_t>(s) * p.rows]; };
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float mx = neg_inf_f;
    for (int s = lane; s < count; s += 32) mx = max_nan(mx, lse_of(s));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.0f;
    if (mx != neg_inf_f) {
      for (int s = lane; s < count; s += 32) sum += expf(lse_of(s) - mx);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
      row_max = mx;
      row_sum = sum;
    }
  }
  __syncthreads();
  const float mx = row_max;
  const bool empty = mx == neg_inf_f;
  const float inv = empty ? 0.0f : 1.0f / row_sum;  // NaN stays NaN
  const int d_v = p.shape.d_v;
  const float* part = p.out_part + (static_cast<std::int64_t>(first) * p.rows + r) * d_v;
  float acc[columns_per_thread] = {};
  for (int s0 = 0; s0 < count; s0 += slots_per_pass) {
    const int n = min(slots_per_pass, count - s0);
    for (int s = threadIdx.x; s < n; s += threads) {
      weight[s] = empty ? 0.0f : expf(lse_of(s0 + s) - mx) * inv;
    }
    __syncthreads();
    for (int s = 0; s < n; ++s) {
      const float w = weight[s];
      const float* ps = part + static_cast<std::int64_t>(s0 + s) * p.rows * d_v;
#pragma unroll
      for (int j = 0; j < columns_per_thread; ++j) {
        const int d = threadIdx.x + j * threads;
        if (d < d_v) acc[j] = fmaf(w, ps[d], acc[j]);
      }
    }
    __syncthreads();  // weight is rewritten by the next pass
  }
  const int t = r / p.shape.h_q, h = r % p.shape.h_q;
  __nv_bfloat16* out_row = p.out + p.shape.out_offset(b, t, h);
#pragma unroll
  for (int j = 0; j < columns_per_thread; ++j) {
    const int d = threadIdx.x + j * threads;
    if (d < d_v) out_row[d] = __float2bfloat16_rn(acc[j]);
  }
  if (threadIdx.x == 0) p.lse[p.shape.lse_offset(b, t, h)] = empty ? neg_inf_f : mx + logf(row_sum);
}

}  // namespace amla::cuda::detail::combine
