// amla/detail/variant_common.hpp: internals shared by attention/seesaw.hpp and
// attention/transposed.hpp (argument checks of the dense head-group entry points, the keys a head
// group reads, FlashMLA's base-2 softmax scale). Not for direct inclusion.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::attention {

namespace detail {

/// Shared validation of the dense entry points of the variant recurrences (seesaw, transposed).
inline void check_variant_inputs(const char* fn, const HeadGroup& g, Eigen::Index out_rows,
                                 Eigen::Index out_cols, std::size_t lse_size,
                                 Eigen::Index block_size) {
  namespace base = ::amla::detail;
  const auto shape = [](Eigen::Index r, Eigen::Index c) { return base::shape_text(r, c); };
  if (g.d_qk() < 1) base::throw_invalid(fn, "g.q", shape(g.rows(), g.d_qk()), "d_qk must be >= 1");
  if (g.k.cols() != g.d_qk()) {
    base::throw_invalid(fn, "g.k", shape(g.k.rows(), g.k.cols()),
                        "k.cols() must equal q.cols() = " + std::to_string(g.d_qk()));
  }
  if (g.v.rows() != g.n_keys()) {
    base::throw_invalid(fn, "g.v", shape(g.v.rows(), g.v.cols()),
                        "v.rows() must equal k.rows() = " + std::to_string(g.n_keys()));
  }
  if (g.d_v() < 1)
    base::throw_invalid(fn, "g.v", shape(g.v.rows(), g.v.cols()), "d_v must be >= 1");
  if (!(std::isfinite(g.scale) && g.scale > 0.0f)) {
    base::throw_invalid(fn, "g.scale", base::to_text(g.scale),
                        "the softmax scale must be finite and > 0");
  }
  if (!g.visible.empty()) {
    if (static_cast<Eigen::Index>(g.visible.size()) != g.rows()) {
      base::throw_invalid(
          fn, "g.visible", "size " + std::to_string(g.visible.size()),
          "must be empty or hold one count per row (" + std::to_string(g.rows()) + ")");
    }
    for (std::size_t r = 0; r < g.visible.size(); ++r) {
      if (g.visible[r] < 0 || g.visible[r] > g.n_keys()) {
        base::throw_invalid(fn, "g.visible",
                            "visible[" + std::to_string(r) + "] = " + std::to_string(g.visible[r]),
                            "must lie in [0, n_keys = " + std::to_string(g.n_keys()) + "]");
      }
    }
  }
  if (block_size < 1)
    base::throw_invalid(fn, "options.block_size", base::to_text(block_size), "must be >= 1");
  if (out_rows != g.rows() || out_cols != g.d_v()) {
    base::throw_invalid(fn, "out", shape(out_rows, out_cols),
                        "must be [rows, d_v] = " + shape(g.rows(), g.d_v()));
  }
  if (static_cast<Eigen::Index>(lse_size) != g.rows()) {
    base::throw_invalid(fn, "lse", "size " + std::to_string(lse_size),
                        "must hold one value per row (" + std::to_string(g.rows()) + ")");
  }
}

/// Keys any row may see: the recurrences never read past this.
inline Eigen::Index keys_read(const HeadGroup& g) {
  if (g.visible.empty()) return g.n_keys();
  int most = 0;
  for (int v : g.visible) most = std::max(most, v);
  return most;
}

/// scale * log2(e) rounded once to float, as FlashMLA's host code computes scale_softmax_log2.
inline float scale_log2(float scale) {
  return static_cast<float>(static_cast<double>(scale) * std::numbers::log2e);
}

/// A copy of rows [begin, begin + n) of m, rounded to BF16 when asked.
inline MatrixF block_rows(const Eigen::Ref<const MatrixF>& m, Eigen::Index begin, Eigen::Index n,
                          bool to_bf16) {
  MatrixF b = m.middleRows(begin, n);
  if (to_bf16) round_bf16_inplace(b);
  return b;
}

}  // namespace detail

}  // namespace amla::attention
