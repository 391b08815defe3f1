// amla/attention/golden.hpp: float64 softmax attention, the truth every recurrence is checked
// against.
//
// The inputs are taken exactly as given (a bf16 cache is already BF16; a float cache is used at
// full float precision: golden never rounds operands). A head group of float64 operands
// (HeadGroupD) is taken as it is too, so values that are float64 results themselves (MLA's
// absorbed queries and decompressed keys and values) reach it unrounded; with float operands
// (HeadGroup) each product of two floats is exact in float64. Everything after that is float64: the
// scores S = Q K^T, x = scale * S, the row max m over the visible keys, p = exp(x - m), the row
// sum l, O = (P V) / l and lse = m + log(l) (natural log). Two passes over exact scores, not an
// online recurrence, so the only errors are float64 roundings (relative ~1e-15, far below the
// 1e-5 that float32 modes are held to). exp is Eigen's vectorised float64 exp (within a couple of
// ulps of the true value).
//
// Rows that see no key give out = 0 and lse = -inf; values a row does not see never reach it, and
// NaN and Inf among what it reads propagate as this arithmetic propagates them: golden is the
// definition of problem/conventions.hpp's contract. The row max propagates NaN. Products of float
// operands cannot overflow float64, so a golden row is NaN only through a non-finite operand.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "amla/attention/detail/recurrence.hpp"
#include "amla/attention/driver.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::attention {

/// Keys per float64 GEMM panel (bounds the float64 copy of K and V held at once).
inline constexpr Eigen::Index golden_key_panel = 1024;

/// Float64 attention of one head group (float or double operands) into caller buffers:
/// out [rows, d_v], lse [rows]. Throws amla::invalid_argument on inconsistent shapes or a bad
/// scale or visible count.
template <class S>
void golden_attention(const BasicHeadGroup<S>& caller, Eigen::Ref<MatrixD> out,
                      std::span<double> lse) {
  validate_head_group("golden_attention", caller, out.rows(), out.cols(), lse.size());
  const detail::UnseenValueShield<S> shield(caller);
  const BasicHeadGroup<S>& g = shield.group();
  const Eigen::Index rows = g.rows();
  const Eigen::Index n = max_visible_keys(g);  // keys past every row's window are never read
  const double scale = static_cast<double>(g.scale);

  out.setZero();
  if (rows == 0) return;
  MatrixD p(rows, n);  // scores, then probabilities (unnormalised)
  if (n > 0) {
    const MatrixD qd = g.q.template cast<double>();
    for (Eigen::Index j0 = 0; j0 < n; j0 += golden_key_panel) {
      const Eigen::Index nb = std::min(golden_key_panel, n - j0);
      const MatrixD kd = g.k.middleRows(j0, nb).template cast<double>();
      p.middleCols(j0, nb).noalias() = qd * kd.transpose();
    }
  }
  std::vector<double> l(static_cast<std::size_t>(rows), 0.0);
  for (Eigen::Index r = 0; r < rows; ++r) {
    const Eigen::Index vis = g.visible_keys(r);
    auto row = p.row(r);
    if (vis == 0) {
      row.setZero();
      lse[static_cast<std::size_t>(r)] = -std::numeric_limits<double>::infinity();
      continue;
    }
    auto x = row.head(vis).array();
    x *= scale;
    const double m = x.template maxCoeff<Eigen::PropagateNaN>();
    x = (x - m).exp();
    row.tail(n - vis).setZero();
    const double sum = x.sum();
    l[static_cast<std::size_t>(r)] = sum;
    lse[static_cast<std::size_t>(r)] = m + std::log(sum);
  }
  for (Eigen::Index j0 = 0; j0 < n; j0 += golden_key_panel) {
    const Eigen::Index nb = std::min(golden_key_panel, n - j0);
    const MatrixD vd = g.v.middleRows(j0, nb).template cast<double>();
    out.noalias() += p.middleCols(j0, nb) * vd;
  }
  for (Eigen::Index r = 0; r < rows; ++r) {
    const double sum = l[static_cast<std::size_t>(r)];
    switch (row_end_of(g.visible_keys(r), sum)) {
      case row_end::empty:
        break;             // out row 0, lse -inf (set above)
      case row_end::lost:  // only from non-finite operands: float64 scores cannot overflow
        out.row(r).setConstant(std::numeric_limits<double>::quiet_NaN());
        lse[static_cast<std::size_t>(r)] = std::numeric_limits<double>::quiet_NaN();
        break;
      case row_end::normal:
        out.row(r) /= sum;
        break;
    }
  }
  shield.restore(out);
}

/// Float64 outputs of one head group (out_float() and lse_float() give float views for
/// comparisons against kernels).
using GoldenResult = AttentionResult<double>;

/// Float64 attention of one head group (float or double operands).
template <class S>
GoldenResult golden_attention(const BasicHeadGroup<S>& g) {
  GoldenResult r{MatrixD(g.rows(), g.d_v()), Eigen::VectorXd(g.rows())};
  golden_attention(g, r.out, std::span<double>(r.lse.data(), static_cast<std::size_t>(g.rows())));
  return r;
}

/// Golden has no options: it computes in float64 and takes the operands as stored.
struct GoldenOptions {};

namespace detail {

/// Golden as the decode entry point sees it (detail/recurrence.hpp).
struct GoldenRecurrence : Recurrence<GoldenOptions, double> {
  static constexpr const char* decode_name = "golden_decode";
  static constexpr const char* options_name = "golden";
  static void validate(const char*, std::string_view, const GoldenOptions&) {}
  static operand_gather gather(const GoldenOptions&) { return operand_gather::as_stored; }
  template <class = void>
  static void core(const HeadGroup& g, const GoldenOptions&, Eigen::Ref<MatrixD> out,
                   std::span<double> lse) {
    golden_attention(g, out, lse);
  }
};

}  // namespace detail

/// Float64 attention over a paged decode problem: golden_decode(inputs, options, outputs) into
/// caller buffers (out may be float, double or bf16; a narrower out is rounded once from the
/// float64 value), or golden_decode(inputs, options = {}) into owned float64 buffers.
inline constexpr detail::DecodeEntry<detail::GoldenRecurrence> golden_decode{};

}  // namespace amla::attention
