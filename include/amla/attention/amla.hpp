// amla/attention/amla.hpp: the AMLA recurrence (AMLA paper, Algorithm 2 with Appendix A), as an
// Ascend kernel computes it: the output O is rescaled in place by ONE integer AtomicAdd on its
// FP32 bit pattern per KV block, instead of an FP32 multiply.
//
// ---- The recurrence, per query row (all scalars FP32 unless said) ----------------------------
//   S_i   = scale * (Q K_i^T)                        (BF16 operands, FP32 accumulation)
//   m_i   = max(m_{i-1}, rowmax S_i)                 (m_0 = -inf)
//   n_i   = round(-m_i / ln2)                        rounded to nearest, ties to even (rint)
//   P_i   = exp(S_i - m_i),  l_i = l_{i-1} exp(m_{i-1} - m_i) + rowsum P_i
//   S32_i = exp(ln2 (n_i + m_i / ln2))               (= 1/r_i of eq. 4, in [2^-1/2, 2^1/2])
//   S16_i = BF16(S32_i)                              (round to nearest even, widened back)
//   c_i   = S16_i / S32_i                            (default reading, see below; c_0 = 1)
//   eps   = 1.5 (c_i / c_{i-1} - 1)
//   N     = max(n_i - n_{i-1}, -30) + eps + 1e-6     (evaluated left to right in FP32)
//   k_i   = Cast_to_int32(N * 2^23)                  truncation toward zero, see below
//   O    <- AS_FP32(AS_INT32(O) + k_i)               one integer add per element (i > 1)
//   O    <- O + BF16(P_i * S16_i) V_i                (BF16 operands, FP32 accumulation)
//   out   = O / (l_N * S16_N),   lse = m_N + ln(l_N)
// The rounding of n_i is immaterial to the invariant (any integer works, the paper's bound
// 2^-1/2 <= S32 <= 2^1/2 needs round to nearest; ties occur only when -m/ln2 is exactly k + 1/2).
//
// ---- Which c_i cancels the BF16 rounding of S16 (Algorithm 2 line 11 vs Appendix A) ----------
// Let O_i* = sum_{j<=i} exp(S_j - m_i) V_j be the unnormalised output at the running max (what
// Base holds). Block i adds S16_i * exp(S_i - m_i) V_i, so the accumulator stays consistent iff
// it holds O_i = S16_i O_i* after every block. Given O_{i-1} = S16_{i-1} O_{i-1}*, the rescale
// must multiply by
//   F_i = (S16_i / S16_{i-1}) exp(m_{i-1} - m_i).
// From S32_i = exp(n_i ln2 + m_i), exp(m_i) = S32_i 2^-n_i, hence
//   exp(m_{i-1} - m_i) = 2^(n_i - n_{i-1}) S32_{i-1} / S32_i   and
//   F_i = 2^(n_i - n_{i-1}) * (S16_i / S32_i) / (S16_{i-1} / S32_{i-1}).
// So the factor next to the power of two is c_i / c_{i-1} with c = S16 / S32: Appendix A's
// c_i = r_i / r'_i, since r_i = 1/S32 and r'_i = 1/S16. With it, eps (ideally) removes the
// whole effect of rounding S16 and the final division by S16_N is exact bookkeeping.
// Algorithm 2 as printed, c_i = S32/S16, multiplies by the reciprocal (1 + e)^-1 ~ 1 - e of the
// needed 1 + e: it does not cancel the rounding error, it doubles it (to first order).
// `amla_compensation::none` (eps = 0) leaves it once. Only the ratio c_i / c_{i-1} matters, so an
// error appears only where m (hence S32) changes from block to block; the 1.5 = 1 + 1/2 factor is
// Appendix A's linearisation of a multiply by (1 + e) as an add on the mantissa with the mantissa
// taken at mid-range (numeric/one_plus_eps.hpp derives its error, |e|/2 worst case).
//
// ---- The cast of N and the +1e-6 --------------------------------------------------------------
// N * 2^23 is exact in FP32 (a power-of-two scaling). A float N with |N| >= 1 is a multiple of
// 2^-23, so N * 2^23 is then already an integer and the cast cannot round; the cast's rounding
// only matters when |N| < 1 (dn = 0, or dn = -1 with eps + nudge > 0), and by less than one unit
// (a relative 1.2e-7). The +1e-6 is the classic guard of a TRUNCATING float -> int cast,
// (int)(x + 1e-6): it lifts a value meant to be an integer but computed a hair below it over the
// integer before the truncation; a round-to-nearest cast would need no guard. We therefore model
// Cast_to_int32 as truncation toward zero (Ascend's CAST_TRUNC, C's static_cast), selectable via
// `AmlaOptions::n_cast`. Note the side effect the paper does not mention: after the 2^23 scaling
// the guard is 1e-6 * 2^23 = 8.39 units, so every block adds 8 to every mantissa of O (the FP32
// sum dn + 1e-6 makes it 8 for |dn| < 16, 16 for 16 <= |dn| < 32): a drift of 8 / (2^23 + M),
// about +6.4e-7 relative per block (at most 9.5e-7). It is part of the kernel, so it is
// reproduced when emulating BF16; `AmlaOptions::nudge` can set it to 0 to measure it.
//
// ---- Lemma 3.1 inside the recurrence ------------------------------------------------------------
// The add is a multiplication only while the O element and the result are normal FP32 numbers
// (0 < E < 255 before and after, numeric/pow2.hpp). An element that is exactly 0 (a zero column
// of V, or P V cancelling exactly), subnormal, or tiny enough that E + (n_i - n_{i-1}) <= 0,
// becomes garbage: +0 with k = -2^24 + 8 becomes the pattern 0xFF000008 (-1.7e38), a tiny element
// can become a NaN pattern or flip its sign. Lemma 3.1's precondition is checked for the combined
// add k (exponent part and mantissa part): a carry out of the mantissa into the exponent is fine,
// a result or source outside the normal range is not. The first block of a row never adds
// (Algorithm 2 line 15, per row: a row whose first visible key lies in a later block starts
// there). Every violation of an integer add is counted and located in the report in every mode
// (block, row, column, the add k, the value before, after, and the intended value); finding them is
// cheap (one branch-free flag per row, a second pass only over flagged rows).
//
// ---- The exponent clamp
// -------------------------------------------------------------------------- Line 13 clamps the
// exponent step: max(n_i - n_{i-1}, -30). When a row's max jumps by more than 30 ln 2 ~ 20.8
// between blocks, the clamped add multiplies the older blocks' contributions by 2^-30 instead of
// 2^(n_i - n_{i-1}), keeping them 2^(-30 - dn) times too large. That is the paper's algorithm (a
// 32-bit add cannot carry a step below -255 anyway) and it is harmless only while the older
// contributions are negligible next to the new ones: 4096 keys of score 0 and V = 64 followed by
// one key of score 40 and V = 0.0625 (blocks of 512) gives 0.0627990 where golden gives 0.0625 (2.4
// BF16 ulps). Each step the clamp changes is a clamp event, counted in every mode
// (AmlaReport::clamped) and located in checked and safe modes (AmlaReport::clamps).
//
// ---- The rescale modes (`AmlaOptions::rescale`, amla::pow2_mode) -------------------------------
//   hardware  the clamped step and the raw add everywhere (what the NPU computes).
//   checked   the same values; clamp events are located too.
//   safe      the add where it is exact, the intended value elsewhere: the same add carried out
//             with an unbounded exponent, rounded once to FP32 (zeros stay zeros, tiny results
//             round to subnormals, Inf/NaN pass through); and at a clamp event what the exact step
//             needs: the unclamped add (k = Cast((n_i - n_{i-1} + eps + nudge) 2^23) in 64 bits,
//             numeric/amla_step.hpp's amla_exact_add, below INT32_MIN for a step below -255) with
//             its intended value on every element. That step is no hardware add: it is reported
//             as the clamp event, and its elements are not counted as violations.
//
// ---- Masks, empty rows, non-finite values and lse -----------------------------------------------
// A row attends keys [0, visible) (attention/head_group.hpp). Masked keys get P = 0 and take no
// part in the max; a block with no visible key for a started row still performs the add (the
// kernel adds for every row): dn = 0, eps = 0, so k = Cast(1e-6 * 2^23) = 8 (0 with
// AmlaOptions::skip_unmoved, which makes every step with dn = eps = 0 the identity). A row that
// sees no key gives out = 0 and lse = -inf, and values a row does not see never reach it
// (problem/conventions.hpp). lse is natural-log, from m and l exactly as Base computes it: the
// integer exponents n_i only re-scale O (exp(m_N) = S32_N 2^-n_N links the two bookkeepings; a
// base-2 consumer uses lse_to_log2, problem/conventions.hpp).
// Non-finite values follow problem/conventions.hpp's rules 3 and 4 in every mode. A NaN score, a
// score past FP32's range or a row whose visible scores are all -inf makes l NaN (as in Base) and
// the row ends with out and lse NaN; such a row's max is not finite, and no add is made from or
// to a frame with a non-finite max (n and S32 have no meaning there). A NaN or Inf in O (a NaN or
// Inf value read) is outside Lemma 3.1's window: it is a violation, located, and it keeps its
// value through the add in every mode, since the pattern add of a NaN or Inf has no meaning
// either (the raw add would turn 0x7FC00000 plus a negative k into a finite number).
//
// ---- float32 mode (precision::float32)
// ------------------------------------------------------------ No BF16 rounding anywhere: S16 = S32
// (so c == 1 and eps == 0 in every reading), P is not rounded, the inputs are used as given, and
// the nudge defaults to 0. The rescale is then an exact multiply by 2^max(n_i - n_{i-1}, -30)
// wherever Lemma 3.1 holds: more exact than Base's FP32 factor exp(m_{i-1} - m_i).
//
// Exponentials: P = exp(S - m) uses Eigen's vectorised exp (<= 2 ulp; values below e^-87.3 flush
// to 0); the per-row scalars (S32, exp(m_{i-1} - m_i)) use std::exp.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "amla/attention/detail/recurrence.hpp"
#include "amla/attention/driver.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/numeric/amla_step.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/bits.hpp"
#include "amla/numeric/gemm.hpp"
#include "amla/numeric/one_plus_eps.hpp"
#include "amla/numeric/pow2.hpp"

namespace amla::attention {

/// Which c_i the (1 + eps) compensation uses (see the file comment for the derivation; defined
/// with the step's arithmetic in numeric/amla_step.hpp).
using amla::amla_compensation;

/// Options of the AMLA recurrence. The defaults are the paper's kernel. The shared precision mode
/// and block size come first, with Base's type (RecurrenceOptions<512>, attention/driver.hpp), so
/// the two recurrences can be swapped; the BF16 cast of the output is
/// DecodeOptions::round_output_bf16 (or round_bf16_inplace on a dense result), as for Base. mode
/// bf16 is the kernel's precision (BF16 operands, S16 and P cast to BF16, FP32 accumulation);
/// float32 rounds nothing to BF16 (S16 = S32, so eps = 0). AMLA's block size is 512. AMLA stays
/// BF16: precision::fp16 is rejected where the options are validated.
struct AmlaOptions : RecurrenceOptions<512> {
  /// Which c_i the (1 + eps) compensation uses.
  amla_compensation compensation = amla_compensation::appendix_a;
  /// The form of the integer-add rescale: hardware, checked or safe (see the file comment).
  pow2_mode rescale = pow2_mode::hardware;
  /// The clamp of max(n_i - n_{i-1}, clamp) (line 13: -30), in [-126, -24]: a clamped step keeps
  /// the older blocks at 2^clamp of their weight, a cut-off only when that lies below FP32's unit
  /// roundoff 2^-24 (0 would never scale them down at all); -126 is FP32's exponent range.
  int exponent_clamp = -30;
  /// The +1e-6 of line 13, finite, in [0, 2^-10]. Unset: 1e-6 in bf16 mode, 0 in float32 mode
  /// (there eps == 0 and dn is an exact integer, so N * 2^23 is an exact integer and the guard
  /// has nothing to guard; keeping it would add its drift of ~6.4e-7 per block to a mode that
  /// promises 1e-5).
  std::optional<float> nudge;
  /// Rounding of Cast_to_int32(N * 2^23) (see the file comment: truncation).
  eps_rounding n_cast = eps_rounding::toward_zero;
  /// A step with n_i = n_{i-1} and c_i = c_{i-1} (dn = eps = 0) adds k = 0, the exact identity,
  /// instead of the nudge's 8 (numeric/amla_step.hpp's amla_step_options::skip_unmoved). false:
  /// line 13 as printed.
  bool skip_unmoved = false;
};

/// One element where the integer add broke Lemma 3.1's preconditions.
struct AmlaViolation {
  Eigen::Index block = 0;  ///< KV block index (0-based: block i covers keys [i B, (i + 1) B))
  Eigen::Index row = 0;    ///< query row of the head group (r = t * heads_per_group + j)
  Eigen::Index col = 0;    ///< column of O (0 .. d_v - 1)
  std::int32_t add = 0;    ///< the integer k added to the pattern
  float before = 0.0f;     ///< the O element before the add
  float after = 0.0f;      ///< the raw hardware result AS_FP32(AS_INT32(before) + k)
  float intended = 0.0f;   ///< the add with an unbounded exponent (what safe mode keeps)
  int batch = 0;           ///< sequence (paged entry point; 0 for a lone head group)
  int kv_head = 0;         ///< KV head (paged entry point; 0 for a lone head group)
};

/// One step of one row whose exponent step n_i - n_{i-1} fell below AmlaOptions::exponent_clamp
/// (see the file comment): hardware and checked modes multiplied the older blocks by 2^clamp
/// instead of 2^step; safe mode applied the exact step (its elements are not listed as
/// violations: no 32-bit add was made).
struct AmlaClampEvent {
  Eigen::Index block = 0;  ///< KV block of the step (its new max)
  Eigen::Index row = 0;    ///< query row of the head group
  float step = 0.0f;       ///< n_i - n_{i-1} before the clamp
  int batch = 0;           ///< sequence (paged entry point; 0 for a lone head group)
  int kv_head = 0;         ///< KV head (paged entry point; 0 for a lone head group)
};

/// What the rescales did. `violations` counts every element where an integer add broke Lemma 3.1
/// and `located` lists them, in every mode, ordered by (batch, kv_head, block, row, col). `clamped`
/// counts the clamp events in every mode and `clamps` lists them in checked and safe modes,
/// ordered by (batch, kv_head, block, row); safe mode's exact steps at clamp events are not adds
/// of the hardware's and add nothing to `violations`.
struct AmlaReport {
  std::size_t violations = 0;
  std::vector<AmlaViolation> located;
  /// Element adds performed: d_v per row and block after the row's first.
  std::size_t rescaled_elements = 0;
  std::size_t clamped = 0;
  std::vector<AmlaClampEvent> clamps;
};

/// AMLA outputs of one head group (out, lse and the report).
using AmlaResult = AttentionResult<float, AmlaReport>;

namespace detail {

/// The step's arithmetic knobs (numeric/amla_step.hpp) of validated options.
inline amla_step_options amla_step_options_of(const AmlaOptions& o) noexcept {
  const bool bf16 = o.mode == precision::bf16;
  amla_step_options s;
  s.compensation = o.compensation;
  s.round_s16 = bf16;
  s.exponent_clamp = static_cast<float>(o.exponent_clamp);
  s.nudge = o.nudge.value_or(bf16 ? 1e-6f : 0.0f);
  s.n_cast = o.n_cast;
  s.skip_unmoved = o.skip_unmoved;
  return s;
}

/// Validates the options (the head group itself is validated by the entry points).
inline void amla_validate_options(const char* fn, const char* name, const AmlaOptions& o) {
  using amla::detail::throw_invalid;
  using amla::detail::to_text;
  const std::string p = std::string(name) + ".";
  const auto arg = [&p](const char* field) { return p + field; };
  if (o.mode == precision::fp16) {
    throw_invalid(fn, arg("mode").c_str(), "precision::fp16",
                  "must be precision::bf16 or precision::float32: AMLA is defined for BF16 "
                  "operands (Lemma 3.1's integer add, the S16 scaling and the (1 + eps) "
                  "compensation assume P cast to BF16), and has no FP16 form");
  }
  if (o.block_size < 1)
    throw_invalid(fn, arg("block_size").c_str(), to_text(o.block_size), "must be >= 1");
  if (o.compensation != amla_compensation::appendix_a &&
      o.compensation != amla_compensation::as_printed &&
      o.compensation != amla_compensation::none) {
    throw_invalid(fn, arg("compensation").c_str(), to_text(static_cast<int>(o.compensation)),
                  "must be amla_compensation::appendix_a, as_printed or none");
  }
  if (o.rescale != pow2_mode::hardware && o.rescale != pow2_mode::checked &&
      o.rescale != pow2_mode::safe) {
    throw_invalid(fn, arg("rescale").c_str(), to_text(static_cast<int>(o.rescale)),
                  "must be pow2_mode::hardware, checked or safe");
  }
  if (o.n_cast != eps_rounding::toward_zero && o.n_cast != eps_rounding::nearest_even) {
    throw_invalid(fn, arg("n_cast").c_str(), to_text(static_cast<int>(o.n_cast)),
                  "must be eps_rounding::toward_zero or nearest_even");
  }
  if (o.exponent_clamp > -24 || o.exponent_clamp < -126) {
    throw_invalid(fn, arg("exponent_clamp").c_str(), to_text(o.exponent_clamp),
                  "must lie in [-126, -24] (2^clamp, the weight a clamped step leaves the older "
                  "blocks, must lie below FP32's unit roundoff 2^-24)");
  }
  if (o.nudge && !(std::isfinite(*o.nudge) && *o.nudge >= 0.0f && *o.nudge <= 0x1p-10f)) {
    throw_invalid(fn, arg("nudge").c_str(), to_text(*o.nudge), "must be finite and in [0, 2^-10]");
  }
}

/// Records an element whose add broke Lemma 3.1 (the report of amla_rescale_row).
inline void amla_locate(AmlaReport& report, Eigen::Index block, Eigen::Index row, Eigen::Index col,
                        std::int32_t k, float before, float after, float intended) {
  ++report.violations;
  report.located.push_back(AmlaViolation{.block = block,
                                         .row = row,
                                         .col = col,
                                         .add = k,
                                         .before = before,
                                         .after = after,
                                         .intended = intended});
}

/// Lines 13-17 on one row of O: the add of the step from `prev` to `now` (both frames of finite
/// maxima) on every element, in the form `opt.rescale` asks for (see the file comment), with its
/// clamp events and violations reported.
inline void amla_rescale_row(float* orow, Eigen::Index dv, const amla_scalars& prev,
                             const amla_scalars& now, const amla_step_options& step,
                             const AmlaOptions& opt, Eigen::Index blk, Eigen::Index r,
                             AmlaReport& report) {
  const amla_step st = amla_step_between(prev, now, step);
  const bool safe = opt.rescale == pow2_mode::safe;
  report.rescaled_elements += static_cast<std::size_t>(dv);
  if (st.clamped) {
    ++report.clamped;
    if (opt.rescale != pow2_mode::hardware) {
      AmlaClampEvent e;
      e.block = blk;
      e.row = r;
      e.step = now.n - prev.n;
      report.clamps.push_back(e);
    }
  }
  if (safe && st.clamped) {
    // The exact step, which no clamped 32-bit add carries: the unclamped add with an unbounded
    // exponent on every element (its k may lie below INT32_MIN), reported as the clamp event.
    const std::int64_t exact = amla_exact_add(prev, now, step);
    for (Eigen::Index j = 0; j < dv; ++j) orow[j] = pattern_add_intended(orow[j], exact);
    return;
  }
  const std::int32_t k = st.k;
  if (!pattern_add_inplace(orow, dv, k)) return;
  // Rare path: the pattern before the add is the one after it minus k (mod 2^32).
  for (Eigen::Index j = 0; j < dv; ++j) {
    const float after = orow[j];
    const float before = as_fp32(as_uint32(after) - static_cast<std::uint32_t>(k));
    if (pattern_add_is_exact(before, k)) continue;
    const float intended = pattern_add_intended(before, k);
    amla_locate(report, blk, r, j, k, before, after, intended);
    // Inf and NaN keep their value in every mode (the intended value passes them through).
    if (safe || !std::isfinite(before)) orow[j] = intended;
  }
}

/// The recurrence itself; arguments already validated. Appends to `report`.
template <class = void>
void amla_core(const HeadGroup& caller, Eigen::Ref<MatrixF> o, std::span<float> lse,
               const AmlaOptions& opt, AmlaReport& report) {
  const UnseenValueShield<float> shield(caller);
  const HeadGroup& g = shield.group();
  const Eigen::Index rows = g.rows();
  const Eigen::Index dv = g.d_v();
  const bool bf16 = opt.mode == precision::bf16;
  const amla_step_options step = amla_step_options_of(opt);
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();

  o.setZero();  // the accumulator O, normalised at the end
  std::fill(lse.begin(), lse.end(), empty_row_lse);
  // Keys past every row's window are never read: they need not even be finite.
  const Eigen::Index keys_used = max_visible_keys(g);
  if (rows == 0 || keys_used == 0) return;

  // Per-row state: m, l as in Base; whether the row has seen a key; AMLA's scalars (n, S32, S16,
  // c) of the row's last block (numeric/amla_step.hpp; a row that has not started holds n = 0,
  // S16 = c = 1).
  const auto urows = static_cast<std::size_t>(rows);
  std::vector<float> m(urows, neg_inf), l(urows, 0.0f);
  std::vector<char> started(urows, 0);
  std::vector<amla_scalars> last(urows);

  const Eigen::Index bk = std::min<Eigen::Index>(opt.block_size, keys_used);
  MatrixF s(rows, bk);   // scores, then P
  MatrixF pv(rows, dv);  // P_i V_i

  for (Eigen::Index k0 = 0, blk = 0; k0 < keys_used; k0 += bk, ++blk) {
    const Eigen::Index nb = std::min(bk, keys_used - k0);
    auto sb = s.leftCols(nb);
    sb.noalias() = g.q * g.k.middleRows(k0, nb).transpose();
    sb *= g.scale;

    for (Eigen::Index r = 0; r < rows; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      const Eigen::Index vis = std::clamp<Eigen::Index>(g.visible_keys(r) - k0, 0, nb);
      auto srow = sb.row(r);
      if (vis == 0 && !started[ru]) {  // nothing seen yet: O row stays 0, no add (line 15)
        srow.setZero();
        continue;
      }
      // Online softmax statistics, exactly as Base: m, P = exp(S - m), l.
      const float m_old = m[ru];
      const float m_new = vis > 0 ? std::max(m_old, srow.head(vis).maxCoeff()) : m_old;
      if (vis > 0) srow.head(vis) = (srow.head(vis).array() - m_new).exp();
      srow.tail(nb - vis).setZero();
      const float up = started[ru] ? std::exp(m_old - m_new) : 0.0f;
      l[ru] = l[ru] * up + srow.head(vis).sum();
      m[ru] = m_new;
      // AMLA's scalars (lines 8-11): n, S32, S16, c at the new max.
      const amla_scalars now = amla_scalars_ln(m_new, step);
      // Line 12: P scaled by S16, then cast to BF16 (NaN-preserving: P is NaN only when an input
      // is, and then it stays NaN).
      srow *= now.s16;
      if (bf16) round_bf16_inplace(srow.data(), nb);
      // Lines 13-17: one integer add of k on the pattern of every O element of the row, between
      // frames of finite maxima (a non-finite max means l is NaN: the row ends lost).
      if (started[ru] && std::isfinite(m_old) && std::isfinite(m_new)) {
        amla_rescale_row(o.row(r).data(), dv, last[ru], now, step, opt, blk, r, report);
      }
      last[ru] = now;
      started[ru] = 1;
    }

    // Lines 19-20: O += P_i V_i (FP32 accumulation).
    pv.noalias() = sb * g.v.middleRows(k0, nb);
    o += pv;
  }

  // Line 22: O / (l_N S16_N); lse from the FP32 statistics as in Base.
  end_rows(
      g, o, lse, [&](Eigen::Index r) { return l[static_cast<std::size_t>(r)]; },
      [&](Eigen::Index r, float l_r) {
        const auto ru = static_cast<std::size_t>(r);
        o.row(r) /= l_r * last[ru].s16;
        return m[ru] + std::log(l_r);
      });
  shield.restore(o);
}

}  // namespace detail

namespace detail {

/// AMLA as the decode entry point sees it (detail/recurrence.hpp): located violations carry their
/// batch, KV head and group row, and are sorted once every chunk is done.
struct AmlaRecurrence : Recurrence<AmlaOptions, float, AmlaReport> {
  static constexpr const char* decode_name = "amla_decode";
  static constexpr const char* options_name = "amla";
  static void validate(const char* fn, std::string_view prefix, const AmlaOptions& o) {
    validate_recurrence_options(fn, prefix, o);
    amla_validate_options(fn, std::string(prefix).c_str(), o);
  }
  template <class = void>
  static void core(const HeadGroup& g, const AmlaOptions& o, Eigen::Ref<MatrixF> out,
                   std::span<float> lse, AmlaReport& report) {
    amla_core(g, out, lse, o, report);
  }
  static void place(AmlaReport& part, const GroupLocation& at) {
    for (AmlaViolation& v : part.located) {
      v.batch = at.batch;
      v.kv_head = at.kv_head;
      v.row += at.row_begin;
    }
    for (AmlaClampEvent& e : part.clamps) {
      e.batch = at.batch;
      e.kv_head = at.kv_head;
      e.row += at.row_begin;
    }
  }
  static void merge(AmlaReport& total, AmlaReport&& part) {
    total.violations += part.violations;
    total.rescaled_elements += part.rescaled_elements;
    total.clamped += part.clamped;
    total.located.insert(total.located.end(), part.located.begin(), part.located.end());
    total.clamps.insert(total.clamps.end(), part.clamps.begin(), part.clamps.end());
  }
  // Chunks finish in any order: sort into the documented, thread-count-independent order.
  static void finish(AmlaReport& total) {
    std::sort(total.located.begin(), total.located.end(),
              [](const AmlaViolation& a, const AmlaViolation& b) {
                return std::tie(a.batch, a.kv_head, a.block, a.row, a.col) <
                       std::tie(b.batch, b.kv_head, b.block, b.row, b.col);
              });
    std::sort(total.clamps.begin(), total.clamps.end(),
              [](const AmlaClampEvent& a, const AmlaClampEvent& b) {
                return std::tie(a.batch, a.kv_head, a.block, a.row) <
                       std::tie(b.batch, b.kv_head, b.block, b.row);
              });
  }
};

}  // namespace detail

/// AMLA attention of one head group (attention/head_group.hpp) into caller buffers: out
/// [rows, d_v], lse [rows] (natural log). Returns the rescale report. In bf16 mode the operands
/// are rounded to BF16 first. Throws amla::invalid_argument on bad options, inconsistent shapes, a
/// bad visible count or scale.
template <class = void>
AmlaReport amla_attention(const HeadGroup& g, const AmlaOptions& options, Eigen::Ref<MatrixF> out,
                          std::span<float> lse) {
  return detail::run_dense<detail::AmlaRecurrence>(
      "amla_attention", g, options, out.rows(), out.cols(), lse.size(),
      [&](const HeadGroup& operands) {
        AmlaReport report;
        detail::amla_core(operands, out, lse, options, report);
        return report;
      });
}

/// AMLA attention of one head group, into owned outputs.
template <class = void>
AmlaResult amla_attention(const HeadGroup& g, const AmlaOptions& options = {}) {
  return detail::owned_result<float, AmlaReport>(
      g, [&](Eigen::Ref<MatrixF> out, std::span<float> lse) {
        return amla_attention(g, options, out, lse);
      });
}

/// Owned float outputs of amla_decode (a DecodeResult) and the report.
using AmlaDecodeResult = ReportedDecodeResult<float, AmlaReport>;

/// AMLA attention over a paged decode problem (attention/driver.hpp): amla_decode(inputs,
/// options, outputs, amla = {}) into caller buffers, returning the report of the whole problem,
/// or amla_decode(inputs, options = {}, amla = {}) into an AmlaDecodeResult. The driver gathers
/// each head group (rounding a float cache to BF16 once in bf16 mode), runs the recurrence on its
/// row chunks and scatters out and lse. Located violations carry their batch, KV head and group
/// row (r = t * h_q / h_kv + j: token t, query head kv_head * h_q / h_kv + j). Validates
/// everything first (nothing is written on a throw).
inline constexpr detail::DecodeEntry<detail::AmlaRecurrence> amla_decode{};

}  // namespace amla::attention
