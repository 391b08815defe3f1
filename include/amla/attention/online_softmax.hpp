// amla/attention/online_softmax.hpp: "Base", FlashAttention's online softmax as a Cube/Vector
// (tensor core / CUDA core) decode kernel computes it: AMLA Algorithm 1.
//
// For each KV block i of block_size keys (512 in AMLA, 64 in FlashMLA), per query row:
//   [C1] S_i = Q K_i^T                  BF16 operands, FP32 accumulation (a matrix unit)
//   [V1] x = S_i * scale                FP32 (the kernel multiplies by the scale; it does not
//                                       divide by sqrt(d_qk))
//        m_i = max(m_{i-1}, rowmax(x))  over the row's visible keys of the block only
//        P_i = exp(x - m_i)             FP32, keys the row cannot see get P = 0
//        l_i = l_{i-1} exp(m_{i-1} - m_i) + rowsum(P_i)   FP32, the sum of the FP32 P (before
//                                       the cast below, as FlashAttention/FlashMLA sum it)
//        P_i -> BF16                    the cast that feeds the second matrix product
//   [C2] T_i = P_i V_i                  BF16 operands, FP32 accumulation, into its own buffer
//   [V2] O_i = O_{i-1} exp(m_{i-1} - m_i) + T_i   FP32 multiply, then FP32 add (no FMA)
// and at the end O = O_N / l_N (FP32 division) and lse = m_N + log(l_N) (natural log).
// The optional BF16 cast of the output is DecodeOptions::round_output_bf16 (or round_bf16_inplace
// on a dense result). In precision::float32 mode nothing is cast: operands are used as given and P
// stays FP32. precision::fp16 is the same recurrence with FP16 in place of BF16 (Q, K, V and P
// rounded to FP16, FP32 accumulation), its output cast DecodeOptions::round_output_fp16.
//
// Rows and blocks that see nothing. A row's running max starts at -inf; a block in which the row
// sees no key leaves m, l and O untouched (its P row is 0 and the rescale factor is exactly 1), so
// no -inf - (-inf) is ever formed. A row that sees no key at all gets out = 0, lse = -inf. Keys
// past the largest visible count of the group are never read, and values a row does not see never
// reach it (problem/conventions.hpp, rule 1).
//
// Non-finite values (problem/conventions.hpp, rules 3 and 4). A NaN score, or a score that is
// +inf in FP32 (q = 1e20, k = 1e20: the product overflows), makes its P = exp(x - m) NaN whatever
// the max kept, so l is NaN and the row ends with out and lse NaN; so does a row whose every
// visible score is -inf (-inf - (-inf)). A NaN or Inf value reaches only its output column.
//
// Arithmetic details that differ from a given kernel only in the last bits: exp is Eigen's
// vectorised expf (within a few ulps; hardware uses its own approximations), row sums and row
// maxima reduce in Eigen's vector order, and the matrix products accumulate in Eigen's order
// (numeric/gemm.hpp explains why that is below the BF16 level). S_i is computed for several blocks
// in one product (a panel): each element is the same dot product either way.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "amla/attention/detail/recurrence.hpp"
#include "amla/attention/driver.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::attention {

/// Options of the Base recurrence: the shared precision mode and block size, 512 keys per block
/// by default (AMLA's; FlashMLA uses 64).
using BaseOptions = RecurrenceOptions<512>;

namespace detail {

/// Keys per [C1] panel: a multiple of the block size near 4096 keys, so a panel of S stays a few
/// MB while each product is large enough to run at full speed.
inline Eigen::Index base_panel_keys(Eigen::Index block) noexcept {
  return std::max<Eigen::Index>(block, (4096 / block) * block);
}

/// The Base recurrence on validated arguments whose operands are as the matrix unit sees them
/// (detail/recurrence.hpp).
template <class = void>
void base_core(const HeadGroup& caller, const BaseOptions& options, Eigen::Ref<MatrixF> out,
               std::span<float> lse) {
  using Eigen::Index;
  const UnseenValueShield<float> shield(caller);
  const HeadGroup& g = shield.group();
  const Index rows = g.rows();
  const Index n = max_visible_keys(g);
  const Index block = options.block_size;
  const float scale = g.scale;
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();

  const Eigen::Ref<const MatrixF> q = g.q;
  const Eigen::Ref<const MatrixF> k = g.k.topRows(n);
  const Eigen::Ref<const MatrixF> v = g.v.topRows(n);

  out.setZero();
  std::vector<float> m(static_cast<std::size_t>(rows), neg_inf);
  std::vector<float> l(static_cast<std::size_t>(rows), 0.0f);
  Eigen::VectorXf alpha(rows);
  const Index panel = detail::base_panel_keys(block);
  MatrixF s(rows, std::min(panel, n));
  MatrixF t(rows, g.d_v());

  for (Index p0 = 0; p0 < n; p0 += panel) {
    const Index pn = std::min(panel, n - p0);
    // [C1] for every block of the panel.
    s.leftCols(pn).noalias() = q * k.middleRows(p0, pn).transpose();
    for (Index j0 = p0; j0 < p0 + pn; j0 += block) {
      const Index nb = std::min(block, n - j0);
      // [V1] row by row (a row of a block is a few KB: it stays in L1 across the passes).
      for (Index r = 0; r < rows; ++r) {
        float* x = s.row(r).data() + (j0 - p0);
        const Index vb = std::clamp<Index>(g.visible_keys(r) - j0, 0, nb);
        std::fill(x + vb, x + nb, 0.0f);
        if (vb == 0) {
          alpha(r) = 1.0f;
          continue;
        }
        Eigen::Map<Eigen::ArrayXf> xr(x, vb);
        xr *= scale;
        const std::size_t ri = static_cast<std::size_t>(r);
        const float m_new = std::max(m[ri], xr.maxCoeff());
        alpha(r) = std::exp(m[ri] - m_new);  // exp(-inf) = 0 on the row's first block
        xr = (xr - m_new).exp();
        l[ri] = l[ri] * alpha(r) + xr.sum();
        m[ri] = m_new;
        // P is exp of a non-positive number, finite, unless a score is NaN or +inf; then l is
        // NaN and the row ends lost whatever P holds: the NaN-free BF16 rounding is enough.
        cast_p_inplace(x, vb, options.mode);
      }
      // [C2] and [V2].
      t.noalias() = s.middleCols(j0 - p0, nb) * v.middleRows(j0, nb);
      out.array().colwise() *= alpha.array();
      out += t;
    }
  }
  end_rows(
      g, out, lse, [&](Index r) { return l[static_cast<std::size_t>(r)]; },
      [&](Index r, float l_r) {
        out.row(r) /= l_r;
        return m[static_cast<std::size_t>(r)] + std::log(l_r);
      });
  shield.restore(out);
}

/// Base as the decode entry point sees it (detail/recurrence.hpp).
struct BaseRecurrence : Recurrence<BaseOptions> {
  template <class = void>
  static void core(const HeadGroup& g, const BaseOptions& o, Eigen::Ref<MatrixF> out,
                   std::span<float> lse) {
    base_core(g, o, out, lse);
  }
  static constexpr const char* decode_name = "base_decode";
  static constexpr const char* options_name = "base";
};

}  // namespace detail

/// Base attention of one head group into caller buffers: out [rows, d_v], lse [rows]. In bf16
/// (fp16) mode the operands are rounded to BF16 (FP16) first. Throws amla::invalid_argument on
/// inconsistent shapes, a bad visible count or scale, an unknown mode, or block_size < 1.
template <class = void>
void base_attention(const HeadGroup& g, const BaseOptions& options, Eigen::Ref<MatrixF> out,
                    std::span<float> lse) {
  detail::run_dense<detail::BaseRecurrence>(
      "base_attention", g, options, out.rows(), out.cols(), lse.size(),
      [&](const HeadGroup& operands) { detail::base_core(operands, options, out, lse); });
}

namespace detail {

/// base_attention for amla's own callers whose operands already are BF16 values (the MLA
/// formulations round them when they build them): validates, then runs Base without rounded
/// copies. Operands that are not BF16 values would silently skip the casts in bf16 mode.
template <class = void>
void base_attention_prerounded(const HeadGroup& g, const BaseOptions& options,
                               Eigen::Ref<MatrixF> out, std::span<float> lse) {
  constexpr const char* fn = "base_attention";
  validate_head_group(fn, g, out.rows(), out.cols(), lse.size());
  validate_recurrence_options(fn, "options", options);
  base_core(g, options, out, lse);
}

}  // namespace detail

/// Base outputs of one head group.
using BaseResult = AttentionResult<float>;

/// Base attention of one head group, into owned outputs.
template <class = void>
BaseResult base_attention(const HeadGroup& g, const BaseOptions& options = {}) {
  return detail::owned_result<float>(g, [&](Eigen::Ref<MatrixF> out, std::span<float> lse) {
    base_attention(g, options, out, lse);
  });
}

/// Base attention over a paged decode problem: base_decode(inputs, options, outputs, base = {})
/// into caller buffers, or base_decode(inputs, options = {}, base = {}) into an owned
/// ReportedDecodeResult<float>. In bf16 mode a float cache is rounded to BF16 once, while
/// gathering. Validates everything before writing.
inline constexpr detail::DecodeEntry<detail::BaseRecurrence> base_decode{};

}  // namespace amla::attention
