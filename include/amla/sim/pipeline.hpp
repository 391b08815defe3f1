// amla/sim/pipeline.hpp: stage-level schedules across Cube and Vector units (AMLA Section 4.1,
// Figures 5-7).
//
// A FlashAttention loop over KV blocks is a chain of stages per block, [C1] -> [V1] -> [C2] ->
// [V2] (AMLA: [C1] -> [V1] -> [C2], its [V2] being gone), optionally followed by one tail stage
// after the last block (the final normalisation, "last V"). Cube stages run on Cube units, Vector
// stages on Vector units, and every hand-over between the two kinds goes through GM, which costs
// a latency. Dependencies:
//   * stage s of block b needs stage s - 1 of block b;
//   * a stage that carries state across blocks (the online softmax's running max and sum in [V1],
//     Base's O in [V2]) needs the same stage of block b - 1;
//   * the tail needs the last stage of the last block.
// A *schedule* gives each unit its program: the order in which it runs its tasks (and may add
// extra ordering edges, e.g. Base's fully serial order). Schedules are built by
//   * serial_schedule: Base's order, every task after the previous one, whatever its unit;
//   * cyclic_schedule: a steady *Arrangement* (per unit, which stages of which block offsets in
//     which slot: AMLA's cube [C1(k+2), C2(k)], vector [V1(k+1)]), from which the preload,
//     steady and drain phases follow. Arrangements come from preload_arrangement (Figure 7 and
//     its Base analogue), from the preload theory (sim/preload_theory.hpp: Theorem B.1's
//     construction, the exhaustive optimum, any timed Cycle, converted by
//     preload::chain_arrangement), or from a user;
//   * or by hand.
// simulate_schedule is the simulator's one list scheduler: every unit runs its program in order,
// each task as soon as its unit is free and its inputs have arrived, on the discrete-event engine.
// A zero-length task takes no unit time: it happens when its inputs are ready and never holds up
// its unit's other tasks. Malformed input (a stage index out of range, a task listed twice, a Cube
// stage on a Vector unit) throws amla::invalid_argument; a well-formed schedule that cannot run
// (it needs a task no unit runs, or its dependencies and program orders form a cycle) comes back
// as a result that is not ok, with a reason that names the tasks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/sim/engine.hpp"
#include "amla/sim/status.hpp"
#include "amla/sim/timeline.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// Which kind of core runs a stage.
enum class UnitKind { cube, vector };

/// The limits of a stage-level schedule, so that every time and index stays in range and no
/// schedule runs for ever: a stage lasts at most 2^40 cycles; a chain has at most 1024 stages; an
/// arrangement's offsets lie in [-1024, 1024]; a schedule covers at most 10^6 KV blocks and
/// 10^7 tasks (blocks x (stages + tail)).
inline constexpr std::int64_t max_stage_cycles = std::int64_t{1} << 40;
inline constexpr int max_chain_stages = 1024;
inline constexpr int max_arrangement_offset = 1024;
inline constexpr int max_schedule_blocks = 1000000;
inline constexpr std::int64_t max_schedule_tasks = 10000000;

inline const char* to_string(UnitKind k) {
  return k == UnitKind::cube ? "Cube" : "Vector";
}

/// One stage of the per-block chain.
struct StageSpec {
  std::string name;  ///< "C1", "V1", ... (also the Timeline colour category)
  UnitKind kind = UnitKind::cube;
  Cycles duration{0};
  bool carries_state = false;  ///< needs the same stage of the previous block
};

/// The stages every KV block goes through, and the optional tail after the last block.
struct StageChain {
  std::vector<StageSpec> stages;
  std::optional<StageSpec> tail;

  /// AMLA: [C1] -> [V1] -> [C2] per block, then the last V.
  static StageChain amla(Cycles c1, Cycles v1, Cycles c2, Cycles last_v) {
    StageChain ch;
    ch.stages = {{"C1", UnitKind::cube, c1, false},
                 {"V1", UnitKind::vector, v1, true},
                 {"C2", UnitKind::cube, c2, false}};
    ch.tail = StageSpec{"LastV", UnitKind::vector, last_v, false};
    return ch;
  }
  /// Base (FlashAttention): [C1] -> [V1] -> [C2] -> [V2] per block, then the last V.
  static StageChain base(Cycles c1, Cycles v1, Cycles c2, Cycles v2, Cycles last_v) {
    StageChain ch;
    ch.stages = {{"C1", UnitKind::cube, c1, false},
                 {"V1", UnitKind::vector, v1, true},
                 {"C2", UnitKind::cube, c2, false},
                 {"V2", UnitKind::vector, v2, true}};
    ch.tail = StageSpec{"LastV", UnitKind::vector, last_v, false};
    return ch;
  }

  int size() const { return static_cast<int>(stages.size()); }
  /// The tail's stage index (== size()).
  int tail_index() const { return size(); }
  const StageSpec& spec(int stage) const {
    return stage == tail_index() ? *tail : stages[static_cast<std::size_t>(stage)];
  }

  void validate() const {
    AMLA_REQUIRE(!stages.empty(), "stages", stages.size(), "a chain has at least one stage");
    AMLA_REQUIRE(stages.size() <= static_cast<std::size_t>(max_chain_stages), "stages",
                 stages.size(), "at most max_chain_stages (1024) stages");
    for (const auto& s : stages)
      AMLA_REQUIRE(s.duration.count >= 0 && s.duration.count <= max_stage_cycles, "stage duration",
                   s.name + " = " + std::to_string(s.duration.count), "cycles in [0, 2^40]");
    if (tail)
      AMLA_REQUIRE(tail->duration.count >= 0 && tail->duration.count <= max_stage_cycles,
                   "tail duration", tail->name + " = " + std::to_string(tail->duration.count),
                   "cycles in [0, 2^40]");
  }
};

/// One task: stage `stage` of KV block `block` (the tail is stage chain.tail_index(), block 0).
struct TaskRef {
  int stage = 0;
  int block = 0;
  friend bool operator==(const TaskRef&, const TaskRef&) = default;
};

/// A task in a unit's program, with the pipeline phase it belongs to.
struct ScheduledTask {
  TaskRef task;
  Phase phase = Phase::none;
};

/// One unit and its program.
struct UnitProgram {
  std::string name;
  UnitKind kind = UnitKind::cube;
  std::vector<ScheduledTask> tasks;
};

/// A whole schedule: units with programs, plus extra ordering edges (consumer, producer).
struct Schedule {
  std::string name;
  int blocks = 0;
  int first_block_label = 0;  ///< the number block 0 has in task names ("C1[0]"; 1 counts from 1)
  std::vector<UnitProgram> units;
  std::vector<std::pair<TaskRef, TaskRef>> extra_deps;
};

/// A slot of a steady cycle: in cycle k, the unit runs stage `stage` of block k + `offset`.
struct ArrangementSlot {
  int stage = 0;
  int offset = 0;
  friend bool operator==(const ArrangementSlot&, const ArrangementSlot&) = default;
};

/// The simulator's one arrangement type: which stage of which block (an offset from the cycle's
/// index) runs in which slot on which unit, for one steady cycle of a stage chain. The Cube
/// unit's slots and the Vector unit's slots are listed in execution order; every stage of the
/// chain appears exactly once, on a unit of its kind. The preload theory's timed Cycles (stage
/// offsets in a window, sim/preload_theory.hpp) convert to it with preload::chain_arrangement.
struct Arrangement {
  std::vector<ArrangementSlot> cube;
  std::vector<ArrangementSlot> vector;
  friend bool operator==(const Arrangement&, const Arrangement&) = default;

  /// The largest offset: how many cycles the first stage runs ahead of the last (for Figure 7,
  /// the preload count 2).
  int lead() const {
    int hi = 0, lo = 0;
    bool first = true;
    for (const auto* slots : {&cube, &vector})
      for (const auto& x : *slots) {
        hi = first ? x.offset : std::max(hi, x.offset);
        lo = first ? x.offset : std::min(lo, x.offset);
        first = false;
      }
    return hi - lo;
  }
};

/// The arrangement with no dependency inside a cycle: stage s of an S-stage chain runs on block
/// k + (S - 1 - s) in cycle k, each unit taking its stages in chain order. For AMLA's three
/// stages this is Figure 7: cube [C1(k+2), C2(k)], vector [V1(k+1)] (preload count 2); for Base's
/// four it is Figure 5's count-3 pipeline: cube [C1(k+3), C2(k+1)], vector [V1(k+2), V2(k)].
inline Arrangement preload_arrangement(const StageChain& chain) {
  chain.validate();
  Arrangement a;
  const int s_count = chain.size();
  for (int s = 0; s < s_count; ++s) {
    const ArrangementSlot slot{s, s_count - 1 - s};
    (chain.stages[static_cast<std::size_t>(s)].kind == UnitKind::cube ? a.cube : a.vector)
        .push_back(slot);
  }
  return a;
}

namespace detail {

/// Tasks of a schedule of `blocks` KV blocks over `chain` (every stage of every block, the tail).
inline std::int64_t schedule_tasks(const StageChain& chain, int blocks) {
  return static_cast<std::int64_t>(blocks) * (chain.size() + 1);
}

/// Throws amla::invalid_argument unless 1 <= blocks <= max_schedule_blocks and the schedule has
/// at most max_schedule_tasks tasks.
inline void require_schedule_blocks(const StageChain& chain, int blocks) {
  AMLA_REQUIRE(blocks >= 1 && blocks <= max_schedule_blocks, "blocks", blocks,
               "in [1, 10^6] KV blocks");
  AMLA_REQUIRE(schedule_tasks(chain, blocks) <= max_schedule_tasks, "blocks", blocks,
               "blocks x (stages + 1) <= 10^7 tasks");
}

inline std::string task_text(const StageChain& chain, TaskRef t, int first_block_label = 0) {
  if (t.stage == chain.tail_index()) return chain.tail->name;
  return chain.stages[static_cast<std::size_t>(t.stage)].name + "[" +
         std::to_string(t.block + first_block_label) + "]";
}

}  // namespace detail

/// `arr` in the paper's notation, e.g. "cube [C1(k+2), C2(k)], vector [V1(k+1)]" (stage names
/// from `chain`; a slot naming no stage of it shows its index).
inline std::string arrangement_text(const StageChain& chain, const Arrangement& arr) {
  std::string t;
  for (const UnitKind kind : {UnitKind::cube, UnitKind::vector}) {
    t += kind == UnitKind::cube ? "cube [" : "], vector [";
    bool first = true;
    for (const auto& x : kind == UnitKind::cube ? arr.cube : arr.vector) {
      t += first ? "" : ", ";
      first = false;
      // (appends, not "#" + to_string: GCC 12 -Wrestrict)
      if (x.stage >= 0 && x.stage < chain.size()) {
        t += chain.stages[static_cast<std::size_t>(x.stage)].name;
      } else {
        t += '#';
        t += std::to_string(x.stage);
      }
      t += "(k";
      if (x.offset > 0) t += '+';
      if (x.offset != 0) t += std::to_string(x.offset);
      t += ')';
    }
  }
  return t + "]";
}

/// Whether `arr` is an arrangement of `chain`: every slot names a stage of the chain on a unit of
/// that stage's kind with an offset in [-max_arrangement_offset, max_arrangement_offset], and
/// every stage appears exactly once. The reason names the stage at fault.
/// (Whether its order can run, i.e. has no dependency cycle, is simulate_schedule's answer.)
inline Status check_arrangement(const StageChain& chain, const Arrangement& arr) {
  chain.validate();
  std::vector<int> seen(static_cast<std::size_t>(chain.size()), 0);
  for (const UnitKind kind : {UnitKind::cube, UnitKind::vector}) {
    for (const auto& x : kind == UnitKind::cube ? arr.cube : arr.vector) {
      if (x.stage < 0 || x.stage >= chain.size())
        return Status::fail("arrangement stage " + std::to_string(x.stage) + " on the " +
                            to_string(kind) + " unit is not a stage of the chain (0.." +
                            std::to_string(chain.size() - 1) + ")");
      const StageSpec& spec = chain.stages[static_cast<std::size_t>(x.stage)];
      if (x.offset < -max_arrangement_offset || x.offset > max_arrangement_offset)
        return Status::fail("arrangement offset " + std::to_string(x.offset) + " of " + spec.name +
                            " is outside [-1024, 1024] (max_arrangement_offset)");
      if (spec.kind != kind)
        return Status::fail("arrangement puts " + spec.name + ", a " + to_string(spec.kind) +
                            " stage, on the " + to_string(kind) + " unit");
      ++seen[static_cast<std::size_t>(x.stage)];
    }
  }
  for (int st = 0; st < chain.size(); ++st)
    if (seen[static_cast<std::size_t>(st)] != 1)
      return Status::fail("arrangement has " + chain.stages[static_cast<std::size_t>(st)].name +
                          " " + std::to_string(seen[static_cast<std::size_t>(st)]) +
                          " times; every stage of the chain appears exactly once");
  return Status::success();
}

/// Expands a cycle arrangement over `blocks` KV blocks: cycles k = -max(offset) ... run every slot
/// whose block k + offset exists; cycles before 0 are the preload, full cycles the steady loop,
/// the rest the drain; the tail (if any) ends the program of the first unit of its kind.
/// Each stage must appear exactly once in the arrangement (on a unit of its kind).
inline Schedule cyclic_schedule(const StageChain& chain, int blocks, const Arrangement& arr,
                                std::string name = "cyclic") {
  chain.validate();
  detail::require_schedule_blocks(chain, blocks);
  const Status fits = check_arrangement(chain, arr);
  AMLA_REQUIRE(fits.ok, "arrangement", fits.reason, "an arrangement of the chain's stages");
  int max_off = 0, min_off = 0;
  bool first = true;
  for (const auto* slots : {&arr.cube, &arr.vector})
    for (const auto& x : *slots) {
      max_off = first ? x.offset : std::max(max_off, x.offset);
      min_off = first ? x.offset : std::min(min_off, x.offset);
      first = false;
    }

  Schedule sch;
  sch.name = std::move(name);
  sch.blocks = blocks;
  sch.units = {{"cube", UnitKind::cube, {}}, {"vector", UnitKind::vector, {}}};
  const int all = static_cast<int>(arr.cube.size() + arr.vector.size());
  for (int k = -max_off; k <= blocks - 1 - min_off; ++k) {
    int valid = 0;
    for (const auto* slots : {&arr.cube, &arr.vector})
      for (const auto& s : *slots) valid += (k + s.offset >= 0 && k + s.offset < blocks);
    const Phase ph = k < 0 ? Phase::preload : (valid == all ? Phase::steady : Phase::drain);
    for (int u = 0; u < 2; ++u) {
      for (const auto& s : u == 0 ? arr.cube : arr.vector) {
        const int b = k + s.offset;
        if (b >= 0 && b < blocks)
          sch.units[static_cast<std::size_t>(u)].tasks.push_back({{s.stage, b}, ph});
      }
    }
  }
  if (chain.tail) {
    auto& u = chain.tail->kind == UnitKind::cube ? sch.units[0] : sch.units[1];
    u.tasks.push_back({{chain.tail_index(), 0}, Phase::drain});
  }
  return sch;
}

/// Base's serial order: for each block every stage in chain order, each task waiting for the
/// previous one (whatever unit ran it), then the tail.
inline Schedule serial_schedule(const StageChain& chain, int blocks) {
  chain.validate();
  detail::require_schedule_blocks(chain, blocks);
  Schedule sch;
  sch.name = "serial";
  sch.blocks = blocks;
  sch.units = {{"cube", UnitKind::cube, {}}, {"vector", UnitKind::vector, {}}};
  std::optional<TaskRef> prev;
  auto add = [&](TaskRef t, UnitKind kind) {
    sch.units[kind == UnitKind::cube ? 0 : 1].tasks.push_back({t, Phase::none});
    if (prev) sch.extra_deps.emplace_back(t, *prev);
    prev = t;
  };
  for (int b = 0; b < blocks; ++b)
    for (int s = 0; s < chain.size(); ++s)
      add({s, b}, chain.stages[static_cast<std::size_t>(s)].kind);
  if (chain.tail) add({chain.tail_index(), 0}, chain.tail->kind);
  return sch;
}

/// When a task ran.
struct TaskTiming {
  TaskRef task;
  std::string name;
  int unit = 0;
  Cycles start{0}, end{0};
};

/// The outcome of simulate_schedule: ok, or why not (naming the tasks).
struct ScheduleResult : Status {
  Cycles makespan{0};
  std::vector<TaskTiming> tasks;  ///< in unit-program order, unit by unit
  std::vector<UnitStats> units;
  Timeline timeline;
  std::int64_t events = 0;

  /// The timing of one task (throws when the schedule did not run it).
  const TaskTiming& at(TaskRef t) const {
    for (const auto& x : tasks)
      if (x.task == t) return x;
    AMLA_THROW("task", "stage " + std::to_string(t.stage) + " block " + std::to_string(t.block),
               "a task the schedule ran");
  }
};

namespace detail {

struct FlatTask {
  TaskRef t;
  int unit;
  Phase phase;
};

/// Why a consumer waits for a producer: 0 data, 1 program order, 2 an extra edge.
struct WaitEdge {
  int producer;
  int kind;
};

/// Finds a cycle in the wait graph and names it, or returns "" when there is none.
inline std::string find_cycle(const StageChain& chain, const Schedule& sch,
                              const std::vector<FlatTask>& flat,
                              const std::vector<std::vector<WaitEdge>>& pred) {
  const std::size_t n = flat.size();
  std::vector<int> indeg(n, 0);
  std::vector<std::vector<int>> succ(n);
  for (std::size_t i = 0; i < n; ++i)
    for (const auto& e : pred[i]) {
      ++indeg[i];
      succ[static_cast<std::size_t>(e.producer)].push_back(static_cast<int>(i));
    }
  std::vector<int> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) ready.push_back(static_cast<int>(i));
  std::size_t done = 0;
  while (!ready.empty()) {
    const int x = ready.back();
    ready.pop_back();
    ++done;
    for (const int y : succ[static_cast<std::size_t>(x)])
      if (--indeg[static_cast<std::size_t>(y)] == 0) ready.push_back(y);
  }
  if (done == n) return {};
  // Every task left has a predecessor left: walk backwards until a task repeats.
  int x = 0;
  while (indeg[static_cast<std::size_t>(x)] == 0) ++x;
  std::vector<int> seen_at(n, -1), nodes, kinds;  // kinds[i]: edge nodes[i+1] -> nodes[i]
  while (seen_at[static_cast<std::size_t>(x)] < 0) {
    seen_at[static_cast<std::size_t>(x)] = static_cast<int>(nodes.size());
    nodes.push_back(x);
    for (const auto& e : pred[static_cast<std::size_t>(x)])
      if (indeg[static_cast<std::size_t>(e.producer)] > 0) {
        kinds.push_back(e.kind);
        x = e.producer;
        break;
      }
  }
  // The cycle is nodes[r..] with nodes[r] == x; producer -> consumer order runs backwards.
  const auto r = static_cast<std::size_t>(seen_at[static_cast<std::size_t>(x)]);
  std::string text = "dependency cycle, the schedule can never run: " +
                     task_text(chain, flat[static_cast<std::size_t>(x)].t, sch.first_block_label);
  // Forward: x = nodes[r] feeds nodes[last], which feeds nodes[last - 1], ..., back to nodes[r].
  for (std::size_t i = nodes.size(); i-- > r;) {
    const int node = nodes[i];
    const int kind = kinds[i];  // edge nodes[i+1] (or x when i is last) -> nodes[i]
    const auto& f = flat[static_cast<std::size_t>(node)];
    std::string why;
    if (kind == 0)
      why = "needs its data";
    else if (kind == 1)
      why = "comes after it in " + sch.units[static_cast<std::size_t>(f.unit)].name + "'s program";
    else
      why = "is ordered after it";
    text += " -> " + task_text(chain, f.t, sch.first_block_label) + " (" + why + ")";
  }
  return text;
}

}  // namespace detail

/// Runs `sch` with stage durations from `chain` (the list scheduler: each unit in program order,
/// each task as soon as its unit is free and its inputs are in; zero-length tasks off the units);
/// every Cube <-> Vector hand-over costs `handoff` cycles (also on extra ordering edges that cross
/// kinds). `clock` labels the Timeline.
inline ScheduleResult simulate_schedule(const StageChain& chain, const Schedule& sch,
                                        Cycles handoff = Cycles{0}, Hertz clock = Hertz{1e9}) {
  chain.validate();
  AMLA_REQUIRE(sch.blocks >= 1, "blocks", sch.blocks, ">= 1 KV block");
  AMLA_REQUIRE(handoff.count >= 0 && handoff.count <= max_stage_cycles, "handoff", handoff.count,
               "cycles in [0, 2^40]");
  if (sch.blocks > max_schedule_blocks ||
      detail::schedule_tasks(chain, sch.blocks) > max_schedule_tasks) {
    ScheduleResult too_big;
    too_big.set_failed("a schedule of " + std::to_string(sch.blocks) + " KV blocks over " +
                       std::to_string(chain.size()) +
                       " stages exceeds the limits (10^6 blocks, 10^7 tasks)");
    return too_big;
  }
  const int S = chain.size();
  const int slots = S + 1;  // stages + tail
  const int label0 = sch.first_block_label;
  auto text = [&](TaskRef t) { return detail::task_text(chain, t, label0); };
  auto is_task = [&](TaskRef t) {
    const bool tail = chain.tail && t.stage == chain.tail_index();
    return t.stage >= 0 && (t.stage < S || tail) && t.block >= 0 && t.block < sch.blocks &&
           (!tail || t.block == 0);
  };
  auto key = [&](TaskRef t) { return static_cast<std::size_t>(t.block * slots + t.stage); };
  std::vector<int> where(static_cast<std::size_t>(sch.blocks * slots), -1);
  std::vector<detail::FlatTask> flat;
  for (std::size_t u = 0; u < sch.units.size(); ++u) {
    for (const auto& st : sch.units[u].tasks) {
      const TaskRef t = st.task;
      AMLA_REQUIRE(is_task(t), "task",
                   "stage " + std::to_string(t.stage) + " block " + std::to_string(t.block),
                   "a stage of the chain (or its tail, block 0) and 0 <= block < blocks");
      AMLA_REQUIRE(chain.spec(t.stage).kind == sch.units[u].kind, "task",
                   text(t) + " on unit '" + sch.units[u].name + "'",
                   std::string("a ") + to_string(chain.spec(t.stage).kind) +
                       " stage runs on a unit of that kind");
      AMLA_REQUIRE(where[key(t)] < 0, "task", text(t), "each task appears once in the schedule");
      where[key(t)] = static_cast<int>(flat.size());
      flat.push_back({t, static_cast<int>(u), st.phase});
    }
  }
  for (const auto& [c, p] : sch.extra_deps)
    for (const TaskRef t : {c, p})
      AMLA_REQUIRE(is_task(t), "extra dependency",
                   "stage " + std::to_string(t.stage) + " block " + std::to_string(t.block),
                   "a task of the chain and block range");
  auto zero = [&](std::size_t i) { return chain.spec(flat[i].t.stage).duration.count == 0; };

  ScheduleResult res;
  // What each scheduled task waits for.
  std::vector<std::vector<detail::WaitEdge>> pred(flat.size());
  for (std::size_t i = 0; i < flat.size(); ++i) {
    const TaskRef t = flat[i].t;
    std::vector<TaskRef> need;
    if (chain.tail && t.stage == chain.tail_index()) {
      need.push_back({S - 1, sch.blocks - 1});
    } else {
      if (t.stage > 0) need.push_back({t.stage - 1, t.block});
      if (chain.stages[static_cast<std::size_t>(t.stage)].carries_state && t.block > 0)
        need.push_back({t.stage, t.block - 1});
    }
    for (const TaskRef p : need) {
      if (where[key(p)] < 0) {
        res.set_failed("missing producer: " + text(t) + " needs " + text(p) +
                       ", which no unit runs");
        return res;
      }
      pred[i].push_back({where[key(p)], 0});
    }
  }
  for (const auto& [c, p] : sch.extra_deps) {
    if (where[key(c)] < 0) continue;  // an edge into a task nobody runs constrains nothing
    if (where[key(p)] < 0) {
      res.set_failed("missing producer: " + text(c) + " is ordered after " + text(p) +
                     ", which no unit runs");
      return res;
    }
    pred[static_cast<std::size_t>(where[key(c)])].push_back({where[key(p)], 2});
  }
  // Data edges plus program order (between the tasks that take unit time) must be acyclic.
  {
    auto with_order = pred;
    for (const auto& u : sch.units) {
      int prev = -1;
      for (const auto& st : u.tasks) {
        const int i = where[key(st.task)];
        if (zero(static_cast<std::size_t>(i))) continue;
        if (prev >= 0) with_order[static_cast<std::size_t>(i)].push_back({prev, 1});
        prev = i;
      }
    }
    std::string cyc = detail::find_cycle(chain, sch, flat, with_order);
    if (!cyc.empty()) {
      res.set_failed(std::move(cyc));
      return res;
    }
  }
  auto delay = [&](std::size_t producer, std::size_t consumer) {
    return chain.spec(flat[producer].t.stage).kind != chain.spec(flat[consumer].t.stage).kind
               ? handoff
               : Cycles{0};
  };
  // A zero-length task is no operation: its consumers wait directly for its producers (through
  // any run of zero-length tasks), with the hand-over delays added along the way.
  std::vector<std::vector<std::pair<int, Cycles>>> through(flat.size());
  std::vector<char> resolved(flat.size(), 0);
  auto resolve = [&](auto&& self, std::size_t z) -> const std::vector<std::pair<int, Cycles>>& {
    if (!resolved[z]) {
      for (const auto& w : pred[z]) {
        const auto p = static_cast<std::size_t>(w.producer);
        if (!zero(p)) {
          through[z].push_back({w.producer, delay(p, z)});
        } else {
          for (const auto& [q, dq] : self(self, p)) through[z].push_back({q, dq + delay(p, z)});
        }
      }
      resolved[z] = 1;
    }
    return through[z];
  };

  Engine e(true);
  std::vector<UnitId> units;
  for (const auto& u : sch.units) units.push_back(e.add_unit(u.name));
  std::vector<OpId> ops(flat.size());
  for (std::size_t i = 0; i < flat.size(); ++i) {
    if (zero(i)) continue;
    const auto& f = flat[i];
    const auto& spec = chain.spec(f.t.stage);
    Label l;
    l.name = text(f.t);
    l.category = spec.name;
    l.phase = f.phase;
    ops[i] = e.add_op(units[static_cast<std::size_t>(f.unit)], Work::compute(spec.duration), l);
  }
  for (std::size_t i = 0; i < flat.size(); ++i) {
    if (zero(i)) continue;
    for (const auto& [p, d] : resolve(resolve, i))
      e.depend(ops[i], ops[static_cast<std::size_t>(p)], d);
  }
  const RunResult run = e.run();
  if (!run.ok) {  // acyclic and pool-free, so only a run longer than max_run_cycles
    res.set_failed(run.reason);
    return res;
  }
  res.makespan = run.makespan;
  res.events = run.events;
  for (std::size_t i = 0; i < flat.size(); ++i) {
    Cycles start{0}, end{0};
    if (zero(i)) {
      for (const auto& [p, d] : resolve(resolve, i))
        start = std::max(start, e.op_end(ops[static_cast<std::size_t>(p)]) + d);
      end = start;
      res.makespan = std::max(res.makespan, end);
    } else {
      start = e.op_start(ops[i]);
      end = e.op_end(ops[i]);
    }
    res.tasks.push_back({flat[i].t, text(flat[i].t), flat[i].unit, start, end});
  }
  for (const auto u : units) res.units.push_back(e.unit_stats(u));
  res.timeline = e.timeline(sch.name + " schedule", clock);
  return res;
}

}  // namespace amla::sim
