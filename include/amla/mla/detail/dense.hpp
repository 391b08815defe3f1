// amla/mla/detail/dense.hpp: the dense attention calls the MLA formulations make, in one place.
//
// float64 mode: the golden recurrence on float64 operands. MLA's derived operands (the absorbed
// query Q_N W_KVb1, the decompressed K and V) are float64 values; attention::golden_attention
// takes them as a HeadGroupD, unrounded, and computes scores, softmax and P V in float64: the
// result is the float64 attention of the float64 operands.
//
// bf16 mode: the Base recurrence (attention/online_softmax.hpp, FlashAttention as a Cube/Vector
// kernel computes it) on BF16 operands, returning FP32 out and lse.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <span>
#include <type_traits>

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
template <class = void>
DenseResult<float> base_f32(const MatrixF& q, Eigen::Ref<const MatrixF> k,
                            Eigen::Ref<const MatrixF> v, std::span<const int> visible, float scale,
                            int kv_block) {
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
/// it. KeyValues<float> holds BF16 values for Base, KeyValues<double> float64 values for golden.
template <class S>
class KeyValues {
 public:
  KeyValues(Eigen::Index capacity, int d_qk, int d_v) : k_(capacity, d_qk), v_(capacity, d_v) {}

  /// Rows [r0, r0 + k.rows()) of K and V.
  template <class DK, class DV>
  void set_rows(Eigen::Index r0, const Eigen::MatrixBase<DK>& k, const Eigen::MatrixBase<DV>& v) {
    AMLA_ASSERT(r0 + k.rows() <= k_.rows() && k.rows() == v.rows());
    k_.middleRows(r0, k.rows()) = k;
    v_.middleRows(r0, v.rows()) = v;
  }

  /// Attention of q (unscaled) over the first n_keys keys: Base with KV blocks of `kv_block` keys
  /// (S = float), golden (S = double).
  DenseResult<S> attend(const Mat<S>& q, Eigen::Index n_keys, std::span<const int> visible,
                        double scale, int kv_block) const {
    if constexpr (std::is_same_v<S, float>) {
      return base_f32(q, k_.topRows(n_keys), v_.topRows(n_keys), visible, static_cast<float>(scale),
                      kv_block);
    } else {
      static_assert(std::is_same_v<S, double>);
      const attention::HeadGroupD g{q, k_.topRows(n_keys), v_.topRows(n_keys), visible, scale};
      DenseResult<double> r;
      r.out.resize(q.rows(), v_.cols());
      r.lse.resize(q.rows());
      attention::golden_attention(
          g, r.out, std::span<double>(r.lse.data(), static_cast<std::size_t>(q.rows())));
      return r;
    }
  }

 private:
  Mat<S> k_, v_;
};

}  // namespace amla::mla::detail
