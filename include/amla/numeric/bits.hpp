// amla/numeric/bits.hpp: FP32 <-> INT32/UINT32 bit casts and the IEEE-754 binary32 field layout.
//
// An FP32 value F with sign S, biased exponent E and mantissa M is stored as the 32-bit pattern
//   S (bit 31) | E (bits 30..23) | M (bits 22..0),
// and for 0 < E < 255 it means F = (-1)^S * (1 + M / 2^23) * 2^(E - 127) (AMLA eq. 5). Read as a
// two's-complement int32 the same pattern is I = -2^31 S + 2^23 E + M (AMLA eq. 6), which is why an
// integer add of n << 23 moves the exponent (numeric/pow2.hpp).
#pragma once

#include <bit>
#include <cstdint>

#include "amla/config.hpp"

namespace amla {

namespace detail {
template <class To, class From>
AMLA_HOST_DEVICE constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
#if AMLA_DEVICE_COMPILE
  return __builtin_bit_cast(To, from);
#else
  return std::bit_cast<To>(from);
#endif
}

/// Leading zero bits of a nonzero 32-bit value. Device code gets a constexpr binary search
/// (__clz is not constexpr, and nvcc evaluates constant expressions in its device pass too).
AMLA_HOST_DEVICE constexpr int count_leading_zeros(std::uint32_t x) noexcept {
#if defined(__CUDA_ARCH__)
  int n = 0;
  if (x <= 0x0000FFFFu) n += 16, x <<= 16;
  if (x <= 0x00FFFFFFu) n += 8, x <<= 8;
  if (x <= 0x0FFFFFFFu) n += 4, x <<= 4;
  if (x <= 0x3FFFFFFFu) n += 2, x <<= 2;
  if (x <= 0x7FFFFFFFu) n += 1;
  return n;
#else
  return std::countl_zero(x);
#endif
}
}  // namespace detail

/// The FP32 bit pattern of f read as a signed 32-bit integer (AS_INT32 in the AMLA paper).
AMLA_HOST_DEVICE constexpr std::int32_t as_int32(float f) noexcept {
  return detail::bit_cast<std::int32_t>(f);
}
/// The FP32 bit pattern of f read as an unsigned 32-bit integer.
AMLA_HOST_DEVICE constexpr std::uint32_t as_uint32(float f) noexcept {
  return detail::bit_cast<std::uint32_t>(f);
}
/// The float whose bit pattern is i (AS_FP32 in the AMLA paper).
AMLA_HOST_DEVICE constexpr float as_fp32(std::int32_t i) noexcept {
  return detail::bit_cast<float>(i);
}
AMLA_HOST_DEVICE constexpr float as_fp32(std::uint32_t u) noexcept {
  return detail::bit_cast<float>(u);
}

namespace fp32 {
inline constexpr std::uint32_t sign_mask = 0x8000'0000u;
inline constexpr std::uint32_t exponent_mask = 0x7F80'0000u;
inline constexpr std::uint32_t mantissa_mask = 0x007F'FFFFu;
inline constexpr int mantissa_bits = 23;
inline constexpr int exponent_bias = 127;
inline constexpr int exponent_max = 255;  // all-ones: Inf or NaN

/// Biased exponent field E in [0, 255]: 0 for zeros and subnormals, 255 for Inf and NaN.
AMLA_HOST_DEVICE constexpr int biased_exponent(float f) noexcept {
  return static_cast<int>((as_uint32(f) & exponent_mask) >> mantissa_bits);
}
/// Mantissa field M in [0, 2^23).
AMLA_HOST_DEVICE constexpr std::uint32_t mantissa(float f) noexcept {
  return as_uint32(f) & mantissa_mask;
}
/// Sign bit S (1 for negative values, -0.0f and NaNs with the sign set).
AMLA_HOST_DEVICE constexpr int sign(float f) noexcept {
  return static_cast<int>(as_uint32(f) >> 31);
}
/// Whether f is a NaN, decided on the bits (valid under -ffast-math too).
AMLA_HOST_DEVICE constexpr bool is_nan(float f) noexcept {
  return (as_uint32(f) & ~sign_mask) > exponent_mask;
}
/// Whether f is +Inf or -Inf, decided on the bits.
AMLA_HOST_DEVICE constexpr bool is_inf(float f) noexcept {
  return (as_uint32(f) & ~sign_mask) == exponent_mask;
}
}  // namespace fp32

}  // namespace amla
