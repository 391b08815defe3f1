// amla/problem/nz_layout.hpp: Ascend's NZ ("fractal") layout of a paged KV cache as a view, and
// its exact conversion to and from the FlashMLA (ND) layout of problem/shape.hpp.
//
// The Cube unit of an Ascend NPU reads matrices as 16 x 32-byte fractals, so CANN's paged
// attention keeps the cache of each page and head with the channels split into columns of
// c0 = 32 bytes' worth of elements, each column holding all the page's tokens:
//   ND  kv [num_pages, page_size, h_kv, d]
//   NZ  kv [num_pages, h_kv, d / c0, page_size, c0]
//   element (page p, slot s, head g, channel j) sits at
//     ((((p * h_kv + g) * (d / c0) + j / c0) * page_size + s) * c0 + j % c0
// c0 is 16 for 2-byte elements (FP16, BF16), 32 for 1-byte ones (INT8, FP8) and 8 for FP32
// (nz_c0); d must be a multiple of it (MLA's 512, 64 and 576 are, for every c0). The conversions
// copy elements, so they are exact for any element type. NzInputs is a decode problem whose caches
// are in this layout, as the recurrences read it (problem/inputs.hpp's decode_source).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "amla/config.hpp"
#include "amla/detail/checked.hpp"
#include "amla/problem/inputs.hpp"
#include "amla/problem/shape.hpp"
#include "amla/problem/validate.hpp"

namespace amla {

/// Elements of one 32-byte fractal row: 32 / element bytes (16 for BF16, 32 for INT8 and FP8).
AMLA_HOST_DEVICE constexpr int nz_c0(std::size_t element_bytes) {
  return static_cast<int>(32 / element_bytes);
}

/// The sizes of an NZ cache and its index arithmetic (file comment). No checks: validate_nz_layout.
struct NzLayout {
  int num_pages = 1;
  int page_size = 128;  ///< CANN's block_size
  int h_kv = 1;
  int d = 576;
  int c0 = 16;

  /// Offset of element (page, slot, head g, channel j).
  AMLA_HOST_DEVICE constexpr std::size_t offset(int page, int slot, int g, int j) const {
    const std::size_t columns = static_cast<std::size_t>(d / c0);
    const std::size_t column =
        (static_cast<std::size_t>(page) * h_kv + g) * columns + static_cast<std::size_t>(j / c0);
    return (column * page_size + slot) * c0 + static_cast<std::size_t>(j % c0);
  }
  /// Elements between channel j and channel j + c0 of one token: a whole column.
  AMLA_HOST_DEVICE constexpr std::size_t column_stride() const {
    return static_cast<std::size_t>(page_size) * c0;
  }
  /// Elements of the cache (the same as its ND form).
  std::size_t elements(const char* fn) const {
    return static_cast<std::size_t>(detail::checked_product(
        fn, "layout", "[num_pages, h_kv, d / c0, page_size, c0]", num_pages, h_kv, d, page_size));
  }
};

/// An NZ cache in the caller's memory.
template <layout_element T>
struct NzCache {
  NzLayout layout;
  std::span<const T> data;  ///< [num_pages, h_kv, d / c0, page_size, c0]

  AMLA_HOST_DEVICE const T& at(int page, int slot, int g, int j) const {
    return data[layout.offset(page, slot, g, j)];
  }
};

/// Validates an NZ layout: every size >= 1, c0 dividing d; returns its element count.
inline std::size_t validate_nz_layout(const char* fn, const NzLayout& l) {
  detail::check_dims(fn, {{"layout.num_pages", l.num_pages},
                          {"layout.page_size", l.page_size},
                          {"layout.h_kv", l.h_kv},
                          {"layout.d", l.d},
                          {"layout.c0", l.c0}});
  if (l.d % l.c0 != 0) {
    detail::throw_invalid(fn, "layout.d", std::to_string(l.d),
                          "must be a multiple of layout.c0 = " + std::to_string(l.c0) +
                              " (NZ columns hold c0 channels)");
  }
  return l.elements(fn);
}

/// The NZ form of the ND cache nd [num_pages, page_size, h_kv, d].
template <layout_element T>
void nd_to_nz(const NzLayout& l, std::span<const T> nd, std::span<T> nz) {
  const char* fn = "amla::nd_to_nz";
  const std::size_t n = validate_nz_layout(fn, l);
  detail::check_span(fn, "nd", nd, n, "[num_pages, page_size, h_kv, d]");
  detail::check_span(fn, "nz", std::span<const T>(nz), n,
                     "[num_pages, h_kv, d / c0, page_size, c0]");
  std::size_t i = 0;
  for (int p = 0; p < l.num_pages; ++p) {
    for (int s = 0; s < l.page_size; ++s) {
      for (int g = 0; g < l.h_kv; ++g) {
        for (int j = 0; j < l.d; ++j) nz[l.offset(p, s, g, j)] = nd[i++];
      }
    }
  }
}

/// The ND form [num_pages, page_size, h_kv, d] of an NZ cache.
template <layout_element T>
void nz_to_nd(const NzCache<T>& c, std::span<T> nd) {
  const char* fn = "amla::nz_to_nd";
  const NzLayout& l = c.layout;
  const std::size_t n = validate_nz_layout(fn, l);
  detail::check_span(fn, "data", c.data, n, "[num_pages, h_kv, d / c0, page_size, c0]");
  detail::check_span(fn, "nd", std::span<const T>(nd), n, "[num_pages, page_size, h_kv, d]");
  std::size_t i = 0;
  for (int p = 0; p < l.num_pages; ++p) {
    for (int s = 0; s < l.page_size; ++s) {
      for (int g = 0; g < l.h_kv; ++g) {
        for (int j = 0; j < l.d; ++j) nd[i++] = c.at(p, s, g, j);
      }
    }
  }
}

/// The NZ layout of a FlashMLA cache of shape s (the K cache: d = d_qk) with c0 elements per
/// fractal row (nz_c0 of the element size by default).
inline NzLayout nz_layout_of(const DecodeShape& s, int c0) {
  return {s.num_pages, s.page_size, s.h_kv, s.d_qk, c0};
}

/// The d channels of (page, slot, head g) of an NZ cache widened to float: one run of c0
/// contiguous elements per fractal column.
template <decode_element T>
AMLA_HOST_DEVICE void read_nz_token(const NzCache<T>& c, int page, int slot, int g, float* dst) {
  const NzLayout& l = c.layout;
  for (int j0 = 0; j0 < l.d; j0 += l.c0) detail::widen_n(&c.at(page, slot, g, j0), l.c0, dst + j0);
}

/// A decode problem whose K cache (and optionally a separate V cache) is stored in Ascend's NZ
/// layout, read token by token through read_nz_token; the queries and tables are in the FlashMLA
/// layout of problem/shape.hpp. shape is the dense problem the caches stand for: kv's num_pages,
/// page_size, h_kv and d = d_qk, and a separate V cache's d = d_v.
template <decode_element T>
struct NzInputs {
  DecodeShape shape;
  std::span<const T> q;  ///< [batch, s_q, h_q, d_qk]
  NzCache<T> kv;         ///< [num_pages, h_kv, d_qk / c0, page_size, c0]
  NzCache<T> v;          ///< no data: V is the first d_v channels of kv; else d = d_v
  std::span<const std::int32_t> block_table;
  std::span<const std::int32_t> seqlens;

  static constexpr value_format query_format = format_of<T>;
  static constexpr value_format cache_format = format_of<T>;

  bool v_in_kv() const { return v.data.empty(); }
  int seqlen(int b) const { return seqlens[static_cast<std::size_t>(b)]; }
  int page_of(int b, int key) const { return detail::table_page(shape, block_table, b, key); }
  void read_query(int b, int t, int h, float* dst) const {
    detail::read_flashmla_query(shape, q, b, t, h, dst);
  }
  void read_key(int page, int slot, int g, float* dst) const {
    read_nz_token(kv, page, slot, g, dst);
  }
  void read_value(int page, int slot, int g, float* dst) const {
    read_nz_token(v, page, slot, g, dst);
  }
};

/// Validates a decode problem read from NZ caches: each layout (validate_nz_layout) and its
/// agreement with the shape, the spans, the tables and the options. Returns the softmax scale.
template <decode_element T>
float validate_decode(const char* fn, const NzInputs<T>& in, const DecodeOptions& options) {
  const DecodeShape& s = in.shape;
  validate_shape(fn, s, in.v_in_kv());
  const auto check_cache = [&](const NzCache<T>& c, const std::string& name, const char* d_arg,
                               int d) {
    const std::size_t n = validate_nz_layout(fn, c.layout);
    const auto field = [&name](const char* f) { return name + ".layout." + f; };
    const auto same = [&](const char* arg, int value, const char* f, int cache_value) {
      if (value != cache_value) {
        detail::throw_invalid(fn, arg, std::to_string(value),
                              "must equal " + field(f) + " = " + std::to_string(cache_value));
      }
    };
    same("shape.num_pages", s.num_pages, "num_pages", c.layout.num_pages);
    same("shape.page_size", s.page_size, "page_size", c.layout.page_size);
    same("shape.h_kv", s.h_kv, "h_kv", c.layout.h_kv);
    same(d_arg, d, "d", c.layout.d);
    detail::check_span(fn, (name + ".data").c_str(), c.data, n,
                       "[num_pages, h_kv, d / c0, page_size, c0]");
  };
  check_cache(in.kv, "kv", "shape.d_qk", s.d_qk);
  if (!in.v_in_kv()) check_cache(in.v, "v", "shape.d_v", s.d_v);
  detail::check_span(fn, "q", in.q, s.q_elems(), "[batch, s_q, h_q, d_qk]");
  detail::check_span(fn, "block_table", in.block_table, s.block_table_elems(),
                     "[batch, max_pages_per_seq]");
  detail::check_span(fn, "seqlens", in.seqlens, s.seqlens_elems(), "[batch]");
  validate_tables(fn, s, in.block_table, in.seqlens);
  return validate_options(fn, options, s);
}

}  // namespace amla
