// amla/numeric/bf16.hpp: the BF16 storage type and its exact conversions to and from FP32.
//
// BF16 is the upper half of an FP32 pattern: 1 sign bit, the same 8 exponent bits, 7 mantissa
// bits. Widening BF16 -> FP32 is exact (append 16 zero bits). Narrowing FP32 -> BF16 drops the low
// 16 bits, and how it rounds matters to a golden reference, so both hardware behaviours are here:
//
// * Round to nearest, ties to even (the default; what CUDA's __float2bfloat16_rn, Ascend's
//   CAST_RINT and Eigen's bfloat16 do). Add 0x7FFF plus the lowest kept bit to the pattern, then
//   truncate. For a low half below 0x8000 the add cannot carry into bit 16 (round down); above
//   0x8000 it always carries (round up); at exactly 0x8000 it carries only when the kept lsb is 1,
//   so the result's lsb becomes 0 (ties to even). A carry that ripples out of the mantissa bumps
//   the exponent, which is exactly the right answer, including the largest finite values rounding
//   to the Inf pattern 0x7F80 (overflow to Inf, as IEEE requires). Subnormals need no special
//   case: their exponent field is 0 and the same integer add rounds their mantissa correctly.
// * Truncation (round toward zero), which some casts do: keep the high half.
//
// NaN is the one input where the integer tricks go wrong: rounding 0x7FFFFFFF would carry into
// the sign bit, and truncating 0x7F800001 would give 0x7F80, which is Inf. Both conversions
// therefore map a NaN to a quiet NaN (mantissa msb 0x0040 set) that keeps the sign and the top 6
// payload bits. +-Inf and +-0 are preserved by both conversions.
//
// The round-to-nearest-even add is written once, detail::bf16_rne_bits; everything else here (the
// bf16 type, round_bf16, the array forms the recurrences use on P, the AMLA step's S16 in
// numeric/amla_step.hpp, host and device alike) calls it. The finite-only forms drop the NaN
// select, for arrays known to be finite (P = exp(x) with x <= 0), so that their loops stay a
// plain integer add and mask.
#pragma once

#include <cstddef>
#include <cstdint>

#include "amla/config.hpp"
#include "amla/numeric/bits.hpp"

namespace amla {

namespace detail {

/// Round to nearest, ties to even, on the FP32 pattern u: add 0x7FFF plus the lowest kept bit
/// (bit 16) and clear the low half. The result is the BF16 pattern in the high half (low half 0).
/// Correct for every pattern that is not a NaN, Inf and the carry to Inf included (file comment).
/// Examples: 0x3F808000 (a tie, kept lsb 0) -> 0x3F800000; 0x3F818000 (a tie, kept lsb 1) ->
/// 0x3F820000; 0x7F7FFFFF (FLT_MAX) -> 0x7F800000 (Inf).
AMLA_HOST_DEVICE constexpr std::uint32_t bf16_rne_bits(std::uint32_t u) noexcept {
  return (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
}

/// The quiet NaN a NaN pattern u narrows to: the mantissa msb (0x00400000) set, sign and the top
/// 6 payload bits kept, the low half cleared.
AMLA_HOST_DEVICE constexpr std::uint32_t bf16_quiet_nan_bits(std::uint32_t u) noexcept {
  return (u | 0x00400000u) & 0xFFFF0000u;
}

}  // namespace detail

/// How an FP32 value is narrowed to BF16.
enum class bf16_rounding : std::uint8_t {
  nearest_even,  ///< IEEE round to nearest, ties to even (default)
  toward_zero,   ///< truncation of the low 16 bits
};

/// 16-bit BF16 storage. Trivially copyable, 2 bytes, the same layout as __nv_bfloat16 and
/// Ascend's bfloat16_t, so arrays of it can be handed to device code as they are.
struct bf16 {
  std::uint16_t bits = 0;

  /// The BF16 with this bit pattern.
  AMLA_HOST_DEVICE static constexpr bf16 from_bits(std::uint16_t b) noexcept { return bf16{b}; }

  /// Narrow f to BF16 with the given rounding (see the file comment for the bit-level argument).
  AMLA_HOST_DEVICE static constexpr bf16 from_float(
      float f, bf16_rounding mode = bf16_rounding::nearest_even) noexcept {
    const std::uint32_t u = as_uint32(f);
    if (fp32::is_nan(f))
      return from_bits(static_cast<std::uint16_t>(detail::bf16_quiet_nan_bits(u) >> 16));
    if (mode == bf16_rounding::toward_zero) return from_bits(static_cast<std::uint16_t>(u >> 16));
    return from_bits(static_cast<std::uint16_t>(detail::bf16_rne_bits(u) >> 16));
  }

  /// Widen to FP32; exact for every pattern (NaN payloads included).
  AMLA_HOST_DEVICE constexpr float to_float() const noexcept {
    return as_fp32(static_cast<std::uint32_t>(bits) << 16);
  }

  AMLA_HOST_DEVICE constexpr explicit operator float() const noexcept { return to_float(); }

  friend constexpr bool operator==(bf16 a, bf16 b) noexcept { return a.bits == b.bits; }
};

static_assert(sizeof(bf16) == 2 && alignof(bf16) == 2, "bf16 must be two plain bytes");

/// f rounded to the nearest BF16 value and widened back to FP32: the value a kernel sees after a
/// cast to BF16. round_bf16(round_bf16(x)) == round_bf16(x).
AMLA_HOST_DEVICE constexpr float round_bf16(
    float f, bf16_rounding mode = bf16_rounding::nearest_even) noexcept {
  return bf16::from_float(f, mode).to_float();
}

/// round_bf16(f) for a finite (or infinite) f, without the NaN test: a NaN input gives an
/// unspecified pattern (0x7FFFFFFF carries into the sign bit). For values known to be finite.
AMLA_HOST_DEVICE constexpr float round_bf16_finite(float f) noexcept {
  return as_fp32(detail::bf16_rne_bits(as_uint32(f)));
}

/// Rounds p[0, n) to BF16 in place, round to nearest even, for values known not to be NaN
/// (round_bf16_finite on each). The loop is an integer add and a mask: it vectorises.
AMLA_HOST_DEVICE inline void round_bf16_finite_inplace(float* p, std::ptrdiff_t n) noexcept {
  for (std::ptrdiff_t i = 0; i < n; ++i) p[i] = round_bf16_finite(p[i]);
}

/// Rounds p[0, n) to BF16 in place exactly as round_bf16 (nearest even, a NaN becomes a quiet
/// NaN). The NaN case is a select, not a branch, so the loop still vectorises.
AMLA_HOST_DEVICE inline void round_bf16_inplace(float* p, std::ptrdiff_t n) noexcept {
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const std::uint32_t u = as_uint32(p[i]);
    const bool nan = (u & ~fp32::sign_mask) > fp32::exponent_mask;
    p[i] = as_fp32(nan ? detail::bf16_quiet_nan_bits(u) : detail::bf16_rne_bits(u));
  }
}

/// Whether f is exactly representable in BF16 (its low 16 bits are zero). NaNs count as
/// representable only when their payload fits.
AMLA_HOST_DEVICE constexpr bool is_bf16_exact(float f) noexcept {
  return (as_uint32(f) & 0xFFFFu) == 0u;
}

}  // namespace amla
