// amla/attention/transposed.hpp: FlashMLA-ETAP's transposed attention, as a golden reference.
//
// A decode head group has few query rows (h_q / h_kv heads times s_q tokens, 16 per GPU when
// DeepSeek's 128 heads are split over 8 H20s) and many keys. Hopper's WGMMA needs M >= 64, so the
// usual S = Q K^T pads the query rows up to 64 and wastes most of the tensor core. ETAP (Efficient
// Transpose Attention Pipeline, Dege et al. 2025) computes everything transposed so that the long
// key dimension is M:
//
//   S^T = K_j Q^T          [block, rows]   (keys on M, query rows on N)
//   P^T = softmax over each column of S^T (online across KV blocks)
//   O^T = O^T diag(scale) + V_j^T P^T      [d_v, rows]
//   O   = (O^T / l)^T                      transposed once at the end
//
// The online softmax is FlashAttention-2's (ETAP builds on FlashMLA's first kernel, which uses
// it): per column r and block j, with c = scale * log2(e),
//   m_old = m,  m = max(m, colmax(S^T_j)),  m' = (m == -inf ? 0 : m)
//   scale = 2^((m_old - m') * c),  P^T = 2^(fma(S^T, c, -m' * c)),  l = l * scale + colsum(P^T)
// (l * scale first, then the block's p added to it one by one)
// m is the raw (unscaled) score maximum; the fma is nvcc's contraction of `s * c - m' * c`. The
// end multiplies by 1 / l (FlashAttention-2's normalisation, not a division) and reports
// lse = m * scale + ln(l).
//
// ETAP's Algorithm 1 prints the rescale factor as diag(exp(m_old - m))^{-1}; the inverse is a
// misprint (it would grow O as the max grows): the factor is exp(m_old - m) <= 1, as in its code.
// ETAP also splits O^T into two d_v/2 halves updated by two warpgroups with the same P^T and the
// same scale; a split along d_v changes no rounding (each output element is its own dot product),
// so it is not modelled. Block order: ETAP's Algorithm 1 walks the blocks forward; its published
// code (inherited from FlashMLA's first kernel) walks them from the last to the first. Both are
// here (TransposedOptions::order); they differ only in rounding.
//
// Precision modes, masking and empty rows follow attention/seesaw.hpp: precision::bf16 rounds Q,
// K, V to BF16 and casts P^T to BF16 before the V^T P^T product (FP32 elsewhere);
// precision::fp16 does the same in FP16 (ETAP's FP16 kernel, the setting of its Table 1);
// precision::float32 rounds nothing. The output cast is DecodeOptions::round_output_bf16 (or
// round_output_fp16). Keys a row may not see score -inf, keys no row sees are never read, a row
// that sees no key gets out = 0 and lse = -inf (ETAP, like FlashAttention-2, writes +inf), a NaN
// that is read propagates through the column max (FlashAttention-2 resets a NaN l to 1; amla does
// not hide it), and a scale too large for the base-2 folding of the max loses the row to NaN as
// in seesaw.hpp. Entry points mirror Base: transposed_attention (dense head group) and
// transposed_decode (paged).
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "amla/attention/detail/recurrence.hpp"
#include "amla/attention/driver.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::attention {

/// The order in which a recurrence visits the KV blocks.
enum class kv_block_order : std::uint8_t {
  forward,  ///< first block to last (ETAP's Algorithm 1, FlashAttention)
  reverse,  ///< last block to first (ETAP's and FlashMLA v1's code)
};

/// Options of the transposed (ETAP) recurrence: the shared precision mode (bf16: BF16 operands
/// and a BF16 cast of P^T before V^T P^T; float32: everything in FP32) and block size (the M
/// dimension of S^T; ETAP uses 64), then the block order.
struct TransposedOptions : RecurrenceOptions<64> {
  kv_block_order order = kv_block_order::forward;
};

namespace detail {

/// Checks the shared options and the block order.
inline void validate_transposed_options(const char* fn, std::string_view prefix,
                                        const TransposedOptions& o) {
  validate_recurrence_options(fn, prefix, o);
  if (o.order != kv_block_order::forward && o.order != kv_block_order::reverse) {
    amla::detail::throw_invalid(fn, (std::string(prefix) + ".order").c_str(),
                                std::to_string(static_cast<int>(o.order)),
                                "must be kv_block_order::forward or kv_block_order::reverse");
  }
}

/// The transposed recurrence on validated arguments whose operands are as the matrix unit sees
/// them (detail/recurrence.hpp).
template <class = void>
void transposed_core(const HeadGroup& caller, const TransposedOptions& options,
                     Eigen::Ref<MatrixF> out, std::span<float> lse) {
  const UnseenValueShield<float> shield(caller);
  const HeadGroup& g = shield.group();
  const Eigen::Index rows = g.rows();
  const Eigen::Index n_read = max_visible_keys(g);  // keys past every row's window: never read
  const Eigen::Index bs = options.block_size;
  const Eigen::Index blocks = (n_read + bs - 1) / bs;
  const float c = scale_log2(g.scale);
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();

  const Eigen::Ref<const MatrixF> k = g.k.topRows(n_read);
  const Eigen::Ref<const MatrixF> v = g.v.topRows(n_read);
  std::vector<float> m(static_cast<std::size_t>(rows), neg_inf);
  std::vector<float> l(static_cast<std::size_t>(rows), 0.0f);
  MatrixF o_t = MatrixF::Zero(g.d_v(), rows);  // O^T
  MatrixF s_t;                                 // S^T, then P^T

  for (Eigen::Index step = 0; step < blocks; ++step) {
    const Eigen::Index j = options.order == kv_block_order::forward ? step : blocks - 1 - step;
    const Eigen::Index begin = j * bs;
    const Eigen::Index n = std::min(bs, n_read - begin);
    s_t.resize(n, rows);
    s_t.noalias() = k.middleRows(begin, n) * g.q.transpose();  // S^T = K_j Q^T
    for (Eigen::Index r = 0; r < rows; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      const Eigen::Index first_masked = std::clamp<Eigen::Index>(g.visible_keys(r) - begin, 0, n);
      for (Eigen::Index i = first_masked; i < n; ++i) s_t(i, r) = neg_inf;

      // Softmax down column r (FlashAttention-2's online update, base 2).
      const float m_old = m[ri];
      float col_max = m_old;
      for (Eigen::Index i = 0; i < n; ++i) col_max = max_propagating_nan(col_max, s_t(i, r));
      m[ri] = col_max;
      const float m_cur = col_max == neg_inf ? 0.0f : col_max;
      const float scale = std::exp2((m_old - m_cur) * c);
      const float max_scaled = m_cur * c;
      float sum = l[ri] * scale;  // FlashAttention-2 rescales l, then adds the block's p to it
      for (Eigen::Index i = 0; i < n; ++i) {
        const float p = std::exp2(std::fma(s_t(i, r), c, -max_scaled));
        s_t(i, r) = p;
        sum += p;
      }
      l[ri] = sum;
      o_t.col(r) *= scale;
    }
    cast_p_inplace(s_t, options.mode);  // P^T to BF16 / FP16: the B operand of the PV wgmma
    o_t.noalias() += v.middleRows(begin, n).transpose() * s_t;  // O^T += V_j^T P^T
  }

  end_rows(
      g, out, lse, [&](Eigen::Index r) { return l[static_cast<std::size_t>(r)]; },
      [&](Eigen::Index r, float l_r) {
        const float inv = 1.0f / l_r;
        for (Eigen::Index d = 0; d < g.d_v(); ++d) out(r, d) = o_t(d, r) * inv;  // (O^T / l)^T
        // m * scale + ln(l), one fma
        return std::fma(m[static_cast<std::size_t>(r)], g.scale, std::log(l_r));
      });
  shield.restore(out);
}

/// The transposed recurrence as the decode entry point sees it (detail/recurrence.hpp).
struct TransposedRecurrence : Recurrence<TransposedOptions> {
  template <class = void>
  static void core(const HeadGroup& g, const TransposedOptions& o, Eigen::Ref<MatrixF> out,
                   std::span<float> lse) {
    transposed_core(g, o, out, lse);
  }
  static constexpr const char* decode_name = "transposed_decode";
  static constexpr const char* options_name = "transposed";
  static void validate(const char* fn, std::string_view prefix, const TransposedOptions& o) {
    validate_transposed_options(fn, prefix, o);
  }
};

}  // namespace detail

/// Runs the transposed recurrence on one head group into caller buffers: out [rows, d_v] and
/// lse [rows] (natural log). In bf16 mode the operands are rounded to BF16 first. Throws
/// amla::invalid_argument on inconsistent shapes, a bad visible count or scale, an unknown mode
/// or block order, or block_size < 1.
template <class = void>
void transposed_attention(const HeadGroup& g, const TransposedOptions& options,
                          Eigen::Ref<MatrixF> out, std::span<float> lse) {
  detail::run_dense<detail::TransposedRecurrence>(
      "transposed_attention", g, options, out.rows(), out.cols(), lse.size(),
      [&](const HeadGroup& operands) { detail::transposed_core(operands, options, out, lse); });
}

/// Owned outputs of one head group.
using TransposedResult = AttentionResult<float>;

/// The transposed recurrence over one head group, into owned outputs.
template <class = void>
TransposedResult transposed_attention(const HeadGroup& g, const TransposedOptions& options = {}) {
  return detail::owned_result<float>(g, [&](Eigen::Ref<MatrixF> out, std::span<float> lse) {
    transposed_attention(g, options, out, lse);
  });
}

/// The transposed recurrence over a paged decode problem: transposed_decode(inputs, options,
/// outputs, transposed = {}) into caller buffers, or transposed_decode(inputs, options = {},
/// transposed = {}) into an owned ReportedDecodeResult<float>. In bf16 mode a float cache is
/// rounded to BF16 once, while gathering. Validates everything before writing.
inline constexpr detail::DecodeEntry<detail::TransposedRecurrence> transposed_decode{};

}  // namespace amla::attention
