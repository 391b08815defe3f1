// amla/problem/split_schedule.hpp: how a split-KV decode kernel cuts a batch's requests into
// pieces of work for the SMs of a GPU (the tile schedule), and a replay of a schedule that
// reports which SM gets which work and the balance.
//
// ---- Work ---------------------------------------------------------------------------------------
// A request b of seqlen L_b is n_b = ceil(L_b / block_keys) KV blocks. Its query rows are cut into
// `row_blocks` CTAs' worth (the CUDA Hopper kernel: ceil(s_q h_q / 64) blocks of 64 rows, h_kv 1);
// every row block of a request walks the same KV blocks, so a schedule decides only how each
// request's blocks are cut into pieces, contiguous block ranges. The CUDA kernel runs one CTA per
// (row block, piece), the pieces numbered request by request (piece_at), and the GPU's block
// scheduler hands the CTAs to SMs in that order as SMs free up; replay_split_schedule plays that
// assignment on the CPU. A request cut into several pieces writes one normalised partial output
// and lse per piece (a slot) and a combine merges them (attention/split_kv.hpp is the CPU
// mirror); a request in one piece writes its output directly.
//
// ---- Sized schedule (num_splits = 0) ------------------------------------------------------------
// FlashMLA's get_mla_metadata balances a batch's blocks over one wave of persistent CTAs, each
// running a part of the batch. Here a CTA runs one piece, so the schedule sizes the pieces from
// the batch and the lengths for one wave of `slots` = sms / row_blocks pieces: every request b is
// cut into k_b = ceil(n_b / T) equal pieces of at most T blocks (an empty request is one empty
// piece), with T the smallest piece length ceil(n_max / k), k = 1, 2, ..., for which the pieces
// still fit the wave (sum k_b <= slots). The longest requests take the most pieces, the time of the
// wave is about T blocks, and a batch that fills a wave (batch >= slots) is not cut at all.
// Example: H100 (132 SMs), s_q 2, h_q 128 (4 row blocks, 33 slots): one request of 256 blocks is
// cut into 32 pieces of 8; 16 of 64 blocks into 2 pieces of 32 each; 128 requests are not cut.
//
// ---- Fixed splits (num_splits = k >= 1) ---------------------------------------------------------
// Every request in k equal pieces of ceil(n_b / k) blocks (some possibly empty); k = 1 is no
// split-KV. Slots b k + s when k > 1.
//
// The functions on SplitScheduleView are host-device: the CUDA kernel reads its piece with the
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
  int sms = 132;        ///< CTAs that run at once (one per SM for the Hopper kernel)
  int block_keys = 64;  ///< keys per KV block, the kernel's tile
  int num_splits = 0;   ///< 0: sized from the batch and lengths; k >= 1: k equal pieces each
};

/// One request's piece: KV blocks [block_begin, block_end) of `request`, written to partial slot
/// `slot`, or directly to the output when slot is -1 (the request is in one piece).
struct SplitPiece {
  int request = 0;
  int block_begin = 0;
  int block_end = 0;
  int slot = -1;
};

/// A schedule as a kernel reads it: scalars plus two per-request prefix arrays (sized schedule;
/// the fixed one needs only the seqlens). Non-owning: host vectors (SplitSchedule) or device
/// memory (the CUDA plan).
struct SplitScheduleView {
  int batch = 0;
  int num_splits = 0;  ///< 0: sized, else k
  int block_keys = 64;
  int piece_blocks = 1;                        ///< T: the longest piece (sized)
  const std::int32_t* seqlens = nullptr;       ///< [batch]
  const std::int32_t* piece_prefix = nullptr;  ///< [batch + 1]: first piece of each request
  const std::int32_t* slot_prefix = nullptr;   ///< [batch + 1]: first slot of each split request
};

namespace split_schedule {

/// KV blocks of a sequence of `seqlen` keys.
AMLA_HOST_DEVICE constexpr int blocks_of(int seqlen, int block_keys) {
  return static_cast<int>((static_cast<std::int64_t>(seqlen) + block_keys - 1) / block_keys);
}

/// Pieces of a request of n blocks cut into pieces of at most T blocks (1 for n = 0).
AMLA_HOST_DEVICE constexpr int pieces_for(int n, int t) {
  return n > t ? (n + t - 1) / t : 1;
}

/// Partial slots of a request of k pieces: k when it is cut, else 0.
AMLA_HOST_DEVICE constexpr int slots_for(int k) {
  return k > 1 ? k : 0;
}

/// The piece length of the k-th candidate for requests of at most n_max blocks.
AMLA_HOST_DEVICE constexpr int candidate_blocks(int n_max, int k) {
  return n_max > 0 ? (n_max + k - 1) / k : 1;
}

/// Request b's piece s of k: ceil(n / k) blocks each (the last ones possibly shorter or empty).
AMLA_HOST_DEVICE inline SplitPiece piece_of(int b, int n, int k, int s, int first_slot) {
  const int per = (n + k - 1) / k;
  SplitPiece piece;
  piece.request = b;
  // (no std::min: host-device code that nvcc compiles without --expt-relaxed-constexpr)
  piece.block_begin = s * per < n ? s * per : n;
  piece.block_end = (s + 1) * per < n ? (s + 1) * per : n;
  piece.slot = k > 1 ? first_slot + s : -1;
  return piece;
}

/// Pieces of the whole schedule: what a grid of one CTA per piece (per row block) runs.
AMLA_HOST_DEVICE inline int piece_count(const SplitScheduleView& v) {
  return v.num_splits > 0 ? v.batch * v.num_splits : v.piece_prefix[v.batch];
}

/// Piece `index` of the schedule, numbered request by request: fills `piece` and returns true, or
/// false past the last piece.
AMLA_HOST_DEVICE inline bool piece_at(const SplitScheduleView& v, int index, SplitPiece& piece) {
  if (index < 0 || index >= piece_count(v)) return false;
  if (v.num_splits > 0) {
    const int k = v.num_splits, b = index / k;
    piece = piece_of(b, blocks_of(v.seqlens[b], v.block_keys), k, index % k, b * k);
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
  const int k = v.piece_prefix[lo + 1] - v.piece_prefix[lo];
  piece = piece_of(lo, blocks_of(v.seqlens[lo], v.block_keys), k, index - v.piece_prefix[lo],
                   v.slot_prefix[lo]);
  return true;
}

}  // namespace split_schedule

/// A schedule on the host: its scalars and arrays; view() is what a kernel (or the replay) reads.
struct SplitSchedule {
  SplitScheduleView scalars;  ///< batch, num_splits, piece_blocks (its pointers unused)
  std::vector<std::int32_t> seqlens;
  std::vector<std::int32_t> piece_prefix;  ///< [batch + 1] (sized) or empty
  std::vector<std::int32_t> slot_prefix;   ///< [batch + 1] (sized) or empty
  int num_slots = 0;                       ///< partial outputs the combine merges

  SplitScheduleView view() const {
    SplitScheduleView v = scalars;
    v.seqlens = seqlens.data();
    v.piece_prefix = piece_prefix.empty() ? nullptr : piece_prefix.data();
    v.slot_prefix = slot_prefix.empty() ? nullptr : slot_prefix.data();
    return v;
  }
};

/// What a launch needs before the seqlens are known: the slots of one wave, and bounds of the
/// pieces (the grid) and of the partial slots (the workspace).
struct SplitScheduleBounds {
  int slots = 1;     ///< pieces one wave runs: max(1, sms / row_blocks)
  int pieces = 1;    ///< at most this many pieces
  int partials = 0;  ///< at most this many partial slots
};

/// Throws amla::invalid_argument naming `fn` and the knob at fault.
inline void validate_split_schedule_options(const char* fn, const SplitScheduleOptions& o) {
  auto require = [&](bool ok, const char* name, int value, const char* rule) {
    if (!ok) detail::throw_invalid(fn, name, std::to_string(value), rule);
  };
  require(o.sms >= 1, "options.sms", o.sms, "must be >= 1");
  require(o.block_keys >= 1, "options.block_keys", o.block_keys, "must be >= 1");
  require(o.num_splits >= 0, "options.num_splits", o.num_splits, "must be >= 0 (0 = sized)");
}

/// The bounds of a schedule of `batch` requests of `row_blocks` CTAs each.
inline SplitScheduleBounds split_schedule_bounds(int batch, int row_blocks,
                                                 const SplitScheduleOptions& o) {
  validate_split_schedule_options("amla::split_schedule_bounds", o);
  AMLA_REQUIRE(batch >= 1, "batch", batch, "must be >= 1");
  AMLA_REQUIRE(row_blocks >= 1, "row_blocks", row_blocks, "must be >= 1");
  SplitScheduleBounds b;
  b.slots = std::max(1, o.sms / row_blocks);
  if (o.num_splits > 0) {
    const std::int64_t pieces = static_cast<std::int64_t>(batch) * o.num_splits;
    AMLA_REQUIRE(pieces <= INT32_MAX, "options.num_splits", o.num_splits,
                 "batch * num_splits must stay below 2^31");
    b.pieces = static_cast<int>(pieces);
    b.partials = o.num_splits > 1 ? b.pieces : 0;
  } else if (batch >= b.slots) {
    b.pieces = batch;  // a wave or more: no request is cut
  } else {
    b.pieces = b.slots;
    b.partials = b.slots;
  }
  return b;
}

/// The sized schedule's piece length T for requests of these block counts (host copy of the
/// plan kernel's search; `slots` from split_schedule_bounds).
inline int sized_piece_blocks(std::span<const int> blocks, int slots) {
  int n_max = 0;
  for (int n : blocks) n_max = std::max(n_max, n);
  if (static_cast<int>(blocks.size()) >= slots) return std::max(1, n_max);
  int best = split_schedule::candidate_blocks(n_max, 1);
  for (int k = 2; k <= slots; ++k) {
    const int t = split_schedule::candidate_blocks(n_max, k);
    if (t >= best) continue;
    std::int64_t pieces = 0;
    for (int n : blocks) pieces += split_schedule::pieces_for(n, t);
    if (pieces > slots) break;  // shorter pieces only make more of them
    best = t;
  }
  return best;
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
  std::vector<int> blocks(static_cast<std::size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    const auto i = static_cast<std::size_t>(b);
    if (s.seqlens[i] < 0) {
      detail::throw_invalid(fn, ("seqlens[" + std::to_string(b) + "]").c_str(),
                            std::to_string(s.seqlens[i]), "must be >= 0");
    }
    blocks[i] = split_schedule::blocks_of(s.seqlens[i], o.block_keys);
  }
  SplitScheduleView& v = s.scalars;
  v.batch = batch;
  v.num_splits = o.num_splits;
  v.block_keys = o.block_keys;
  if (o.num_splits > 0) {
    s.num_slots = bounds.partials;
    return s;
  }
  v.piece_blocks = sized_piece_blocks(blocks, bounds.slots);
  s.piece_prefix.assign(static_cast<std::size_t>(batch) + 1, 0);
  s.slot_prefix.assign(static_cast<std::size_t>(batch) + 1, 0);
  for (int b = 0; b < batch; ++b) {
    const auto i = static_cast<std::size_t>(b);
    const int k = split_schedule::pieces_for(blocks[i], v.piece_blocks);
    s.piece_prefix[i + 1] = s.piece_prefix[i] + k;
    s.slot_prefix[i + 1] = s.slot_prefix[i] + split_schedule::slots_for(k);
  }
  s.num_slots = s.slot_prefix.back();
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
/// `row_blocks` CTAs costing its blocks plus `overhead_blocks` (a CTA's fixed cost: loading Q,
/// filling the pipeline, writing the result; FlashMLA's metadata counts 5). Throws
/// amla::invalid_argument on sms or row_blocks below 1 or a negative overhead.
inline SplitScheduleReplay replay_split_schedule(const SplitScheduleView& v, int row_blocks,
                                                 int sms, int overhead_blocks = 5) {
  AMLA_REQUIRE(sms >= 1, "sms", sms, "must be >= 1");
  AMLA_REQUIRE(row_blocks >= 1, "row_blocks", row_blocks, "must be >= 1");
  AMLA_REQUIRE(overhead_blocks >= 0, "overhead_blocks", overhead_blocks, "must be >= 0");
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
      sm->cost += blocks + overhead_blocks;
      total += blocks + overhead_blocks;
    }
  }
  for (const SplitSmLoad& l : r.sms) r.makespan = std::max(r.makespan, l.cost);
  r.mean_cost = static_cast<double>(total) / static_cast<double>(sms);
  r.imbalance = r.mean_cost > 0 ? static_cast<double>(r.makespan) / r.mean_cost : 1.0;
  for (int n : r.pieces_per_request) r.split_requests += n > 1 ? 1 : 0;
  return r;
}

}  // namespace amla
