// amla/problem/flashinfer_layout.hpp: FlashInfer's MLA paged cache (BatchMLAPagedAttentionWrapper)
// as a view, and its exact conversion to and from the FlashMLA layout of problem/shape.hpp.
//
// FlashInfer                                     FlashMLA layout
//   ckv [num_pages, page_size, d_ckv]              kv [num_pages, page_size, 1, d_ckv + d_kpe]:
//   kpe [num_pages, page_size, d_kpe]                row = concat(ckv row, kpe row), V is the
//                                                    first d_v = d_ckv channels (the latent)
//   kv_indptr [batch + 1], kv_indices [>= nnz]     block_table [batch, max_pages_per_seq]:
//     request b owns pages kv_indices[kv_indptr[b]    row b = its pages, then 0 (never read)
//     .. kv_indptr[b + 1])
//   last_page_len [batch] (or kv_len [batch])      seqlens [batch] = (pages_b - 1) * page_size
//                                                    + last_page_len[b] (0 without pages)
//   q_nope [N, h, d_ckv], q_pe [N, h, d_kpe]       q [batch, s_q, h, d_ckv + d_kpe]: the same
//                                                    concat (N = batch * s_q, token-major)
// Page ids are kept, so the caches are the same pages in both layouts. Every conversion is a copy
// of elements of any trivially copyable type (float, bf16, FP8 codes), hence exact.
//
// Rules (validate_flashinfer_cache): kv_indptr starts at 0, does not decrease and ends at most at
// kv_indices' size; the indices a request owns lie in [0, num_pages); a request with pages has
// last_page_len in [1, page_size], one without pages in [0, page_size] (it holds no key);
// given kv_len instead, a request's length must need exactly its pages:
// (pages_b - 1) * page_size < kv_len[b] <= pages_b * page_size (kv_len[b] = 0 without pages).
//
// FlashInferInputs is a decode problem stored this way (q_nope, q_pe and the cache), as the
// recurrences read it (problem/inputs.hpp's decode_source): a query row is q_nope's row then
// q_pe's, a cached token ckv's row then kpe's, V the ckv row, so each read equals the FlashMLA
// layout's read of the converted problem.
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/checked.hpp"
#include "amla/problem/inputs.hpp"
#include "amla/problem/shape.hpp"
#include "amla/problem/validate.hpp"

namespace amla {

namespace detail {

/// The element counts of the [rows, da], [rows, db] and [rows, da + db] views of
/// concat_channels and split_channels.
struct ChannelCounts {
  std::size_t a, b, both;
};

/// Checks the rows, da and db arguments of `fn` (each >= 1) and returns the views' element counts
/// (rows * channels, checked against overflow).
inline ChannelCounts channel_counts(const char* fn, int rows, int da, int db) {
  check_dims(fn, {{"rows", rows}, {"da", da}, {"db", db}});
  const auto n = [&](int d) {
    return static_cast<std::size_t>(checked_product(fn, "rows", "rows * channels", rows, d));
  };
  return {n(da), n(db), n(da + db)};
}

}  // namespace detail

/// out[r] = concat(a[r], b[r]) for rows r < rows: a [rows, da], b [rows, db], out [rows, da + db].
/// FlashInfer's ckv + kpe -> kv and q_nope + q_pe -> q.
template <layout_element T>
void concat_channels(std::span<const T> a, std::span<const T> b, std::span<T> out, int rows, int da,
                     int db) {
  const char* fn = "amla::concat_channels";
  const auto n = detail::channel_counts(fn, rows, da, db);
  detail::check_span(fn, "a", a, n.a, "[rows, da]");
  detail::check_span(fn, "b", b, n.b, "[rows, db]");
  detail::check_span(fn, "out", std::span<const T>(out), n.both, "[rows, da + db]");
  const auto ua = static_cast<std::size_t>(da), ub = static_cast<std::size_t>(db);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    std::copy_n(a.data() + r * ua, ua, out.data() + r * (ua + ub));
    std::copy_n(b.data() + r * ub, ub, out.data() + r * (ua + ub) + ua);
  }
}

/// The inverse of concat_channels: a[r] = in[r][0, da), b[r] = in[r][da, da + db).
template <layout_element T>
void split_channels(std::span<const T> in, std::span<T> a, std::span<T> b, int rows, int da,
                    int db) {
  const char* fn = "amla::split_channels";
  const auto n = detail::channel_counts(fn, rows, da, db);
  detail::check_span(fn, "in", in, n.both, "[rows, da + db]");
  detail::check_span(fn, "a", std::span<const T>(a), n.a, "[rows, da]");
  detail::check_span(fn, "b", std::span<const T>(b), n.b, "[rows, db]");
  const auto ua = static_cast<std::size_t>(da), ub = static_cast<std::size_t>(db);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    std::copy_n(in.data() + r * (ua + ub), ua, a.data() + r * ua);
    std::copy_n(in.data() + r * (ua + ub) + ua, ub, b.data() + r * ub);
  }
}

/// A FlashInfer MLA paged cache in the caller's memory (file comment). Exactly one of
/// last_page_len and kv_len is non-empty.
template <layout_element T>
struct FlashInferCache {
  int num_pages = 1;
  int page_size = 64;
  int d_ckv = 512;
  int d_kpe = 64;
  std::span<const T> ckv;                       ///< [num_pages, page_size, d_ckv]
  std::span<const T> kpe;                       ///< [num_pages, page_size, d_kpe]
  std::span<const std::int32_t> kv_indptr;      ///< [batch + 1]
  std::span<const std::int32_t> kv_indices;     ///< at least kv_indptr[batch] entries
  std::span<const std::int32_t> last_page_len;  ///< [batch], or empty with kv_len
  std::span<const std::int32_t> kv_len;         ///< [batch], or empty with last_page_len

  int batch() const { return static_cast<int>(kv_indptr.size()) - 1; }
  /// Pages request b owns.
  AMLA_HOST_DEVICE int pages(int b) const {
    return kv_indptr[static_cast<std::size_t>(b) + 1] - kv_indptr[static_cast<std::size_t>(b)];
  }
  /// Keys request b holds (for a validated view).
  AMLA_HOST_DEVICE int seqlen(int b) const {
    const auto i = static_cast<std::size_t>(b);
    if (!kv_len.empty()) return kv_len[i];
    const int n = pages(b);
    return n == 0 ? 0 : (n - 1) * page_size + last_page_len[i];
  }
  /// The page holding key `key` of request b.
  AMLA_HOST_DEVICE int page_of(int b, int key) const {
    return kv_indices[static_cast<std::size_t>(kv_indptr[static_cast<std::size_t>(b)]) +
                      static_cast<std::size_t>(key / page_size)];
  }
};

/// Validates a FlashInfer cache view (the rules of the file comment); returns the batch size.
template <layout_element T>
int validate_flashinfer_cache(const char* fn, const FlashInferCache<T>& c) {
  detail::check_dim(fn, "num_pages", c.num_pages);
  detail::check_dim(fn, "page_size", c.page_size);
  detail::check_dim(fn, "d_ckv", c.d_ckv);
  detail::check_dim(fn, "d_kpe", c.d_kpe);
  detail::check_int_product(fn, "num_pages * page_size", "cache rows", c.num_pages, c.page_size);
  detail::check_span(
      fn, "ckv", c.ckv,
      static_cast<std::size_t>(detail::checked_product(fn, "ckv", "[num_pages, page_size, d_ckv]",
                                                       c.num_pages, c.page_size, c.d_ckv)),
      "[num_pages, page_size, d_ckv]");
  detail::check_span(
      fn, "kpe", c.kpe,
      static_cast<std::size_t>(detail::checked_product(fn, "kpe", "[num_pages, page_size, d_kpe]",
                                                       c.num_pages, c.page_size, c.d_kpe)),
      "[num_pages, page_size, d_kpe]");
  if (c.kv_indptr.size() < 2 || c.kv_indptr.size() - 1 > static_cast<std::size_t>(INT_MAX)) {
    detail::throw_invalid(fn, "kv_indptr", detail::span_text(c.kv_indptr),
                          "must hold batch + 1 >= 2 entries");
  }
  const int batch = c.batch();
  const std::size_t nb = static_cast<std::size_t>(batch);
  if (c.kv_indptr[0] != 0) {
    detail::throw_invalid(fn, "kv_indptr", "kv_indptr[0] = " + std::to_string(c.kv_indptr[0]),
                          "must be 0");
  }
  for (std::size_t b = 0; b < nb; ++b) {
    if (c.kv_indptr[b + 1] < c.kv_indptr[b]) {
      detail::throw_invalid(
          fn, "kv_indptr",
          "kv_indptr[" + std::to_string(b + 1) + "] = " + std::to_string(c.kv_indptr[b + 1]),
          "must not be below kv_indptr[" + std::to_string(b) +
              "] = " + std::to_string(c.kv_indptr[b]));
    }
  }
  if (static_cast<std::size_t>(c.kv_indptr[nb]) > c.kv_indices.size()) {
    detail::throw_invalid(
        fn, "kv_indptr",
        "kv_indptr[" + std::to_string(nb) + "] = " + std::to_string(c.kv_indptr[nb]),
        "must be at most the size of kv_indices = " + std::to_string(c.kv_indices.size()));
  }
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.kv_indptr[nb]); ++i) {
    if (c.kv_indices[i] < 0 || c.kv_indices[i] >= c.num_pages) {
      detail::throw_invalid(
          fn, "kv_indices",
          "kv_indices[" + std::to_string(i) + "] = " + std::to_string(c.kv_indices[i]),
          "must lie in [0, num_pages = " + std::to_string(c.num_pages) + ")");
    }
  }
  if (c.last_page_len.empty() == c.kv_len.empty()) {
    detail::throw_invalid(
        fn, "last_page_len",
        c.kv_len.empty() ? "empty (and kv_len empty)" : "given (and kv_len given)",
        "exactly one of last_page_len and kv_len must be given");
  }
  const bool by_last = !c.last_page_len.empty();
  const char* arg = by_last ? "last_page_len" : "kv_len";
  detail::check_span(fn, arg, by_last ? c.last_page_len : c.kv_len, nb, "[batch]");
  for (std::size_t b = 0; b < nb; ++b) {
    const std::int64_t pages = c.pages(static_cast<int>(b));
    const std::int64_t v = by_last ? c.last_page_len[b] : c.kv_len[b];
    std::int64_t lo = 0, hi = 0;
    if (by_last) {
      lo = pages > 0 ? 1 : 0;
      hi = c.page_size;
    } else {
      lo = pages > 0 ? (pages - 1) * c.page_size + 1 : 0;
      hi = pages * c.page_size;
    }
    if (v < lo || v > hi) {
      detail::throw_invalid(
          fn, arg, std::string(arg) + "[" + std::to_string(b) + "] = " + std::to_string(v),
          "request " + std::to_string(b) + " owns " + std::to_string(pages) + " pages of " +
              std::to_string(c.page_size) + " keys, so it must lie in [" + std::to_string(lo) +
              ", " + std::to_string(hi) + "]");
    }
  }
  return batch;
}

/// The most pages any request of a validated view owns (at least 1): the block_table width
/// flashinfer_to_flashmla needs.
template <layout_element T>
int flashinfer_max_pages(const FlashInferCache<T>& c) {
  int m = 1;
  for (int b = 0; b < c.batch(); ++b) m = std::max(m, c.pages(b));
  return m;
}

/// The FlashMLA layout of a FlashInfer cache: kv [num_pages, page_size, 1, d_ckv + d_kpe],
/// block_table [batch, max_pages_per_seq] (each row its request's pages, then 0), seqlens
/// [batch]. max_pages_per_seq must be at least flashinfer_max_pages(c).
template <layout_element T>
void flashinfer_to_flashmla(const FlashInferCache<T>& c, std::span<T> kv,
                            std::span<std::int32_t> block_table, std::span<std::int32_t> seqlens,
                            int max_pages_per_seq) {
  const char* fn = "amla::flashinfer_to_flashmla";
  const int batch = validate_flashinfer_cache(fn, c);
  const int need = flashinfer_max_pages(c);
  if (max_pages_per_seq < need) {
    detail::throw_invalid(
        fn, "max_pages_per_seq", std::to_string(max_pages_per_seq),
        "must be at least the most pages a request owns = " + std::to_string(need));
  }
  const std::size_t cols = static_cast<std::size_t>(max_pages_per_seq);
  detail::check_span(
      fn, "block_table", std::span<const std::int32_t>(block_table),
      static_cast<std::size_t>(detail::checked_product(
          fn, "block_table", "[batch, max_pages_per_seq]", batch, max_pages_per_seq)),
      "[batch, max_pages_per_seq]");
  detail::check_span(fn, "seqlens", std::span<const std::int32_t>(seqlens),
                     static_cast<std::size_t>(batch), "[batch]");
  concat_channels(c.ckv, c.kpe, kv, c.num_pages * c.page_size, c.d_ckv, c.d_kpe);
  for (int b = 0; b < batch; ++b) {
    const auto row = static_cast<std::size_t>(b) * cols;
    const int pages = c.pages(b);
    std::fill_n(block_table.data() + row, cols, 0);
    std::copy_n(c.kv_indices.data() + c.kv_indptr[static_cast<std::size_t>(b)],
                static_cast<std::size_t>(pages), block_table.data() + row);
    seqlens[static_cast<std::size_t>(b)] = c.seqlen(b);
  }
}

/// Index entries the FlashInfer layout of a FlashMLA problem needs: the pages of every sequence.
inline std::size_t flashinfer_index_count(const DecodeShape& s,
                                          std::span<const std::int32_t> seqlens) {
  std::size_t n = 0;
  for (const std::int32_t len : seqlens) n += static_cast<std::size_t>(s.pages_for(len));
  return n;
}

/// The FlashInfer layout of a FlashMLA cache (h_kv = 1, d_ckv = s.d_v, d_kpe = s.d_qk - s.d_v):
/// ckv, kpe, kv_indptr [batch + 1], kv_indices [flashinfer_index_count], last_page_len
/// [batch] (0 for an empty sequence). The problem's tables are validated as a decode's are.
template <layout_element T>
void flashmla_to_flashinfer(const DecodeShape& s, std::span<const T> kv,
                            std::span<const std::int32_t> block_table,
                            std::span<const std::int32_t> seqlens, std::span<T> ckv,
                            std::span<T> kpe, std::span<std::int32_t> kv_indptr,
                            std::span<std::int32_t> kv_indices,
                            std::span<std::int32_t> last_page_len) {
  const char* fn = "amla::flashmla_to_flashinfer";
  validate_shape(fn, s, true);
  if (s.h_kv != 1) {
    detail::throw_invalid(fn, "shape.h_kv", std::to_string(s.h_kv),
                          "must be 1: FlashInfer's MLA cache has one KV head");
  }
  if (s.d_v >= s.d_qk) {
    detail::throw_invalid(fn, "shape.d_v", std::to_string(s.d_v),
                          "must be below shape.d_qk = " + std::to_string(s.d_qk) +
                              " (d_ckv = d_v, d_kpe = d_qk - d_v >= 1)");
  }
  detail::check_span(fn, "kv", kv, s.kv_elems(), "[num_pages, page_size, 1, d_qk]");
  detail::check_span(fn, "block_table", block_table, s.block_table_elems(),
                     "[batch, max_pages_per_seq]");
  detail::check_span(fn, "seqlens", seqlens, s.seqlens_elems(), "[batch]");
  validate_tables(fn, s, block_table, seqlens);
  detail::check_int_product(fn, "shape.num_pages * shape.page_size", "cache rows", s.num_pages,
                            s.page_size);
  const std::size_t nb = static_cast<std::size_t>(s.batch);
  detail::check_span(fn, "kv_indptr", std::span<const std::int32_t>(kv_indptr), nb + 1,
                     "[batch + 1]");
  const std::size_t nnz = flashinfer_index_count(s, seqlens);
  if (nnz > static_cast<std::size_t>(INT32_MAX)) {
    detail::throw_invalid(fn, "kv_indices", std::to_string(nnz) + " entries",
                          "kv_indptr is int32: at most " + std::to_string(INT32_MAX) + " pages");
  }
  detail::check_span(fn, "kv_indices", std::span<const std::int32_t>(kv_indices), nnz,
                     "the pages of every sequence (flashinfer_index_count)");
  detail::check_span(fn, "last_page_len", std::span<const std::int32_t>(last_page_len), nb,
                     "[batch]");
  split_channels(kv, ckv, kpe, s.num_pages * s.page_size, s.d_v, s.d_qk - s.d_v);
  std::size_t at = 0;
  kv_indptr[0] = 0;
  for (int b = 0; b < s.batch; ++b) {
    const std::int32_t len = seqlens[static_cast<std::size_t>(b)];
    const int pages = s.pages_for(len);
    for (int i = 0; i < pages; ++i) kv_indices[at++] = block_table[s.table_offset(b, i)];
    kv_indptr[static_cast<std::size_t>(b) + 1] = static_cast<std::int32_t>(at);
    last_page_len[static_cast<std::size_t>(b)] = pages == 0 ? 0 : len - (pages - 1) * s.page_size;
  }
}

/// A decode problem in FlashInfer's layout, read by the attention driver (file comment). shape is
/// the dense problem it stands for: batch = cache.batch(), s_q and h_q of the queries, h_kv 1,
/// d_qk = d_ckv + d_kpe, d_v = d_ckv, the cache's num_pages and page_size, and max_pages_per_seq
/// at least the most pages a request owns (flashinfer_max_pages).
template <decode_element T>
struct FlashInferInputs {
  DecodeShape shape;
  std::span<const T> q_nope;  ///< [batch * s_q, h_q, d_ckv], token-major
  std::span<const T> q_pe;    ///< [batch * s_q, h_q, d_kpe]
  FlashInferCache<T> cache;

  static constexpr value_format query_format = format_of<T>;
  static constexpr value_format cache_format = format_of<T>;

  bool v_in_kv() const { return true; }
  int seqlen(int b) const { return cache.seqlen(b); }
  int page_of(int b, int key) const { return cache.page_of(b, key); }
  void read_query(int b, int t, int h, float* dst) const {
    const auto row = (static_cast<std::size_t>(b) * static_cast<std::size_t>(shape.s_q) +
                      static_cast<std::size_t>(t)) *
                         static_cast<std::size_t>(shape.h_q) +
                     static_cast<std::size_t>(h);
    const auto dc = static_cast<std::size_t>(cache.d_ckv),
               dp = static_cast<std::size_t>(cache.d_kpe);
    detail::widen_n(q_nope.data() + row * dc, cache.d_ckv, dst);
    detail::widen_n(q_pe.data() + row * dp, cache.d_kpe, dst + cache.d_ckv);
  }
  void read_key(int page, int slot, int /*g*/, float* dst) const {
    const auto token = static_cast<std::size_t>(page) * static_cast<std::size_t>(cache.page_size) +
                       static_cast<std::size_t>(slot);
    detail::widen_n(cache.ckv.data() + token * static_cast<std::size_t>(cache.d_ckv), cache.d_ckv,
                    dst);
    detail::widen_n(cache.kpe.data() + token * static_cast<std::size_t>(cache.d_kpe), cache.d_kpe,
                    dst + cache.d_ckv);
  }
  /// V is the ckv row: never called by the driver (v_in_kv()); reads it all the same.
  void read_value(int page, int slot, int /*g*/, float* dst) const {
    const auto token = static_cast<std::size_t>(page) * static_cast<std::size_t>(cache.page_size) +
                       static_cast<std::size_t>(slot);
    detail::widen_n(cache.ckv.data() + token * static_cast<std::size_t>(cache.d_ckv), cache.d_ckv,
                    dst);
  }
};

/// Validates a decode problem in FlashInfer's layout: the cache (validate_flashinfer_cache), the
/// shape and its agreement with the cache, the query spans and the options. Returns the softmax
/// scale.
template <decode_element T>
float validate_decode(const char* fn, const FlashInferInputs<T>& in, const DecodeOptions& options) {
  const DecodeShape& s = in.shape;
  validate_shape(fn, s, true);
  const int batch = validate_flashinfer_cache(fn, in.cache);
  const auto same = [&](const char* arg, int value, const std::string& rule, int want) {
    if (value != want) {
      detail::throw_invalid(fn, arg, std::to_string(value),
                            "must equal " + rule + " = " + std::to_string(want));
    }
  };
  same("shape.batch", s.batch, "the requests of cache.kv_indptr", batch);
  same("shape.h_kv", s.h_kv, "the KV heads of a FlashInfer MLA cache", 1);
  same("shape.num_pages", s.num_pages, "cache.num_pages", in.cache.num_pages);
  same("shape.page_size", s.page_size, "cache.page_size", in.cache.page_size);
  same("shape.d_v", s.d_v, "cache.d_ckv", in.cache.d_ckv);
  same("shape.d_qk", s.d_qk, "cache.d_ckv + cache.d_kpe", in.cache.d_ckv + in.cache.d_kpe);
  const int need = flashinfer_max_pages(in.cache);
  if (s.max_pages_per_seq < need) {
    detail::throw_invalid(
        fn, "shape.max_pages_per_seq", std::to_string(s.max_pages_per_seq),
        "must be at least the most pages a request owns = " + std::to_string(need));
  }
  const auto rows = [&](int d) {
    return static_cast<std::size_t>(
        detail::checked_product(fn, "q", "[batch * s_q, h_q, d]", s.batch, s.s_q, s.h_q, d));
  };
  detail::check_span(fn, "q_nope", in.q_nope, rows(in.cache.d_ckv), "[batch * s_q, h_q, d_ckv]");
  detail::check_span(fn, "q_pe", in.q_pe, rows(in.cache.d_kpe), "[batch * s_q, h_q, d_kpe]");
  return validate_options(fn, options, s);
}

}  // namespace amla
