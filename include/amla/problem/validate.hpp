// amla/problem/validate.hpp: the one validator of a decode problem. Every entry point (the CPU
// recurrences, the MLA formulations, the CUDA backend on host copies of its tables) calls these
// functions, so a rule is written, and reported, once.
//
// Each check throws amla::invalid_argument whose message names the entry point `fn`, the argument,
// its value and the rule. Nothing is written to any output before validation has passed.
#pragma once

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>

#include "amla/config.hpp"
#include "amla/detail/checked.hpp"
#include "amla/problem/inputs.hpp"
#include "amla/problem/options.hpp"
#include "amla/problem/outputs.hpp"
#include "amla/problem/shape.hpp"
#include "amla/problem/sparse.hpp"

namespace amla {

namespace detail {

template <class T>
std::string span_text(std::span<T> s) {
  if (s.data() == nullptr && !s.empty())
    return "null pointer with size " + std::to_string(s.size());
  return "span of " + std::to_string(s.size()) + " elements";
}

/// Checks that span `arg` holds exactly `expected` elements of the given layout.
template <class T>
void check_span(const char* fn, const char* arg, std::span<T> s, std::size_t expected,
                const std::string& layout) {
  if (s.data() == nullptr && expected != 0) {
    throw_invalid(fn, arg, "null pointer",
                  "must point to " + layout + " = " + std::to_string(expected) + " elements");
  }
  if (s.size() != expected) {
    throw_invalid(fn, arg, span_text(s),
                  "must hold " + layout + " = " + std::to_string(expected) + " elements");
  }
}

inline void check_dim(const char* fn, const char* name, int value) {
  if (value < 1) throw_invalid(fn, name, std::to_string(value), "must be >= 1");
}

/// check_dim on each (name, value) pair, in order.
inline void check_dims(const char* fn,
                       std::initializer_list<std::pair<const char*, int>> named_values) {
  for (const auto& [name, value] : named_values) check_dim(fn, name, value);
}

/// Checks that a product of shape fields fits an int (row and group counts index with int).
inline void check_int_product(const char* fn, const char* arg, const char* what, int a, int b) {
  if (mul_or_overflow(a, b, INT_MAX) < 0) {
    throw_invalid(fn, arg, std::to_string(a) + " * " + std::to_string(b),
                  std::string(what) + " must be at most " + std::to_string(INT_MAX));
  }
}

}  // namespace detail

/// Validates a shape alone: every dim >= 1, h_kv divides h_q, d_v <= d_qk when V is read from
/// the kv cache, and every count derived from it representable (head-group rows and the number
/// of groups in int, tensor sizes in std::ptrdiff_t).
inline void validate_shape(const char* fn, const DecodeShape& s, bool v_in_kv) {
  detail::check_dim(fn, "shape.batch", s.batch);
  detail::check_dim(fn, "shape.s_q", s.s_q);
  detail::check_dim(fn, "shape.h_q", s.h_q);
  detail::check_dim(fn, "shape.h_kv", s.h_kv);
  detail::check_dim(fn, "shape.d_qk", s.d_qk);
  detail::check_dim(fn, "shape.d_v", s.d_v);
  detail::check_dim(fn, "shape.num_pages", s.num_pages);
  detail::check_dim(fn, "shape.page_size", s.page_size);
  detail::check_dim(fn, "shape.max_pages_per_seq", s.max_pages_per_seq);
  if (s.h_q % s.h_kv != 0) {
    detail::throw_invalid(fn, "shape.h_kv", std::to_string(s.h_kv),
                          "must divide shape.h_q = " + std::to_string(s.h_q));
  }
  if (v_in_kv && s.d_v > s.d_qk) {
    detail::throw_invalid(fn, "shape.d_v", std::to_string(s.d_v),
                          "must be <= shape.d_qk = " + std::to_string(s.d_qk) +
                              " when V is read from the kv cache (v is empty)");
  }
  detail::check_int_product(fn, "shape.s_q * shape.h_q", "query rows per sequence", s.s_q, s.h_q);
  detail::check_int_product(fn, "shape.batch * shape.h_kv", "head groups", s.batch, s.h_kv);
  detail::check_int_product(fn, "shape.batch * shape.h_q", "query heads over the batch", s.batch,
                            s.h_q);
  detail::checked_product(fn, "shape (q elements)", "q [batch, s_q, h_q, d_qk]", s.batch, s.s_q,
                          s.h_q, s.d_qk);
  detail::checked_product(fn, "shape (out elements)", "out [batch, s_q, h_q, d_v]", s.batch, s.s_q,
                          s.h_q, s.d_v);
  detail::checked_product(fn, "shape (kv elements)", "kv [num_pages, page_size, h_kv, d_qk]",
                          s.num_pages, s.page_size, s.h_kv, s.d_qk);
  if (!v_in_kv) {
    detail::checked_product(fn, "shape (v elements)", "v [num_pages, page_size, h_kv, d_v]",
                            s.num_pages, s.page_size, s.h_kv, s.d_v);
  }
  detail::checked_product(fn, "shape (block_table elements)",
                          "block_table [batch, max_pages_per_seq]", s.batch, s.max_pages_per_seq);
}

/// Validates the page tables of a paged problem: every seqlens[b] in [0, max_pages_per_seq *
/// page_size], and the first ceil(seqlens[b] / page_size) entries of block_table row b in
/// [0, num_pages). Entries past a sequence's pages are never read and may hold anything. The
/// spans must already have their sizes checked (validate_decode does).
inline void validate_tables(const char* fn, const DecodeShape& s,
                            std::span<const std::int32_t> block_table,
                            std::span<const std::int32_t> seqlens) {
  for (int b = 0; b < s.batch; ++b) {
    const std::int32_t len = seqlens[static_cast<std::size_t>(b)];
    if (len < 0 || len > s.max_seqlen()) {
      detail::throw_invalid(
          fn, "seqlens", "seqlens[" + std::to_string(b) + "] = " + std::to_string(len),
          "must lie in [0, max_pages_per_seq * page_size = " + std::to_string(s.max_seqlen()) +
              "]");
    }
    const int pages = s.pages_for(len);
    for (int i = 0; i < pages; ++i) {
      const std::int32_t page = block_table[s.table_offset(b, i)];
      if (page < 0 || page >= s.num_pages) {
        detail::throw_invalid(fn, "block_table",
                              "block_table[" + std::to_string(b) + "][" + std::to_string(i) +
                                  "] = " + std::to_string(page),
                              "a page holding keys of sequence " + std::to_string(b) + " (seqlen " +
                                  std::to_string(len) + ") must lie in [0, num_pages = " +
                                  std::to_string(s.num_pages) + ")");
      }
    }
  }
}

/// Validates the sparse top-k index lists of a problem (problem/sparse.hpp): topk >= 0 (>= 1 when
/// indices are given), indices [batch, s_q, topk], topk_length empty or [batch, s_q] with entries
/// in [0, topk], and every counted entry -1 or a key its token may see, in
/// [0, visible_keys(seqlens[b], s_q, t, causal)). seqlens must already be validated.
inline void validate_sparse(const char* fn, const DecodeShape& s,
                            std::span<const std::int32_t> seqlens, bool causal,
                            const SparseTopk& sp) {
  if (!sp.enabled()) return;
  if (sp.topk < 1) {
    detail::throw_invalid(fn, "sparse.topk", std::to_string(sp.topk),
                          "must be >= 1 when sparse.indices is given (0 with no indices: dense)");
  }
  const std::int64_t lists =
      detail::checked_product(fn, "sparse.indices", "[batch, s_q]", s.batch, s.s_q);
  const std::int64_t entries =
      detail::checked_product(fn, "sparse.indices", "[batch, s_q, topk]", s.batch, s.s_q, sp.topk);
  detail::check_span(fn, "sparse.indices", sp.indices, static_cast<std::size_t>(entries),
                     "[batch, s_q, topk]");
  if (!sp.topk_length.empty()) {
    detail::check_span(fn, "sparse.topk_length", sp.topk_length, static_cast<std::size_t>(lists),
                       "[batch, s_q] (or empty)");
  }
  for (int b = 0; b < s.batch; ++b) {
    const std::int32_t len = seqlens[static_cast<std::size_t>(b)];
    for (int t = 0; t < s.s_q; ++t) {
      const std::string at = "[" + std::to_string(b) + "][" + std::to_string(t) + "]";
      const int n = sp.counted(s, b, t);
      if (n < 0 || n > sp.topk) {
        detail::throw_invalid(fn, "sparse.topk_length",
                              "topk_length" + at + " = " + std::to_string(n),
                              "must lie in [0, topk = " + std::to_string(sp.topk) + "]");
      }
      const int visible = visible_keys(len, s.s_q, t, causal);
      const std::int32_t* list = sp.indices.data() + sp.offset(s, b, t);
      for (int i = 0; i < n; ++i) {
        const std::int32_t key = list[i];
        if (key == invalid_index || (key >= 0 && key < visible)) continue;
        detail::throw_invalid(
            fn, "sparse.indices",
            "indices" + at + "[" + std::to_string(i) + "] = " + std::to_string(key),
            "must be -1 (invalid) or a key query token " + std::to_string(t) + " of sequence " +
                std::to_string(b) + " may see, in [0, " + std::to_string(visible) + ") (seqlen " +
                std::to_string(len) + (causal ? ", causal" : "") + ")");
      }
    }
  }
}

/// Validates the options against a shape; returns the softmax scale to use.
inline float validate_options(const char* fn, const DecodeOptions& options, const DecodeShape& s) {
  if (options.softmax_scale) {
    detail::require_finite_positive(fn, "options.softmax_scale", *options.softmax_scale);
  }
  if (options.threads < 0) {
    detail::throw_invalid(fn, "options.threads", std::to_string(options.threads),
                          "must be >= 0 (0 = hardware concurrency)");
  }
  if (options.rows_per_task < 0) {
    detail::throw_invalid(fn, "options.rows_per_task", std::to_string(options.rows_per_task),
                          "must be >= 0 (0 = whole head group)");
  }
  if (options.round_output_fp16 && options.round_output_bf16) {
    detail::throw_invalid(fn, "options.round_output_fp16", "true",
                          "must be false when options.round_output_bf16 is set (one output cast)");
  }
  return resolved_scale(options, s);
}

/// Validates a decode problem: shape, the size of every span, the page tables, the sparse index
/// lists, the sink and the options. Returns the softmax scale to use.
template <decode_element T>
float validate_decode(const char* fn, const DecodeInputs<T>& in, const DecodeOptions& options) {
  const DecodeShape& s = in.shape;
  validate_shape(fn, s, in.v_in_kv());
  detail::check_span(fn, "q", in.q, s.q_elems(), "[batch, s_q, h_q, d_qk]");
  detail::check_span(fn, "kv", in.kv, s.kv_elems(), "[num_pages, page_size, h_kv, d_qk]");
  if (!in.v_in_kv()) {
    detail::check_span(fn, "v", in.v, s.v_elems(), "[num_pages, page_size, h_kv, d_v] (or empty)");
  }
  detail::check_span(fn, "block_table", in.block_table, s.block_table_elems(),
                     "[batch, max_pages_per_seq]");
  detail::check_span(fn, "seqlens", in.seqlens, s.seqlens_elems(), "[batch]");
  validate_tables(fn, s, in.block_table, in.seqlens);
  validate_sparse(fn, s, in.seqlens, options.causal, in.sparse);
  if (!in.sink.empty()) {
    detail::check_span(fn, "sink", in.sink, static_cast<std::size_t>(s.h_q), "[h_q] (or empty)");
  }
  return validate_options(fn, options, s);
}

/// Validates the outputs against a shape (out [batch, s_q, h_q, d_v]; lse [batch, h_q, s_q] or
/// empty).
template <class OutT, class LseT>
void validate_outputs(const char* fn, const DecodeShape& s, const DecodeOutputs<OutT, LseT>& out) {
  detail::check_span(fn, "out", out.out, s.out_elems(), "[batch, s_q, h_q, d_v]");
  if (!out.lse.empty()) detail::check_span(fn, "lse", out.lse, s.lse_elems(), "[batch, h_q, s_q]");
}

}  // namespace amla
