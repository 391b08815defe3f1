// amla/sim/decode.hpp: an MLA decode kernel mapped onto a whole Cube/Vector chip, simulated at
// tile level (AMLA Sections 3.3, 4 and 5.2).
//
// Workload: the problem layer's amla::Workload (problem/workload.hpp): batch B, S_q query tokens,
// H = h_q heads, one latent KV head, d_qk = 576 (512 latent + 64 RoPE), d_v = 512, and each
// sequence's own number of cached tokens (a varlen batch runs as it is); the kernel streams the
// cache in KV blocks of DecodeOptions::kv_block = 512 tokens. One *task* is the FlashAttention
// loop of one sequence over a group of at most `max_rows_per_task` (H x S_q) query rows (256 in
// the paper: 128 heads x S_q = 2) and over that sequence's KV blocks (its last block partial);
// tasks go round-robin to the Cube cores, each core runs its tasks one after another; a sequence
// with no keys has no task. With a causal mask the Cube still computes every block of the
// sequence (the mask trims only the last block's useful work), so the cycles are those of the
// unmasked loop while the FLOPs, and the FLOPS utilisation, count the attended pairs as the
// Workload counts them. Per KV block of a task:
//   [C1] S = Q K^T   on the Cube core, tile by tile (sim/cube_stage.hpp): K streams from HBM
//                    (the die's HBM is shared by its cores, max-min fair), Q is loaded from HBM
//                    once per task and then stays in L1 or comes back from L2;
//   [V1] online softmax on the core's two Vector cores (half the rows each): S in from GM, P out;
//                    AMLA also adds the integer exponent step N to O in GM (AtomicAdd<INT32>);
//   [C2] P V         on the Cube core, V and P are L2 hits (V is the K block's first 512
//                    columns, read by [C1] two cycles earlier); Base writes T = P V, AMLA
//                    atomically adds it into O (AtomicAdd<FP32>);
//   [V2] (Base only) O = O * exp(m_old - m_new) + T: a 256 KB FP32 O read and written through GM
//                    per block (at 128 rows), the traffic AMLA removes;
//   last V           O / l into the BF16 output.
// Every Cube <-> Vector hand-over costs chip.handoff_latency. (AMLA's [V1] of block i + 1 adds
// the exponent step to O while [C2] of block i may still be adding P_i V_i into it; the model
// follows the paper's steady cycle, which has no dependency inside a cycle, and leaves the order
// of those two in-GM updates to the kernel.)
// Schedules: Base runs the serial order (each stage after the previous one); AMLA runs the
// preload pipeline of Figure 7 (preload [C1, C1, V1], steady cycles [C1, C2, V1], drain
// [C2, C2, V1] and the last V); either may be forced. Any other arrangement of the stage chain
// runs too (DecodeOptions::arrangement): Theorem B.1's (DecodeSchedule::theorem_b1 builds it from
// decode_stage_chain's stage durations, sim/preload_theory.hpp), the exhaustive optimum's, or a
// user's. One that does not fit the chain, or whose order can never run, comes back as a result
// that is not ok, with the reason.
//
// Symmetry: cores that run identical task lists on the same die behave identically (same
// programs, same start, fair HBM sharing), so by default one representative per class is
// simulated, its transfers weighing as many cores on the die's HBM link; the result is the same
// as simulating every core (tested), only faster.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/enum_name.hpp"
#include "amla/problem/workload.hpp"
#include "amla/sim/chip.hpp"
#include "amla/sim/cube_stage.hpp"
#include "amla/sim/engine.hpp"
#include "amla/sim/pipeline.hpp"
#include "amla/sim/preload_theory.hpp"
#include "amla/sim/status.hpp"
#include "amla/sim/tiling.hpp"
#include "amla/sim/timeline.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// The most engine operations simulate_decode builds (about a gigabyte of engine state at the
/// tile level); a larger simulation comes back not ok, with the count in the reason, before any
/// memory is taken.
inline constexpr double max_decode_operations = 0x1p22;

/// Which recurrence the kernel implements.
enum class Variant { base, amla };
inline const char* to_string(Variant v) {
  return v == Variant::base ? "Base" : "AMLA";
}

/// Which stage order each core follows: automatic (Base serial, AMLA preload), the serial order,
/// the preload arrangement of Figure 7 (and its Base analogue, preload_arrangement), or the
/// arrangement of Theorem B.1 built from decode_stage_chain's durations.
enum class DecodeSchedule { automatic, serial, preload, theorem_b1 };
inline const char* to_string(DecodeSchedule s) {
  return amla::detail::enum_name(s, {"automatic", "serial", "preload", "theorem_b1"});
}

struct DecodeOptions {
  Variant variant = Variant::amla;
  DecodeSchedule schedule = DecodeSchedule::automatic;  ///< Base: serial, AMLA: preload
  /// Any arrangement of the variant's stage chain (StageChain::amla / ::base; stage indices into
  /// it); when set it is what the cores run, and `schedule` must be automatic.
  std::optional<Arrangement> arrangement;
  int kv_block = 512;            ///< tokens per KV block the Cube cores stream
  int max_rows_per_task = 256;   ///< query rows (heads x S_q) of one task
  Tiling c1 = amla_c1_tiling();  ///< M, N, K are set per task and block
  Tiling c2 = amla_c2_tiling();
  /// Base only: keep O resident in UB instead of GM (what the paper rules out, Section 3.1).
  bool base_o_in_ub = false;
  /// One representative per class of identical cores. Exact only for identical cores, so it is
  /// used only when nothing tells them apart (chip.core_start_stagger and
  /// chip.hbm_latency_jitter both 0).
  bool symmetry = true;
  bool record_timeline = false;
  int timeline_cores = 1;  ///< representative Cube cores (with their Vector cores) drawn
};

/// Time shares of one kind of pipe over all the chip's units of that kind.
struct PipeSummary {
  std::string pipe;  ///< "MTE2", "MTE1", "MMAD", "FixP", "Vector"
  double busy = 0, stalled_on_data = 0, stalled_on_buffer = 0, idle = 0;
};

/// The outcome of simulate_decode: ok, or why the kernel cannot run as asked (a tiling or UB use
/// that does not fit, an arrangement that does not fit the chain or deadlocks).
struct DecodeResult : Status {
  Cycles cycles{0};  ///< the cycle model's makespan
  Seconds time{0};   ///< cycles / clock + chip.fixed_overhead: the predicted kernel time
  double flops = 0;
  double fu = 0;  ///< FLOPS utilisation: flops / (time x peak)
  Bytes hbm_bytes{0};
  double hbm_utilization = 0;  ///< HBM bytes / (peak bandwidth x time)
  int tasks = 0, rows_per_task = 0;
  int blocks_per_task = 0;  ///< KV blocks of the longest sequence's tasks
  int cores_used = 0, max_tasks_per_core = 0, core_classes = 0;
  std::vector<PipeSummary> pipes;
  std::vector<UnitStats> units;  ///< every simulated unit (multiplicity = cores it stands for)
  Timeline timeline;
  std::int64_t events = 0;
  std::size_t operations = 0;

  double kernel_us() const { return time.us(); }
};

/// Cycles of a Vector stage on one Vector core: `elements` values at `ops_per_element`
/// instructions each over the SIMD lanes, `in_bytes` + `out_bytes` through the core's GM port,
/// overlapped over double-buffered UB chunks (the longer side plus one chunk of the shorter),
/// plus one L2 access latency to start.
inline Cycles vector_stage_cycles(const Chip& chip, double elements, double ops_per_element,
                                  double in_bytes, double out_bytes) {
  const double compute = elements * ops_per_element / chip.vector_fp32_lanes;
  const double xfer = (in_bytes + out_bytes) / chip.vector_gm.count;
  const double chunks = std::max(1.0, std::ceil(in_bytes / chip.vector_chunk.count));
  const double body = std::max(compute, xfer) + std::min(compute, xfer) / chunks;
  return Cycles{chip.l2_latency.count + static_cast<std::int64_t>(std::ceil(body))};
}

namespace detail {

struct DecodeTask {
  int batch, group, rows;
  int blocks, last_block;  // KV blocks of the sequence and the tokens of its last block
};

// What a stage produced, for wiring consumers.
struct StageOut {
  std::vector<OpId> exits;    // the ops whose end is the stage's result
  std::vector<OpId> entries;  // the ops an ordering constraint must hold back
  bool cube = true;
  OpId span_first, span_last;  // for the stage lane of the Timeline
  std::string name;
  Phase phase = Phase::none;
  std::string category;
};

inline constexpr const char* decode_fn = "amla::sim::simulate_decode";

/// Throws amla::invalid_argument naming the field at fault unless the decode model maps `w`
/// with `opt`.
inline void validate_decode(const Workload& w, const DecodeOptions& opt) {
  using amla::detail::throw_invalid;
  using amla::detail::to_text;
  w.validate(decode_fn);
  if (w.h_kv != 1)
    throw_invalid(decode_fn, "workload.h_kv", to_text(w.h_kv),
                  "must be 1: the decode model maps MLA's one latent KV head");
  if (!w.v_in_kv)
    throw_invalid(decode_fn, "workload.v_in_kv", "false",
                  "must be true: [C2] reads V as the first d_v columns of the K block");
  if (opt.variant != Variant::base && opt.variant != Variant::amla)
    throw_invalid(decode_fn, "options.variant", to_text(static_cast<int>(opt.variant)),
                  "Variant::base or Variant::amla");
  if (static_cast<int>(opt.schedule) < 0 || static_cast<int>(opt.schedule) > 3)
    throw_invalid(decode_fn, "options.schedule", to_text(static_cast<int>(opt.schedule)),
                  "a DecodeSchedule (automatic, serial, preload, theorem_b1)");
  if (opt.kv_block < 1) throw_invalid(decode_fn, "options.kv_block", to_text(opt.kv_block), ">= 1");
  if (opt.max_rows_per_task < 1)
    throw_invalid(decode_fn, "options.max_rows_per_task", to_text(opt.max_rows_per_task), ">= 1");
  if (opt.timeline_cores < 0)
    throw_invalid(decode_fn, "options.timeline_cores", to_text(opt.timeline_cores), ">= 0");
  if (opt.arrangement && opt.schedule != DecodeSchedule::automatic)
    throw_invalid(decode_fn, "options.schedule", to_string(opt.schedule),
                  "must be automatic when options.arrangement is given");
  if (opt.variant == Variant::amla && opt.base_o_in_ub)
    throw_invalid(decode_fn, "options.base_o_in_ub", "true",
                  "only for Variant::base (AMLA keeps O in GM by design)");
  opt.c1.validate();
  opt.c2.validate();
}

/// The tiling of [C1] (S = Q K^T: M rows, N keys, K = d_qk) and [C2] (P V: M rows, N = d_v,
/// K keys) for `m` rows and a block of `n` keys.
inline Tiling c1_tiling(const DecodeOptions& opt, const Workload& w, int m, int n) {
  Tiling t = opt.c1;
  t.M = m;
  t.N = n;
  t.K = w.d_qk;
  return t;
}
inline Tiling c2_tiling(const DecodeOptions& opt, const Workload& w, int m, int n) {
  Tiling t = opt.c2;
  t.M = m;
  t.N = w.d_v;
  t.K = n;
  return t;
}

/// Cycles of Vector stage `name` ("V1", "V2" or "LastV") of block `block` of a task on one Vector
/// core holding `r` of the task's rows, for a block of `n` keys.
inline Cycles vector_stage_of(const Chip& chip, const Workload& w, const DecodeOptions& opt,
                              const std::string& name, double r, int n, int block) {
  const bool amla = opt.variant == Variant::amla;
  const double o_bytes = r * w.d_v * 4.0;
  if (name == "V1") {
    const double in = r * n * 4.0;
    const double outb = r * n * 2.0 + (amla && block > 0 ? o_bytes : 0.0);
    return vector_stage_cycles(
        chip, r * n, amla ? chip.amla_v1_ops_per_element : chip.base_v1_ops_per_element, in, outb);
  }
  if (name == "V2") {
    const double in = opt.base_o_in_ub ? o_bytes : o_bytes * (block > 0 ? 2 : 1);
    const double outb = opt.base_o_in_ub ? 0.0 : o_bytes;
    return vector_stage_cycles(chip, r * w.d_v, chip.base_v2_ops_per_element, in, outb);
  }
  const double in = opt.base_o_in_ub ? 0.0 : o_bytes;  // LastV
  return vector_stage_cycles(chip, r * w.d_v, chip.final_v_ops_per_element, in, r * w.d_v * 2.0);
}

/// The variant's stage chain with placeholder durations (the decode model times each stage
/// itself; the chain gives the dependencies and the names arrangements refer to).
inline StageChain decode_chain(Variant v) {
  return v == Variant::amla
             ? StageChain::amla(Cycles{1}, Cycles{1}, Cycles{1}, Cycles{1})
             : StageChain::base(Cycles{1}, Cycles{1}, Cycles{1}, Cycles{1}, Cycles{1});
}

}  // namespace detail

/// The variant's stage chain with each stage's duration for one full KV block of a task of the
/// workload's (largest) row group, in the steady state (a later block): the Cube stages from
/// simulate_cube_stage with every core of the die streaming alike (K from HBM, Q, P and V L2
/// hits), the Vector stages on the Vector core with the most rows. What the preload theory
/// needs to build an arrangement (preload::theorem_b1_arrangement(chain)). Throws
/// amla::invalid_argument for malformed input or a Cube tiling that does not fit (the reason in
/// the message).
inline StageChain decode_stage_chain(const Chip& chip, const Workload& w,
                                     const DecodeOptions& opt = {}) {
  chip.validate();
  detail::validate_decode(w, opt);
  const int rows = w.h_q * w.s_q;
  const int groups = (rows + opt.max_rows_per_task - 1) / opt.max_rows_per_task;
  const int m = (rows + groups - 1) / groups;
  const int n = std::max(1, std::min(opt.kv_block, w.max_seqlen()));
  const int vpc = chip.vector_per_cube;
  const double r = (m + vpc - 1) / vpc;
  auto cube = [&](const Tiling& t, bool b_from_hbm) {
    CubeStageOptions o;
    o.b_from_hbm = b_from_hbm;
    o.record = false;
    const CubeStageResult c = simulate_cube_stage(chip, t, o);
    if (!c.ok)
      amla::detail::throw_invalid(
          "amla::sim::decode_stage_chain", "options.c1/c2",
          "M " + std::to_string(t.M) + ", N " + std::to_string(t.N) + ", K " + std::to_string(t.K),
          "a tiling that fits: " + c.reason);
    return c.cycles;
  };
  const Cycles c1 = cube(detail::c1_tiling(opt, w, m, n), true);
  const Cycles c2 = cube(detail::c2_tiling(opt, w, m, n), false);
  const Cycles v1 = detail::vector_stage_of(chip, w, opt, "V1", r, n, 1);
  const Cycles last_v = detail::vector_stage_of(chip, w, opt, "LastV", r, n, 1);
  if (opt.variant == Variant::amla) return StageChain::amla(c1, v1, c2, last_v);
  return StageChain::base(c1, v1, c2, detail::vector_stage_of(chip, w, opt, "V2", r, n, 1), last_v);
}

/// Simulates one decode kernel call. Malformed arguments throw amla::invalid_argument; a tiling
/// or UB use that does not fit, or an arrangement that does not fit the stage chain or cannot
/// run, comes back not ok with the reason.
inline DecodeResult simulate_decode(const Chip& chip, const Workload& w,
                                    const DecodeOptions& opt = {}) {
  chip.validate();
  detail::validate_decode(w, opt);
  DecodeResult res;
  res.flops = w.flops();
  const int kv_block = opt.kv_block;

  // ---- tasks and their shapes ----
  const int rows = w.h_q * w.s_q;
  const int groups = (rows + opt.max_rows_per_task - 1) / opt.max_rows_per_task;
  std::vector<detail::DecodeTask> tasks;
  std::vector<int> block_sizes;  // every block length in use (full and last), first seen first
  auto note_block = [&](int n) {
    if (std::find(block_sizes.begin(), block_sizes.end(), n) == block_sizes.end())
      block_sizes.push_back(n);
  };
  for (int b = 0; b < w.batch(); ++b) {
    const int len = w.seqlens[static_cast<std::size_t>(b)];
    if (len == 0) continue;  // nothing to attend: no task
    const int nb = (len + kv_block - 1) / kv_block;
    const int last = len - (nb - 1) * kv_block;
    note_block(std::min(kv_block, len));
    note_block(last);
    res.blocks_per_task = std::max(res.blocks_per_task, nb);
    for (int g = 0; g < groups; ++g)
      tasks.push_back({b, g, rows / groups + (g < rows % groups ? 1 : 0), nb, last});
  }
  res.tasks = static_cast<int>(tasks.size());
  res.rows_per_task = (rows + groups - 1) / groups;
  if (res.blocks_per_task > max_schedule_blocks) {
    res.set_failed("a sequence of " + std::to_string(w.max_seqlen()) + " keys is " +
                   std::to_string(res.blocks_per_task) + " KV blocks of " +
                   std::to_string(kv_block) +
                   ", more than a stage schedule holds (max_schedule_blocks = 10^6)");
    return res;
  }
  if (tasks.empty()) {  // every sequence empty: the kernel only starts and ends
    res.time = chip.fixed_overhead;
    return res;
  }

  auto c1_of = [&](int m, int n) { return detail::c1_tiling(opt, w, m, n); };
  auto c2_of = [&](int m, int n) { return detail::c2_tiling(opt, w, m, n); };
  // ---- feasibility: every tiling used, shared buffering, UB ----
  for (const int m : {rows / groups, res.rows_per_task}) {
    for (const int n : block_sizes) {
      for (const auto& [t, which] : {std::pair{c1_of(m, n), "C1"}, std::pair{c2_of(m, n), "C2"}}) {
        const Status f = check_fit(t, chip);
        if (!f.ok) {
          res.set_failed(std::string("[") + which + "] tiling (M " + std::to_string(t.M) + ", N " +
                         std::to_string(t.N) + ", K " + std::to_string(t.K) + "): " + f.reason);
          return res;
        }
      }
    }
  }
  if (opt.c1.b_slots != opt.c2.b_slots || opt.c1.l0_buffers != opt.c2.l0_buffers ||
      opt.c1.a_slots != opt.c2.a_slots || opt.c1.l1_slot.count != opt.c2.l1_slot.count ||
      l0c_tiles(opt.c1, chip) != l0c_tiles(opt.c2, chip)) {
    res.set_failed(
        "[C1] and [C2] tilings must share one L1 / L0 arrangement (a_slots, b_slots, l1_slot, "
        "l0_buffers, L0C tiles), as in Remark 4.1: both stages run on the same buffers");
    return res;
  }
  const int vpc = chip.vector_per_cube;
  const int rows_v_max = (res.rows_per_task + vpc - 1) / vpc;
  const bool amla = opt.variant == Variant::amla;
  {
    const double o_resident = opt.base_o_in_ub ? rows_v_max * w.d_v * 4.0 : 0.0;
    const double kvb = std::min(kv_block, w.max_seqlen());
    VectorTiling v1;
    v1.in_bytes_per_row = kvb * 4;
    v1.out_bytes_per_row = kvb * 2 + (amla ? w.d_v * 4.0 : 0.0);
    v1.scratch_bytes_per_row = kvb * 4;
    v1.rows = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(chip.vector_chunk.count / v1.in_bytes_per_row));
    v1.rows = std::min<std::int64_t>(v1.rows, rows_v_max);
    v1.resident = Bytes{o_resident};
    Status f = check_fit(v1, chip);
    if (f.ok && !amla) {
      VectorTiling v2;
      v2.in_bytes_per_row = w.d_v * 4.0 * (opt.base_o_in_ub ? 1 : 2);
      v2.out_bytes_per_row = opt.base_o_in_ub ? 0 : w.d_v * 4.0;
      v2.rows = std::max<std::int64_t>(
          1, static_cast<std::int64_t>(chip.vector_chunk.count / v2.in_bytes_per_row));
      v2.rows = std::min<std::int64_t>(v2.rows, rows_v_max);
      v2.resident = Bytes{o_resident};
      f = check_fit(v2, chip);
      if (!f.ok) f.reason = "[V2] " + f.reason;
    } else if (!f.ok) {
      f.reason = "[V1] " + f.reason;
    }
    if (!f.ok) {
      res.set_failed(f.reason);
      return res;
    }
  }

  const StageChain chain = detail::decode_chain(opt.variant);
  const int S = chain.size();

  // ---- cores, dies, symmetry classes ----
  const int cores = chip.cube_cores();
  std::vector<std::vector<int>> core_tasks(static_cast<std::size_t>(cores));
  for (std::size_t t = 0; t < tasks.size(); ++t)
    core_tasks[t % static_cast<std::size_t>(cores)].push_back(static_cast<int>(t));
  std::map<std::pair<int, std::vector<int>>, int> class_of;  // (die, task shapes) -> class
  std::vector<int> rep_core;
  std::vector<double> class_size;
  for (int c = 0; c < cores; ++c) {
    const auto& ct = core_tasks[static_cast<std::size_t>(c)];
    if (ct.empty()) continue;
    ++res.cores_used;
    res.max_tasks_per_core = std::max(res.max_tasks_per_core, static_cast<int>(ct.size()));
    std::vector<int> shape;
    for (const int t : ct) {
      const auto& task = tasks[static_cast<std::size_t>(t)];
      shape.insert(shape.end(), {task.rows, task.blocks, task.last_block});
    }
    const auto k = std::make_pair(c / chip.cube_cores_per_die, shape);
    const bool reduce =
        opt.symmetry && chip.core_start_stagger.count == 0 && chip.hbm_latency_jitter.count == 0;
    const auto it = reduce ? class_of.find(k) : class_of.end();
    if (it == class_of.end()) {
      if (reduce) class_of.emplace(k, static_cast<int>(rep_core.size()));
      rep_core.push_back(c);
      class_size.push_back(1);
    } else {
      class_size[static_cast<std::size_t>(it->second)] += 1;
    }
  }
  res.core_classes = static_cast<int>(rep_core.size());

  // ---- work bound: the engine operations the simulation would build ----
  {
    std::map<std::pair<int, int>, double> per_block;  // (rows, keys) -> operations of one block
    auto block_ops = [&](int m, int n) {
      auto it = per_block.find({m, n});
      if (it == per_block.end()) {
        const double vector_stages = static_cast<double>(S) * vpc;
        it = per_block
                 .emplace(std::pair{m, n}, cube_stage_operations(c1_of(m, n)) +
                                               cube_stage_operations(c2_of(m, n)) + vector_stages)
                 .first;
      }
      return it->second;
    };
    double ops = 0;
    for (const int core : rep_core)
      for (const int t : core_tasks[static_cast<std::size_t>(core)]) {
        const auto& task = tasks[static_cast<std::size_t>(t)];
        ops += (task.blocks - 1) * block_ops(task.rows, kv_block) +
               block_ops(task.rows, task.last_block) + vpc;
      }
    if (ops > max_decode_operations) {
      res.set_failed("the simulation needs about " + amla::detail::to_text(ops) +
                     " engine operations (" + std::to_string(res.core_classes) +
                     " simulated Cube cores), more than max_decode_operations = 2^22; use fewer "
                     "or shorter sequences, a larger kv_block, or symmetric cores");
      return res;
    }
  }

  // ---- stage order per task (the stage-level schedules of sim/pipeline.hpp) ----
  const DecodeSchedule kind = opt.arrangement ? DecodeSchedule::automatic
                              : opt.schedule != DecodeSchedule::automatic
                                  ? opt.schedule
                                  : (amla ? DecodeSchedule::preload : DecodeSchedule::serial);
  const bool serial = !opt.arrangement && kind == DecodeSchedule::serial;
  Arrangement arrangement;
  std::string order_name = "preload";
  if (opt.arrangement) {
    arrangement = *opt.arrangement;
    order_name = "arrangement";
  } else if (kind == DecodeSchedule::preload) {
    arrangement = preload_arrangement(chain);
  } else if (kind == DecodeSchedule::theorem_b1) {
    arrangement = preload::theorem_b1_arrangement(decode_stage_chain(chip, w, opt));
    order_name = "Theorem B.1";
  }
  if (!serial) {
    const Status fits = check_arrangement(chain, arrangement);
    if (!fits.ok) {
      res.set_failed(fits.reason);
      return res;
    }
  }
  auto slot = [&](TaskRef t) { return static_cast<std::size_t>(t.block * (S + 1) + t.stage); };
  // One stage order per block count in use, with its ordering edges by consumer.
  struct Order {
    Schedule schedule;
    std::vector<std::vector<TaskRef>> extra_by_consumer;
  };
  std::map<int, Order> orders;
  for (const auto& task : tasks) {
    if (orders.count(task.blocks) != 0) continue;
    Order o;
    o.schedule = serial ? serial_schedule(chain, task.blocks)
                        : cyclic_schedule(chain, task.blocks, arrangement, order_name);
    if (!serial) {
      // The order must be able to run at all (no dependency cycle through the programs).
      const ScheduleResult dry = simulate_schedule(chain, o.schedule);
      if (!dry.ok) {
        res.set_failed("the " + order_name + " order cannot run over " +
                       std::to_string(task.blocks) + " KV blocks: " + dry.reason);
        return res;
      }
    }
    o.extra_by_consumer.resize(static_cast<std::size_t>((S + 1) * task.blocks));
    for (const auto& [c, p] : o.schedule.extra_deps) o.extra_by_consumer[slot(c)].push_back(p);
    orders.emplace(task.blocks, std::move(o));
  }
  // Producers of a stage task: data (the chain) and ordering (the schedule's extra edges).
  auto producers = [&](TaskRef t, const Order& o) {
    const int nb = o.schedule.blocks;
    std::vector<std::pair<TaskRef, bool>> p;  // (producer, is_data)
    if (t.stage == chain.tail_index()) {
      p.push_back({{S - 1, nb - 1}, true});
    } else {
      if (t.stage > 0) p.push_back({{t.stage - 1, t.block}, true});
      if (chain.stages[static_cast<std::size_t>(t.stage)].carries_state && t.block > 0)
        p.push_back({{t.stage, t.block - 1}, true});
    }
    for (const TaskRef pr : o.extra_by_consumer[slot(t)]) p.push_back({pr, false});
    return p;
  };

  Engine e(opt.record_timeline);
  std::vector<LinkId> hbm;
  for (int d = 0; d < chip.dies; ++d)
    hbm.push_back(e.add_link("HBM die " + std::to_string(d), chip.hbm_per_die()));

  struct CoreUnits {
    CubeCore cube;
    std::vector<UnitId> vec;
    PoolId q_pool, p_pool;  // equal when Q is not resident (one shared A region)
    bool q_resident = false;
    std::vector<detail::StageOut> stages;  // for the Timeline
  };
  std::vector<CoreUnits> cu(rep_core.size());
  std::vector<UnitId> all_cube_pipes[4];
  std::vector<double> cube_mult;
  std::vector<UnitId> all_vec;

  const bool rec = opt.record_timeline;
  for (std::size_t ci = 0; ci < rep_core.size(); ++ci) {
    const int core = rep_core[ci];
    const double mult = class_size[ci];
    const std::string cname = "cube" + std::to_string(core);
    CoreUnits& u = cu[ci];
    const auto& ct = core_tasks[static_cast<std::size_t>(core)];
    int max_rows = 0, max_n = 0;
    for (const int t : ct) {
      const auto& task = tasks[static_cast<std::size_t>(t)];
      max_rows = std::max(max_rows, task.rows);
      max_n = std::max(max_n, task.blocks > 1 ? kv_block : task.last_block);
    }
    const Tiling c1_full = c1_of(max_rows, max_n);
    const Tiling c2_full = c2_of(max_rows, max_n);
    u.cube =
        add_cube_core(e, chip, c1_full,
                      hbm[static_cast<std::size_t>(core / chip.cube_cores_per_die)], cname, mult);
    for (int j = 0; j < vpc; ++j)
      u.vec.push_back(e.add_unit("vec" + std::to_string(core) + "." + std::to_string(j), mult));
    const auto q_stripes = static_cast<int>(c1_full.a_stripes());
    const auto p_stripes = static_cast<int>(c2_full.a_stripes());
    u.q_resident = q_stripes + p_stripes <= opt.c1.a_slots;
    if (u.q_resident) {
      u.q_pool = e.add_pool(cname + " L1 Q buffers", q_stripes);
      u.p_pool = e.add_pool(cname + " L1 P buffers", opt.c1.a_slots - q_stripes);
    } else {
      u.q_pool = u.p_pool = e.add_pool(cname + " L1 Q/P buffers", opt.c1.a_slots);
    }
    const Cycles start = chip.core_start_stagger * (core % chip.cube_cores_per_die);
    for (const UnitId x : {u.cube.mte2, u.cube.mte1, u.cube.mmad, u.cube.fixp})
      e.set_start(x, start);
    for (const UnitId x : u.vec) e.set_start(x, start);
    all_cube_pipes[0].push_back(u.cube.mte2);
    all_cube_pipes[1].push_back(u.cube.mte1);
    all_cube_pipes[2].push_back(u.cube.mmad);
    all_cube_pipes[3].push_back(u.cube.fixp);
    cube_mult.push_back(mult);
    for (const auto v : u.vec) all_vec.push_back(v);

    // ---- emit every task of this core ----
    std::vector<OpId> prev_task_exits;  // serial schedules: a task starts after the previous one
    for (const int ti : ct) {
      const auto& task = tasks[static_cast<std::size_t>(ti)];
      const int m = task.rows;
      std::vector<int> rows_v(static_cast<std::size_t>(vpc));
      for (int j = 0; j < vpc; ++j) rows_v[static_cast<std::size_t>(j)] = m / vpc + (j < m % vpc);
      const Order& order = orders.at(task.blocks);
      const int nb = task.blocks;
      std::vector<detail::StageOut> out(static_cast<std::size_t>((S + 1) * nb));
      std::vector<char> emitted(out.size(), 0);
      std::vector<OpId> q_loads, q_last_reads;
      int c1_done = 0;
      const std::string tname = "b" + std::to_string(task.batch) +
                                (groups > 1 ? "." + std::to_string(task.group) : std::string{});
      auto emit = [&](const ScheduledTask& st) {
        const TaskRef t = st.task;
        const StageSpec& spec = chain.spec(t.stage);
        const int n = t.block == nb - 1 ? task.last_block : kv_block;
        detail::StageOut so;
        so.cube = spec.kind == UnitKind::cube;
        so.phase = st.phase;
        so.category = spec.name;
        so.name = rec ? spec.name + (t.stage == chain.tail_index()
                                         ? "[" + tname + "]"
                                         : "[" + tname + " k" + std::to_string(t.block) + "]")
                      : std::string{};
        // Gather what this stage waits for.
        std::vector<OpId> data_after, order_after;
        for (const auto& [p, is_data] : producers(t, order)) {
          const auto& po = out[slot(p)];
          AMLA_ASSERT(emitted[slot(p)]);
          for (const OpId x : po.exits) (is_data ? data_after : order_after).push_back(x);
        }
        const Cycles cross = chip.handoff_latency;
        Label lab;
        lab.name = so.name;
        lab.category = spec.name;
        lab.phase = st.phase;
        if (spec.name == "C1" || spec.name == "C2") {
          const bool is_c1 = spec.name == "C1";
          const Tiling tl = is_c1 ? c1_of(m, n) : c2_of(m, n);
          AOperand a;
          BOperand b;
          if (is_c1) {
            b.from_hbm = true;
            if (u.q_resident) {
              if (c1_done == 0) {
                a.load = true;
                a.from_hbm = true;
                a.pool = u.q_pool;
                a.release_at_end = false;
              } else {
                a.load = false;
                a.resident = q_loads;
              }
            } else {
              a.load = true;
              a.from_hbm = c1_done == 0;
              a.pool = u.q_pool;
            }
          } else {
            b.from_hbm = false;
            a.load = true;
            a.from_hbm = false;
            a.pool = u.p_pool;
            a.after = data_after;  // P comes from [V1]
            a.after_delay = cross;
          }
          // Ordering edges (serial schedules) hold back every load of the stage.
          const bool first_of_task = serial && t.stage == 0 && t.block == 0;
          if (first_of_task)
            order_after.insert(order_after.end(), prev_task_exits.begin(), prev_task_exits.end());
          const CubeStageOps ops = emit_cube_stage(e, u.cube, chip, tl, a, b, lab);
          for (const OpId ld : ops.loads)
            for (const OpId x : order_after) e.depend(ld, x, cross);
          if (is_c1) {
            if (u.q_resident) {
              if (c1_done == 0) q_loads = ops.a_loads;
              q_last_reads = ops.a_last_reads;
            }
            ++c1_done;
          }
          so.exits = {ops.fixps.back()};
          so.entries = ops.loads;
          so.span_first = ops.first_mmad;
          so.span_last = ops.last_mmad;
        } else {
          // Vector stage on each Vector core (its share of the rows).
          for (int j = 0; j < vpc; ++j) {
            const double r = rows_v[static_cast<std::size_t>(j)];
            if (r <= 0) continue;
            const Cycles dur = detail::vector_stage_of(chip, w, opt, spec.name, r, n, t.block);
            const OpId op = e.add_op(u.vec[static_cast<std::size_t>(j)], Work::compute(dur), lab);
            for (const auto& [p, is_data] : producers(t, order)) {
              const auto& po = out[slot(p)];
              const Cycles d = po.cube ? cross : Cycles{0};
              for (const OpId x : po.exits) e.depend(op, x, d);
              (void)is_data;
            }
            so.exits.push_back(op);
            so.entries.push_back(op);
            if (!so.span_first.valid()) so.span_first = op;
            so.span_last = op;
          }
        }
        out[slot(t)] = so;
        emitted[slot(t)] = 1;
      };
      // Emit the cube and vector programs merged in an order where producers come first.
      const auto& cube_prog = order.schedule.units[0].tasks;
      const auto& vec_prog = order.schedule.units[1].tasks;
      std::size_t ic = 0, iv = 0;
      auto ready = [&](const ScheduledTask& st) {
        for (const auto& [p, is_data] : producers(st.task, order)) {
          (void)is_data;
          if (!emitted[slot(p)]) return false;
        }
        return true;
      };
      while (ic < cube_prog.size() || iv < vec_prog.size()) {
        if (ic < cube_prog.size() && ready(cube_prog[ic])) {
          emit(cube_prog[ic++]);
        } else if (iv < vec_prog.size() && ready(vec_prog[iv])) {
          emit(vec_prog[iv++]);
        } else {
          AMLA_ASSERT(false);  // the schedule builders never produce a cycle
          break;
        }
      }
      if (u.q_resident)
        for (const OpId r : q_last_reads) e.release(r, u.q_pool);
      prev_task_exits = out[slot({chain.tail_index(), 0})].exits;
      if (rec && static_cast<int>(ci) < opt.timeline_cores)
        for (auto& so : out) u.stages.push_back(std::move(so));
    }
  }

  const RunResult run = e.run();
  if (!take_run(res, e, run)) return res;
  res.cycles = run.makespan;
  res.time = chip.clock.to_seconds(res.cycles) + chip.fixed_overhead;
  res.fu = res.flops / (res.time.count * chip.peak_flops_per_s());
  double hbm_bytes = 0;
  for (const auto l : hbm) hbm_bytes += e.link_stats(l).bytes.count;
  res.hbm_bytes = Bytes{hbm_bytes};
  res.hbm_utilization = hbm_bytes / (chip.dies * chip.hbm_bytes_per_s_per_die * res.time.count);

  // ---- summaries over all the chip's units (unsimulated cores count as idle) ----
  const double span = static_cast<double>(res.cycles.count);
  auto summarize = [&](const char* name, const std::vector<UnitId>& units, double total_units) {
    PipeSummary p;
    p.pipe = name;
    for (const auto id : units) {
      const UnitStats s = e.unit_stats(id);
      p.busy += s.multiplicity * static_cast<double>(s.busy.count);
      p.stalled_on_data += s.multiplicity * static_cast<double>(s.stalled_on_data.count);
      p.stalled_on_buffer += s.multiplicity * static_cast<double>(s.stalled_on_buffer.count);
    }
    const double total = total_units * span;
    if (total > 0) {
      p.busy /= total;
      p.stalled_on_data /= total;
      p.stalled_on_buffer /= total;
      p.idle = std::max(0.0, 1 - p.busy - p.stalled_on_data - p.stalled_on_buffer);
    }
    return p;
  };
  const char* names[4] = {"MTE2", "MTE1", "MMAD", "FixP"};
  for (int k = 0; k < 4; ++k) res.pipes.push_back(summarize(names[k], all_cube_pipes[k], cores));
  res.pipes.push_back(summarize("Vector", all_vec, chip.vector_cores()));
  for (std::size_t i = 0; i < e.unit_count(); ++i)
    res.units.push_back(e.unit_stats(UnitId{static_cast<std::int32_t>(i)}));

  if (rec) {
    res.timeline.title = std::string(to_string(opt.variant)) + " decode, B " +
                         std::to_string(w.batch()) + ", S_q " + std::to_string(w.s_q) + ", S_k " +
                         (w.is_uniform() ? std::string{} : "<= ") + std::to_string(w.max_seqlen()) +
                         " on " + chip.name;
    res.timeline.clock = chip.clock;
    const Timeline units_tl = e.timeline("", chip.clock);
    for (std::size_t ci = 0; ci < cu.size() && static_cast<int>(ci) < opt.timeline_cores; ++ci) {
      const auto& u = cu[ci];
      Lane stages;
      stages.name =
          u.cube.name + (class_size[ci] > 1
                             ? " (x" + std::to_string(static_cast<int>(class_size[ci])) + ")"
                             : std::string{});
      for (const auto& so : u.stages) {
        if (!so.cube || !so.span_first.valid()) continue;
        stages.intervals.push_back(
            {e.op_start(so.span_first), e.op_end(so.span_last), so.name, so.category, so.phase});
      }
      std::sort(stages.intervals.begin(), stages.intervals.end(),
                [](const Interval& a, const Interval& b) { return a.start < b.start; });
      res.timeline.lanes.push_back(std::move(stages));
      auto add_lane = [&](UnitId id) {
        res.timeline.lanes.push_back(units_tl.lanes[static_cast<std::size_t>(id.index)]);
      };
      add_lane(u.cube.mte2);
      add_lane(u.cube.mte1);
      add_lane(u.cube.mmad);
      add_lane(u.cube.fixp);
      for (const auto v : u.vec) add_lane(v);
    }
  }
  return res;
}

}  // namespace amla::sim
