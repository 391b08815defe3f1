// amla/numeric/minifloat.hpp: FP32 narrowed to a smaller binary floating-point format with round to
// nearest, ties to even, and widened back, for any exponent and mantissa width. FP16
// (numeric/fp16.hpp) and the FP8 formats e4m3 and e5m2 (numeric/fp8.hpp) are instances.
//
// A format has E exponent bits, M mantissa bits, a sign bit and bias B. A code with exponent field
// e and mantissa field m means
//   e > 0:  (-1)^s (1 + m / 2^M) 2^(e - B)      normal
//   e = 0:  (-1)^s (m / 2^M) 2^(1 - B)          subnormal (and +-0)
// The largest exponent field is what tells the two families apart:
//   * IEEE-like (FP16, e5m2): exponent field all ones is Inf (m = 0) or NaN (m != 0);
//   * "fn", finite (e4m3fn, OCP FP8): all ones is an ordinary binade, except that mantissa all
//     ones is NaN; there is no Inf. e4m3fn's largest value is therefore 1.75 * 2^8 = 448.
//
// Narrowing, round to nearest even. Write the FP32 input as an integer significand times a power
// of two, x = sig * 2^(e - 23), with sig = 2^23 + M for a normal input (e = E - 127) and sig = M
// for a subnormal one (e = -126). The target's quantum at x is 2^(max(e, emin) - M), emin = 1 - B
// the smallest normal exponent, so the code's magnitude is sig shifted right by
//   shift = 23 - M + max(0, emin - e)
// with ties to even on the shifted-out bits. For e >= emin the kept part q lies in [2^M, 2^(M+1)]
// and the code is ((e - emin) << M) + q: its implicit bit lands in the exponent field, and a carry
// of q to 2^(M+1) moves to the next binade by itself (the same integer fact bf16.hpp's add relies
// on). Below emin the code is q, a subnormal, whose carry to 2^M is the smallest normal. Shifts
// past 25 round everything to zero (sig < 2^24 is below half the quantum); the shift is clamped to
// 31 so it stays defined.
//
// Overflow. A code above the largest finite one (as computed, with an unbounded exponent: IEEE's
// rule, and OCP's) is the format's overflow, including +-Inf inputs. What it becomes is the
// caller's choice (OCP FP8 spec, section 5.3; PTX cvt .satfinite):
//   saturation::none    Inf where the format has one (FP16, e5m2), NaN where it has none (e4m3fn);
//                       what IEEE, torch and ml_dtypes conversions do;
//   saturation::finite  +-the largest finite value (Inf inputs too); NaN stays NaN. What CUDA's
//                       __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does, as vLLM quantizes.
// NaN inputs become a quiet NaN of the same sign: for IEEE-like formats the mantissa msb (the quiet
// bit) set plus the top M payload bits, as bf16.hpp does; for fn formats the single NaN pattern.
// Widening is exact for every code, NaN payloads of IEEE-like formats included.
#pragma once

#include <cstdint>

#include "amla/config.hpp"
#include "amla/numeric/bits.hpp"

namespace amla {

/// What a narrowing does with a magnitude above the format's largest finite value (file comment).
enum class saturation : std::uint8_t {
  none,    ///< overflow to Inf (or NaN where the format has no Inf): IEEE, torch, ml_dtypes
  finite,  ///< clamp to +-max finite, Inf included (PTX .satfinite, __NV_SATFINITE)
};

namespace detail {

/// A binary floating-point format of at most 16 bits (file comment).
struct minifloat_spec {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_inf;  ///< IEEE-like (exponent all ones = Inf/NaN); false: "fn", finite only

  AMLA_HOST_DEVICE constexpr std::uint32_t sign_bit() const {
    return std::uint32_t{1} << (exponent_bits + mantissa_bits);
  }
  AMLA_HOST_DEVICE constexpr std::uint32_t mantissa_mask() const {
    return (std::uint32_t{1} << mantissa_bits) - 1u;
  }
  /// Exponent field all ones, in place.
  AMLA_HOST_DEVICE constexpr std::uint32_t exponent_mask() const {
    return ((std::uint32_t{1} << exponent_bits) - 1u) << mantissa_bits;
  }
  /// The smallest normal exponent, 1 - bias.
  AMLA_HOST_DEVICE constexpr int emin() const { return 1 - bias; }
  /// The largest finite magnitude code: below the Inf binade, or mantissa all ones less one.
  AMLA_HOST_DEVICE constexpr std::uint32_t max_finite() const {
    return has_inf ? exponent_mask() - 1u : exponent_mask() | (mantissa_mask() - 1u);
  }
  /// The magnitude code an overflow becomes without saturation: Inf, or NaN for fn formats.
  AMLA_HOST_DEVICE constexpr std::uint32_t overflow_code() const {
    return has_inf ? exponent_mask() : exponent_mask() | mantissa_mask();
  }
  /// The quiet NaN magnitude code for an FP32 NaN whose mantissa is `fp32_mantissa`.
  AMLA_HOST_DEVICE constexpr std::uint32_t nan_code(std::uint32_t fp32_mantissa) const {
    if (!has_inf) return exponent_mask() | mantissa_mask();
    const std::uint32_t quiet = std::uint32_t{1} << (mantissa_bits - 1);
    return exponent_mask() | quiet | (fp32_mantissa >> (fp32::mantissa_bits - mantissa_bits));
  }
};

/// The code of FP32 pattern u in format f, round to nearest even, overflow as `sat` says (file
/// comment). Integer arithmetic and selects only, no branch, so that loops over arrays of it
/// vectorise; host and device alike.
AMLA_HOST_DEVICE constexpr std::uint32_t minifloat_from_fp32(minifloat_spec f, std::uint32_t u,
                                                             saturation sat) noexcept {
  const std::uint32_t sign = (u & fp32::sign_mask) != 0u ? f.sign_bit() : 0u;
  const std::uint32_t mag = u & ~fp32::sign_mask;
  const std::uint32_t fm = u & fp32::mantissa_mask;
  const int fe = static_cast<int>(mag >> fp32::mantissa_bits);  // 255 for Inf: overflows below
  const std::uint32_t sig = fe == 0 ? fm : (fm | (std::uint32_t{1} << fp32::mantissa_bits));
  const int e = (fe == 0 ? 1 : fe) - fp32::exponent_bias;
  const int below = f.emin() - e;  // > 0: the target is subnormal at x
  const int raw_shift = fp32::mantissa_bits - f.mantissa_bits + (below > 0 ? below : 0);
  const int shift = raw_shift > 31 ? 31 : raw_shift;
  const std::uint32_t q = sig >> shift;
  const std::uint32_t rem = sig & ((std::uint32_t{1} << shift) - 1u);
  const std::uint32_t half = std::uint32_t{1} << (shift - 1);
  const std::uint32_t rounded = q + ((rem > half || (rem == half && (q & 1u) != 0u)) ? 1u : 0u);
  // e - emin <= 128 - emin < 2^9, so the exponent part stays far inside 32 bits (it is only
  // used when below <= 0, where it is non-negative).
  const std::uint32_t exponent_part =
      below > 0 ? 0u : static_cast<std::uint32_t>(e - f.emin()) << f.mantissa_bits;
  const std::uint32_t code = exponent_part + rounded;
  const std::uint32_t overflow = sat == saturation::finite ? f.max_finite() : f.overflow_code();
  const std::uint32_t finite = code > f.max_finite() ? overflow : code;
  return sign | (mag > fp32::exponent_mask ? f.nan_code(fm) : finite);
}

/// The FP32 pattern of code c of format f: exact for every code (NaN payloads of IEEE-like
/// formats kept, the fn NaN widened to the FP32 quiet NaN of the same sign).
AMLA_HOST_DEVICE constexpr std::uint32_t minifloat_to_fp32(minifloat_spec f,
                                                           std::uint32_t c) noexcept {
  const std::uint32_t sign = (c & f.sign_bit()) != 0u ? fp32::sign_mask : 0u;
  const std::uint32_t m = c & f.mantissa_mask();
  const std::uint32_t ef = (c & f.exponent_mask()) >> f.mantissa_bits;
  const int to_fp32 = fp32::mantissa_bits - f.mantissa_bits;
  const std::uint32_t top = (std::uint32_t{1} << f.exponent_bits) - 1u;
  if (ef == top && (f.has_inf || m == f.mantissa_mask())) {
    if (!f.has_inf) return sign | 0x7FC00000u;
    return sign | fp32::exponent_mask | (m << to_fp32);  // Inf (m = 0) or NaN, payload kept
  }
  if (ef != 0u) {
    const std::uint32_t e32 = ef + static_cast<std::uint32_t>(fp32::exponent_bias - f.bias);
    return sign | (e32 << fp32::mantissa_bits) | (m << to_fp32);
  }
  if (m == 0u) return sign;
  // Subnormal: m 2^(emin - M). Its leading bit at position p gives the normal FP32
  // (1 + rest / 2^p) 2^(p + emin - M), whose mantissa field is rest moved up to bit 22.
  const int p = 31 - count_leading_zeros(m);
  const std::uint32_t rest = m & ((std::uint32_t{1} << p) - 1u);
  const int e = p + f.emin() - f.mantissa_bits;
  const std::uint32_t e32 = static_cast<std::uint32_t>(e + fp32::exponent_bias);
  return sign | (e32 << fp32::mantissa_bits) | (rest << (fp32::mantissa_bits - p));
}

}  // namespace detail
}  // namespace amla
