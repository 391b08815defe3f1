// amla/numeric/fp16.hpp: the IEEE-754 binary16 (FP16, "half") storage type and its exact
// conversions to and from FP32.
//
// FP16 has 1 sign bit, 5 exponent bits (bias 15) and 10 mantissa bits: normals from 2^-14 to
// 65504 = (2 - 2^-10) 2^15, subnormals down to 2^-24, Inf and NaN in the top binade. Widening is
// exact. Narrowing rounds to nearest, ties to even, as CUDA's __float2half_rn, Ascend's CAST_RINT
// and numpy do, with IEEE's overflow: a magnitude that rounds above 65504 (from 65520 up, the tie
// going to the even Inf) becomes Inf. The rounding is the generic one of numeric/minifloat.hpp
// (the file comment there derives it); a NaN becomes a quiet NaN that keeps the sign and the top
// 9 payload bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "amla/config.hpp"
#include "amla/numeric/bits.hpp"
#include "amla/numeric/minifloat.hpp"

namespace amla {

namespace detail {
inline constexpr minifloat_spec fp16_spec{5, 10, 15, true};
}  // namespace detail

/// 16-bit FP16 storage: two plain bytes, the layout of __half and of numpy's float16.
struct fp16 {
  std::uint16_t bits = 0;

  /// The largest finite FP16 value, 65504.
  static constexpr float max_finite = 65504.0f;

  /// The FP16 with this bit pattern.
  AMLA_HOST_DEVICE static constexpr fp16 from_bits(std::uint16_t b) noexcept {
    fp16 r;
    r.bits = b;
    return r;
  }

  /// f rounded to nearest even; overflow gives Inf (IEEE), a NaN a quiet NaN.
  AMLA_HOST_DEVICE static constexpr fp16 from_float(float f) noexcept {
    return from_bits(static_cast<std::uint16_t>(
        detail::minifloat_from_fp32(detail::fp16_spec, as_uint32(f), saturation::none)));
  }

  /// Widen to FP32; exact for every pattern (NaN payloads included).
  AMLA_HOST_DEVICE constexpr float to_float() const noexcept {
    return as_fp32(detail::minifloat_to_fp32(detail::fp16_spec, bits));
  }

  AMLA_HOST_DEVICE constexpr explicit operator float() const noexcept { return to_float(); }

  friend constexpr bool operator==(fp16 a, fp16 b) noexcept { return a.bits == b.bits; }
};

static_assert(sizeof(fp16) == 2 && alignof(fp16) == 2, "fp16 must be two plain bytes");

/// f rounded to the nearest FP16 value and widened back: the value a kernel sees after a cast to
/// FP16. round_fp16(round_fp16(x)) == round_fp16(x).
AMLA_HOST_DEVICE constexpr float round_fp16(float f) noexcept {
  return fp16::from_float(f).to_float();
}

/// Rounds p[0, n) to FP16 values in place (round_fp16 on each).
AMLA_HOST_DEVICE inline void round_fp16_inplace(float* p, std::ptrdiff_t n) noexcept {
  for (std::ptrdiff_t i = 0; i < n; ++i) p[i] = round_fp16(p[i]);
}

/// Whether f is exactly an FP16 value (NaNs count when their payload survives the round trip).
AMLA_HOST_DEVICE constexpr bool is_fp16_exact(float f) noexcept {
  return as_uint32(round_fp16(f)) == as_uint32(f);
}

}  // namespace amla
