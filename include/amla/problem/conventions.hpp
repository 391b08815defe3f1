// amla/problem/conventions.hpp: what a decode result depends on and what it holds for empty rows
// and non-finite values (the contract every recurrence and backend keeps), how a decode kernel
// reports lse, and conversions between the conventions kernels use.
//
// ---- The contract of a row ------------------------------------------------------------------
// The float64 golden (attention/golden.hpp) defines every result. A row is one query token t of a
// sequence b at one query head h; the recurrences (Base, AMLA in every rescale mode, seesaw,
// transposed, split-KV) and the CUDA backend keep these rules:
//  1. Reads. A row's out and lse depend only on its q[b, t, h, :] and on K and V of the keys it
//     sees at its KV head: keys s < visible_keys(seqlens[b], s_q, t, causal) (problem/shape.hpp).
//     Keys past its causal window or past the sequence, unused pages, slots and block-table
//     entries are never read and never contribute, whatever they hold: a NaN or Inf there changes
//     nothing (no 0 * NaN in a P V product), as for the NaN-poisoned pages of the problem builders.
//  2. Empty rows. A row that sees no key (seqlen 0, or an empty causal window) gets out = 0 and
//     lse = -inf, the log of the empty sum (FlashMLA writes +inf: see the lse conventions below).
//     This result is reserved for such rows: a row that sees a key never gets it, and its lse is
//     never infinite, so an infinite lse always marks an empty row.
//  3. Non-finite inputs. NaN and Inf among what a row reads propagate as IEEE arithmetic
//     propagates them through golden's computation (scores, max, exp, sum, P V, division):
//       NaN in the row's q or in K of a visible key -> every out element and the lse NaN;
//       NaN in V[s, d] of a visible key            -> out element d NaN (lse unchanged);
//       Inf in V[s, d] of a visible key            -> out element d +-inf or NaN (NaN where it
//                                                     meets a weight of 0 or the other infinity);
//       a score of +inf (Inf in q or K), a score that is NaN (inf - inf, 0 * inf), or every
//       visible score -inf                         -> every out element and the lse NaN;
//       some scores -inf and the row's max finite   -> those keys get weight 0 (out finite).
//  4. Arithmetic limits. Where a recurrence's own arithmetic (FP32, BF16 casts) cannot represent
//     what golden computes for a row that sees keys (a scaled score past FP32's range, such as
//     q = 1e20 and k = 1e20 (1, -1, 2) in FP32; weights that the schedule's exp underflows or
//     overflows, so that the row's sum l is 0 or not finite) the row's out and lse are NaN; a P V
//     sum past FP32's range makes that out element +-inf. Never the empty-row result, and never a
//     finite value outside the recurrence's documented error. A float64 lse narrowed to a float
//     output that overflows is stored as NaN, not as an infinity (rule 2 reserves those).
// AMLA rescales O by an integer add on its FP32 pattern, which is not IEEE arithmetic: an Inf or
// NaN element of O keeps its value through the add in every rescale mode, so rule 3 holds for it;
// its other Lemma 3.1 failures and its exponent clamp are the algorithm's own, counted and located
// in its report (attention/amla.hpp). row_end_of below is rules 2 and 4 as one function.
//
// ---- lse conventions --------------------------------------------------------------------------
// amla's own outputs use the natural log and the mathematics of an empty sum: a row that attends
// no key gets out = 0 and lse = -inf, the log of the empty sum. Kernels differ on both points:
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

/// How a recurrence ends a row (rules 2 and 4 of the file comment).
enum class row_end : std::uint8_t {
  empty,   ///< the row sees no key: out = 0, lse = empty_row_lse
  lost,    ///< it sees keys but its sum l is not a positive finite number: out and lse NaN
  normal,  ///< out = O / l and lse from the row's max and l, as the recurrence computes them
};

/// The end of a row that sees `visible` keys and whose softmax sum (each weight relative to the
/// row's max, so at least 1 in exact arithmetic once a key is seen) came out as l. A NaN l (a NaN
/// score, an inf - inf), l = +inf and l = 0 (every weight lost to the schedule's exp) are `lost`.
template <class S>
AMLA_HOST_DEVICE constexpr row_end row_end_of(std::int64_t visible, S l) noexcept {
  if (visible == 0) return row_end::empty;
  // l - l is 0 exactly for a finite l (NaN for +-inf and NaN).
  return l > S{0} && l - l == S{0} ? row_end::normal : row_end::lost;
}

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
