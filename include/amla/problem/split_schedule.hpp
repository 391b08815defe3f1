// amla/problem/split_schedule.hpp: how a split-KV decode kernel shares a batch's work among the
// SMs of a GPU (the tile schedule), and a replay of a schedule that reports its balance.
//
// ---- Work ---------------------------------------------------------------------------------------
// A request b of seqlen L_b is n_b = ceil(L_b / block_keys) KV blocks. Its query rows are cut into
// `row_blocks` CTAs' worth (the CUDA Hopper kernel: ceil(s_q h_q / 64) blocks of 64 rows, h_kv 1);
// every row block of a request walks the same KV blocks, so a schedule decides only how each
// request's blocks are cut into pieces, contiguous block ranges. The CUDA kernel runs one CTA per
// (row block, piece), the pieces numbered request by request (piece_at), and the GPU's block
// scheduler hands the CTAs to SMs in that order as SMs free up; replay_split_schedule plays that
// assignment on the CPU and reports which SM gets which (request, blocks) and the balance. A
// request cut into several pieces writes one normalised partial output and lse per piece (a slot)
// and a combine merges them (attention/split_kv.hpp is the CPU mirror); a request in one piece
// writes its output directly.
//
// ---- Balanced schedule (num_splits = 0) ---------------------------------------------------------
// After FlashMLA's get_mla_metadata, sized for CTAs that run one piece each (FlashMLA's are
// persistent and run a part of the axis each). Every piece costs, besides its blocks, a fixed
// overhead of `overhead_blocks` blocks (loading Q, filling the pipeline, writing the result;
// FlashMLA counts 5). Lay the requests end to end on a cost axis: request b occupies [C_b, C_b+1)
// with C_b+1 - C_b = overhead + n_b, its overhead first, then its blocks (block j at C_b + overhead
// + j). Cut the axis into `parts` intervals of W = ceil(C_B / parts): a request's blocks are cut
// where an interval ends, one piece per interval they meet (an empty request is one empty piece),
// so every piece is at most W units and the long requests take the most pieces. Each inner
// boundary cuts at most one request, so there are at most batch + parts - 1 pieces, and
// parts = max(1, sms / row_blocks - batch + 1) keeps them to one wave of CTAs while the batch is
// smaller than a wave: a batch that fills the GPU is not cut at all, a single request is cut into
// a wave of equal pieces. Unlike FlashMLA's walk, a continued piece is not charged a second
// overhead: the cuts are then closed-form, so a CTA finds its piece by a binary search and a GPU
// computes the plan with prefix sums (backend/cuda/detail/split_plan.cuh).
//
// ---- Fixed splits (num_splits = k >= 1) ---------------------------------------------------------
// Every request in k equal pieces of ceil(n_b / k) blocks (some possibly empty), one part each:
// parts = batch k; k = 1 is no split-KV. Slots b k + s when k > 1.
//
// The functions on SplitScheduleView are host-device: the CUDA kernel reads its pieces with the
// same code the CPU replay runs (backend/cuda/detail/split_plan.cuh computes the view's arrays on
// the GPU).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "amla/config.hpp"

namespace amla {

/// The knobs of a split-KV tile schedule.
struct SplitScheduleOptions {
  int sms = 132;            ///< CTAs that run at once (one per SM for the Hopper kernel)
  int block_keys = 64;      ///< keys per KV block, the kernel's tile
  int overhead_blocks = 5;  ///< a piece's fixed cost in blocks (balanced schedule; >= 1)
  int num_splits = 0;       ///< 0: balanced; k >= 1: every request in k equal pieces
};

/// One request's share of a part: KV blocks [block_begin, block_end) of `request`, written to
/// partial slot `slot`, or directly to the output when slot is -1 (the request is in one piece).
struct SplitPiece {
  int request = 0;
  int block_begin = 0;
  int block_end = 0;
  int slot = -1;
};

/// A schedule as a kernel reads it: scalars plus two per-request prefix arrays (balanced
/// schedule; the fixed one needs only the seqlens). Non-owning: host vectors (SplitSchedule) or
/// device memory (the CUDA plan).
struct SplitScheduleView {
  int batch = 0;
  int num_parts = 0;   ///< parts that hold work (a launch may have more; they find none)
  int num_splits = 0;  ///< 0: balanced, else k
  int overhead_blocks = 5;
  int block_keys = 64;
  std::int64_t part_cost = 1;                  ///< W (balanced)
  const std::int32_t* seqlens = nullptr;       ///< [batch]
  const std::int64_t* cost_prefix = nullptr;   ///< [batch + 1]: C_b (balanced)
  const std::int32_t* slot_prefix = nullptr;   ///< [batch + 1]: first slot of each split request
  const std::int32_t* piece_prefix = nullptr;  ///< [batch + 1]: first piece of each request
};

namespace split_schedule {

/// KV blocks of a sequence of `seqlen` keys.
AMLA_HOST_DEVICE constexpr int blocks_of(int seqlen, int block_keys) {
  return static_cast<int>((static_cast<std::int64_t>(seqlen) + block_keys - 1) / block_keys);
}

/// The part that holds request b's first block (its start when it has none), and its last one.
/// Balanced schedule; c0 = C_b, c1 = C_b+1.
AMLA_HOST_DEVICE constexpr int first_part(std::int64_t c0, std::int64_t c1, int overhead,
                                          std::int64_t w) {
  return static_cast<int>((c1 - c0 > overhead ? c0 + overhead : c0) / w);
}
AMLA_HOST_DEVICE constexpr int last_part(std::int64_t c0, std::int64_t c1, int overhead,
                                         std::int64_t w) {
  return static_cast<int>((c1 - c0 > overhead ? c1 - 1 : c0) / w);
}
/// Partial slots request b needs: its part count when it spans several parts, else 0.
AMLA_HOST_DEVICE constexpr int slots_of(std::int64_t c0, std::int64_t c1, int overhead,
                                        std::int64_t w) {
  const int n = last_part(c0, c1, overhead, w) - first_part(c0, c1, overhead, w) + 1;
  return n > 1 ? n : 0;
}

/// Pieces of request b: its part count (1 for a request with no block). Balanced schedule.
AMLA_HOST_DEVICE constexpr int pieces_of(std::int64_t c0, std::int64_t c1, int overhead,
                                         std::int64_t w) {
  return last_part(c0, c1, overhead, w) - first_part(c0, c1, overhead, w) + 1;
}

/// Request b's piece in part `part` (first_part(b) <= part <= last_part(b)). Balanced schedule.
AMLA_HOST_DEVICE inline SplitPiece balanced_piece(const SplitScheduleView& v, int b, int part) {
  const std::int64_t c0 = v.cost_prefix[b], c1 = v.cost_prefix[b + 1], w = v.part_cost;
  const int ovh = v.overhead_blocks;
  const int n = blocks_of(v.seqlens[b], v.block_keys);
  const std::int64_t start = c0 + ovh;
  const std::int64_t lo = static_cast<std::int64_t>(part) * w - start;
  const std::int64_t hi = static_cast<std::int64_t>(part + 1) * w - start;
  SplitPiece piece;
  piece.request = b;
  piece.block_begin = static_cast<int>(std::max<std::int64_t>(0, std::min<std::int64_t>(n, lo)));
  piece.block_end = static_cast<int>(std::max<std::int64_t>(0, std::min<std::int64_t>(n, hi)));
  piece.slot =
      slots_of(c0, c1, ovh, w) > 0 ? v.slot_prefix[b] + (part - first_part(c0, c1, ovh, w)) : -1;
  return piece;
}

/// Request b's piece s of k (fixed splits).
AMLA_HOST_DEVICE inline SplitPiece fixed_piece(const SplitScheduleView& v, int b, int s) {
  const int k = v.num_splits;
  const int n = blocks_of(v.seqlens[b], v.block_keys);
  const int per = (n + k - 1) / k;
  SplitPiece piece;
  piece.request = b;
  piece.block_begin = std::min(n, s * per);
  piece.block_end = std::min(n, (s + 1) * per);
  piece.slot = k > 1 ? b * k + s : -1;
  return piece;
}

/// Pieces of the whole schedule: what a grid of one CTA per piece (per row block) runs.
AMLA_HOST_DEVICE inline int piece_count(const SplitScheduleView& v) {
  return v.num_splits > 0 ? v.batch * v.num_splits : v.piece_prefix[v.batch];
}

/// Piece `index` of the schedule, numbered request by request (a request's pieces in part
/// order): fills `piece` and returns true, or false past the last piece.
AMLA_HOST_DEVICE inline bool piece_at(const SplitScheduleView& v, int index, SplitPiece& piece) {
  if (index < 0 || index >= piece_count(v)) return false;
  if (v.num_splits > 0) {
    piece = fixed_piece(v, index / v.num_splits, index % v.num_splits);
    return true;
  }
  // The last b with piece_prefix[b] <= index: binary search (piece_prefix is increasing).
  int lo = 0, hi = v.batch - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (v.piece_prefix[mid] <= index) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int first =
      first_part(v.cost_prefix[lo], v.cost_prefix[lo + 1], v.overhead_blocks, v.part_cost);
  piece = balanced_piece(v, lo, first + (index - v.piece_prefix[lo]));
  return true;
}

}  // namespace split_schedule

/// A schedule on the host: its scalars and arrays; view() is what a kernel (or the replay) reads.
struct SplitSchedule {
  SplitScheduleView scalars;  ///< batch, parts, W, ... (its pointers unused)
  std::vector<std::int32_t> seqlens;
  std::vector<std::int64_t> cost_prefix;   ///< [batch + 1] (balanced) or empty
  std::vector<std::int32_t> slot_prefix;   ///< [batch + 1] (balanced) or empty
  std::vector<std::int32_t> piece_prefix;  ///< [batch + 1] (balanced) or empty
  int num_slots = 0;                       ///< partial outputs the combine merges

  SplitScheduleView view() const {
    SplitScheduleView v = scalars;
    v.seqlens = seqlens.data();
    v.cost_prefix = cost_prefix.empty() ? nullptr : cost_prefix.data();
    v.slot_prefix = slot_prefix.empty() ? nullptr : slot_prefix.data();
    v.piece_prefix = piece_prefix.empty() ? nullptr : piece_prefix.data();
    return v;
  }
};

/// Parts of a batch's schedule (an upper bound of its num_parts: the balanced schedule may use
/// fewer), and the pieces and partial slots it may have, known before the seqlens are.
struct SplitScheduleBounds {
  int parts = 1;
  int pieces = 1;
  int slots = 0;
};

/// Throws amla::invalid_argument naming `fn` and the knob at fault.
inline void validate_split_schedule_options(const char* fn, const SplitScheduleOptions& o) {
  auto require = [&](bool ok, const char* name, int value, const char* rule) {
    if (!ok) detail::throw_invalid(fn, name, std::to_string(value), rule);
  };
  require(o.sms >= 1, "options.sms", o.sms, "must be >= 1");
  require(o.block_keys >= 1, "options.block_keys", o.block_keys, "must be >= 1");
  require(o.overhead_blocks >= 1 && o.overhead_blocks <= (1 << 20), "options.overhead_blocks",
          o.overhead_blocks, "must lie in [1, 2^20]");
  require(o.num_splits >= 0, "options.num_splits", o.num_splits, "must be >= 0 (0 = balanced)");
}

/// The bounds of a schedule of `batch` requests of `row_blocks` CTAs each.
inline SplitScheduleBounds split_schedule_bounds(int batch, int row_blocks,
                                                 const SplitScheduleOptions& o) {
  const char* fn = "amla::split_schedule_bounds";
  validate_split_schedule_options(fn, o);
  AMLA_REQUIRE(batch >= 1, "batch", batch, "must be >= 1");
  AMLA_REQUIRE(row_blocks >= 1, "row_blocks", row_blocks, "must be >= 1");
  SplitScheduleBounds b;
  if (o.num_splits > 0) {
    const std::int64_t parts = static_cast<std::int64_t>(batch) * o.num_splits;
    AMLA_REQUIRE(parts <= INT32_MAX, "options.num_splits", o.num_splits,
                 "batch * num_splits must stay below 2^31");
    b.parts = static_cast<int>(parts);
    b.pieces = b.parts;
    b.slots = o.num_splits > 1 ? b.parts : 0;
  } else {
    // One wave of CTAs (see the file comment); a batch of a wave or more is not cut.
    b.parts = static_cast<int>(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(o.sms / row_blocks) - batch + 1));
    // Each inner boundary between parts cuts at most one request: one more piece, and one more
    // slot (two when it is that request's first cut).
    b.pieces = batch + b.parts - 1;
    b.slots = 2 * (b.parts - 1);
  }
  return b;
}

/// The scalars of a balanced schedule once the costs are summed: W and the parts that hold work.
AMLA_HOST_DEVICE inline void balance_parts(std::int64_t total_cost, int max_parts,
                                           std::int64_t& part_cost, int& num_parts) {
  const std::int64_t parts = max_parts < 1 ? 1 : max_parts;
  part_cost = (total_cost + parts - 1) / parts;
  if (part_cost < 1) part_cost = 1;
  num_parts = static_cast<int>((total_cost + part_cost - 1) / part_cost);
  if (num_parts < 1) num_parts = 1;
}

/// The schedule of a batch with these seqlens on the host (the CPU replay's input; the CUDA
/// backend computes the same arrays on the GPU). Throws amla::invalid_argument on a negative
/// seqlen or bad options.
inline SplitSchedule make_split_schedule(std::span<const std::int32_t> seqlens, int row_blocks,
                                         const SplitScheduleOptions& o) {
  const char* fn = "amla::make_split_schedule";
  AMLA_REQUIRE(!seqlens.empty(), "seqlens", "an empty span", "must hold at least one request");
  const int batch = static_cast<int>(seqlens.size());
  const SplitScheduleBounds bounds = split_schedule_bounds(batch, row_blocks, o);
  SplitSchedule s;
  s.seqlens.assign(seqlens.begin(), seqlens.end());
  for (int b = 0; b < batch; ++b) {
    if (s.seqlens[static_cast<std::size_t>(b)] < 0) {
      detail::throw_invalid(fn, ("seqlens[" + std::to_string(b) + "]").c_str(),
                            std::to_string(s.seqlens[static_cast<std::size_t>(b)]), "must be >= 0");
    }
  }
  SplitScheduleView& v = s.scalars;
  v.batch = batch;
  v.num_splits = o.num_splits;
  v.overhead_blocks = o.overhead_blocks;
  v.block_keys = o.block_keys;
  if (o.num_splits > 0) {
    v.num_parts = bounds.parts;
    s.num_slots = bounds.slots;
  } else {
    s.cost_prefix.assign(static_cast<std::size_t>(batch) + 1, 0);
    for (int b = 0; b < batch; ++b) {
      s.cost_prefix[static_cast<std::size_t>(b) + 1] =
          s.cost_prefix[static_cast<std::size_t>(b)] + o.overhead_blocks +
          split_schedule::blocks_of(s.seqlens[static_cast<std::size_t>(b)], o.block_keys);
    }
    balance_parts(s.cost_prefix.back(), bounds.parts, v.part_cost, v.num_parts);
    s.slot_prefix.assign(static_cast<std::size_t>(batch) + 1, 0);
    for (int b = 0; b < batch; ++b) {
      const auto i = static_cast<std::size_t>(b);
      s.slot_prefix[i + 1] =
          s.slot_prefix[i] + split_schedule::slots_of(s.cost_prefix[i], s.cost_prefix[i + 1],
                                                      o.overhead_blocks, v.part_cost);
    }
    s.num_slots = s.slot_prefix.back();
    s.piece_prefix.assign(static_cast<std::size_t>(batch) + 1, 0);
    for (int b = 0; b < batch; ++b) {
      const auto i = static_cast<std::size_t>(b);
      s.piece_prefix[i + 1] =
          s.piece_prefix[i] + split_schedule::pieces_of(s.cost_prefix[i], s.cost_prefix[i + 1],
                                                        o.overhead_blocks, v.part_cost);
    }
  }
  return s;
}

/// What one SM does under a schedule: the CTAs (one row block of a piece each) it runs, in order.
struct SplitSmLoad {
  std::vector<SplitPiece> pieces;
  std::int64_t cost = 0;  ///< sum of (blocks + overhead) of its CTAs
};

/// The replay of a schedule on a GPU of `sms` SMs: the CTAs (piece i, row block m) launched in
/// the kernel's order (i major), each to the SM that is free first (the lowest-numbered among
/// ties), one CTA per SM at a time, a CTA taking its piece's blocks plus the overhead.
struct SplitScheduleReplay {
  std::vector<SplitSmLoad> sms;
  std::vector<int> pieces_per_request;  ///< 1: written directly; > 1: merged by the combine
  int pieces = 0;
  std::int64_t total_blocks = 0;  ///< KV blocks walked, per row block
  std::int64_t makespan = 0;      ///< the busiest SM's cost
  double mean_cost = 0;           ///< total cost over the SMs
  /// makespan / mean_cost: 1 is perfect balance; the time over the ideal.
  double imbalance = 1;
  int split_requests = 0;  ///< requests the combine merges

  /// One line per SM that works and a summary (for examples and test logs).
  std::string describe() const {
    std::string s;
    auto put = [&s](const char* text, std::int64_t value) {
      s.append(text);
      s.append(std::to_string(value));
    };
    for (std::size_t m = 0; m < sms.size(); ++m) {
      if (sms[m].pieces.empty()) continue;
      put("SM ", static_cast<std::int64_t>(m));
      put(": cost ", sms[m].cost);
      s.push_back(',');
      for (const SplitPiece& pc : sms[m].pieces) {
        put(" r", pc.request);
        put("[", pc.block_begin);
        put(",", pc.block_end);
        s.push_back(')');
        if (pc.slot >= 0) put("@", pc.slot);
      }
      s.push_back('\n');
    }
    put("", pieces);
    put(" pieces, blocks ", total_blocks);
    put(", makespan ", makespan);
    s.append(", imbalance ");
    s.append(detail::to_text(imbalance));
    put(", split requests ", split_requests);
    s.push_back('\n');
    return s;
  }
};

/// Replays a schedule with the kernel's piece numbering (piece_at) on `sms` SMs, each piece run by
/// `row_blocks` CTAs. Throws amla::invalid_argument on sms or row_blocks below 1.
inline SplitScheduleReplay replay_split_schedule(const SplitScheduleView& v, int row_blocks,
                                                 int sms) {
  AMLA_REQUIRE(sms >= 1, "sms", sms, "must be >= 1");
  AMLA_REQUIRE(row_blocks >= 1, "row_blocks", row_blocks, "must be >= 1");
  SplitScheduleReplay r;
  r.sms.resize(static_cast<std::size_t>(sms));
  r.pieces_per_request.assign(static_cast<std::size_t>(std::max(0, v.batch)), 0);
  r.pieces = split_schedule::piece_count(v);
  std::int64_t total = 0;
  for (int i = 0; i < r.pieces; ++i) {
    SplitPiece pc;
    split_schedule::piece_at(v, i, pc);
    const std::int64_t blocks = pc.block_end - pc.block_begin;
    r.total_blocks += blocks;
    ++r.pieces_per_request[static_cast<std::size_t>(pc.request)];
    for (int m = 0; m < row_blocks; ++m) {
      auto sm = std::min_element(
          r.sms.begin(), r.sms.end(),
          [](const SplitSmLoad& a, const SplitSmLoad& b) { return a.cost < b.cost; });
      sm->pieces.push_back(pc);
      sm->cost += blocks + v.overhead_blocks;
      total += blocks + v.overhead_blocks;
    }
  }
  for (const SplitSmLoad& l : r.sms) r.makespan = std::max(r.makespan, l.cost);
  r.mean_cost = static_cast<double>(total) / static_cast<double>(sms);
  r.imbalance = r.mean_cost > 0 ? static_cast<double>(r.makespan) / r.mean_cost : 1.0;
  for (int n : r.pieces_per_request) r.split_requests += n > 1 ? 1 : 0;
  return r;
}

}  // namespace amla
