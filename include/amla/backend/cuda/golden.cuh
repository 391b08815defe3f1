// amla/backend/cuda/golden.cuh: float64 softmax attention on a CUDA GPU, the device mirror of
// attention/golden.hpp, for test sweeps too large for the CPU golden (b = 128, s_k = 16384 is
// about 0.6 TFLOP in float64).
//
// The same inputs (driver.cuh's DeviceDecodeInputs: any shape, paged, V inside kv or separate)
// and the same conventions: the BF16 operands taken exactly (widened to float64), scores
// x = scale * (q . k) in float64, the row max m over the visible keys first, then
// p = exp(x - m), l = sum p, out = (sum p v) / l and lse = m + log(l) (natural log): two passes
// over exact scores, not an online recurrence, so the only errors are float64 roundings. A row
// that sees no key gets out = 0 and lse = -inf; keys a row does not see are never read; NaN and
// Inf among what a row reads propagate as IEEE arithmetic propagates them (the max propagates
// NaN), as in the CPU golden. The outputs are float64: out [batch, s_q, h_q, d_v], lse
// [batch, h_q, s_q]. It agrees with attention::golden_decode to float64 rounding (the tests hold
// it to 1e-12 relative); only the summation order differs.
//
// Work: one CTA of 256 threads per (request, token, 16 query heads of one KV head): a tile of 64
// keys at a time, 64 columns of d_qk at a time through shared memory, each thread 2 rows x 2 keys
// of the scores and 16 rows x 2 columns of the output (one pass over the keys per 512 columns of
// d_v).
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/detail/dense_reads.cuh"
#include "amla/backend/cuda/driver.cuh"

#include <cuda_bf16.h>

#include <cstdint>
#include <optional>

#include "amla/problem/shape.hpp"

namespace amla::cuda {

/// Device pointers of the float64 outputs.
struct DeviceGoldenOutputs {
  double* out = nullptr;  ///< [batch, s_q, h_q, d_v]
  double* lse = nullptr;  ///< [batch, h_q, s_q], natural log
};

struct CudaGoldenOptions {
  bool causal = false;                 ///< as CudaDecodeOptions::causal
  std::optional<float> softmax_scale;  ///< default 1 / sqrt(d_qk); finite and > 0
  /// Copy seqlens and block_table to the host and validate them (synchronises the stream).
  bool check_tables = true;
};

namespace detail::golden {

inline constexpr int threads = 256;
inline constexpr int rows = 16;  ///< query heads per CTA
inline constexpr int keys = 64;  ///< keys per tile
inline constexpr int dc = 64;    ///< columns of d_qk per shared-memory chunk

struct params {
  DecodeShape shape;
  bool causal;
  double scale;
  int head_tiles;  ///< ceil(heads_per_group / rows)
  dense_reads in;
  double* out;
  double* lse;
};

/// max(a, b) propagating NaN.
__device__ __forceinline__ double max_nan(double a, double b) {
  return (a > b || a != a) ? a : b;
}

struct shared_storage {
  double q[rows][dc];
  float k[keys][dc + 1];  // + 1: lanes reading rows lane and lane + 32 hit distinct banks
  double p[rows][keys];
  double m[rows];
  double l[rows];
};

/// Scores of this thread's rows (2w, 2w + 1) and keys (lane, lane + 32) of the tile at k0 (keys
/// past `visible` are never read), times the scale: s[row][key]. The scale multiply and the
/// subtraction of the max are separately rounded (_rn): fused into one FMA in one pass and not
/// the other, the two passes' scores would differ, and by far more than a rounding where a score
/// is huge (exp(x - m) of a score equal to the max must be exactly 1).
__device__ __forceinline__ void tile_scores(double (&s)[2][2], shared_storage& sm, const params& p,
                                            int b, int t, int h0, int nrows, int g, int k0,
                                            int visible) {
  const DecodeShape& sh = p.shape;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  s[0][0] = s[0][1] = s[1][0] = s[1][1] = 0.0;
  for (int d0 = 0; d0 < sh.d_qk; d0 += dc) {
    for (int i = tid; i < rows * dc; i += threads) {
      const int r = i / dc, d = d0 + i % dc;
      sm.q[r][i % dc] =
          r < nrows && d < sh.d_qk
              ? static_cast<double>(__bfloat162float(p.in.query_row(sh, b, t, h0 + r)[d]))
              : 0.0;
    }
    for (int i = tid; i < keys * dc; i += threads) {
      const int kk = i / dc, d = d0 + i % dc, key = k0 + kk;
      float x = 0.0f;
      if (key < visible && d < sh.d_qk) {
        x = __bfloat162float(p.in.key_row(sh, b, key, g)[d]);
      }
      sm.k[kk][i % dc] = x;
    }
    __syncthreads();
#pragma unroll 8
    for (int d = 0; d < dc; ++d) {
      const double q0 = sm.q[2 * warp][d], q1 = sm.q[2 * warp + 1][d];
      const double ka = sm.k[lane][d], kb = sm.k[lane + 32][d];
      s[0][0] = fma(q0, ka, s[0][0]);
      s[0][1] = fma(q0, kb, s[0][1]);
      s[1][0] = fma(q1, ka, s[1][0]);
      s[1][1] = fma(q1, kb, s[1][1]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) s[i][j] = __dmul_rn(s[i][j], p.scale);
  }
}

/// Grid (h_kv * head_tiles, s_q, batch). A template (its argument unused), as
/// hopper::sm90a_probe says why.
template <int Unused = 0>
__global__ void __launch_bounds__(threads, 1) golden_kernel(const params p) {
  __shared__ shared_storage sm;
  const DecodeShape& sh = p.shape;
  const int g = blockIdx.x / p.head_tiles;
  const int h0 = g * sh.heads_per_group() + (blockIdx.x % p.head_tiles) * rows;
  const int nrows = min(rows, (g + 1) * sh.heads_per_group() - h0);
  const int t = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int visible = visible_keys(p.in.seqlens[b], sh.s_q, t, p.causal);

  if (visible == 0) {
    for (int r = 0; r < nrows; ++r) {
      for (int c = tid; c < sh.d_v; c += threads) p.out[sh.out_offset(b, t, h0 + r) + c] = 0.0;
    }
    if (tid < nrows) p.lse[sh.lse_offset(b, t, h0 + tid)] = -__builtin_huge_val();
    return;
  }

  // Pass 1: the row max over the visible keys.
  double m[2] = {-__builtin_huge_val(), -__builtin_huge_val()};
  for (int k0 = 0; k0 < visible; k0 += keys) {
    double s[2][2];
    tile_scores(s, sm, p, b, t, h0, nrows, g, k0, visible);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (k0 + lane < visible) m[i] = max_nan(m[i], s[i][0]);
      if (k0 + lane + 32 < visible) m[i] = max_nan(m[i], s[i][1]);
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    for (int o = 16; o > 0; o >>= 1) m[i] = max_nan(m[i], __shfl_xor_sync(0xffffffffu, m[i], o));
  }
  if (lane == 0) {
    sm.m[2 * warp] = m[0];
    sm.m[2 * warp + 1] = m[1];
  }

  // Pass 2, per 512 columns of d_v: p = exp(x - m), l = sum p, O = sum p v.
  for (int c0 = 0; c0 < sh.d_v; c0 += 2 * threads) {
    double o[rows][2];
#pragma unroll
    for (int r = 0; r < rows; ++r) o[r][0] = o[r][1] = 0.0;
    double l[2] = {0.0, 0.0};
    const int ca = c0 + tid, cb = c0 + tid + threads;
    for (int k0 = 0; k0 < visible; k0 += keys) {
      double s[2][2];
      tile_scores(s, sm, p, b, t, h0, nrows, g, k0, visible);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const double pa = k0 + lane < visible ? exp(__dsub_rn(s[i][0], m[i])) : 0.0;
        const double pb = k0 + lane + 32 < visible ? exp(__dsub_rn(s[i][1], m[i])) : 0.0;
        l[i] += pa + pb;
        sm.p[2 * warp + i][lane] = pa;
        sm.p[2 * warp + i][lane + 32] = pb;
      }
      __syncthreads();
      const int nk = min(keys, visible - k0);
      for (int kk = 0; kk < nk; ++kk) {
        const int key = k0 + kk;
        const __nv_bfloat16* vr = p.in.value_row(sh, b, key, g);
        const double va = ca < sh.d_v ? static_cast<double>(__bfloat162float(vr[ca])) : 0.0;
        const double vb = cb < sh.d_v ? static_cast<double>(__bfloat162float(vr[cb])) : 0.0;
#pragma unroll
        for (int r = 0; r < rows; ++r) {
          const double pr = sm.p[r][kk];
          o[r][0] = fma(pr, va, o[r][0]);
          o[r][1] = fma(pr, vb, o[r][1]);
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      for (int o2 = 16; o2 > 0; o2 >>= 1) l[i] += __shfl_xor_sync(0xffffffffu, l[i], o2);
    }
    if (lane == 0) {
      sm.l[2 * warp] = l[0];
      sm.l[2 * warp + 1] = l[1];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < rows; ++r) {
      if (r < nrows) {
        double* out_row = p.out + sh.out_offset(b, t, h0 + r);
        if (ca < sh.d_v) out_row[ca] = o[r][0] / sm.l[r];
        if (cb < sh.d_v) out_row[cb] = o[r][1] / sm.l[r];
      }
    }
  }
  if (tid < nrows) p.lse[sh.lse_offset(b, t, h0 + tid)] = sm.m[tid] + log(sm.l[tid]);
}

}  // namespace detail::golden

/// Float64 attention of a decode problem on `stream` into `out` (see the file comment).
/// Validates on the host first (amla::invalid_argument: the shape, pointers and scale, and with
/// options.check_tables the page tables, which synchronises the stream); asynchronous otherwise.
inline void golden_decode(const DeviceDecodeInputs& in, const DeviceGoldenOutputs& out,
                          const CudaGoldenOptions& options = {}, cudaStream_t stream = nullptr) {
  const char* fn = "amla::cuda::golden_decode";
  detail::validate_inputs(fn, in);
  detail::require_device_pointer(fn, "out", out.out, "[batch, s_q, h_q, d_v] double");
  detail::require_device_pointer(fn, "lse", out.lse, "[batch, h_q, s_q] double");
  DecodeOptions problem;
  problem.causal = options.causal;
  problem.softmax_scale = options.softmax_scale;
  const float scale = validate_options(fn, problem, in.shape);
  if (options.check_tables) detail::validate_tables_on_host(fn, in, stream);
  const DecodeShape& s = in.shape;
  const detail::golden::params p{
      .shape = s,
      .causal = options.causal,
      .scale = static_cast<double>(scale),
      .head_tiles = (s.heads_per_group() + detail::golden::rows - 1) / detail::golden::rows,
      .in = detail::dense_reads_of(in),
      .out = out.out,
      .lse = out.lse};
  const dim3 grid(static_cast<unsigned>(s.h_kv * p.head_tiles), static_cast<unsigned>(s.s_q),
                  static_cast<unsigned>(s.batch));
  detail::golden::golden_kernel<><<<grid, detail::golden::threads, 0, stream>>>(p);
  AMLA_CUDA_CHECK_LAUNCH("amla::cuda::detail::golden::golden_kernel");
}

}  // namespace amla::cuda
