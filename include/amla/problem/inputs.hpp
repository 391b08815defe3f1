// amla/problem/inputs.hpp: read-only views of a decode problem's inputs in the caller's memory
// (layouts in problem/shape.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "amla/numeric/bf16.hpp"
#include "amla/problem/shape.hpp"

namespace amla {

/// Element types of the inputs: float, or amla::bf16 as a kernel stores them.
template <class T>
concept decode_element = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

/// Element types a cache layout conversion copies (problem/flashinfer_layout.hpp,
/// problem/nz_layout.hpp): any trivially copyable element of 1, 2, 4 or 8 bytes (FP8 codes, BF16,
/// FP16, float, ...).
template <class T>
concept layout_element = std::is_trivially_copyable_v<T> &&
    (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

/// Read-only views of a decode problem's inputs.
template <decode_element T>
struct DecodeInputs {
  DecodeShape shape;
  std::span<const T> q;
  std::span<const T> kv;
  std::span<const T> v;  ///< empty: V is the first d_v columns of kv
  std::span<const std::int32_t> block_table;
  std::span<const std::int32_t> seqlens;

  /// Whether V is read from the K cache (MLA) rather than a separate V cache.
  bool v_in_kv() const { return v.empty(); }
};

}  // namespace amla
