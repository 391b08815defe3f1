// amla/problem/sparse.hpp: sparse top-k decode (DeepSeek-V3.2's DSA): each query token attends
// only the keys an indexer chose for it, listed per token.
//
// Tensors (row-major, last index fastest):
//   indices      [batch, s_q, topk]  int32: positions of keys in sequence b (the same positions
//                                    as the dense problem's: key s lives in page
//                                    block_table[b, s / page_size], slot s % page_size), or -1
//   topk_length  [batch, s_q]        int32, optional: only the first topk_length[b, t] entries of
//                                    indices[b, t, :] count; the rest are never read
// Every query head of token t (all KV heads) attends the keys of indices[b, t, :].
//
// What a row attends. The counted entries of indices[b, t, :] that are not -1, in their order:
//   * -1 marks an invalid entry: it contributes nothing (no weight, nothing read);
//   * a duplicate counts as often as it is listed: a key listed twice has twice its weight in the
//     softmax sum and in P V, as a kernel that gathers each listed key computes it;
//   * every other value must be a key the token may see: in [0, visible_keys(seqlens[b], s_q, t,
//     causal)) (problem/shape.hpp), the whole sequence without a causal mask. A position past
//     it (or below -1) is an amla::invalid_argument naming the entry: amla reads a position
//     through the block table, and a position past the sequence has no page there (FlashMLA's
//     kernels take indices into the flat cache, block * page_size + slot, and its prefill
//     reference treats one past the sequence as invalid; amla asks the caller to write -1);
//   * topk may exceed the sequence length: the surplus entries are -1 or duplicates;
//   * a token with no valid counted entry (all -1, or topk_length 0) is an empty row: out = 0,
//     lse = -inf (problem/conventions.hpp, rule 2), also with a sink.
// Keys no counted entry lists are never read, whatever they hold (rule 1 of the contract, with
// "the keys it sees" the listed ones). Page sizes need not be powers of two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "amla/config.hpp"
#include "amla/problem/shape.hpp"

namespace amla {

/// The sparse top-k index lists of a decode problem (see the file comment). With topk = 0 and
/// indices empty the problem is dense.
struct SparseTopk {
  int topk = 0;                               ///< entries per query token; 0: dense problem
  std::span<const std::int32_t> indices;      ///< [batch, s_q, topk]
  std::span<const std::int32_t> topk_length;  ///< [batch, s_q] or empty (all topk entries count)

  /// Whether the problem is sparse.
  bool enabled() const { return topk != 0 || !indices.empty(); }

  /// Offset of indices[b][t][0].
  std::size_t offset(const DecodeShape& s, int b, int t) const {
    return (static_cast<std::size_t>(b) * s.s_q + t) * static_cast<std::size_t>(topk);
  }
  /// Entries of indices[b][t] that count: topk_length[b][t], or topk without topk_length.
  int counted(const DecodeShape& s, int b, int t) const {
    return topk_length.empty()
               ? topk
               : topk_length[static_cast<std::size_t>(b) * s.s_q + static_cast<std::size_t>(t)];
  }
};

/// The index of an invalid entry.
inline constexpr std::int32_t invalid_index = -1;

}  // namespace amla
