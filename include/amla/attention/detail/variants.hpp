// amla/attention/detail/variants.hpp: internals shared by attention/seesaw.hpp and
// attention/transposed.hpp (option checks, operands as the matrix unit sees them, FlashMLA's
// base-2 softmax scale). Not for direct inclusion.
#pragma once

#include <Eigen/Core>
#include <numbers>
#include <string>

#include "amla/attention/driver.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::attention::detail {

/// Checks a variant recurrence's precision mode and block size; `prefix` names the options
/// argument in the message ("options" for a dense core, "seesaw" / "transposed" for a decode).
inline void validate_variant_options(const char* fn, const std::string& prefix, precision mode,
                                     int block_size) {
  if (mode != precision::bf16 && mode != precision::float32) {
    amla::detail::throw_invalid(fn, (prefix + ".mode").c_str(),
                                std::to_string(static_cast<int>(mode)),
                                "must be precision::bf16 or precision::float32");
  }
  if (block_size < 1) {
    amla::detail::throw_invalid(fn, (prefix + ".block_size").c_str(), std::to_string(block_size),
                                "must be >= 1");
  }
}

/// scale * log2(e) rounded once to float, as FlashMLA's host code computes scale_softmax_log2.
inline float scale_log2(float scale) {
  return static_cast<float>(static_cast<double>(scale) * std::numbers::log2e);
}

/// Q, and the first n keys of K and V, as the matrix unit sees them: rounded copies when `round`
/// (bf16 mode on operands the caller did not pre-round), the caller's memory otherwise.
class VariantOperands {
 public:
  VariantOperands(const HeadGroup& g, Eigen::Index n, bool round)
      : q_own_(round ? rounded_bf16(g.q) : MatrixF()),
        k_own_(round ? rounded_bf16(g.k.topRows(n)) : MatrixF()),
        v_own_(round ? rounded_bf16(g.v.topRows(n)) : MatrixF()),
        q(round ? Eigen::Ref<const MatrixF>(q_own_) : g.q),
        k(round ? Eigen::Ref<const MatrixF>(k_own_) : g.k.topRows(n)),
        v(round ? Eigen::Ref<const MatrixF>(v_own_) : g.v.topRows(n)) {}
  VariantOperands(const VariantOperands&) = delete;
  VariantOperands& operator=(const VariantOperands&) = delete;

 private:
  MatrixF q_own_, k_own_, v_own_;

 public:
  const Eigen::Ref<const MatrixF> q;  ///< [rows, d_qk]
  const Eigen::Ref<const MatrixF> k;  ///< [n, d_qk]
  const Eigen::Ref<const MatrixF> v;  ///< [n, d_v]
};

}  // namespace amla::attention::detail
