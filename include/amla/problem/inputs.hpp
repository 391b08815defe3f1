// amla/problem/inputs.hpp: read-only views of a decode problem's inputs in the caller's memory
// (layouts in problem/shape.hpp), and what every input layout offers the attention driver.
//
// A decode problem's keys and values may be stored in several layouts: the dense FlashMLA cache
// (DecodeInputs, here), FlashMLA's and the scaled FP8 caches (problem/fp8_cache.hpp), FlashInfer's
// split cache (problem/flashinfer_layout.hpp) and Ascend's NZ layout (problem/nz_layout.hpp). Each
// view reads one query row or one cached token as float values, exactly as its kernel
// dequantizes or copies them, through the same functions its converters use; the driver
// (attention/driver.hpp) reads every layout through that one interface (decode_source below) and
// never sees bytes. Each view has its validate_decode overload (problem/validate.hpp for
// DecodeInputs, the layout's header for the others).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "amla/config.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/fp16.hpp"
#include "amla/problem/shape.hpp"
#include "amla/problem/sparse.hpp"

namespace amla {

/// Element types of the inputs: float, or amla::bf16 / amla::fp16 as a kernel stores them.
template <class T>
concept decode_element =
    std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, fp16>;

/// Element types a cache layout conversion copies (problem/flashinfer_layout.hpp,
/// problem/nz_layout.hpp): any trivially copyable element of 1, 2, 4 or 8 bytes (FP8 codes, BF16,
/// FP16, float, ...).
template <class T>
concept layout_element = std::is_trivially_copyable_v<T> &&
    (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

/// The number format of the values a view reads: what a recurrence must still round them to.
AMLA_ENUMERATORS_BEGIN
enum class value_format : std::uint8_t {
  fp32,  ///< any float (a float cache, or FP8 values times a float scale)
  bf16,  ///< BF16 values (a bf16 cache, FlashMLA's dequantized FP8)
  fp16,  ///< FP16 values
};
AMLA_ENUMERATORS_END

/// The format of the values an element type holds.
template <decode_element T>
inline constexpr value_format format_of = std::is_same_v<T, bf16>   ? value_format::bf16
                                          : std::is_same_v<T, fp16> ? value_format::fp16
                                                                    : value_format::fp32;

namespace detail {

/// An input element widened to float (exact for every decode_element).
template <decode_element T>
AMLA_HOST_DEVICE constexpr float widen(T x) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return x.to_float();
  }
}

/// n elements widened to float.
template <decode_element T>
AMLA_HOST_DEVICE void widen_n(const T* src, int n, float* dst) noexcept {
  for (int i = 0; i < n; ++i) dst[i] = widen(src[i]);
}

/// The page of key `key` of sequence b through a block table in the FlashMLA layout.
inline int table_page(const DecodeShape& s, std::span<const std::int32_t> block_table, int b,
                      int key) {
  return block_table[s.table_offset(b, key / s.page_size)];
}

/// q[b, t, h, :] of queries in the FlashMLA layout widened to d_qk floats.
template <decode_element T>
void read_flashmla_query(const DecodeShape& s, std::span<const T> q, int b, int t, int h,
                         float* dst) {
  widen_n(q.data() + s.q_offset(b, t, h), s.d_qk, dst);
}

}  // namespace detail

/// What the attention driver reads of a decode problem stored in any layout:
///   in.shape                           the DecodeShape of the problem (the sizes it stands for)
///   in.seqlen(b)                       keys of sequence b
///   in.page_of(b, key)                 the page holding key `key` of sequence b (slot: key %
///                                      shape.page_size)
///   in.read_query(b, t, h, dst)        q[b, t, h, :] as d_qk floats
///   in.read_key(page, slot, g, dst)    K of that cached token at KV head g as d_qk floats
///   in.read_value(page, slot, g, dst)  its V as d_v floats (only called when !in.v_in_kv())
///   in.v_in_kv()                       whether V is the first d_v channels of K (MLA)
///   I::query_format, I::cache_format   the value_format of what the reads return
/// A view is valid once validate_decode(fn, in, options) has passed; the reads do no checks.
template <class I>
concept decode_source = requires(const I& in, int i, float* dst) {
  { in.shape } -> std::convertible_to<DecodeShape>;
  { in.seqlen(i) } -> std::convertible_to<int>;
  { in.page_of(i, i) } -> std::convertible_to<int>;
  in.read_query(i, i, i, dst);
  in.read_key(i, i, i, dst);
  in.read_value(i, i, i, dst);
  { in.v_in_kv() } -> std::convertible_to<bool>;
  { I::query_format } -> std::convertible_to<value_format>;
  { I::cache_format } -> std::convertible_to<value_format>;
};

/// Read-only views of a decode problem's inputs in the dense FlashMLA layout.
template <decode_element T>
struct DecodeInputs {
  DecodeShape shape;
  std::span<const T> q;
  std::span<const T> kv;
  std::span<const T> v;  ///< empty: V is the first d_v columns of kv
  std::span<const std::int32_t> block_table;
  std::span<const std::int32_t> seqlens;
  /// Sparse top-k index lists (problem/sparse.hpp); disabled by default (a dense problem).
  SparseTopk sparse{};
  /// [h_q] attention sink logits, or empty: head h's sink joins the softmax denominator of its
  /// rows (problem/conventions.hpp, "Attention sinks").
  std::span<const float> sink{};

  static constexpr value_format query_format = format_of<T>;
  static constexpr value_format cache_format = format_of<T>;

  /// Whether V is read from the K cache (MLA) rather than a separate V cache.
  bool v_in_kv() const { return v.empty(); }

  int seqlen(int b) const { return seqlens[static_cast<std::size_t>(b)]; }
  int page_of(int b, int key) const { return detail::table_page(shape, block_table, b, key); }
  void read_query(int b, int t, int h, float* dst) const {
    detail::read_flashmla_query(shape, q, b, t, h, dst);
  }
  void read_key(int page, int slot, int g, float* dst) const {
    detail::widen_n(kv.data() + shape.slot_index(page, slot, g) * shape.d_qk, shape.d_qk, dst);
  }
  void read_value(int page, int slot, int g, float* dst) const {
    detail::widen_n(v.data() + shape.slot_index(page, slot, g) * shape.d_v, shape.d_v, dst);
  }
};

}  // namespace amla
