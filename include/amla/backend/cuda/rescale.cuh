// amla/backend/cuda/rescale.cuh: the per-row bookkeeping of the two rescaling modes, shared by
// every CUDA kernel of amla. base.cuh and amla.cuh name the modes for users; this file is the
// arithmetic, written once for device code so that the simple kernel and the Hopper kernel agree.
//
// Units. Kernels work in base 2: a score is s2 = (q . k) * softmax_scale * log2(e), the running
// max m is the max of s2, and P = exp2(s2 - m). The natural-log quantities of the CPU headers are
// these times ln 2: m_nat = m * ln2, lse = (m + log2(l)) * ln2. AMLA's n_i = round(-m_nat / ln2)
// is therefore round(-m), and S32 = exp(ln2 (n + m_nat / ln2)) = exp2(n + m).
#pragma once

#include "amla/backend/cuda/detail/check.cuh"

#include <cuda_bf16.h>

#include <cstdint>

namespace amla::cuda {

/// How the kernels rescale the output accumulator when the running max grows.
enum class rescale_mode : std::uint8_t {
  /// Base (attention/online_softmax.hpp): O *= exp(m_old - m_new) in FP32, P = exp(s - m) cast to
  /// BF16, out = O / l.
  standard,
  /// AMLA (attention/amla.hpp, Algorithm 2 with Appendix A): O's FP32 bit pattern gets one integer
  /// add k per block, P is scaled by S16 before its BF16 cast, out = O / (l * S16).
  amla,
};

/// One query row's state after some KV blocks (base-2 units, see the file comment).
struct row_frame {
  float m = -__builtin_huge_valf();  ///< running max of s2; -inf before the first visible key
  float n = 0.0f;                    ///< AMLA: n_i = round(-m) (0 before the first key)
  float c = 1.0f;                    ///< AMLA: compensation ratio c_i = S16 / S32 (c_0 = 1)
  float s16 = 1.0f;                  ///< AMLA: S16_i (1 in standard mode)
};

/// What moving a row from one frame to the next asks of a kernel.
struct frame_step {
  row_frame next;
  float o_scale = 1.0f;    ///< standard: multiply O by this
  std::int32_t o_add = 0;  ///< AMLA: add this to O's FP32 bit pattern (0: no add)
  float p_scale = 1.0f;    ///< multiply exp2(s2 - m) by this before the BF16 cast (AMLA: S16)
  float l_scale = 1.0f;    ///< multiply l by this: exp2(m_old - m_new)
};

namespace detail {

inline constexpr float neg_inf_f = -__builtin_huge_valf();

/// exp2 on the special function unit (relative error about 2^-22, exp2(-inf) = 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// The max to subtract: m, or 0 for a row that has seen no key (all its scores are -inf, so
/// exp2(-inf - 0) = 0 and no NaN appears).
__device__ __forceinline__ float usable_max(float m) {
  return m == neg_inf_f ? 0.0f : m;
}

/// AMLA constants (attention/amla.hpp defaults): the clamp of n_i - n_{i-1} and the +1e-6 nudge.
inline constexpr float amla_exponent_clamp = -30.0f;
inline constexpr float amla_nudge = 1e-6f;

}  // namespace detail

/// The step from frame `old` to running max `m_new` (>= old.m) in the given mode. Mirrors, per
/// row, attention/online_softmax.hpp (standard) and attention/amla.hpp (AMLA: n = rint(-m),
/// S32 = exp2(n + m), S16 = BF16(S32) nearest-even, c = S16 / S32 (Appendix A reading),
/// eps = 1.5 (c / c_old - 1), k = trunc((max(n - n_old, -30) + eps + 1e-6) * 2^23), evaluated
/// left to right in FP32 without contraction; a row that has seen no key yet gets no add).
template <rescale_mode Mode>
__device__ __forceinline__ frame_step step_frame(const row_frame& old, float m_new) {
  frame_step st;
  if (m_new == detail::neg_inf_f) {  // still no visible key: nothing changes, O and l are 0
    st.next = old;
    return st;
  }
  const bool started = old.m != detail::neg_inf_f;
  st.l_scale = started ? detail::fast_exp2(old.m - m_new) : 0.0f;
  st.next.m = m_new;
  if constexpr (Mode == rescale_mode::standard) {
    st.o_scale = st.l_scale;
  } else {
    const float n = rintf(-m_new);
    const float s32 = exp2f(__fadd_rn(n, m_new));
    const float s16 = __bfloat162float(__float2bfloat16_rn(s32));
    const float c = __fdiv_rn(s16, s32);
    st.next.n = n;
    st.next.c = c;
    st.next.s16 = s16;
    st.p_scale = s16;
    if (started) {
      const float eps = __fmul_rn(1.5f, __fsub_rn(__fdiv_rn(c, old.c), 1.0f));
      const float dn = fmaxf(__fsub_rn(n, old.n), detail::amla_exponent_clamp);
      const float big_n = __fadd_rn(__fadd_rn(dn, eps), detail::amla_nudge);
      st.o_add = __float2int_rz(__fmul_rn(big_n, 8388608.0f));  // * 2^23, truncated
    }
  }
  return st;
}

/// Applies a step's rescale to accumulator elements of one row.
template <rescale_mode Mode>
__device__ __forceinline__ float rescale_o(float o, const frame_step& st) {
  if constexpr (Mode == rescale_mode::standard) {
    return o * st.o_scale;
  } else {
    return __int_as_float(__float_as_int(o) + st.o_add);  // wraps like AtomicAdd<int32>
  }
}

/// The final divisor of a row's accumulator: l (standard) or l * S16 (AMLA).
template <rescale_mode Mode>
__device__ __forceinline__ float output_divisor(const row_frame& f, float l) {
  if constexpr (Mode == rescale_mode::standard) {
    return l;
  } else {
    return __fmul_rn(l, f.s16);
  }
}

}  // namespace amla::cuda
