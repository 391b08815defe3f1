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

#include "amla/numeric/pow2.hpp"

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
/// AMLA's per-row scalars n, S32, S16 and c are functions of m alone (see amla_scalars), so a
/// frame stores only m: the kernels keep 128 accumulators per thread in registers and cannot
/// afford three more per row.
struct row_frame {
  float m = -__builtin_huge_valf();  ///< running max of s2; -inf before the first visible key
};

/// AMLA's scalars of a running max m (base-2 units): n = rint(-m) (round to nearest even),
/// S32 = exp2(n + m), S16 = BF16(S32) (nearest even), c = S16 / S32 (Appendix A reading).
/// A row that has seen no key (m = -inf) has n = 0, S16 = S32 = c = 1.
struct amla_scalars {
  float n = 0.0f;
  float s32 = 1.0f;
  float s16 = 1.0f;
  float c = 1.0f;
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
__device__ __forceinline__ amla_scalars amla_scalars_of(float m) {
  amla_scalars a;
  if (m == detail::neg_inf_f) return a;
  a.n = rintf(-m);
  a.s32 = exp2f(__fadd_rn(a.n, m));
  a.s16 = __bfloat162float(__float2bfloat16_rn(a.s32));
  a.c = __fdiv_rn(a.s16, a.s32);
  return a;
}

/// The step from frame `old` to running max `m_new` (>= old.m) in the given mode. Mirrors, per
/// row, attention/online_softmax.hpp (standard) and attention/amla.hpp (AMLA, amla_scalars_of
/// for both frames, eps = 1.5 (c / c_old - 1), k = trunc((max(n - n_old, -30) + eps + 1e-6) *
/// 2^23), evaluated left to right in FP32 without contraction; a row that has seen no key yet
/// gets no add).
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
    const amla_scalars a = amla_scalars_of(m_new);
    st.p_scale = a.s16;
    if (started) {
      const amla_scalars b = amla_scalars_of(old.m);
      const float eps = __fmul_rn(1.5f, __fsub_rn(__fdiv_rn(a.c, b.c), 1.0f));
      const float dn = fmaxf(__fsub_rn(a.n, b.n), detail::amla_exponent_clamp);
      const float big_n = __fadd_rn(__fadd_rn(dn, eps), detail::amla_nudge);
      st.o_add = __float2int_rz(__fmul_rn(big_n, 8388608.0f));  // * 2^23, truncated
    }
  }
  return st;
}

namespace detail {

/// The magnitudes (FP32 patterns without the sign) for which adding k to the pattern is an exact
/// multiplication (Lemma 3.1 for the combined add: the source and the result normal):
/// lo <= mag < lo + span, tested as one unsigned compare (mag - lo) < span.
struct exact_add_window {
  std::uint32_t lo;
  std::uint32_t span;
};
__device__ __forceinline__ exact_add_window exact_window(std::int32_t k) {
  if (k == 0) return {0u, 0xFFFFFFFFu};  // no add: nothing can go wrong
  constexpr std::int64_t normal_lo = 0x00800000, normal_hi = 0x7F800000;
  const std::int64_t lo = k < 0 ? normal_lo - k : normal_lo;
  const std::int64_t hi = k > 0 ? normal_hi - k : normal_hi;
  return {static_cast<std::uint32_t>(lo), hi > lo ? static_cast<std::uint32_t>(hi - lo) : 0u};
}
__device__ __forceinline__ bool add_is_exact(std::uint32_t bits, exact_add_window w) {
  return ((bits & 0x7FFFFFFFu) - w.lo) < w.span;
}

/// What AS_FP32(AS_INT32(f) + k) is meant to be where Lemma 3.1 fails: the same add on (sign,
/// exponent, mantissa) with an unbounded exponent, rounded once to FP32; zeros stay zeros, Inf
/// and NaN pass through (attention/amla.hpp's amla_intended_add, the "safe" form). Inline integer
/// code (no call, no loop): a call here would make the kernels spill their accumulators.
__device__ __forceinline__ float intended_add(float f, std::int32_t k) {
  // Written with selects only (no branches), so that an unrolled loop of it stays one block.
  const std::uint32_t u = __float_as_uint(f);
  const std::uint32_t mag = u & 0x7FFFFFFFu;
  const std::int32_t e_raw = static_cast<std::int32_t>(mag >> 23);
  const std::int32_t m_raw = static_cast<std::int32_t>(u & 0x007FFFFFu);
  // A subnormal source: move its leading bit to position 23 (shift 0 for normal sources).
  const int shift = e_raw == 0 ? __clz(m_raw | 1) - 8 : 0;
  const std::int32_t m = e_raw == 0 ? (m_raw << shift) - (1 << 23) : m_raw;
  const std::int32_t e = e_raw == 0 ? 1 - shift : e_raw;
  const std::int64_t r = (static_cast<std::int64_t>(e) << 23) + m + k;
  const std::int64_t e2 = r >> 23;  // floor division: r may be negative
  const std::uint32_t m2 = static_cast<std::uint32_t>(r & 0x7FFFFF);
  // Below the normal range: round (2^23 + m2) 2^(e2 - 150) once to a subnormal, ties to even.
  const int sh = e2 < -30 ? 31 : 1 - static_cast<int>(e2);  // used only when e2 < 1
  const std::uint32_t mant = (1u << 23) | m2;
  const std::uint32_t q = sh > 24 ? 0u : mant >> min(sh, 31);
  const std::uint32_t rem = sh > 24 ? 0u : mant & ((1u << min(sh, 31)) - 1u);
  const std::uint32_t half = sh > 24 ? 1u : 1u << max(min(sh, 31) - 1, 0);
  const std::uint32_t sub = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  const std::uint32_t normal = (static_cast<std::uint32_t>(e2) << 23) | m2;
  const std::uint32_t out = e2 >= 0xFF ? 0x7F800000u : (e2 >= 1 ? normal : sub);
  const bool keep = mag == 0u || e_raw == 0xFF;  // +-0, Inf, NaN pass through
  return keep ? f : __uint_as_float(out | (u & 0x80000000u));
}

/// The safe add as the Hopper kernel does it, in three instructions: where the magnitude lies below
/// the exact window's low end `lo` (a zero, a subnormal, or a value the add would push below the
/// normal range) the result is the signed zero, elsewhere the raw add. It differs from
/// intended_add only where intended_add returns a subnormal (|value| < 2^-126): a flush to zero.
/// The top of the window (overflow to Inf) cannot be reached by an O element: |O| stays below
/// the key count times max |V|.
__device__ __forceinline__ float amla_add_flush(float o, std::uint32_t k, std::uint32_t lo) {
  const std::uint32_t u = __float_as_uint(o);
  const std::uint32_t mag = u & 0x7FFFFFFFu;
  return __uint_as_float(u + (mag >= lo ? k : 0u - mag));  // u - mag keeps only the sign
}

}  // namespace detail

/// The AMLA add in the form `form` (amla::pow2_mode): hardware is the raw add (what an NPU's
/// AtomicAdd<int32> computes, garbage where Lemma 3.1 fails); safe is the raw add where it is
/// exact and the intended value elsewhere (a zero stays zero).
__device__ __forceinline__ float amla_add(float o, std::int32_t k, pow2_mode form) {
  const std::uint32_t u = __float_as_uint(o);
  if (form == pow2_mode::safe && !detail::add_is_exact(u, detail::exact_window(k))) {
    return detail::intended_add(o, k);
  }
  return __uint_as_float(u + static_cast<std::uint32_t>(k));
}

/// The final divisor of a row's accumulator: l (standard) or l * S16 (AMLA).
template <rescale_mode Mode>
__device__ __forceinline__ float output_divisor(const row_frame& f, float l) {
  if constexpr (Mode == rescale_mode::standard) {
    return l;
  } else {
    return __fmul_rn(l, amla_scalars_of(f.m).s16);
  }
}

}  // namespace amla::cuda
