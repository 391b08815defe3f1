// amla/numeric/pow2.hpp: multiply an FP32 value by 2^n with one integer add (AMLA Lemma 3.1).
//
// With I = AS_INT32(F) = -2^31 S + 2^23 E + M (numeric/bits.hpp), adding n * 2^23 changes only
// the exponent field, E -> E + n, provided the new field is still a normal exponent. So
//   F * 2^n == AS_FP32(AS_INT32(F) + n * 2^23)      exactly, bit for bit,
// whenever both preconditions hold:
//   (1) 0 < E < 255      F is a normal number: not +-0, not subnormal, not Inf/NaN;
//   (2) 0 < E + n < 255  the result is normal too: no underflow to subnormal, no overflow.
// Outside them the add is not a multiplication. The field arithmetic wraps: E + n <= 0 borrows
// from the sign bit, E + n >= 255 carries into it or lands on Inf/NaN patterns. Example: 0.0f
// (E = 0) with n = -2 gives the pattern 0xFF000000, i.e. -1.7e38, a huge negative number instead of
// 0. An NPU's AtomicAdd<int32> on the FP32 bits of O does exactly that, so a golden reference for
// such a kernel must reproduce it (mul_pow2_hardware), detect it (mul_pow2_checked) or avoid it
// (mul_pow2_safe).
//
// ---- The combined add: any integer k, not only n * 2^23 ----------------------------------------
// AMLA's rescale adds k = Cast(N * 2^23) with N = dn + eps + nudge (numeric/amla_step.hpp): an
// exponent step dn and a mantissa increment in one integer. A carry out of the mantissa into the
// exponent is still a multiplication (by 2^dn (1 + ...)); what breaks it is the same as above, a
// source or a result outside the normal range. So for any k the add is what it is meant to be
// exactly when
//   (1') 0x00800000 <= |I| < 0x7F800000          the source magnitude pattern is normal;
//   (2') 0x00800000 <= |I| + k < 0x7F800000      so is the result's (added without wrap-around).
// Both are one interval of magnitudes, [max(lo, lo - k), min(hi, hi - k)) with lo = 0x00800000 and
// hi = 0x7F800000: pattern_add_window(k). One unsigned compare, (|I| - lo') < span, tests it,
// since magnitudes below lo' wrap to huge values. For k = n * 2^23 it is (1)-(2) exactly.
// The value the add is meant to have where the lemma fails (pattern_add_intended) is the same add
// carried out on (sign, exponent, mantissa) with an unbounded exponent, rounded once to FP32:
// zeros stay zeros (as a multiplication would keep them), a result below the normal range rounds
// to a subnormal (ties to even) or to zero, one above it becomes Inf, Inf and NaN pass through.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "amla/config.hpp"
#include "amla/numeric/bits.hpp"

namespace amla {

/// Which form of the 2^n multiply a recurrence uses for its output rescale.
enum class pow2_mode : std::uint8_t {
  hardware,  ///< the raw integer add, garbage included where Lemma 3.1 fails
  checked,   ///< the raw add, and every precondition failure is reported
  safe,      ///< the add where the lemma holds, an exact multiply (ldexp) elsewhere
};

// ---- any integer k ------------------------------------------------------------------------------

/// The magnitude patterns |I| = AS_INT32(f) & 0x7FFFFFFF for which adding k is exact: the
/// interval [lo, lo + span) (empty when span == 0). See the file comment, (1')-(2').
struct pattern_add_window {
  std::uint32_t lo = 0;
  std::uint32_t span = 0;

  /// Whether the magnitude pattern `mag` lies in the window: one unsigned compare.
  AMLA_HOST_DEVICE constexpr bool contains(std::uint32_t mag) const noexcept {
    return mag - lo < span;
  }
};

/// The window of k: [max(lo, lo - k), min(hi, hi - k)) with lo = 0x00800000 (the smallest normal
/// magnitude) and hi = 0x7F800000 (Inf). Example: k = -2^24 (n = -2) gives [0x01800000,
/// 0x7F800000): sources of exponent field 3 or more.
AMLA_HOST_DEVICE constexpr pattern_add_window pattern_add_window_of(std::int32_t k) noexcept {
  constexpr std::int64_t normal_lo = fp32::mantissa_mask + 1;  // 0x00800000
  constexpr std::int64_t normal_hi = fp32::exponent_mask;      // 0x7F800000
  const std::int64_t lo = k < 0 ? normal_lo - k : normal_lo;
  const std::int64_t hi = k > 0 ? normal_hi - k : normal_hi;
  return {static_cast<std::uint32_t>(lo), hi > lo ? static_cast<std::uint32_t>(hi - lo) : 0u};
}

/// Whether adding k to the pattern of f is exact (Lemma 3.1 for the combined add: the source and
/// the result normal).
AMLA_HOST_DEVICE constexpr bool pattern_add_is_exact(float f, std::int32_t k) noexcept {
  return pattern_add_window_of(k).contains(as_uint32(f) & ~fp32::sign_mask);
}

/// The raw operation AS_FP32(AS_INT32(f) + k) with the two's-complement wrap-around of a 32-bit
/// integer add (what an NPU's AtomicAdd<int32> on the pattern computes).
AMLA_HOST_DEVICE constexpr float pattern_add_hardware(float f, std::int32_t k) noexcept {
  // Unsigned arithmetic gives the same bits as a wrapping int32 add, without signed overflow UB.
  return as_fp32(as_uint32(f) + static_cast<std::uint32_t>(k));
}

/// The value AS_FP32(AS_INT32(f) + k) is meant to have: the add on (sign, exponent, mantissa) with
/// an unbounded exponent, rounded once to FP32 (file comment). Equals pattern_add_hardware(f, k)
/// bit for bit whenever pattern_add_is_exact(f, k). k may lie outside the int32 range (an
/// exponent step below -255, which no 32-bit add can carry; |k| up to 2^62). Integer code with
/// selects only, no branch and no loop, so that device code can inline it without a call (a call
/// would spill a kernel's accumulators).
AMLA_HOST_DEVICE constexpr float pattern_add_intended(float f, std::int64_t k) noexcept {
  const std::uint32_t u = as_uint32(f);
  const std::uint32_t mag = u & ~fp32::sign_mask;
  const std::int32_t e_raw = static_cast<std::int32_t>(mag >> fp32::mantissa_bits);
  const std::uint32_t m_raw = u & fp32::mantissa_mask;
  // A subnormal source (E = 0, value m 2^-149): move its leading bit to position 23, lowering the
  // exponent to 1 - shift, so that (E, M) is (1 + M / 2^23) 2^(E - 127) for it too. Shift 0 for
  // a normal source; `| 1` keeps the count defined for +-0, which is passed through below.
  const int shift = e_raw == 0 ? detail::count_leading_zeros(m_raw | 1u) - 8 : 0;
  const std::int64_t one = std::int64_t{1} << fp32::mantissa_bits;
  const std::int64_t m = e_raw == 0 ? (static_cast<std::int64_t>(m_raw) << shift) - one
                                    : static_cast<std::int64_t>(m_raw);
  const std::int64_t e = e_raw == 0 ? 1 - shift : e_raw;
  // The add with an unbounded exponent: r = E' 2^23 + M' with 0 <= M' < 2^23 (floor division by
  // 2^23 through the arithmetic shift: r may be negative).
  const std::int64_t r = e * one + m + k;
  const std::int64_t e2 = r >> fp32::mantissa_bits;
  const std::uint32_t m2 = static_cast<std::uint32_t>(r & (one - 1));
  // Below the normal range (E' < 1) the value (2^23 + M') 2^(E' - 150) rounds once to a multiple
  // of 2^-149: shift right by sh = 1 - E' with ties to even. sh is clamped to [1, 31]: past 24
  // every value rounds to 0 (2^23 + M' < 2^24 < half the shifted-out weight), so 31 is as good.
  const int sh = e2 >= 1 ? 1 : (e2 < -30 ? 31 : 1 - static_cast<int>(e2));
  const std::uint32_t mant = (std::uint32_t{1} << fp32::mantissa_bits) | m2;
  const std::uint32_t q = mant >> sh;
  const std::uint32_t rem = mant & ((std::uint32_t{1} << sh) - 1u);
  const std::uint32_t half = std::uint32_t{1} << (sh - 1);
  // A carry of q into bit 23 lands on the pattern of FLT_MIN, which is the right answer.
  const std::uint32_t sub = q + ((rem > half || (rem == half && (q & 1u) != 0u)) ? 1u : 0u);
  const std::uint32_t normal =
      (static_cast<std::uint32_t>(e2 >= 1 && e2 < 255 ? e2 : 0) << fp32::mantissa_bits) | m2;
  const std::uint32_t out = e2 >= 255 ? fp32::exponent_mask : (e2 >= 1 ? normal : sub);
  const bool keep = mag == 0u || e_raw == fp32::exponent_max;  // +-0, Inf, NaN pass through
  return keep ? f : as_fp32(out | (u & fp32::sign_mask));
}

/// Adds k to the pattern of every element of o[0, n) (the raw add, pattern_add_hardware) and
/// returns whether some element broke the preconditions (!pattern_add_is_exact of its value
/// before the add). Branch-free: one add and one compare per element, so the loop vectorises.
AMLA_HOST_DEVICE inline bool pattern_add_inplace(float* o, std::ptrdiff_t n,
                                                 std::int32_t k) noexcept {
  const pattern_add_window w = pattern_add_window_of(k);
  const auto ku = static_cast<std::uint32_t>(k);
  std::uint32_t bad = 0;
  for (std::ptrdiff_t j = 0; j < n; ++j) {
    const std::uint32_t u = as_uint32(o[j]);
    bad |= static_cast<std::uint32_t>(!w.contains(u & ~fp32::sign_mask));
    o[j] = as_fp32(u + ku);
  }
  return bad != 0u;
}

/// The add of k in the form `mode`: the raw add (hardware, checked), or the raw add where it is
/// exact and the intended value elsewhere (safe).
AMLA_HOST_DEVICE constexpr float pattern_add(float f, std::int32_t k, pow2_mode mode) noexcept {
  if (mode == pow2_mode::safe && !pattern_add_is_exact(f, k)) return pattern_add_intended(f, k);
  return pattern_add_hardware(f, k);
}

// ---- k = n * 2^23: multiplication by a power of two --------------------------------------------

/// Whether Lemma 3.1's preconditions hold for f and n: 0 < E < 255 and 0 < E + n < 255. Both
/// need |n| <= 253; within that n * 2^23 fits an int32 and the test is the window of that add.
AMLA_HOST_DEVICE constexpr bool pow2_add_is_exact(float f, std::int32_t n) noexcept {
  return n >= -253 && n <= 253 && pattern_add_is_exact(f, n * (std::int32_t{1} << 23));
}

/// The raw hardware operation AS_FP32(AS_INT32(f) + n * 2^23), with the two's-complement
/// wrap-around of a 32-bit integer add. Equals f * 2^n exactly when pow2_add_is_exact(f, n);
/// otherwise it returns whatever pattern the add produces, as the hardware would.
AMLA_HOST_DEVICE constexpr float mul_pow2_hardware(float f, std::int32_t n) noexcept {
  // n * 2^23 wrapped to 32 bits, without signed overflow UB.
  return pattern_add_hardware(
      f, static_cast<std::int32_t>(static_cast<std::uint32_t>(n) << fp32::mantissa_bits));
}

/// The value of the raw add together with whether Lemma 3.1 guaranteed it.
struct pow2_result {
  float value;  ///< mul_pow2_hardware(f, n)
  bool exact;   ///< pow2_add_is_exact(f, n): value == f * 2^n bit for bit
};

/// The raw add, plus whether its preconditions held.
AMLA_HOST_DEVICE constexpr pow2_result mul_pow2_checked(float f, std::int32_t n) noexcept {
  return {mul_pow2_hardware(f, n), pow2_add_is_exact(f, n)};
}

/// f * 2^n with ldexp semantics for every input: the integer add where Lemma 3.1 holds, an exact
/// scaling elsewhere (zeros stay zeros, subnormal results are rounded to nearest, overflow gives
/// Inf, Inf and NaN pass through).
AMLA_HOST_DEVICE inline float mul_pow2_safe(float f, std::int32_t n) noexcept {
  if (pow2_add_is_exact(f, n)) return mul_pow2_hardware(f, n);
#if defined(__CUDA_ARCH__)
  return ldexpf(f, n);
#else
  return std::ldexp(f, n);
#endif
}

/// Dispatch on a runtime mode (checked computes the same value as hardware; the report of the
/// failure is the caller's job, see attention/amla.hpp).
AMLA_HOST_DEVICE inline float mul_pow2(float f, std::int32_t n, pow2_mode mode) noexcept {
  return mode == pow2_mode::safe ? mul_pow2_safe(f, n) : mul_pow2_hardware(f, n);
}

}  // namespace amla
