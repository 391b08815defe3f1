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
#pragma once

#include <cmath>
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

/// Whether Lemma 3.1's preconditions hold for f and n: 0 < E < 255 and 0 < E + n < 255.
AMLA_HOST_DEVICE constexpr bool pow2_add_is_exact(float f, std::int32_t n) noexcept {
  const int e = fp32::biased_exponent(f);
  // Compare in 64 bits so that an extreme n cannot overflow the sum.
  const std::int64_t en = static_cast<std::int64_t>(e) + n;
  return e > 0 && e < fp32::exponent_max && en > 0 && en < fp32::exponent_max;
}

/// The raw hardware operation AS_FP32(AS_INT32(f) + n * 2^23), with the two's-complement
/// wrap-around of a 32-bit integer add. Equals f * 2^n exactly when pow2_add_is_exact(f, n);
/// otherwise it returns whatever pattern the add produces, as the hardware would.
AMLA_HOST_DEVICE constexpr float mul_pow2_hardware(float f, std::int32_t n) noexcept {
  // Unsigned arithmetic gives the same bits as a wrapping int32 add, without signed overflow UB.
  const std::uint32_t delta = static_cast<std::uint32_t>(n) << fp32::mantissa_bits;
  return as_fp32(as_uint32(f) + delta);
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
