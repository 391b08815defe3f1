// amla/numeric/amla_step.hpp: the per-row scalars of the AMLA recurrence and the integer add k of
// one step (AMLA Algorithm 2 lines 8-13 with Appendix A), the arithmetic that the CPU recurrence
// (attention/amla.hpp) and the CUDA kernels (backend/cuda/rescale.cuh) share.
//
// A query row at running max m (natural log) carries, in FP32:
//   n   = round(-m / ln2)                   nearest, ties to even (an integer-valued float)
//   S32 = exp(ln2 (n + m / ln2))            = 1 / r of the paper's eq. 4, in [2^-1/2, 2^1/2]
//   S16 = BF16(S32)                         nearest even, widened back (S32 itself in float32 mode)
//   c   = S16 / S32 (appendix_a), S32 / S16 (as_printed) or 1 (none)
// and a step from the previous block's scalars (n', c') to the new ones adds to every O element
//   eps = 1.5 (c / c' - 1)
//   N   = max(n - n', clamp) + eps + nudge  (FP32, left to right)
//   k   = Cast_to_int32(N * 2^23)           truncation by default (eps_rounding::toward_zero)
// attention/amla.hpp derives why c = S16 / S32 cancels the BF16 rounding of S16 and why the cast
// truncates (the +1e-6 nudge is the guard of a truncating cast, and it adds 8 to k).
//
// ---- The identity step (amla_step_options::skip_unmoved) ---------------------------------------
// When n = n' and c = c' (the max did not move, or moved without changing n or c), dn = 0 and
// eps = 0 exactly, and the step the recurrence needs is the identity: F = 2^dn c / c' = 1 (the
// derivation in attention/amla.hpp). Algorithm 2 line 13 still adds the nudge there, so k = 8:
// every such block multiplies the whole row by about 1 + 2^-20 (6.4e-7 relative, up to 9.5e-7),
// a drift that grows with the number of blocks where the max stays put, which is most of them
// on a long sequence. The nudge only guards the truncating cast against an N computed a hair
// below an integer; an N of exactly 0 has nothing to guard. skip_unmoved = true makes that step
// k = 0 (N = 0), the exact identity, and leaves every other step as printed (bit for bit: a step
// with dn != 0 or eps != 0 is unchanged). It is also what lets a GPU kernel skip the add when no
// row of a warp moved, as Base skips its multiply by 1 (backend/cuda/rescale.cuh).
// Accuracy: where the max is set in the first block and never moves (8192 keys, blocks of 64),
// the printed step ends 8.8e-5 from the float64 golden and skip_unmoved 1.0e-6
// (tests/attention/test_amla.cpp). On random MLA inputs the drift hides under the BF16 roundings:
// `example_02_accuracy --samples 5 --context 16384 --block 64 --layout mla --no-diagnostics
// --dist N1,N5,U3,U20` gives AMLA's excess error over Base (safe - Base) of 4.4e-5, 9.3e-6,
// 2.9e-5, 3.5e-6 with the printed step and 4.1e-5, 6.9e-6, 2.5e-5, 2.3e-6 with --skip-unmoved,
// on errors of 0.66e-3 to 1.8e-3: never worse, and better by a tenth to a third of the excess.
// The default stays false, Algorithm 2 as printed, which amla reproduces; skip_unmoved is the
// opt-in that is both more accurate and (on a GPU) cheaper.
//
// ---- Units: the one thing the CPU and the GPU compute differently ------------------------------
// Only n and S32 depend on the unit of m. The CPU holds natural-log maxima (amla_scalars_ln: the
// formulas above with std::nearbyint and std::exp). The CUDA kernels hold base-2 maxima
// m2 = m / ln2, so n = rint(-m2) and S32 = exp2(n + m2) (backend/cuda/rescale.cuh, the device
// edge). Both then hand (n, S32) to amla_scalars_of, and every later quantity (S16, c, eps, N, k)
// is this header's arithmetic on both sides, bit for bit.
//
// ---- How k relates to the other numeric/ headers ------------------------------------------------
// k's integer part is the exponent step of Lemma 3.1 (numeric/pow2.hpp: the add multiplies by
// 2^dn); its fractional part eps * 2^23 is Appendix A's (1 + eps) add (numeric/one_plus_eps.hpp
// derives its error: the constant 1.5 is the mantissa taken at mid-range). The kernel does not
// round the two parts separately: it sums dn + eps + nudge in FP32 and casts N * 2^23 once, so k is
// NOT dn * 2^23 + one_plus_eps_increment(eps / 1.5). N * 2^23 is exact (a power-of-two scaling);
// a float N with |N| >= 1 is a multiple of 2^-23, so the cast rounds only when |N| < 1.
// The add itself, with its precondition check and its intended value, is numeric/pow2.hpp's
// pattern_add_*.
//
// Every operation is a correctly rounded FP32 operation, written so that nothing can be contracted
// into an FMA (device code uses the _rn intrinsics; host code has no multiply feeding an add).
#pragma once

#include <cmath>
#include <cstdint>

#include "amla/config.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/one_plus_eps.hpp"

namespace amla {

/// Which c_i the (1 + eps) compensation uses (attention/amla.hpp derives the readings).
enum class amla_compensation : std::uint8_t {
  appendix_a,  ///< c_i = S16 / S32 = r_i / r'_i: cancels the BF16 rounding of S16 (default)
  as_printed,  ///< c_i = S32 / S16, Algorithm 2 line 11 as printed: doubles that error
  none,        ///< eps = 0: no compensation
};

/// The arithmetic knobs of the step. The defaults are the paper's kernel (what the CUDA kernels
/// run); attention::AmlaOptions maps onto them.
struct amla_step_options {
  amla_compensation compensation = amla_compensation::appendix_a;
  bool round_s16 = true;          ///< S16 = BF16(S32); false (float32 mode): S16 = S32
  float exponent_clamp = -30.0f;  ///< the lower clamp of n - n' (line 13)
  float nudge = 1e-6f;            ///< the + 1e-6 of line 13
  eps_rounding n_cast = eps_rounding::toward_zero;  ///< the rounding of Cast_to_int32(N * 2^23)
  /// A step with dn = 0 and eps = 0 is the identity, k = 0, instead of the nudge's add (the file
  /// comment). false: line 13 as printed.
  bool skip_unmoved = false;
};

/// AMLA's scalars of one row at one running max. The defaults are those of a row that has seen
/// no key yet (n = 0, S32 = S16 = c = 1): the previous frame of a row's first step.
struct amla_scalars {
  float n = 0.0f;  ///< round(-m / ln2), integer-valued
  float s32 = 1.0f;
  float s16 = 1.0f;
  float c = 1.0f;
};

/// One step's quantities (line 13), kept for tests and reports; k is what the kernels add.
struct amla_step {
  float eps = 0.0f;      ///< 1.5 (c / c' - 1)
  float dn = 0.0f;       ///< max(n - n', clamp)
  float big_n = 0.0f;    ///< dn + eps + nudge
  std::int32_t k = 0;    ///< Cast_to_int32(N * 2^23)
  bool clamped = false;  ///< n - n' < clamp: the step multiplies by 2^clamp instead of 2^(n - n')
};

namespace detail {
// Correctly rounded FP32 operations that the compiler may not fuse (see the file comment).
AMLA_HOST_DEVICE constexpr float add_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
AMLA_HOST_DEVICE constexpr float sub_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
AMLA_HOST_DEVICE constexpr float mul_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
AMLA_HOST_DEVICE constexpr float div_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

/// a / b rounded to nearest for one frame's c over another's (both within 2^-8 of 1); a NaN
/// operand gives NaN. On the device without div.rn's slow path, whose subroutine call in a
/// kernel's block loop costs the code around it more than the division: the reciprocal refined by
/// one Newton step, the quotient as 1 + (a - b) / b (a - b is exact: Sterbenz), then one
/// correction by the exact remainder (FMA). That equals div.rn on every such pair (cuda_decode's
/// gpu test compares all of them); outside this range it may not.
AMLA_HOST_DEVICE constexpr float div_rn_unit(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
  r = __fmaf_rn(r, __fmaf_rn(-b, r, 1.0f), r);
  const float q = __fmaf_rn(__fsub_rn(a, b), r, 1.0f);
  return __fmaf_rn(__fmaf_rn(-b, q, a), r, q);
#else
  return a / b;
#endif
}

/// a / b rounded to nearest where one operand is the other's BF16 rounding (S16 / S32 or S32 /
/// S16) and b lies in [0.5, 2); a NaN operand gives NaN. On the device the approximate reciprocal
/// (no Newton step), the product and one correction by the exact remainder: div.rn's value on
/// every such pair (cuda_decode's gpu test compares all of them), in four instructions.
AMLA_HOST_DEVICE constexpr float div_rn_rounding(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
  const float q = __fmul_rn(a, r);
  return __fmaf_rn(__fmaf_rn(-b, q, a), r, q);
#else
  return a / b;
#endif
}

/// S32 rounded to BF16, nearest even (round_bf16_finite's value for every finite S32). On the
/// device the conversion instruction and a shift, where the integer form takes four instructions;
/// for a NaN S32 (a NaN max) that gives a NaN where round_bf16_finite's add gives another pattern,
/// and the row is NaN either way (amla_scalars_of).
AMLA_HOST_DEVICE constexpr float s16_of(float s32) noexcept {
#if defined(__CUDA_ARCH__)
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(s32));
  return __uint_as_float(static_cast<unsigned>(h) << 16);
#else
  return round_bf16_finite(s32);
#endif
}

/// N = dn + eps + nudge (left to right), or exactly 0 for the identity step under skip_unmoved.
AMLA_HOST_DEVICE constexpr float amla_big_n(float dn, float eps,
                                            const amla_step_options& o) noexcept {
  if (o.skip_unmoved && dn == 0.0f && eps == 0.0f) return 0.0f;
  return add_rn(add_rn(dn, eps), o.nudge);
}
}  // namespace detail

/// S16 and c from n and S32, whatever unit produced them (the file comment). S16 is S32 rounded
/// to BF16, nearest even (s16_of); c follows the compensation reading. On the device s32 must
/// lie in [0.5, 2), as amla_scalars_ln and the CUDA backend's amla_scalars_log2 give it
/// (div_rn_rounding's operands).
/// Example: S32 = 1.35914087f (e / 2) gives S16 = 1.359375f (pattern 0x3FAE0000) and, with
/// appendix_a, c = S16 / S32 = 1.00017226f (pattern 0x3F8005A5).
AMLA_HOST_DEVICE constexpr amla_scalars amla_scalars_of(float n, float s32,
                                                        const amla_step_options& o) noexcept {
  amla_scalars a;
  a.n = n;
  a.s32 = s32;
  // S32 is finite for a finite max, so the NaN select of round_bf16 is not needed. For a NaN or
  // +inf max S32 is NaN and S16 not always: the host's finite-only add keeps x86's default NaN
  // (0xFFC00000) a NaN (the device's conversion keeps every NaN a NaN). Either way the row is NaN
  // through its exponentials (problem/conventions.hpp), whatever S16 scales them by.
  a.s16 = o.round_s16 ? detail::s16_of(s32) : s32;
  if (o.compensation == amla_compensation::appendix_a) a.c = detail::div_rn_rounding(a.s16, a.s32);
  if (o.compensation == amla_compensation::as_printed) a.c = detail::div_rn_rounding(a.s32, a.s16);
  return a;
}

/// The scalars of a row whose running max m is a finite natural-log value (the CPU's unit):
/// n = round(-m / ln2) (ties to even), S32 = exp(ln2 (n + m / ln2)), in FP32 with ln2 rounded to
/// FP32 (0x3F317218). Example: m = 1 gives n = -1, S32 = exp(0.30685282f) = 1.35914087f.
AMLA_HOST_DEVICE inline amla_scalars amla_scalars_ln(float m, const amla_step_options& o) noexcept {
  constexpr float ln2 = 0.693147180559945309f;
  const float m_log2 = detail::div_rn(m, ln2);
#if defined(__CUDA_ARCH__)
  const float n = rintf(-m_log2);
  const float s32 = expf(detail::mul_rn(ln2, detail::add_rn(n, m_log2)));
#else
  const float n = std::nearbyint(-m_log2);
  const float s32 = std::exp(ln2 * (n + m_log2));
#endif
  return amla_scalars_of(n, s32, o);
}

/// The step from a row's previous scalars `prev` to its new ones `next` (line 13): eps, dn, N and
/// the integer k to add to the pattern of every O element of the row. Example (defaults): equal
/// scalars give eps = 0, dn = 0, N = 1e-6f and k = trunc(8.388608) = 8, the nudge's drift; with
/// skip_unmoved, N = 0 and k = 0.
AMLA_HOST_DEVICE inline amla_step amla_step_between(const amla_scalars& prev,
                                                    const amla_scalars& next,
                                                    const amla_step_options& o) noexcept {
  amla_step s;
  s.eps = detail::mul_rn(1.5f, detail::sub_rn(detail::div_rn_unit(next.c, prev.c), 1.0f));
  const float dn = detail::sub_rn(next.n, prev.n);
  s.clamped = dn < o.exponent_clamp;
  s.dn = s.clamped ? o.exponent_clamp : dn;  // std::max(dn, clamp)
  s.big_n = detail::amla_big_n(s.dn, s.eps, o);
  s.k = round_to_int32(detail::mul_rn(s.big_n, 0x1p23f), o.n_cast);
  return s;
}

/// The add an exact step from `prev` to `next` needs: the step of amla_step_between without the
/// clamp, N = (n - n') + eps + nudge (0 for the identity step under skip_unmoved) and
/// k = Cast(N * 2^23) in 64 bits, since n - n' may lie below
/// -255 where no int32 holds it. Equals amla_step_between(prev, next, o).k whenever that step is
/// not clamped. The scalars must be those of finite maxima. |k| saturates at 2^62: any add past
/// 2^32 already moves every finite pattern out of FP32's range. What attention/amla.hpp's safe
/// rescale applies where the hardware clamps (numeric/pow2.hpp's pattern_add_intended takes it).
/// Example (defaults): n' = 0, n = -300, equal c: N = fp32(-300 + 1e-6) = -300 (the ulp at 300 is
/// 3e-5), k = -300 * 2^23.
AMLA_HOST_DEVICE inline std::int64_t amla_exact_add(const amla_scalars& prev,
                                                    const amla_scalars& next,
                                                    const amla_step_options& o) noexcept {
  const float eps = detail::mul_rn(1.5f, detail::sub_rn(detail::div_rn_unit(next.c, prev.c), 1.0f));
  const float dn = detail::sub_rn(next.n, prev.n);
  const float x = detail::mul_rn(detail::amla_big_n(dn, eps, o), 0x1p23f);
  constexpr float limit = 0x1p62f;
  if (!(x > -limit)) return -(std::int64_t{1} << 62);
  if (!(x < limit)) return std::int64_t{1} << 62;
#if defined(__CUDA_ARCH__)
  const float r = o.n_cast == eps_rounding::toward_zero ? truncf(x) : rintf(x);
#else
  const float r = o.n_cast == eps_rounding::toward_zero ? std::trunc(x) : std::nearbyint(x);
#endif
  return static_cast<std::int64_t>(r);
}

}  // namespace amla
