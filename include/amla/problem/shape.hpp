// amla/problem/shape.hpp: the sizes of an MLA/GQA decode problem, its tensor layouts and its mask.
//
// This is the one description of a decode problem's shape in amla: the CPU recurrences, the MLA
// formulations, the simulator's workload and the CUDA backend all read it. It needs no Eigen and
// its index arithmetic is host-device, so device code includes it as it is.
//
// Tensors (row-major, last index fastest):
//   q            [batch, s_q, h_q, d_qk]
//   kv           [num_pages, page_size, h_kv, d_qk]   the paged K cache
//   v            [num_pages, page_size, h_kv, d_v]    a separate V cache, or absent: then V is the
//                first d_v columns of kv (MLA: d_qk 576 = 512 latent + 64 RoPE, d_v 512), as
//                FlashMLA and AMLA read it
//   block_table  [batch, max_pages_per_seq]  int32: page of the i-th page_size keys of sequence b
//   seqlens      [batch]                     int32: keys of sequence b
//   out          [batch, s_q, h_q, d_v]
//   lse          [batch, h_q, s_q]           natural log (problem/conventions.hpp)
// Key s of sequence b lives in page block_table[b, s / page_size], slot s % page_size. Only the
// first ceil(seqlens[b] / page_size) entries of a block_table row are read (and validated); the
// rest may hold anything, and cache pages and slots past a sequence's length are never read.
//
// Heads. Query head h uses KV head g = h / (h_q / h_kv). The h_q / h_kv query heads of one KV
// head, for all s_q tokens, form a head group of s_q * h_q / h_kv query rows that share the same
// keys; amla orders them token-major, row r = t * (h_q / h_kv) + j, as FlashMLA folds [s_q, h_q]
// into one M dimension.
//
// Mask. With causal = true the mask is aligned to the end: query token t of s_q sees keys
// [0, seqlen - s_q + t], i.e. seqlen - s_q + t + 1 keys clamped to [0, seqlen] (the last token
// sees the whole sequence). Without it every token sees all seqlen keys.
//
// Sizes. Element counts are computed with checked arithmetic: a shape whose tensors cannot be
// addressed (a product past PTRDIFF_MAX) is an amla::invalid_argument, never a wrapped count.
// The offset functions do no checks; they are valid for a shape that passed validation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "amla/config.hpp"
#include "amla/detail/checked.hpp"

namespace amla {

/// The sizes of a decode problem. Every field must be >= 1, h_kv must divide h_q, and a
/// sequence holds at most max_pages_per_seq * page_size keys (problem/validate.hpp).
struct DecodeShape {
  int batch = 1;
  int s_q = 1;                ///< query tokens per sequence (1, or more with MTP/speculation)
  int h_q = 128;              ///< query heads
  int h_kv = 1;               ///< KV heads (MLA: 1)
  int d_qk = 576;             ///< head dim of Q and K
  int d_v = 512;              ///< head dim of V and of the output
  int num_pages = 1;          ///< pages in the cache
  int page_size = 64;         ///< keys per page (FlashMLA 64, CANN 128, SGLang 1)
  int max_pages_per_seq = 1;  ///< columns of block_table

  AMLA_HOST_DEVICE constexpr int heads_per_group() const { return h_q / h_kv; }
  /// Query rows of one head group: s_q * h_q / h_kv.
  AMLA_HOST_DEVICE constexpr int rows_per_group() const { return s_q * heads_per_group(); }
  /// Keys a sequence can hold: max_pages_per_seq * page_size (fits in int64 for any int fields).
  AMLA_HOST_DEVICE constexpr std::int64_t max_seqlen() const {
    return static_cast<std::int64_t>(max_pages_per_seq) * page_size;
  }

  /// Element counts of the tensors (checked: throws amla::invalid_argument on overflow).
  std::size_t q_elems() const {
    return count("q", "[batch, s_q, h_q, d_qk]", batch, s_q, h_q, d_qk);
  }
  std::size_t kv_elems() const {
    return count("kv", "[num_pages, page_size, h_kv, d_qk]", num_pages, page_size, h_kv, d_qk);
  }
  std::size_t v_elems() const {
    return count("v", "[num_pages, page_size, h_kv, d_v]", num_pages, page_size, h_kv, d_v);
  }
  std::size_t block_table_elems() const {
    return count("block_table", "[batch, max_pages_per_seq]", batch, max_pages_per_seq, 1, 1);
  }
  std::size_t seqlens_elems() const { return count("seqlens", "[batch]", batch, 1, 1, 1); }
  std::size_t out_elems() const {
    return count("out", "[batch, s_q, h_q, d_v]", batch, s_q, h_q, d_v);
  }
  std::size_t lse_elems() const { return count("lse", "[batch, h_q, s_q]", batch, h_q, s_q, 1); }

  /// Offsets of elements (no bounds checks).
  AMLA_HOST_DEVICE constexpr std::size_t q_offset(int b, int t, int h) const {
    return ((static_cast<std::size_t>(b) * s_q + t) * h_q + h) * d_qk;
  }
  AMLA_HOST_DEVICE constexpr std::size_t out_offset(int b, int t, int h) const {
    return ((static_cast<std::size_t>(b) * s_q + t) * h_q + h) * d_v;
  }
  AMLA_HOST_DEVICE constexpr std::size_t lse_offset(int b, int t, int h) const {
    return (static_cast<std::size_t>(b) * h_q + h) * s_q + t;
  }
  /// Offset of (page, slot, kv head) in kv (times d_qk) or v (times d_v) before the head dim.
  AMLA_HOST_DEVICE constexpr std::size_t slot_index(int page, int slot, int g) const {
    return (static_cast<std::size_t>(page) * page_size + slot) * h_kv + g;
  }
  /// Offset of block_table[b][i].
  AMLA_HOST_DEVICE constexpr std::size_t table_offset(int b, int i) const {
    return static_cast<std::size_t>(b) * max_pages_per_seq + i;
  }
  /// Pages sequence of `seqlen` keys occupies: ceil(seqlen / page_size).
  AMLA_HOST_DEVICE constexpr int pages_for(int seqlen) const {
    return static_cast<int>((static_cast<std::int64_t>(seqlen) + page_size - 1) / page_size);
  }

 private:
  static std::size_t count(const char* tensor, const char* layout, int a, int b, int c, int d) {
    return static_cast<std::size_t>(
        detail::checked_product("amla::DecodeShape", tensor, layout, a, b, c, d));
  }
};

/// Visible key count of query token t (of s_q) in a sequence of seqlen keys (see the file
/// comment): seqlen, or with a causal mask clamp(seqlen - s_q + t + 1, 0, seqlen).
AMLA_HOST_DEVICE constexpr int visible_keys(int seqlen, int s_q, int t, bool causal) {
  if (!causal) return seqlen;
  const std::int64_t v = static_cast<std::int64_t>(seqlen) - s_q + t + 1;
  return v < 0 ? 0 : (v > seqlen ? seqlen : static_cast<int>(v));
}

}  // namespace amla
