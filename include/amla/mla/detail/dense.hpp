// amla/mla/detail/dense.hpp: the dense attention calls the MLA formulations make, in one place.
//
// float64 mode: the golden recurrence on float64 inputs.
//   attention::golden_attention takes its operands as float (HeadGroup holds float matrices) and
//   does everything after that in float64: each product of two floats is exact in float64 and the
//   sums, exponentials and P*V run in float64. MLA's derived operands (the absorbed query Q_N
//   W_KVb1, the decompressed K and V) are float64 values, and rounding them to float would cost
//   the formulations their float64 agreement (1e-7 instead of 1e-15). So each float64 matrix X is
//   handed over as an unevaluated pair of floats, X = X_hi + X_lo with X_hi = fl32(X) and
//   X_lo = fl32(X - X_hi) (|X - X_hi - X_lo| <= 2^-48 |X| for values in float's normal range),
//   and the pair is laid out so that golden's own products add up to the float64 result:
//     scores: Q K^T = [Q_hi, Q_hi, Q_lo] [K_hi, K_lo, K_hi]^T  (+ Q_lo K_lo^T, about 2^-48 of it,
//             dropped), with a half left out when Q or K is exactly a float matrix;
//     values: P [V_hi, V_lo] gives [P V_hi, P V_lo], and O = O_hi + O_lo;
//     scale:  folded into Q in float64 beforehand, and golden runs with scale 1.
//   golden then sees exactly the float64 scores (to 2^-48) and computes softmax and P V in
//   float64: the result is the float64 attention of the float64 operands.
//
// bf16 mode: the Base recurrence (attention/online_softmax.hpp, FlashAttention as a Cube/Vector
// kernel computes it) on BF16 operands, returning FP32 out and lse.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "amla/attention/golden.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/config.hpp"
#include "amla/mla/model.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::mla::detail {

/// A float64 matrix as float hi + lo parts; `exact` when lo is all zero (X is a float matrix).
struct FloatPair {
  MatrixF hi;
  MatrixF lo;
  bool exact = true;
};

inline FloatPair split_to_floats(const MatrixD& x) {
  FloatPair p;
  p.hi = x.cast<float>();
  p.lo = (x - p.hi.cast<double>()).cast<float>();
  p.exact = (p.lo.array() == 0.0f).all();
  return p;
}

/// Horizontal concatenation of float matrices with the same row count.
inline MatrixF hcat(std::initializer_list<const MatrixF*> parts) {
  Eigen::Index cols = 0;
  const Eigen::Index rows = (*parts.begin())->rows();
  for (const MatrixF* p : parts) cols += p->cols();
  MatrixF m(rows, cols);
  Eigen::Index c = 0;
  for (const MatrixF* p : parts) {
    m.middleCols(c, p->cols()) = *p;
    c += p->cols();
  }
  return m;
}

/// Output of one dense attention call.
template <class S>
struct DenseResult {
  Mat<S> out;                               ///< [rows, d_v]
  Eigen::Matrix<S, Eigen::Dynamic, 1> lse;  ///< [rows]
};

/// Float64 softmax attention of float64 operands through attention::golden_attention:
/// out = softmax(scale Q K^T) V row by row over the visible keys, lse natural log.
/// `q_scaled` is scale * Q. visible: empty, or one count per row.
inline DenseResult<double> golden_f64(const MatrixD& q_scaled, const MatrixD& k, const MatrixD& v,
                                      std::span<const int> visible) {
  AMLA_ASSERT(q_scaled.cols() == k.cols() && k.rows() == v.rows());
  const FloatPair q = split_to_floats(q_scaled);
  const FloatPair kp = split_to_floats(k);
  const FloatPair vp = split_to_floats(v);
  MatrixF qf, kf;
  if (q.exact && kp.exact) {
    qf = q.hi;
    kf = kp.hi;
  } else if (q.exact) {
    qf = hcat({&q.hi, &q.hi});
    kf = hcat({&kp.hi, &kp.lo});
  } else if (kp.exact) {
    qf = hcat({&q.hi, &q.lo});
    kf = hcat({&kp.hi, &kp.hi});
  } else {
    qf = hcat({&q.hi, &q.hi, &q.lo});
    kf = hcat({&kp.hi, &kp.lo, &kp.hi});
  }
  const MatrixF vf = vp.exact ? vp.hi : hcat({&vp.hi, &vp.lo});
  const attention::HeadGroup g{qf, kf, vf, visible, 1.0f};
  DenseResult<double> r;
  MatrixD o(g.rows(), vf.cols());
  r.lse.resize(g.rows());
  attention::golden_attention(g, o,
                              std::span<double>(r.lse.data(), static_cast<std::size_t>(g.rows())));
  if (vp.exact) {
    r.out = std::move(o);
  } else {
    const Eigen::Index dv = v.cols();
    r.out = o.leftCols(dv) + o.rightCols(dv);
  }
  return r;
}

/// The Base recurrence in its bf16 mode (BF16 operands, FP32 accumulation and online softmax,
/// P cast to BF16), KV blocks of `kv_block` keys. The formulations hand it operands that are
/// already BF16 values (rounded when gathered or stored), so Base uses them without copies.
inline DenseResult<float> base_f32(const MatrixF& q, const MatrixF& k, const MatrixF& v,
                                   std::span<const int> visible, float scale, int kv_block) {
  const attention::HeadGroup g{q, k, v, visible, scale};
  attention::BaseOptions options;
  options.mode = attention::precision::bf16;
  options.block_size = kv_block;
  options.operands_prerounded = true;
  DenseResult<float> r;
  r.out.resize(q.rows(), v.cols());
  r.lse.resize(q.rows());
  attention::base_attention(g, options, r.out,
                            std::span<float>(r.lse.data(), static_cast<std::size_t>(q.rows())));
  return r;
}

/// Softmax attention of one dense group in the mode's arithmetic: float64 golden for S = double,
/// the Base recurrence (BF16 operands, KV blocks of `kv_block`) for S = float. q is unscaled;
/// visible is empty or one count per row.
template <class S>
DenseResult<S> attend(const Mat<S>& q, const Mat<S>& k, const Mat<S>& v,
                      std::span<const int> visible, double scale, int kv_block) {
  if constexpr (std::is_same_v<S, double>) {
    (void)kv_block;
    const MatrixD q_scaled = q * scale;
    return golden_f64(q_scaled, k, v, visible);
  } else {
    static_assert(std::is_same_v<S, float>);
    return base_f32(q, k, v, visible, static_cast<float>(scale), kv_block);
  }
}

}  // namespace amla::mla::detail
