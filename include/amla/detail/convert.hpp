// amla/detail/convert.hpp: element conversions the attention drivers and MLA formulations need.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "amla/numeric/bf16.hpp"
#include "amla/numeric/bits.hpp"
#include "amla/numeric/fp16.hpp"

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

/// x rounded once to the nearest FP16 (ties to even; overflow to Inf as numeric/fp16.hpp). The
/// narrowing to float rounds to odd (an inexact result keeps the float neighbour toward zero
/// with its last bit set), which carries the sticky information the second rounding needs: a
/// float has 13 more significand bits than an FP16, at every FP16 magnitude (normal or not), so
/// round-to-odd followed by round-to-nearest-even equals one rounding of x.
inline fp16 fp16_from_double(double x) noexcept {
  float f = static_cast<float>(x);
  if (!std::isfinite(f) || static_cast<double>(f) == x) return fp16::from_float(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) {
    f = std::nextafter(f, 0.0f);  // the neighbour toward zero
  }
  return fp16::from_float(as_fp32(as_uint32(f) | 1u));
}

/// An element of an input tensor widened to float (exact for float, bf16 and fp16).
inline float to_float(float x) noexcept {
  return x;
}
inline float to_float(bf16 x) noexcept {
  return x.to_float();
}
inline float to_float(fp16 x) noexcept {
  return x.to_float();
}

/// The cast applied to an output before it is stored (DecodeOptions' round_output_bf16 and
/// round_output_fp16).
AMLA_ENUMERATORS_BEGIN
enum class output_cast : std::uint8_t { none, bf16, fp16 };
AMLA_ENUMERATORS_END

/// Stores an accumulator value x (float or double) into an output element of type OutT, rounding
/// to BF16 or FP16 first as `cast` says (a bf16 OutT always rounds to BF16): one rounding in
/// every case.
template <class OutT, class Scalar>
OutT store_as(Scalar x, output_cast cast) noexcept {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>);
  constexpr bool wide = std::is_same_v<Scalar, double>;
  if constexpr (std::is_same_v<OutT, bf16>) {
    if constexpr (wide) {
      return bf16_from_double(x);
    } else {
      return bf16::from_float(x);
    }
  } else {
    if (cast == output_cast::bf16) {
      if constexpr (wide) {
        return static_cast<OutT>(bf16_from_double(x).to_float());
      } else {
        return static_cast<OutT>(bf16::from_float(x).to_float());
      }
    }
    if (cast == output_cast::fp16) {
      if constexpr (wide) {
        return static_cast<OutT>(fp16_from_double(x).to_float());
      } else {
        return static_cast<OutT>(fp16::from_float(x).to_float());
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
