// amla/detail/convert.hpp: element conversions the attention drivers and MLA formulations need.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "amla/numeric/bf16.hpp"

namespace amla::detail {

/// x rounded once to the nearest BF16 (ties to even). Going through float first would round twice
/// (double -> float -> bf16), which can land on the wrong side of a BF16 tie; instead the float
/// rounding only locates the two BF16 neighbours of x and the nearer one is chosen in double,
/// where both neighbours and x are exact. (f = RN_float(x) is within half a float ulp of x, so
/// the BF16 truncation t of f and the next BF16 value away from zero bracket x unless f rounded
/// up onto t itself, in which case t is the nearest anyway.)
inline bf16 bf16_from_double(double x) noexcept {
  const float f = static_cast<float>(x);
  if (!std::isfinite(f)) return bf16::from_float(f);
  const bf16 t = bf16::from_float(f, bf16_rounding::toward_zero);
  const std::uint16_t sign = t.bits & 0x8000u;
  const std::uint16_t mag = t.bits & 0x7FFFu;
  const double ax = std::fabs(x);
  const double lo = static_cast<double>(bf16::from_bits(mag).to_float());
  // The next BF16 magnitude; past the largest finite BF16 the overflow threshold is 2^128.
  const double hi =
      mag == 0x7F7Fu
          ? std::ldexp(1.0, 128)
          : static_cast<double>(bf16::from_bits(static_cast<std::uint16_t>(mag + 1)).to_float());
  std::uint16_t chosen = mag;
  if (ax - lo > hi - ax || (ax - lo == hi - ax && (mag & 1u) != 0u)) chosen = mag + 1;
  return bf16::from_bits(static_cast<std::uint16_t>(sign | chosen));
}

/// An element of an input tensor widened to float (exact for float and bf16).
inline float to_float(float x) noexcept {
  return x;
}
inline float to_float(bf16 x) noexcept {
  return x.to_float();
}

/// Stores an accumulator value x (float or double) into an output element of type OutT, rounding
/// to BF16 first when round_bf16 is set (or when OutT is bf16): one rounding in every case.
template <class OutT, class Scalar>
OutT store_as(Scalar x, bool round_bf16) noexcept {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>);
  if constexpr (std::is_same_v<OutT, bf16>) {
    if constexpr (std::is_same_v<Scalar, double>) {
      return bf16_from_double(x);
    } else {
      return bf16::from_float(x);
    }
  } else {
    if (round_bf16) {
      if constexpr (std::is_same_v<Scalar, double>) {
        return static_cast<OutT>(bf16_from_double(x).to_float());
      } else {
        return static_cast<OutT>(bf16::from_float(x).to_float());
      }
    }
    return static_cast<OutT>(x);
  }
}

/// Stores an lse value x (float or double) into an lse element of type LseT. A finite value that
/// the narrowing to float overflows becomes NaN rather than an infinity: infinite lse values mark
/// rows that see no key (problem/conventions.hpp, rules 2 and 4).
template <class LseT, class Scalar>
LseT store_lse(Scalar x) noexcept {
  static_assert(std::is_floating_point_v<LseT> && std::is_floating_point_v<Scalar>);
  const auto y = static_cast<LseT>(x);
  return std::isinf(y) && std::isfinite(x) ? std::numeric_limits<LseT>::quiet_NaN() : y;
}

}  // namespace amla::detail
