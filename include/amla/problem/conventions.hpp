// amla/problem/conventions.hpp: how a decode kernel reports lse, and conversions between the
// conventions kernels use.
//
// amla's own outputs use the natural log and the mathematics of an empty sum: a row that attends
// no key (a sequence of length 0, or a row whose causal window is empty) gets out = 0 and
// lse = -inf, the log of the empty sum. Kernels differ on both points:
//   * base: FlashAttention and FlashMLA compute exp2 internally (the softmax scale folded by
//     log2(e)) but return the natural-log lse; some kernels return the base-2 value itself.
//     Reading one as the other scales every lse by ln 2 or log2(e), which a split-KV combine
//     turns into wrong weights.
//   * empty rows: FlashMLA (like FlashAttention, whose softmax epilogue it shares) writes
//     lse = +inf for a row whose sum is 0 in its final output, and -inf only in split-KV partials
//     so that the combine gives them weight 0.
// Compare such rows by their meaning, not their bits: out is 0 in every convention.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

#include "amla/config.hpp"

namespace amla {

/// log2(e): multiply a natural-log lse by it for base-2 consumers.
inline constexpr double log2_e = std::numbers::log2e;

/// The value of lse for a row that attends no key in amla's convention: the log of an empty sum.
inline constexpr float empty_row_lse = -std::numeric_limits<float>::infinity();

/// lse in base 2: lse * log2(e). -inf stays -inf.
template <class S>
AMLA_HOST_DEVICE constexpr S lse_to_log2(S lse) noexcept {
  return lse * static_cast<S>(log2_e);
}

/// The logarithm base of an lse tensor.
enum class lse_base : std::uint8_t { e, two };

/// What an lse tensor holds for a row that attends no key.
enum class empty_lse : std::uint8_t {
  neg_inf,  ///< the log of the empty sum (amla, split-KV partials)
  pos_inf,  ///< FlashMLA's and FlashAttention's final output
};

/// An lse convention: base and empty-row value. amla's own outputs use the default.
struct LseConvention {
  lse_base base = lse_base::e;
  empty_lse empty = empty_lse::neg_inf;

  friend constexpr bool operator==(LseConvention, LseConvention) = default;
};

/// amla's convention, and FlashMLA's (natural log, +inf for empty rows).
inline constexpr LseConvention amla_lse{lse_base::e, empty_lse::neg_inf};
inline constexpr LseConvention flashmla_lse{lse_base::e, empty_lse::pos_inf};

/// One lse value converted between conventions. An empty row is recognised by an infinite value
/// (either sign: both conventions' empty markers) and mapped to the target's marker; NaN stays
/// NaN; finite values are rescaled between bases.
template <class S>
S convert_lse(S lse, LseConvention from, LseConvention to) noexcept {
  if (std::isnan(lse)) return lse;
  if (std::isinf(lse)) {
    return to.empty == empty_lse::neg_inf ? -std::numeric_limits<S>::infinity()
                                          : std::numeric_limits<S>::infinity();
  }
  if (from.base == to.base) return lse;
  return from.base == lse_base::e ? lse * static_cast<S>(log2_e) : lse / static_cast<S>(log2_e);
}

}  // namespace amla
