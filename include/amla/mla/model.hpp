// amla/mla/model.hpp: an MLA layer's dimensions with its KV up-projection weights.
//
// The weights are the two halves of W_KVb, the matrix that decompresses the latent cache:
//   W_KVb1 [H, D_n, D_l]: k_n(head h) = W_KVb1[h] c_n   (the no-RoPE key of head h)
//   W_KVb2 [H, D_v, D_l]: v(head h)   = W_KVb2[h] c_n   (the value of head h)
// for a latent vector c_n of D_l columns (C_N in the TyphoonMLA paper). Row-major, last index
// fastest, so W_KVb1[h] is a contiguous [D_n, D_l] block. The model holds views over the caller's
// memory (nothing is copied); the caller keeps it alive while the model is in use.
//
// Element types: float or amla::bf16, as for the attention inputs. In the BF16-emulating mode of
// the formulations float weights are rounded to BF16 when read (the kernel's view); in the
// float64 mode they are taken as stored.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include "amla/config.hpp"
#include "amla/detail/checked.hpp"
#include "amla/detail/convert.hpp"
#include "amla/mla/presets.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/problem/inputs.hpp"
#include "amla/problem/validate.hpp"

namespace amla::mla {

/// Element types of MLA inputs: those of the attention data model, float or amla::bf16.
template <class T>
concept mla_element = decode_element<T>;

/// Dimensions plus views of W_KVb1 [H, D_n, D_l] and W_KVb2 [H, D_v, D_l].
template <mla_element T>
struct MlaModel {
  MlaDims dims;
  std::span<const T> w_kvb1;  ///< [H, D_n, D_l]
  std::span<const T> w_kvb2;  ///< [H, D_v, D_l]

  /// Element counts of the weights (checked: amla::invalid_argument when they overflow).
  std::size_t w_kvb1_elems() const {
    return static_cast<std::size_t>(amla::detail::checked_product(
        "amla::mla::MlaModel", "dims (W_KVb1 elements)", "W_KVb1 [H, D_n, D_l]", dims.heads,
        dims.d_nope, dims.d_latent));
  }
  std::size_t w_kvb2_elems() const {
    return static_cast<std::size_t>(
        amla::detail::checked_product("amla::mla::MlaModel", "dims (W_KVb2 elements)",
                                      "W_KVb2 [H, D_v, D_l]", dims.heads, dims.d_v, dims.d_latent));
  }
};

namespace detail {

/// Row-major dynamic matrix of scalar S (float in the bf16 mode, double in the float64 mode).
template <class S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Validates dims and weight sizes, attributing errors to `fn`.
template <mla_element T>
void validate_model(const char* fn, const MlaModel<T>& m) {
  validate_dims(fn, m.dims);
  amla::detail::check_span(fn, "model.w_kvb1", m.w_kvb1, m.w_kvb1_elems(), "[H, D_n, D_l]");
  amla::detail::check_span(fn, "model.w_kvb2", m.w_kvb2, m.w_kvb2_elems(), "[H, D_v, D_l]");
}

/// Element x as a value of scalar type S, rounded to BF16 first when `round` is set (for float
/// storage; bf16 storage is exact either way).
template <class S, class T>
S element_as(T x, bool round) {
  if constexpr (std::is_same_v<T, bf16>) {
    return static_cast<S>(x.to_float());
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<S>(round ? round_bf16(x) : x);
  } else {
    static_assert(std::is_same_v<T, double>);
    // One rounding, double -> BF16 (going through float could round twice).
    if (round) return static_cast<S>(amla::detail::bf16_from_double(x).to_float());
    return static_cast<S>(x);
  }
}

/// Copies a contiguous row-major [rows, cols] block starting at `src` into a matrix of scalar S.
template <class S, class T>
Mat<S> block_as(const T* src, Eigen::Index rows, Eigen::Index cols, bool round) {
  Mat<S> m(rows, cols);
  S* dst = m.data();
  const Eigen::Index n = rows * cols;
  for (Eigen::Index i = 0; i < n; ++i) dst[i] = element_as<S>(src[i], round);
  return m;
}

}  // namespace detail

/// Throws amla::invalid_argument unless the dims are valid and the weights have
/// H * D_n * D_l and H * D_v * D_l elements.
template <mla_element T>
void validate(const MlaModel<T>& model) {
  detail::validate_model("amla::mla::validate", model);
}

/// W_KVb1[h] ([D_n, D_l]) as a matrix of scalar S (float or double), rounded to BF16 when `round`.
template <class S, mla_element T>
detail::Mat<S> w_kvb1_head(const MlaModel<T>& m, int h, bool round = false) {
  AMLA_REQUIRE(h >= 0 && h < m.dims.heads, "h", h, "must lie in [0, dims.heads)");
  return detail::block_as<S>(
      m.w_kvb1.data() + static_cast<std::size_t>(h) * m.dims.d_nope * m.dims.d_latent,
      m.dims.d_nope, m.dims.d_latent, round);
}

/// W_KVb2[h] ([D_v, D_l]) as a matrix of scalar S (float or double), rounded to BF16 when `round`.
template <class S, mla_element T>
detail::Mat<S> w_kvb2_head(const MlaModel<T>& m, int h, bool round = false) {
  AMLA_REQUIRE(h >= 0 && h < m.dims.heads, "h", h, "must lie in [0, dims.heads)");
  return detail::block_as<S>(
      m.w_kvb2.data() + static_cast<std::size_t>(h) * m.dims.d_v * m.dims.d_latent, m.dims.d_v,
      m.dims.d_latent, round);
}

}  // namespace amla::mla
