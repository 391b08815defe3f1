// amla/attention/seesaw.hpp: FlashMLA's "seesaw" schedule, step by step, as a golden reference.
//
// FlashMLA's Hopper decode kernel (the "new kernel" of the FlashMLA deep dive) keeps the output
// O [rows, d_v] in the registers of two warpgroups: O_L (the first d_v/2 columns) in warpgroup 0
// and O_R (the rest) in warpgroup 1. It consumes the keys two blocks at a time (K_0, K_1, each
// `block_size` keys; V_0, V_1 are the matching value blocks split into left/right halves) and
// interleaves the two warpgroups so that one runs softmax on the CUDA cores while the other runs a
// tensor-core product. Per pair of blocks, with one running max m shared by both warpgroups:
//
//    0.      m = -inf, o_L = o_R = 0, l_L = l_R = 0                 (once, before the first pair)
//    1. [0]  p_0 = Q K_0^T                                          (raw FP32 scores)
//    2. [1]  p_1 = Q K_1^T
//    3. [0]  m_new0 = max(m, rowmax(p_0) * c),  scale_0 = 2^(m - m_new0),  m = m_new0
//    4. [0]  p_0 = 2^(p_0 * c - m),  l_L = l_L * scale_0 + rowsum(p_0)
//    5. [0]  o_L = o_L * scale_0 + bf16(p_0) V_0L
//    6. [1]  m_new1 = max(m, rowmax(p_1) * c),  scale_1 = 2^(m - m_new1),  m = m_new1
//    7. [1]  p_1 = 2^(p_1 * c - m)
//    8. [1]  o_R = o_R * (scale_1 * scale_0) + bf16(p_1) V_1R,  l_R = l_R * (scale_1 * scale_0)
//            + rowsum(p_1)
//    9. [0]  p_0 = p_0 * scale_1                                    (FP32; cast again for step 10)
//   10. [1]  o_R = o_R + bf16(p_0) V_0R
//   11. [0]  o_L = o_L * scale_1 + bf16(p_1) V_1L,  l_L = l_L * scale_1
//   end:     l = l_L + l_R,  out = [o_L o_R] / l,  lse = ln(l) + m / log2(e)
//
// where c = scale * log2(e) is the softmax scale folded into base 2. This file follows the
// kernel's arithmetic (deepseek-ai/FlashMLA, csrc/kernels/splitkv_mla.cu), which refines the blog
// in ways that move low bits, so engineers can compare intermediate states with a real run:
// * The max is kept in the log2 domain: m = max(raw score) * c, and p = exp2(fma(s, c, -m)) (nvcc
//   contracts `s * c - m` into one FFMA; std::fma reproduces it, and like the GPU it can give the
//   row's largest score p = 2^(tiny > 0), one ulp above 1, because m was rounded). The blog writes
//   scale_0 = exp(m_new0 - m); the kernel (and the mathematics) use 2^(m_old - m_new) <= 1.
// * Each warpgroup keeps its own partial row sum: l_L sums the even blocks' p_0, l_R the odd
//   blocks' p_1, each rescaled as its half of O is; they are added once at the end.
// * Step 9 rescales the FP32 p_0 and casts it to BF16 afresh: V_0R is multiplied by
//   bf16(p_0 * scale_1), not by bf16(p_0) * scale_1.
// * The output is o / l (a division, not a multiply by 1/l) and lse = ln(l) + m / log2(e), both as
//   the kernel writes them. The kernel's unsplit output is then cast to BF16: that cast is
//   DecodeOptions::round_output_bf16 in seesaw_decode (round_bf16_inplace on a dense result), as
//   for every recurrence.
//
// An odd number of blocks leaves the last pair with no K_1 (the kernel's IS_BLK0_LAST branch):
// every score of block 1 is masked, so rowmax is -inf, scale_1 = 2^0 = 1, p_1 has no columns,
// step 8 only rescales o_R and l_R by scale_0, and step 11 is skipped. The observer still sees
// steps 2, 6, 7, 8, 11 for that pair, with keys1 == 0.
//
// Masking and empty rows. Row r sees keys [0, visible[r]) (HeadGroup). Scores of keys it may not
// see are -inf, and keys no row sees are never read (the kernel stops at the sequence end and zero
// fills V past it; here the blocks simply end at max_r visible[r]). The kernel uses finite
// sentinels (m starts at -1e30, masked scores are -1e33) so that a row with nothing seen yet never
// computes inf - inf; amla keeps the blog's -inf and takes the limits explicitly: while m = -inf
// every p is 0 and every scale is 1, exactly what the sentinels produce. A row that sees no key
// ends with l = 0 and gets out = 0 and lse = -inf (FlashMLA writes lse = +inf there; see
// head_group.hpp). Values a row does not see never reach it, and NaN and Inf among what it reads
// follow problem/conventions.hpp: the running max propagates NaN (a std::max would skip it, and a
// row whose max stayed -inf would take the "nothing seen" limits), so a NaN score makes the row
// NaN; unlike the kernel, which resets a NaN l to 1, amla does not hide it.
// Large scales. The max is folded into base 2 once, m = RN(max * c), so the largest score's weight
// is 2^(max * c - m), off by up to 2^(|m| 2^-24): a relative error of about ln2 |m| 2^-24 (4e-6
// at |m| = 100, the BF16 level near |m| = 2^14). That is the kernel's arithmetic and it is kept;
// where it loses the row entirely (the weight underflows to 0 or overflows, as at softmax_scale
// 1e30) the row's sum is 0 or not finite and the row ends with out and lse NaN, never as an
// empty row (problem/conventions.hpp, rule 4).
//
// What is not emulated: exp2f on the GPU is the MUFU.EX2 approximation (about 2 ulp) and the
// tensor core's accumulation order is its own; amla uses std::exp2 and Eigen's FP32 GEMM (see
// numeric/gemm.hpp), so a comparison with a real run agrees to a few FP32 ulp in p, l and m and to
// the usual accumulation noise in o, never bit for bit. A block's row sum is a sequential FP32 sum
// (the kernel sums per thread and adds the four threads of a row at the end) folded into l by one
// fma, as nvcc contracts `l * scale + sum`.
//
// Precision modes (attention/driver.hpp's `precision`, as for Base). precision::bf16: Q, K, V are
// rounded to BF16 (a no-op for BF16-exact inputs; the paged driver rounds while gathering), P is
// cast to BF16 before each P*V product, and everything else is FP32, as on the GPU.
// precision::float32: the same schedule entirely in FP32 (no rounding anywhere), which agrees with
// the float64 golden to about 1e-6 relative. precision::fp16: FlashMLA's FP16 kernel, FP16 in
// place of BF16 for Q, K, V and each cast of P.
//
// Entry points, mirroring Base (online_softmax.hpp): seesaw_attention on one dense head group
// (into caller buffers, or into a SeesawResult), with an optional observer of every step, and
// seesaw_decode on a paged decode problem through the shared driver (run_decode), whose row chunks
// of DecodeOptions::rows_per_task = 64 rows are FlashMLA's BLOCK_SIZE_M.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "amla/attention/detail/recurrence.hpp"
#include "amla/attention/driver.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/detail/enum_name.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::attention {

/// Options of the seesaw recurrence: the shared precision mode (bf16: BF16 operands and a BF16
/// cast of P before every P*V product, as the kernel; float32: the same schedule entirely in FP32)
/// and block size, FlashMLA's 64 keys per block by default (its page block size; the schedule
/// takes two blocks at once).
using SeesawOptions = RecurrenceOptions<64>;

/// The steps of the seesaw schedule, numbered as in the FlashMLA deep dive.
enum class seesaw_step : std::uint8_t {
  init = 0,         ///< m = -inf, o_L = o_R = 0 (reported once, before the first pair)
  qk0 = 1,          ///< p_0 = Q K_0^T
  qk1 = 2,          ///< p_1 = Q K_1^T
  max0 = 3,         ///< m, scale_0 from block 0
  exp0 = 4,         ///< p_0 = 2^(p_0 c - m), l_L update
  o_left_p0 = 5,    ///< o_L = o_L * scale_0 + p_0 V_0L
  max1 = 6,         ///< m, scale_1 from block 1
  exp1 = 7,         ///< p_1 = 2^(p_1 c - m)
  o_right_p1 = 8,   ///< o_R = o_R * (scale_1 scale_0) + p_1 V_1R, l_R update
  rescale_p0 = 9,   ///< p_0 = p_0 * scale_1
  o_right_p0 = 10,  ///< o_R = o_R + p_0 V_0R
  o_left_p1 = 11,   ///< o_L = o_L * scale_1 + p_1 V_1L, l_L *= scale_1
};

/// Short name of a step ("qk0", "o_right_p1", ...).
constexpr const char* to_string(seesaw_step s) noexcept {
  return amla::detail::enum_name(
      s, {"init", "qk0", "qk1", "max0", "exp0", "o_left_p0", "max1", "exp1", "o_right_p1",
          "rescale_p0", "o_right_p0", "o_left_p1"});
}

/// The whole state of the schedule right after one step, as the observer sees it. Every view is
/// valid only during the observer call. Values are FP32 as the kernel holds them: p_0 and p_1 are
/// the FP32 scores or probabilities (a P*V product multiplies their BF16 rounding in the BF16
/// mode), m is in the log2 domain (max raw score times scale * log2(e)).
struct SeesawState {
  seesaw_step step;
  Eigen::Index pair;               ///< pair index: blocks 2 * pair and 2 * pair + 1
  Eigen::Index key_begin0;         ///< first key of K_0
  Eigen::Index keys0;              ///< keys in K_0 (block_size, or fewer in the last block)
  Eigen::Index key_begin1;         ///< first key of K_1
  Eigen::Index keys1;              ///< keys in K_1 (0 when the pair has no second block)
  std::span<const float> m;        ///< [rows] running max, log2 domain
  std::span<const float> scale0;   ///< [rows] scale_0 of this pair (1 before step 3)
  std::span<const float> scale1;   ///< [rows] scale_1 of this pair (1 before step 6)
  std::span<const float> l_left;   ///< [rows] warpgroup 0's partial row sum
  std::span<const float> l_right;  ///< [rows] warpgroup 1's partial row sum
  const MatrixF& p0;               ///< [rows, keys0]
  const MatrixF& p1;               ///< [rows, keys1]
  const MatrixF& o_left;           ///< [rows, d_v / 2]
  const MatrixF& o_right;          ///< [rows, d_v - d_v / 2]
};

/// Called after every step; see SeesawState.
using SeesawObserver = std::function<void(const SeesawState&)>;

namespace detail {

/// The seesaw schedule on validated arguments whose operands are as the matrix unit sees them
/// (detail/recurrence.hpp); calls `observe` when set.
template <class = void>
void seesaw_core(const HeadGroup& caller, const SeesawOptions& options, Eigen::Ref<MatrixF> out,
                 std::span<float> lse, const SeesawObserver& observe) {
  const UnseenValueShield<float> shield(caller);
  const HeadGroup& g = shield.group();
  const Eigen::Index rows = g.rows();
  const Eigen::Index d_left = g.d_v() / 2;
  const Eigen::Index d_right = g.d_v() - d_left;
  const Eigen::Index n_read = max_visible_keys(g);  // keys past every row's window: never read
  const Eigen::Index bs = options.block_size;
  const float c = scale_log2(g.scale);
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();

  const Eigen::Ref<const MatrixF> q = g.q;
  const Eigen::Ref<const MatrixF> k = g.k.topRows(n_read);
  const Eigen::Ref<const MatrixF> v = g.v.topRows(n_read);
  std::vector<float> m(static_cast<std::size_t>(rows), neg_inf);
  std::vector<float> scale0(static_cast<std::size_t>(rows), 1.0f);
  std::vector<float> scale1(static_cast<std::size_t>(rows), 1.0f);
  std::vector<float> l_left(static_cast<std::size_t>(rows), 0.0f);
  std::vector<float> l_right(static_cast<std::size_t>(rows), 0.0f);
  MatrixF o_left = MatrixF::Zero(rows, d_left);
  MatrixF o_right = MatrixF::Zero(rows, d_right);
  MatrixF p0(rows, 0), p1(rows, 0);

  Eigen::Index pair = 0, begin0 = 0, n0 = 0, begin1 = 0, n1 = 0;
  const auto report = [&](seesaw_step s) {
    if (!observe) return;
    observe(SeesawState{s, pair, begin0, n0, begin1, n1, m, scale0, scale1, l_left, l_right, p0, p1,
                        o_left, o_right});
  };
  // Scores Q K_blk^T with the keys a row may not see set to -inf.
  const auto scores = [&](Eigen::Index begin, Eigen::Index n, MatrixF& p) {
    p.resize(rows, n);
    p.noalias() = q * k.middleRows(begin, n).transpose();
    for (Eigen::Index r = 0; r < rows; ++r) {
      const Eigen::Index first_masked = std::clamp<Eigen::Index>(g.visible_keys(r) - begin, 0, n);
      for (Eigen::Index j = first_masked; j < n; ++j) p(r, j) = neg_inf;
    }
  };
  // m_new = max(m, rowmax(p) * c), returns 2^(m - m_new) per row and updates m.
  const auto update_max = [&](const MatrixF& p, std::vector<float>& scale) {
    for (Eigen::Index r = 0; r < rows; ++r) {
      float row_max = neg_inf;
      for (Eigen::Index j = 0; j < p.cols(); ++j) row_max = max_propagating_nan(row_max, p(r, j));
      const auto ri = static_cast<std::size_t>(r);
      const float m_new = max_propagating_nan(m[ri], row_max * c);
      // Nothing seen yet (m_new = -inf): the kernel's finite sentinels give 2^0 = 1.
      scale[ri] = m_new == neg_inf ? 1.0f : std::exp2(m[ri] - m_new);
      m[ri] = m_new;
    }
  };
  // p = 2^(fma(p, c, -m)) in place, row sums (sequential FP32) into `sum`.
  const auto exponentiate = [&](MatrixF& p, std::vector<float>& sum) {
    for (Eigen::Index r = 0; r < rows; ++r) {
      const float mr = m[static_cast<std::size_t>(r)];
      float s = 0.0f;
      for (Eigen::Index j = 0; j < p.cols(); ++j) {
        const float e = mr == neg_inf ? 0.0f : std::exp2(std::fma(p(r, j), c, -mr));
        p(r, j) = e;
        s += e;
      }
      sum[static_cast<std::size_t>(r)] = s;
    }
  };
  const auto operand = [&](const MatrixF& p) {  // P as the P*V product's operand
    MatrixF cast = p;
    cast_p_inplace(cast, options.mode);
    return cast;
  };
  const auto scale_rows = [&](MatrixF& o, std::vector<float>& l, const std::vector<float>& f) {
    for (Eigen::Index r = 0; r < rows; ++r) {
      const float fr = f[static_cast<std::size_t>(r)];
      o.row(r) *= fr;
      l[static_cast<std::size_t>(r)] *= fr;
    }
  };

  report(seesaw_step::init);
  std::vector<float> sum(static_cast<std::size_t>(rows), 0.0f);
  for (begin0 = 0; begin0 < n_read; begin0 += 2 * bs, ++pair) {
    n0 = std::min(bs, n_read - begin0);
    begin1 = begin0 + n0;
    n1 = std::clamp<Eigen::Index>(n_read - begin1, 0, bs);
    std::fill(scale0.begin(), scale0.end(), 1.0f);
    std::fill(scale1.begin(), scale1.end(), 1.0f);
    const auto v0 = v.middleRows(begin0, n0);
    const auto v1 = v.middleRows(begin1, n1);

    scores(begin0, n0, p0);  // 1
    report(seesaw_step::qk0);
    scores(begin1, n1, p1);  // 2 (no columns when the pair has no K_1)
    report(seesaw_step::qk1);

    update_max(p0, scale0);  // 3
    report(seesaw_step::max0);

    exponentiate(p0, sum);  // 4
    for (std::size_t r = 0; r < sum.size(); ++r) l_left[r] = std::fma(l_left[r], scale0[r], sum[r]);
    report(seesaw_step::exp0);

    for (Eigen::Index r = 0; r < rows; ++r) o_left.row(r) *= scale0[static_cast<std::size_t>(r)];
    o_left.noalias() += operand(p0) * v0.leftCols(d_left);  // 5
    report(seesaw_step::o_left_p0);

    update_max(p1, scale1);  // 6
    report(seesaw_step::max1);

    exponentiate(p1, sum);  // 7
    report(seesaw_step::exp1);

    for (Eigen::Index r = 0; r < rows; ++r) {  // 8
      const auto ri = static_cast<std::size_t>(r);
      const float both = scale1[ri] * scale0[ri];
      o_right.row(r) *= both;
      l_right[ri] = std::fma(l_right[ri], both, sum[ri]);
    }
    if (n1 > 0) o_right.noalias() += operand(p1) * v1.rightCols(d_right);
    report(seesaw_step::o_right_p1);

    for (Eigen::Index r = 0; r < rows; ++r) p0.row(r) *= scale1[static_cast<std::size_t>(r)];
    report(seesaw_step::rescale_p0);  // 9

    o_right.noalias() += operand(p0) * v0.rightCols(d_right);  // 10
    report(seesaw_step::o_right_p0);

    if (n1 > 0) {  // 11 (the kernel skips it when the pair has no K_1; scale_1 is 1 there)
      scale_rows(o_left, l_left, scale1);
      o_left.noalias() += operand(p1) * v1.leftCols(d_left);
    }
    report(seesaw_step::o_left_p1);
  }

  end_rows(
      g, out, lse,
      [&](Eigen::Index r) {
        const auto ri = static_cast<std::size_t>(r);
        return l_left[ri] + l_right[ri];
      },
      [&](Eigen::Index r, float l) {
        for (Eigen::Index j = 0; j < d_left; ++j) out(r, j) = o_left(r, j) / l;
        for (Eigen::Index j = 0; j < d_right; ++j) out(r, d_left + j) = o_right(r, j) / l;
        return std::log(l) +
               m[static_cast<std::size_t>(r)] / static_cast<float>(std::numbers::log2e);
      });
  shield.restore(out);
}

/// The seesaw schedule as the decode entry point sees it (detail/recurrence.hpp), without an
/// observer.
struct SeesawRecurrence : Recurrence<SeesawOptions> {
  template <class = void>
  static void core(const HeadGroup& g, const SeesawOptions& o, Eigen::Ref<MatrixF> out,
                   std::span<float> lse) {
    seesaw_core(g, o, out, lse, {});
  }
  static constexpr const char* decode_name = "seesaw_decode";
  static constexpr const char* options_name = "seesaw";
};

}  // namespace detail

/// Runs the seesaw schedule on one head group into caller buffers: out [rows, d_v], lse [rows]
/// (natural log). In bf16 mode the operands are rounded to BF16 first. Calls `observe` (when set)
/// after step 0 and after each of steps 1-11 of every pair of blocks. Throws
/// amla::invalid_argument on inconsistent shapes, a bad visible count or scale, an unknown mode,
/// or block_size < 1.
template <class = void>
void seesaw_attention(const HeadGroup& g, const SeesawOptions& options, Eigen::Ref<MatrixF> out,
                      std::span<float> lse, const SeesawObserver& observe = {}) {
  detail::run_dense<detail::SeesawRecurrence>(
      "seesaw_attention", g, options, out.rows(), out.cols(), lse.size(),
      [&](const HeadGroup& operands) {
        detail::seesaw_core(operands, options, out, lse, observe);
      });
}

/// Owned outputs of one head group.
using SeesawResult = AttentionResult<float>;

/// The seesaw schedule over one head group, into owned outputs.
template <class = void>
SeesawResult seesaw_attention(const HeadGroup& g, const SeesawOptions& options = {},
                              const SeesawObserver& observe = {}) {
  return detail::owned_result<float>(g, [&](Eigen::Ref<MatrixF> out, std::span<float> lse) {
    seesaw_attention(g, options, out, lse, observe);
  });
}

/// The seesaw schedule over a paged decode problem: seesaw_decode(inputs, options, outputs,
/// seesaw = {}) into caller buffers, or seesaw_decode(inputs, options = {}, seesaw = {}) into an
/// owned ReportedDecodeResult<float>; one call of the dense core per DecodeOptions::rows_per_task
/// rows of a head group. In bf16 mode a float cache is rounded to BF16 once, while gathering.
/// Validates everything before writing.
inline constexpr detail::DecodeEntry<detail::SeesawRecurrence> seesaw_decode{};

}  // namespace amla::attention
