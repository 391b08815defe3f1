// amla/mla/presets.hpp: the dimensions that define an MLA layer, and the two published presets.
//
// Notation follows the TyphoonMLA paper (Table 1): H query heads; each head's query and key split
// into a no-RoPE part of D_n columns and a RoPE part of D_r columns (D_qk = D_n + D_r); values of
// D_v columns per head; the KV cache compressed to a latent vector of D_l columns (the "KV LoRA
// rank") plus the D_r RoPE columns, which are shared by every head.
//
// The two ways of computing the same layer see different attention shapes:
//   naive:  per-head MHA, d_qk = D_n + D_r (192), d_v = D_v (128), H KV heads;
//   absorb: one latent KV head shared by all H query heads, d_qk = D_l + D_r (576), d_v = D_l
//   (512).
// Both use the softmax scale 1/sqrt(D_n + D_r): absorbing W_KVb1 into the query changes the
// length of the vectors the dot product runs over but not the value of any score.
#pragma once

#include <climits>
#include <cstdint>
#include <string>

#include "amla/config.hpp"
#include "amla/detail/checked.hpp"

namespace amla::mla {

/// Dimensions of one MLA attention layer. Plain data; `validate` checks it.
struct MlaDims {
  int heads = 0;     ///< H: query heads
  int d_nope = 0;    ///< D_n: no-RoPE part of each query/key head
  int d_rope = 0;    ///< D_r: RoPE part (one copy in the latent cache, shared by all heads)
  int d_v = 0;       ///< D_v: value head dimension
  int d_latent = 0;  ///< D_l: KV LoRA rank, the width of the compressed cache C_N

  /// D_qk = D_n + D_r: the naive (decompressed) query/key head dimension.
  constexpr int d_qk() const { return d_nope + d_rope; }
  /// D_l + D_r: the query/key width of the absorb formulation ([C_N, C_R]).
  constexpr int absorb_d_qk() const { return d_latent + d_rope; }
  /// D_l: the value width of the absorb formulation (values are C_N itself).
  constexpr int absorb_d_v() const { return d_latent; }

  constexpr bool operator==(const MlaDims&) const = default;
};

namespace presets {

/// DeepSeek-V3 (and R1): 128 heads, D_n 128, D_r 64, D_v 128, D_l 512 (DeepSeek-V3 technical
/// report; the TyphoonMLA paper's Table 1 column).
inline constexpr MlaDims deepseek_v3{128, 128, 64, 128, 512};

/// Kimi K2: the DeepSeek-V3 attention with half the heads (64), as the TyphoonMLA paper uses it.
inline constexpr MlaDims kimi_k2{64, 128, 64, 128, 512};

}  // namespace presets

namespace detail {

/// Throws amla::invalid_argument, attributed to `function`, unless every dimension of `dims` is at
/// least 1, D_n + D_r and D_l + D_r fit an int and the weights' element counts are addressable.
/// No other relation between them is required: any positive sizes define a layer.
inline void validate_dims(const char* function, const MlaDims& dims) {
  const auto check = [function](int value, const char* name) {
    if (value < 1) {
      amla::detail::throw_invalid(function, name, std::to_string(value), "must be >= 1");
    }
  };
  check(dims.heads, "dims.heads");
  check(dims.d_nope, "dims.d_nope");
  check(dims.d_rope, "dims.d_rope");
  check(dims.d_v, "dims.d_v");
  check(dims.d_latent, "dims.d_latent");
  // The derived widths are ints, and the weights' element counts must be addressable.
  amla::detail::checked_sum(function, "dims.d_nope + dims.d_rope", "D_qk", dims.d_nope, dims.d_rope,
                            INT_MAX);
  amla::detail::checked_sum(function, "dims.d_latent + dims.d_rope", "D_l + D_r", dims.d_latent,
                            dims.d_rope, INT_MAX);
  amla::detail::checked_product(function, "dims (W_KVb1 elements)", "W_KVb1 [H, D_n, D_l]",
                                dims.heads, dims.d_nope, dims.d_latent);
  amla::detail::checked_product(function, "dims (W_KVb2 elements)", "W_KVb2 [H, D_v, D_l]",
                                dims.heads, dims.d_v, dims.d_latent);
}

}  // namespace detail

/// Throws amla::invalid_argument naming the first dimension that is not >= 1.
inline void validate(const MlaDims& dims) {
  detail::validate_dims("amla::mla::validate", dims);
}

}  // namespace amla::mla
