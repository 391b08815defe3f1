// amla/numeric/fp8.hpp: the OCP 8-bit floating-point formats, e4m3 (fn) and e5m2 for values and
// e8m0 for scales, and their exact conversions to and from FP32.
//
//   e4m3 (float8_e4m3fn)  1 sign, 4 exponent (bias 7), 3 mantissa bits. No Inf; only S.1111.111
//                         is NaN, so the top binade holds normals up to 1.75 * 2^8 = 448.
//                         Subnormals down to 2^-9.
//   e5m2 (float8_e5m2)    1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like: Inf and NaN
//                         in the top binade, finite up to 1.75 * 2^15 = 57344, subnormals to 2^-16.
//                         The high byte of an FP16.
//   e8m0 (float8_e8m0fnu) 8 exponent bits, bias 127, nothing else: code c means 2^(c - 127),
//                         c = 255 is NaN. No sign, no zero, no Inf. The MX formats' and
//                         FlashMLA's MODEL1 scale factor.
// Widening is exact for all 256 codes of each. Narrowing e4m3 and e5m2 rounds to nearest, ties to
// even (numeric/minifloat.hpp); an overflow is NaN (e4m3) or Inf (e5m2) without saturation, as
// the OCP spec's non-saturating mode, torch and ml_dtypes do, and +-the largest finite value with
// saturation::finite (Inf inputs too), as CUDA's __NV_SATFINITE conversion does. A NaN stays a
// NaN (for e4m3 its only pattern, 0x7F with the sign).
//
// e8m0 narrowing. Only powers of two exist, so "rounding" picks a neighbouring power:
//   nearest  2^k for x in [2^k, 1.5 * 2^k), 2^(k+1) from 1.5 * 2^k up: the midpoint rounds up (in
//            value; with no mantissa bit there is no even choice). What ml_dtypes and torch do.
//   up       the smallest power of two >= x: 2^ceil(log2 x). The scale rule of MX and of
//            FlashMLA's quantizer (tests/quant.py), which keeps x / scale <= the element maximum.
//   down     the largest power of two <= x: 2^floor(log2 x), PTX cvt.rz.ue8m0x2.
// A positive x below 2^-127 becomes 2^-127 (code 0) in every mode: the format has no smaller
// value. A result above 2^127 is NaN without saturation (as ml_dtypes), 2^127 with it (Inf
// included). Zero, negative values (-0 too) and NaN have no e8m0 value and give NaN in every mode.
#pragma once

#include <cstdint>

#include "amla/config.hpp"
#include "amla/numeric/bits.hpp"
#include "amla/numeric/minifloat.hpp"

namespace amla {

namespace detail {
inline constexpr minifloat_spec e4m3_spec{4, 3, 7, false};
inline constexpr minifloat_spec e5m2_spec{5, 2, 15, true};
}  // namespace detail

/// OCP FP8 e4m3 (fn): finite, max 448, one NaN pattern per sign.
struct fp8_e4m3 {
  std::uint8_t bits = 0;

  static constexpr float max_finite = 448.0f;

  AMLA_HOST_DEVICE static constexpr fp8_e4m3 from_bits(std::uint8_t b) noexcept {
    fp8_e4m3 r;
    r.bits = b;
    return r;
  }
  /// f rounded to nearest even; an overflow is NaN, or +-448 with saturation::finite.
  AMLA_HOST_DEVICE static constexpr fp8_e4m3 from_float(
      float f, saturation sat = saturation::none) noexcept {
    return from_bits(static_cast<std::uint8_t>(
        detail::minifloat_from_fp32(detail::e4m3_spec, as_uint32(f), sat)));
  }
  /// Widen to FP32; exact (NaN widens to the FP32 quiet NaN of the same sign).
  AMLA_HOST_DEVICE constexpr float to_float() const noexcept {
    return as_fp32(detail::minifloat_to_fp32(detail::e4m3_spec, bits));
  }
  AMLA_HOST_DEVICE constexpr explicit operator float() const noexcept { return to_float(); }
  friend constexpr bool operator==(fp8_e4m3 a, fp8_e4m3 b) noexcept { return a.bits == b.bits; }
};

/// OCP FP8 e5m2: IEEE-like, max 57344, Inf and NaN.
struct fp8_e5m2 {
  std::uint8_t bits = 0;

  static constexpr float max_finite = 57344.0f;

  AMLA_HOST_DEVICE static constexpr fp8_e5m2 from_bits(std::uint8_t b) noexcept {
    fp8_e5m2 r;
    r.bits = b;
    return r;
  }
  /// f rounded to nearest even; an overflow is Inf, or +-57344 with saturation::finite.
  AMLA_HOST_DEVICE static constexpr fp8_e5m2 from_float(
      float f, saturation sat = saturation::none) noexcept {
    return from_bits(static_cast<std::uint8_t>(
        detail::minifloat_from_fp32(detail::e5m2_spec, as_uint32(f), sat)));
  }
  /// Widen to FP32; exact for every code (NaN payloads kept).
  AMLA_HOST_DEVICE constexpr float to_float() const noexcept {
    return as_fp32(detail::minifloat_to_fp32(detail::e5m2_spec, bits));
  }
  AMLA_HOST_DEVICE constexpr explicit operator float() const noexcept { return to_float(); }
  friend constexpr bool operator==(fp8_e5m2 a, fp8_e5m2 b) noexcept { return a.bits == b.bits; }
};

static_assert(sizeof(fp8_e4m3) == 1 && sizeof(fp8_e5m2) == 1, "FP8 types must be one byte");

/// Which FP8 element format a cache or a runtime choice uses.
enum class fp8_kind : std::uint8_t { e4m3, e5m2 };

/// The largest finite value of an FP8 element format: 448 (e4m3) or 57344 (e5m2).
AMLA_HOST_DEVICE constexpr float fp8_max_finite(fp8_kind k) noexcept {
  return k == fp8_kind::e4m3 ? fp8_e4m3::max_finite : fp8_e5m2::max_finite;
}

/// The code of f in format k (fp8_e4m3 / fp8_e5m2 from_float).
AMLA_HOST_DEVICE constexpr std::uint8_t fp8_from_float(fp8_kind k, float f,
                                                       saturation sat = saturation::none) noexcept {
  return k == fp8_kind::e4m3 ? fp8_e4m3::from_float(f, sat).bits
                             : fp8_e5m2::from_float(f, sat).bits;
}

/// The value of code c in format k, exact.
AMLA_HOST_DEVICE constexpr float fp8_to_float(fp8_kind k, std::uint8_t c) noexcept {
  return k == fp8_kind::e4m3 ? fp8_e4m3::from_bits(c).to_float()
                             : fp8_e5m2::from_bits(c).to_float();
}

/// How an FP32 value picks a power of two for e8m0 (file comment).
enum class e8m0_rounding : std::uint8_t {
  nearest,  ///< the nearer power; the midpoint 1.5 * 2^k goes up (ml_dtypes, torch)
  up,       ///< the smallest power >= x (MX and FlashMLA scale rule, PTX .rp)
  down,     ///< the largest power <= x (PTX .rz)
};

/// OCP e8m0 (float8_e8m0fnu): an unsigned power of two 2^(c - 127), c = 255 NaN.
struct e8m0 {
  std::uint8_t bits = 127;  ///< 1.0

  static constexpr std::uint8_t nan_bits = 0xFF;

  AMLA_HOST_DEVICE static constexpr e8m0 from_bits(std::uint8_t b) noexcept {
    e8m0 r;
    r.bits = b;
    return r;
  }

  /// The power of two 2^k (k in [-127, 127]), exactly.
  AMLA_HOST_DEVICE static constexpr e8m0 from_exponent(int k) noexcept {
    return from_bits(static_cast<std::uint8_t>(k + 127));
  }

  /// f narrowed to a power of two as `mode` says; NaN for zero, negative and NaN inputs, and for
  /// an overflow without saturation (file comment). Selects only, no branch.
  AMLA_HOST_DEVICE static constexpr e8m0 from_float(float f,
                                                    e8m0_rounding mode = e8m0_rounding::nearest,
                                                    saturation sat = saturation::none) noexcept {
    const std::uint32_t u = as_uint32(f);
    const int fe = static_cast<int>((u & ~fp32::sign_mask) >> fp32::mantissa_bits);
    // A subnormal x is m 2^-149; with the leading bit of m at position p it is
    // 2^(p - 149) (1 + the bits below p, moved up to the top of a mantissa field).
    // (Inf has fe = 255: k = 128 overflows.)
    const bool sub = fe == 0;
    const std::uint32_t m = u & fp32::mantissa_mask;
    const int p = 31 - detail::count_leading_zeros(m | 1u);
    const int k = sub ? p - 149 : fe - fp32::exponent_bias;
    // x = 2^k (1 + frac), frac in [0, 1): whether frac = 0, whether frac >= 1/2.
    const std::uint32_t frac = sub ? (m << (fp32::mantissa_bits - p)) & fp32::mantissa_mask : m;
    const bool exact = frac == 0u;
    const bool upper_half = (frac >> (fp32::mantissa_bits - 1)) != 0u;
    const bool round_up =
        mode == e8m0_rounding::up ? !exact : (mode == e8m0_rounding::nearest) & upper_half;
    int c = k + 127 + (round_up ? 1 : 0);
    c = c < 0 ? 0 : c;  // below 2^-127: the smallest value
    const int overflow = sat == saturation::finite ? 0xFE : nan_bits;
    const int code = c > 254 ? overflow : c;
    // +0, every negative pattern (-0 included) and NaN: no e8m0 value.
    const bool no_value = (u == 0u) | (u > fp32::exponent_mask);
    return from_bits(static_cast<std::uint8_t>(no_value ? nan_bits : code));
  }

  /// Widen to FP32: 2^(c - 127) exactly (2^-127 is the FP32 subnormal 0x00400000), NaN for 255.
  AMLA_HOST_DEVICE constexpr float to_float() const noexcept {
    if (bits == nan_bits) return as_fp32(0x7FC00000u);
    if (bits == 0) return as_fp32(0x00400000u);
    return as_fp32(static_cast<std::uint32_t>(bits) << fp32::mantissa_bits);
  }
  AMLA_HOST_DEVICE constexpr explicit operator float() const noexcept { return to_float(); }
  /// The exponent k of 2^k (valid for every code but NaN).
  AMLA_HOST_DEVICE constexpr int exponent() const noexcept { return static_cast<int>(bits) - 127; }
  AMLA_HOST_DEVICE constexpr bool is_nan() const noexcept { return bits == nan_bits; }
  friend constexpr bool operator==(e8m0 a, e8m0 b) noexcept { return a.bits == b.bits; }
};

static_assert(sizeof(e8m0) == 1, "e8m0 must be one byte");

}  // namespace amla
