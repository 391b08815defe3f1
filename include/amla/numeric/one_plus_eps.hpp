// amla/numeric/one_plus_eps.hpp: multiply an FP32 value by (1 + eps), |eps| small, with one
// integer add on its bit pattern (AMLA Appendix A, eqs. 14-15).
//
// Derivation. Write F = (-1)^S (1 + m) 2^(E-127) with m = M / 2^23 in [0, 1). Then
//   F (1 + eps) = (-1)^S 2^(E-127) (1 + m + eps (1 + m)).
// Adding an integer k to the pattern adds k / 2^23 to m (while m stays in [0, 1)), so the exact
// increment would be 2^23 eps (1 + m), which depends on the mantissa. The paper fixes m at the
// middle of its range, m = 1/2, and adds the constant
//   k = round(1.5 * 2^23 * eps).
// Worst-case relative error. Ignoring the rounding of k, the result is (1 + m + 1.5 eps) 2^(...),
// against the truth (1 + m)(1 + eps) 2^(...), a relative error of
//   r(m, eps) = eps (1/2 - m) / ((1 + m)(1 + eps)).
// |r| is largest at m = 0, where r = eps / (2 (1 + eps)); at m -> 1 it is -eps / (4 (1 + eps)).
// When m + 1.5 eps leaves [0, 1) the add carries into (or borrows from) the exponent; working
// through both cases gives errors inside the same envelope. Rounding k adds at most 2^-24 of the
// mantissa step, relative at most 2^-24. Hence for every normal F whose result stays normal,
//   |F' / (F (1 + eps)) - 1| <= |eps| / (2 (1 - |eps|)) + 2^-24,
// which for |eps| <= 2^-8 is at most 1.9608e-3 + 6e-8. The error is signed and mantissa
// dependent, but its mean over uniformly spread mantissas is eps (1.5 ln 2 - 1) ~= 0.04 eps (plus
// 9/16 eps^2 from the carry region), nearly unbiased: that, not the worst case, is why the
// constant is 1.5.
// Rounding of k. `nearest_even` rounds 1.5 * 2^23 * eps to the nearest integer, ties to even
// (std::nearbyint under the default FP environment). `toward_zero` truncates, like an FP32 -> INT32
// cast with CAST_TRUNC: the "unrounded" reading, whose extra error is below one mantissa step,
// i.e. below 2^-23 relative, and always toward a smaller |k|.
// The same preconditions as Lemma 3.1 apply: F must be normal and the result must stay normal; a
// zero, subnormal, Inf or NaN input gives a meaningless pattern, as it would on hardware.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "amla/config.hpp"
#include "amla/numeric/bits.hpp"

namespace amla {

/// How the real increment 1.5 * 2^23 * eps becomes an integer.
enum class eps_rounding : std::uint8_t {
  nearest_even,  ///< round to nearest, ties to even
  toward_zero,   ///< truncation (an FP -> INT cast that truncates)
};

/// Cast_to_int32 of x (float or double): x rounded to an integer in the given mode (nearest even
/// is std::nearbyint under the default FP environment), converted to int32. NaN and values whose
/// rounding falls outside the int32 range give INT32_MIN, the "integer indefinite" x86's
/// cvttss2si returns (no caller in amla produces them from finite input).
template <class T>
AMLA_HOST_DEVICE inline std::int32_t round_to_int32(T x, eps_rounding mode) noexcept {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "float or double");
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) {
    // One cvt instruction: x rounds into the int32 range exactly when -2^31 <= x < 2^31 (the
    // floats next to -2^31 and 2^31 are integers), and NaN fails both compares.
    const bool in_range = x >= -2147483648.0f && x < 2147483648.0f;
    const int r = mode == eps_rounding::toward_zero ? __float2int_rz(x) : __float2int_rn(x);
    return in_range ? r : static_cast<std::int32_t>(-2147483647 - 1);
  }
  const T r = mode == eps_rounding::toward_zero ? trunc(x) : rint(x);
#else
  const T r = mode == eps_rounding::toward_zero ? std::trunc(x) : std::nearbyint(x);
#endif
  // -2^31 and 2^31 are exact in float and double.
  if (!(r >= static_cast<T>(-2147483648.0) && r < static_cast<T>(2147483648.0))) {
    return static_cast<std::int32_t>(-2147483647 - 1);
  }
  return static_cast<std::int32_t>(r);
}

/// The integer added to the FP32 pattern to multiply by (1 + eps): 1.5 * 2^23 * eps, rounded.
AMLA_HOST_DEVICE inline std::int32_t one_plus_eps_increment(
    double eps, eps_rounding mode = eps_rounding::nearest_even) noexcept {
  return round_to_int32(1.5 * 8388608.0 * eps, mode);  // 8388608 = 2^23
}

/// f * (1 + eps) approximated by AS_FP32(AS_INT32(f) + one_plus_eps_increment(eps)).
AMLA_HOST_DEVICE inline float mul_one_plus_eps(
    float f, double eps, eps_rounding mode = eps_rounding::nearest_even) noexcept {
  const auto k = static_cast<std::uint32_t>(one_plus_eps_increment(eps, mode));
  return as_fp32(as_uint32(f) + k);
}

/// The derived bound on |mul_one_plus_eps(f, eps, mode) / (f (1 + eps)) - 1| for normal f with a
/// normal result and |eps| < 1 (see the file comment): half a mantissa step of rounding for
/// nearest_even, a whole one for toward_zero.
constexpr double one_plus_eps_error_bound(double eps,
                                          eps_rounding mode = eps_rounding::nearest_even) noexcept {
  const double a = eps < 0 ? -eps : eps;
  const double step = mode == eps_rounding::nearest_even ? 1.0 / 16777216.0  // 2^-24
                                                         : 1.0 / 8388608.0;  // 2^-23
  return a / (2.0 * (1.0 - a)) + step;
}

}  // namespace amla
