// amla/numeric/gemm.hpp: emulated matrix products, the building block of every recurrence.
//
// matmul_bf16 computes C = A * B the way a Cube core or a tensor core does: both operands rounded
// to BF16 (round to nearest even), products and sums in FP32. Rounding the operands and then
// multiplying in float is exact emulation of the operand side: a product of two BF16 values has at
// most 16 significant bits and is exact in FP32, so only the accumulation rounds. FP16 operands
// (rounded_fp16) are emulated the same way: a product of two FP16 values has at most 22
// significant bits and an exponent within FP32's range, so it is exact in FP32 too.
//
// Accumulation order. Hardware sums the K products in its own order (a tensor core adds groups of
// 4-16 products, sometimes with wider internal precision; Eigen blocks K and vectorises). FP32
// addition is not associative, so the low bits of C differ between any two implementations. With
// K terms each result may differ by about K * 2^-24 * sum|a_ik b_kj| in the worst case and about
// sqrt(K) * 2^-24 * that sum typically. For MLA shapes (K = 576 or 512) that is far below the
// BF16 rounding applied to P and to the output (2^-9), so tests of recurrences compare at the BF16
// level, and tests of the float32-only modes use relative tolerances of about 1e-5, never bits.
//
// matmul_f64 is the float64 counterpart used by the golden references.
#pragma once

#include <Eigen/Core>
#include <string>

#include "amla/config.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/fp16.hpp"

namespace amla {

/// Row-major dynamic matrices: the layout of attention tensors ([rows, head_dim]).
using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace detail {
inline std::string shape_text(Eigen::Index rows, Eigen::Index cols) {
  // Built by appending: GCC 12 warns falsely (-Wrestrict, bug 105329) on "literal" + string&&.
  std::string s("[");
  s += std::to_string(rows);
  s += " x ";
  s += std::to_string(cols);
  s += ']';
  return s;
}
template <class DA, class DB>
void check_inner(const char* fn, const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b) {
  if (a.cols() != b.rows()) {
    throw_invalid(fn, "b", "shape " + shape_text(b.rows(), b.cols()),
                  "b.rows() must equal a.cols() = " + std::to_string(a.cols()) + " (a is " +
                      shape_text(a.rows(), a.cols()) + ")");
  }
}
}  // namespace detail

/// Every element of m rounded to BF16 (values stay float).
template <class D>
void round_bf16_inplace(Eigen::DenseBase<D>& m, bf16_rounding mode = bf16_rounding::nearest_even) {
  m = m.unaryExpr([mode](float x) { return round_bf16(x, mode); });
}

/// A copy of m with every element rounded to BF16.
template <class D>
MatrixF rounded_bf16(const Eigen::MatrixBase<D>& m,
                     bf16_rounding mode = bf16_rounding::nearest_even) {
  return m.template cast<float>().unaryExpr([mode](float x) { return round_bf16(x, mode); });
}

/// Every element of m rounded to FP16 (values stay float; numeric/fp16.hpp's one rounding).
template <class D>
void round_fp16_inplace(Eigen::DenseBase<D>& m) {
  m = m.unaryExpr([](float x) { return round_fp16(x); });
}

/// A copy of m with every element rounded to FP16.
template <class D>
MatrixF rounded_fp16(const Eigen::MatrixBase<D>& m) {
  return m.template cast<float>().unaryExpr([](float x) { return round_fp16(x); });
}

/// C_fp32 = bf16(A) * bf16(B) with FP32 accumulation. Throws amla::invalid_argument when
/// a.cols() != b.rows().
template <class DA, class DB>
MatrixF matmul_bf16(const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b) {
  detail::check_inner("matmul_bf16", a, b);
  MatrixF c(a.rows(), b.cols());
  c.noalias() = rounded_bf16(a) * rounded_bf16(b);
  return c;
}

/// C_fp32 = A * B with FP32 accumulation, for operands the caller has already rounded to BF16
/// (not re-rounded and not checked: this is the hot path of the recurrences).
template <class DA, class DB>
MatrixF matmul_prerounded(const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b) {
  detail::check_inner("matmul_prerounded", a, b);
  MatrixF c(a.rows(), b.cols());
  c.noalias() = a.template cast<float>() * b.template cast<float>();
  return c;
}

/// C_fp64 = A * B in float64 (the golden references' product). Throws amla::invalid_argument
/// when a.cols() != b.rows().
template <class DA, class DB>
MatrixD matmul_f64(const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b) {
  detail::check_inner("matmul_f64", a, b);
  MatrixD c(a.rows(), b.cols());
  c.noalias() = a.template cast<double>() * b.template cast<double>();
  return c;
}

}  // namespace amla
