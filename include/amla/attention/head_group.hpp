// amla/attention/head_group.hpp: the dense unit of work every recurrence computes.
//
// A decode kernel sees, for one request b and one KV head g, a block of query rows that share the
// same keys: the h_q / h_kv query heads of that KV head for each of the s_q query tokens. amla
// orders those rows token-major, row r = t * heads_per_group + j (token t, j-th head of the
// group), as FlashMLA does when it folds [s_q, h_q] into one M dimension. The paged-cache driver
// (attention/driver.hpp) gathers the group's keys and values into dense matrices and hands
// each recurrence a HeadGroup; the recurrences never see pages.
#pragma once

#include <Eigen/Core>
#include <limits>
#include <span>
#include <type_traits>

#include "amla/config.hpp"
#include "amla/numeric/gemm.hpp"
#include "amla/problem/conventions.hpp"

namespace amla::attention {

/// One head group's dense inputs in scalar S. Values are as the kernel sees them: in
/// BF16-emulating modes the caller passes BF16-exact floats (the driver guarantees it for bf16
/// storage). Every recurrence takes HeadGroup (float operands); the float64 golden also takes
/// HeadGroupD, for operands that are float64 values themselves (the MLA formulations' absorbed
/// queries and decompressed keys and values).
template <class S>
struct BasicHeadGroup {
  static_assert(std::is_same_v<S, float> || std::is_same_v<S, double>,
                "a head group holds float or double operands");
  using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  Eigen::Ref<const Matrix> q;  ///< [rows, d_qk]
  Eigen::Ref<const Matrix> k;  ///< [n_keys, d_qk]
  Eigen::Ref<const Matrix> v;  ///< [n_keys, d_v]
  /// [rows] or empty. Row r attends keys [0, visible[r]); empty means every row sees all n_keys.
  /// A causal mask aligned to the end gives token t of s_q the count n_keys - s_q + t + 1,
  /// clamped to [0, n_keys]. A row with 0 visible keys is fully masked.
  std::span<const int> visible;
  S scale;  ///< softmax scale, finite and > 0 (validated by the driver)

  Eigen::Index rows() const { return q.rows(); }
  Eigen::Index n_keys() const { return k.rows(); }
  Eigen::Index d_qk() const { return q.cols(); }
  Eigen::Index d_v() const { return v.cols(); }
  /// Keys row r may attend.
  Eigen::Index visible_keys(Eigen::Index r) const {
    return visible.empty() ? n_keys()
                           : static_cast<Eigen::Index>(visible[static_cast<std::size_t>(r)]);
  }
};

/// A head group of float operands: what every recurrence computes on.
using HeadGroup = BasicHeadGroup<float>;
/// A head group of float64 operands (golden_attention only).
using HeadGroupD = BasicHeadGroup<double>;

}  // namespace amla::attention
