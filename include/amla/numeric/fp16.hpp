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

/// 16-bit FP16 storage: two plain bytes, the layout of __half and of numpy's float16. Narrowing
/// rounds to nearest even; an overflow gives Inf (IEEE), a NaN a quiet NaN.
using fp16 = minifloat<std::uint16_t, detail::fp16_spec>;

static_assert(sizeof(fp16) == 2 && alignof(fp16) == 2, "fp16 must be two plain bytes");
static_assert(fp16::max_finite == 65504.0f);

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
