// amla/problem/workload.hpp: the summary of a decode problem that cost models and the simulator
// read: its sizes, mask and per-sequence lengths, without the values.
//
// A Workload is built from the very problem a reference computes (Workload::of), so a varlen
// batch is simulated and costed as it is, or made up for a sweep (Workload::uniform: every
// sequence the same length). Counts follow the problem's mask: with causal = true token t of a
// sequence of L keys attends visible_keys(L, s_q, t, true) keys, so causal work is counted as
// the kernel does it, not as s_q * L.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "amla/config.hpp"
#include "amla/problem/inputs.hpp"
#include "amla/problem/options.hpp"
#include "amla/problem/shape.hpp"
#include "amla/problem/validate.hpp"

namespace amla {

/// Sizes, mask and per-sequence lengths of a decode problem.
struct Workload {
  int s_q = 1;          ///< query tokens per sequence
  int h_q = 128;        ///< query heads
  int h_kv = 1;         ///< KV heads (MLA: 1)
  int d_qk = 576;       ///< head dim of Q and K
  int d_v = 512;        ///< head dim of V and of the output
  bool v_in_kv = true;  ///< V is the first d_v columns of the K cache (MLA)
  bool causal = false;
  std::vector<int> seqlens{4096};  ///< keys of each sequence; size() is the batch

  int batch() const { return static_cast<int>(seqlens.size()); }

  /// A batch of `batch` sequences of s_k keys each.
  static Workload uniform(int batch, int s_q, int h_q, int s_k, int d_qk = 576, int d_v = 512,
                          int h_kv = 1) {
    AMLA_REQUIRE(batch >= 1, "batch", batch, "must be >= 1");
    Workload w;
    w.s_q = s_q;
    w.h_q = h_q;
    w.h_kv = h_kv;
    w.d_qk = d_qk;
    w.d_v = d_v;
    w.seqlens = detail::allocate<int>("amla::Workload::uniform", "batch",
                                      static_cast<std::size_t>(batch), s_k);
    w.validate("amla::Workload::uniform");
    return w;
  }

  /// The workload of a problem (validated as the recurrences validate it).
  template <decode_element T>
  static Workload of(const DecodeInputs<T>& in, const DecodeOptions& options = {}) {
    validate_decode("amla::Workload::of", in, options);
    Workload w;
    w.s_q = in.shape.s_q;
    w.h_q = in.shape.h_q;
    w.h_kv = in.shape.h_kv;
    w.d_qk = in.shape.d_qk;
    w.d_v = in.shape.d_v;
    w.v_in_kv = in.v_in_kv();
    w.causal = options.causal;
    w.seqlens.assign(in.seqlens.begin(), in.seqlens.end());
    return w;
  }

  /// Throws amla::invalid_argument naming `fn` and the field at fault.
  void validate(const char* fn) const {
    detail::check_dim(fn, "workload.s_q", s_q);
    detail::check_dim(fn, "workload.h_q", h_q);
    detail::check_dim(fn, "workload.h_kv", h_kv);
    detail::check_dim(fn, "workload.d_qk", d_qk);
    detail::check_dim(fn, "workload.d_v", d_v);
    if (seqlens.empty()) {
      detail::throw_invalid(fn, "workload.seqlens", "0 sequences", "must hold at least one");
    }
    if (h_q % h_kv != 0) {
      detail::throw_invalid(fn, "workload.h_kv", std::to_string(h_kv),
                            "must divide workload.h_q = " + std::to_string(h_q));
    }
    if (v_in_kv && d_v > d_qk) {
      detail::throw_invalid(fn, "workload.d_v", std::to_string(d_v),
                            "must be <= workload.d_qk = " + std::to_string(d_qk) +
                                " when V is read from the K cache");
    }
    detail::check_int_product(fn, "workload.s_q * workload.h_q", "query rows per sequence", s_q,
                              h_q);
    for (std::size_t b = 0; b < seqlens.size(); ++b) {
      if (seqlens[b] < 0) {
        detail::throw_invalid(fn, "workload.seqlens",
                              "seqlens[" + std::to_string(b) + "] = " + std::to_string(seqlens[b]),
                              "must be >= 0");
      }
    }
    // Every count below (keys over the batch, attended pairs: at most s_q * seqlen a sequence)
    // must fit an int64.
    std::int64_t pairs = 0;
    for (const int len : seqlens) {
      pairs = detail::checked_sum(
          fn, "workload.seqlens", "query-key pairs over the batch (s_q * seqlen summed)", pairs,
          detail::checked_product(fn, "workload.s_q * seqlen", "pairs of one sequence", s_q, len),
          detail::max_elements);
    }
  }

  int max_seqlen() const { return *std::max_element(seqlens.begin(), seqlens.end()); }
  bool is_uniform() const {
    return std::all_of(seqlens.begin(), seqlens.end(), [&](int l) { return l == seqlens[0]; });
  }
  /// Keys stored over the batch: the sum of seqlens (validate() bounds it).
  std::int64_t total_keys() const {
    return std::accumulate(seqlens.begin(), seqlens.end(), std::int64_t{0});
  }
  /// (query token, key) pairs attended over the batch, per query head: sum over sequences and
  /// tokens of the visible key count (validate() bounds it; with a causal mask the sum over
  /// tokens of one sequence is an arithmetic series, so this takes O(batch) whatever s_q is).
  std::int64_t attended_pairs() const {
    std::int64_t n = 0;
    for (const int len : seqlens) n += attended_pairs_of(len);
    return n;
  }
  /// The pairs one sequence of `len` keys attends: s_q * len, or with the causal mask the sum of
  /// visible_keys(len, s_q, t, true) over the tokens t (0 for the first s_q - len tokens when
  /// s_q > len, then 1, 2, ..., up to len).
  std::int64_t attended_pairs_of(int len) const {
    const std::int64_t l = len, sq = s_q;
    if (!causal) return sq * l;
    // Token t sees clamp(l - sq + t + 1, 0, l): the last min(sq, l) tokens see l - min + 1 .. l.
    const std::int64_t seeing = std::min(sq, l);
    return seeing * (2 * l - seeing + 1) / 2;
  }
  /// Floating-point operations of Q K^T and P V, 2 per multiply-add (AMLA Section 2.4's count).
  double flops() const {
    return 2.0 * static_cast<double>(h_q) * static_cast<double>(attended_pairs()) *
           static_cast<double>(d_qk + d_v);
  }
  /// Bytes of the KV cache read once, at `bytes_per_element` (2 for BF16).
  double kv_bytes(double bytes_per_element) const {
    const double per_key = static_cast<double>(h_kv) * (d_qk + (v_in_kv ? 0 : d_v));
    return static_cast<double>(total_keys()) * per_key * bytes_per_element;
  }
};

}  // namespace amla
