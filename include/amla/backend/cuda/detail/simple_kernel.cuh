// amla/backend/cuda/detail/simple_kernel.cuh: the simple kernel, obviously correct for any shape.
//
// One CTA of 128 threads per query row (b, t, h). Offsets and the mask are problem/shape.hpp's. The
// row walks its visible keys in blocks of 64: threads 0..63 each compute one score (an FP32 dot
// product over d_qk), the block's max updates the row's frame (rescale.cuh), and every thread
// accumulates its own output columns (j = tid, tid + 128, ...) over the block's keys in FP32, in
// key order. Only keys below the row's visible count are read, so pages past a sequence's length
// and keys the causal mask hides are never touched; the running max propagates NaN and only a
// row with no visible key gets the empty-row result (driver.cuh states the semantics).
//
// Standard mode computes exact softmax attention in FP32 (P is NOT rounded to BF16): the GPU's
// float reference, used as the oracle of the fast kernel. AMLA mode runs the AMLA recurrence per
// row with 64-key blocks: P scaled by S16 and rounded to BF16, O rescaled by the integer add.
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/detail/dense_reads.cuh"
#include "amla/backend/cuda/rescale.cuh"

#include <cuda_bf16.h>

#include <cstdint>

#include "amla/numeric/pow2.hpp"
#include "amla/problem/shape.hpp"

namespace amla::cuda::detail::simple {

inline constexpr int threads = 128;
inline constexpr int block_keys = 64;

struct params {
  DecodeShape shape;  ///< offsets and the mask come from problem/shape.hpp
  bool causal;
  pow2_mode rescale;  ///< AMLA's add: hardware (raw) or safe
  bool skip_unmoved;  ///< AMLA's identity steps add 0 (CudaDecodeOptions::skip_unmoved)
  float scale_log2;   ///< softmax scale * log2(e)
  dense_reads in;
  __nv_bfloat16* out;
  float* lse;
};

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = max_nan(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

/// Dynamic shared memory: q (d_qk floats), o (d_v floats), p (64 floats), reduction scratch.
inline std::size_t smem_bytes(int d_qk, int d_v) {
  return sizeof(float) * (static_cast<std::size_t>(d_qk) + d_v + block_keys + 8);
}

template <rescale_mode Mode>
__global__ void __launch_bounds__(threads) decode_kernel(const params p) {
  extern __shared__ float smem[];
  float* q_s = smem;
  float* o_s = q_s + p.shape.d_qk;
  float* p_s = o_s + p.shape.d_v;
  float* red = p_s + block_keys;

  const DecodeShape& sh = p.shape;
  const int h = blockIdx.x, t = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x;
  const int g = h / sh.heads_per_group();
  const int visible = visible_keys(p.in.seqlens[b], sh.s_q, t, p.causal);

  const __nv_bfloat16* q_row = p.in.query_row(sh, b, t, h);
  for (int d = tid; d < sh.d_qk; d += threads) q_s[d] = __bfloat162float(q_row[d]);
  for (int d = tid; d < sh.d_v; d += threads) o_s[d] = 0.0f;
  __syncthreads();

  row_frame frame;
  float l = 0.0f;
  for (int k0 = 0; k0 < visible; k0 += block_keys) {
    const int nk = min(block_keys, visible - k0);
    // Scores of this block (threads 0..63, one key each).
    float s = detail::neg_inf_f;
    if (tid < nk) {
      const __nv_bfloat16* k_row = p.in.key_row(sh, b, k0 + tid, g);
      float acc = 0.0f;
      for (int d = 0; d < sh.d_qk; ++d) acc = fmaf(q_s[d], __bfloat162float(k_row[d]), acc);
      s = __fmul_rn(acc, p.scale_log2);  // never fused with the later s - m
    }
    // Block max over the 64 candidates (warps 0 and 1).
    if (tid < 64) {
      const float wm = warp_max(s);
      if ((tid & 31) == 0) red[tid >> 5] = wm;
    }
    __syncthreads();
    const float m_new = max_nan(frame.m, max_nan(red[0], red[1]));
    const frame_step st = step_frame<Mode>(frame, m_new, amla_kernel_step(p.skip_unmoved));
    const float mu = usable_max(st.next.m);
    float pe = 0.0f;  // exp2(s - m) in FP32, the value l sums
    if (tid < 64) {
      pe = tid < nk ? exp2f(s - mu) : 0.0f;
      float pv = pe;
      if constexpr (Mode == rescale_mode::amla) {
        pv = __bfloat162float(__float2bfloat16_rn(pe * st.p_scale));
      }
      p_s[tid] = pv;
      const float ws = warp_sum(pe);
      if ((tid & 31) == 0) red[2 + (tid >> 5)] = ws;
    }
    __syncthreads();
    l = l * st.l_scale + (red[2] + red[3]);
    const bool started = frame.m != detail::neg_inf_f;
    for (int d = tid; d < sh.d_v; d += threads) {
      float o = o_s[d];
      if (started) {
        if constexpr (Mode == rescale_mode::standard) {
          o *= st.o_scale;
        } else {
          o = pattern_add(o, st.o_add, p.rescale);
        }
      }
      for (int i = 0; i < nk; ++i) {
        o = fmaf(p_s[i], __bfloat162float(p.in.value_row(sh, b, k0 + i, g)[d]), o);
      }
      o_s[d] = o;
    }
    frame = st.next;
    __syncthreads();  // p_s and red are rewritten by the next block
  }

  // Only a row with no visible key is empty; one whose max stayed -inf although it saw keys
  // (every score -inf) gets NaN: O / l = 0 / 0, and a NaN lse.
  __nv_bfloat16* out_row = p.out + sh.out_offset(b, t, h);
  const bool empty = visible == 0;
  const float denom = empty ? 1.0f : output_divisor<Mode>(frame, l);
  for (int d = tid; d < sh.d_v; d += threads) {
    out_row[d] = __float2bfloat16_rn(empty ? 0.0f : o_s[d] / denom);
  }
  if (tid == 0) {
    const float lse = empty                          ? detail::neg_inf_f
                      : frame.m == detail::neg_inf_f ? __uint_as_float(0x7FC00000u)
                                                     : (frame.m + log2f(l)) * 0.693147180559945309f;
    p.lse[sh.lse_offset(b, t, h)] = lse;
  }
}

}  // namespace amla::cuda::detail::simple
