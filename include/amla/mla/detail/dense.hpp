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
//             dropped), or [Q_hi, Q_lo] [K, K]^T when K is a float matrix (a cache as stored);
//     values: P [V_hi, V_lo] gives [P V_hi, P V_lo], and O = O_hi + O_lo (P V when V is float);
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

/// Output of one dense attention call.
template <class S>
struct DenseResult {
  Mat<S> out;                               ///< [rows, d_v]
  Eigen::Matrix<S, Eigen::Dynamic, 1> lse;  ///< [rows]
};

/// The Base recurrence in its bf16 mode (BF16 operands, FP32 accumulation and online softmax,
/// P cast to BF16), KV blocks of `kv_block` keys. The formulations hand it operands that are
/// already BF16 values (rounded when gathered or stored), so Base uses them without copies.
inline DenseResult<float> base_f32(const MatrixF& q, Eigen::Ref<const MatrixF> k,
                                   Eigen::Ref<const MatrixF> v, std::span<const int> visible,
                                   float scale, int kv_block) {
  const attention::HeadGroup g{q, k, v, visible, scale};
  attention::BaseOptions options;
  options.mode = attention::precision::bf16;
  options.block_size = kv_block;
  DenseResult<float> r;
  r.out.resize(q.rows(), v.cols());
  r.lse.resize(q.rows());
  attention::detail::base_attention_prerounded(
      g, options, r.out, std::span<float>(r.lse.data(), static_cast<std::size_t>(q.rows())));
  return r;
}

/// The keys and values of dense attention calls, written range by range and reused: a shared
/// prefix is written once and serves every request, each request then writes its own rows after
/// it. KeyValues<float> holds BF16 values for Base; KeyValues<double> holds float64 values as the
/// float pairs golden needs (see the file comment), with the hi/lo split done once per row.
template <class S>
class KeyValues;

template <>
class KeyValues<float> {
 public:
  KeyValues(Eigen::Index capacity, int d_qk, int d_v, bool = false, bool = false)
      : k_(capacity, d_qk), v_(capacity, d_v) {}

  /// Rows [r0, r0 + k.rows()) of K and V.
  template <class DK, class DV>
  void set_rows(Eigen::Index r0, const Eigen::MatrixBase<DK>& k, const Eigen::MatrixBase<DV>& v) {
    AMLA_ASSERT(r0 + k.rows() <= k_.rows() && k.rows() == v.rows());
    k_.middleRows(r0, k.rows()) = k;
    v_.middleRows(r0, v.rows()) = v;
  }

  /// Base attention of q (unscaled) over the first n_keys keys.
  DenseResult<float> attend(const MatrixF& q, Eigen::Index n_keys, std::span<const int> visible,
                            double scale, int kv_block) const {
    return base_f32(q, k_.topRows(n_keys), v_.topRows(n_keys), visible, static_cast<float>(scale),
                    kv_block);
  }

 private:
  MatrixF k_, v_;
};

template <>
class KeyValues<double> {
 public:
  /// k_exact / v_exact: every value written will be a float value (a cache as stored), so one
  /// float copy replaces the pair and golden does half the work.
  KeyValues(Eigen::Index capacity, int d_qk, int d_v, bool k_exact = false, bool v_exact = false)
      : d_qk_(d_qk),
        d_v_(d_v),
        k_exact_(k_exact),
        v_exact_(v_exact),
        k_(capacity, (k_exact ? 2 : 3) * d_qk),
        v_(capacity, (v_exact ? 1 : 2) * d_v) {}

  /// Rows [r0, r0 + k.rows()) of K and V (float64 values).
  template <class DK, class DV>
  void set_rows(Eigen::Index r0, const Eigen::MatrixBase<DK>& k, const Eigen::MatrixBase<DV>& v) {
    const Eigen::Index n = k.rows();
    AMLA_ASSERT(r0 + n <= k_.rows() && n == v.rows());
    const MatrixF kh = k.template cast<float>();
    k_.block(r0, 0, n, d_qk_) = kh;
    if (k_exact_) {
      AMLA_ASSERT((kh.cast<double>().array() == k.array()).all());
      k_.block(r0, d_qk_, n, d_qk_) = kh;  // [K, K] pairs with [Q_hi, Q_lo]
    } else {
      k_.block(r0, d_qk_, n, d_qk_) = (k - kh.cast<double>()).template cast<float>();
      k_.block(r0, 2 * d_qk_, n, d_qk_) = kh;  // [K_hi, K_lo, K_hi] with [Q_hi, Q_hi, Q_lo]
    }
    const MatrixF vh = v.template cast<float>();
    v_.block(r0, 0, n, d_v_) = vh;
    if (v_exact_) {
      AMLA_ASSERT((vh.cast<double>().array() == v.array()).all());
    } else {
      v_.block(r0, d_v_, n, d_v_) = (v - vh.cast<double>()).template cast<float>();
    }
  }

  /// Golden attention of scale * q over the first n_keys keys, in float64.
  DenseResult<double> attend(const MatrixD& q, Eigen::Index n_keys, std::span<const int> visible,
                             double scale, int /*kv_block*/) const {
    const MatrixD qs = q * scale;  // folded here in float64; golden then runs with scale 1
    const MatrixF qh = qs.cast<float>();
    const MatrixF ql = (qs - qh.cast<double>()).cast<float>();
    MatrixF qf(q.rows(), k_.cols());
    if (k_exact_) {
      qf << qh, ql;
    } else {
      qf << qh, qh, ql;  // Q_lo K_lo (about 2^-48 of the score) is left out
    }
    const attention::HeadGroup g{qf, k_.topRows(n_keys), v_.topRows(n_keys), visible, 1.0f};
    MatrixD o(q.rows(), v_.cols());
    DenseResult<double> r;
    r.lse.resize(q.rows());
    attention::golden_attention(
        g, o, std::span<double>(r.lse.data(), static_cast<std::size_t>(q.rows())));
    if (v_exact_) {
      r.out = std::move(o);
    } else {
      r.out = o.leftCols(d_v_) + o.rightCols(d_v_);  // P V_hi + P V_lo
    }
    return r;
  }

 private:
  int d_qk_, d_v_;
  bool k_exact_, v_exact_;
  MatrixF k_, v_;
};

}  // namespace amla::mla::detail
