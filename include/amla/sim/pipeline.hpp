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
//   * cyclic_schedule: a steady *cycle arrangement* (per unit, which stages at which block
//     offsets: AMLA's cube [C1(k+2), C2(k)], vector [V1(k+1)]), from which the preload, steady
//     and drain phases follow;
//   * or by hand (any arrangement).
// simulate_schedule runs one on the discrete-event engine. Malformed input (a stage index out of
// range, a task listed twice, a Cube stage on a Vector unit) throws amla::invalid_argument; a
// well-formed schedule that cannot run (it needs a task no unit runs, or its dependencies and
// program orders form a cycle) is returned infeasible, with a reason that names the tasks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/sim/engine.hpp"
#include "amla/sim/timeline.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// Which kind of core runs a stage.
enum class UnitKind { cube, vector };

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
    for (const auto& s : stages)
      AMLA_REQUIRE(s.duration.count >= 0, "stage duration",
                   s.name + " = " + std::to_string(s.duration.count), "non-negative cycles");
    if (tail)
      AMLA_REQUIRE(tail->duration.count >= 0, "tail duration",
                   tail->name + " = " + std::to_string(tail->duration.count),
                   "non-negative cycles");
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
  std::vector<UnitProgram> units;
  std::vector<std::pair<TaskRef, TaskRef>> extra_deps;
};

/// A slot of a steady cycle: in cycle k, the unit runs stage `stage` of block k + `offset`.
struct ArrangementSlot {
  int stage = 0;
  int offset = 0;
};

/// One steady cycle: the Cube unit's slots and the Vector unit's slots, in execution order.
struct CycleArrangement {
  std::vector<ArrangementSlot> cube;
  std::vector<ArrangementSlot> vector;
};

/// The arrangement with no dependency inside a cycle: stage s of an S-stage chain runs on block
/// k + (S - 1 - s) in cycle k, each unit taking its stages in chain order. For AMLA's three
/// stages this is Figure 7: cube [C1(k+2), C2(k)], vector [V1(k+1)] (preload count 2); for Base's
/// four it is Figure 5's count-3 pipeline: cube [C1(k+3), C2(k+1)], vector [V1(k+2), V2(k)].
inline CycleArrangement preload_arrangement(const StageChain& chain) {
  chain.validate();
  CycleArrangement a;
  const int s_count = chain.size();
  for (int s = 0; s < s_count; ++s) {
    const ArrangementSlot slot{s, s_count - 1 - s};
    (chain.stages[static_cast<std::size_t>(s)].kind == UnitKind::cube ? a.cube : a.vector)
        .push_back(slot);
  }
  return a;
}

namespace detail {

inline std::string task_text(const StageChain& chain, TaskRef t) {
  if (t.stage == chain.tail_index()) return chain.tail->name;
  return chain.stages[static_cast<std::size_t>(t.stage)].name + "[" + std::to_string(t.block) + "]";
}

}  // namespace detail

/// Expands a cycle arrangement over `blocks` KV blocks: cycles k = -max(offset) ... run every slot
/// whose block k + offset exists; cycles before 0 are the preload, full cycles the steady loop,
/// the rest the drain; the tail (if any) ends the program of the first unit of its kind.
/// Each stage must appear exactly once in the arrangement (on a unit of its kind).
inline Schedule cyclic_schedule(const StageChain& chain, int blocks, const CycleArrangement& arr,
                                std::string name = "cyclic") {
  chain.validate();
  AMLA_REQUIRE(blocks >= 1, "blocks", blocks, ">= 1 KV block");
  std::vector<int> seen(static_cast<std::size_t>(chain.size()), 0);
  int max_off = 0, min_off = 0;
  bool first = true;
  auto scan = [&](const std::vector<ArrangementSlot>& slots, UnitKind kind) {
    for (const auto& s : slots) {
      AMLA_REQUIRE(s.stage >= 0 && s.stage < chain.size(), "arrangement stage", s.stage,
                   "an index into the chain's stages");
      AMLA_REQUIRE(chain.stages[static_cast<std::size_t>(s.stage)].kind == kind,
                   "arrangement stage", chain.stages[static_cast<std::size_t>(s.stage)].name,
                   std::string("a stage on the ") + to_string(kind) + " unit must be a " +
                       to_string(kind) + " stage");
      ++seen[static_cast<std::size_t>(s.stage)];
      max_off = first ? s.offset : std::max(max_off, s.offset);
      min_off = first ? s.offset : std::min(min_off, s.offset);
      first = false;
    }
  };
  scan(arr.cube, UnitKind::cube);
  scan(arr.vector, UnitKind::vector);
  for (int s = 0; s < chain.size(); ++s)
    AMLA_REQUIRE(seen[static_cast<std::size_t>(s)] == 1, "arrangement",
                 chain.stages[static_cast<std::size_t>(s)].name + " appears " +
                     std::to_string(seen[static_cast<std::size_t>(s)]) + " times",
                 "every stage appears exactly once");

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
  AMLA_REQUIRE(blocks >= 1, "blocks", blocks, ">= 1 KV block");
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

/// The outcome of simulate_schedule.
struct ScheduleResult {
  bool feasible = false;
  std::string reason;  ///< why not, naming the tasks
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
                     task_text(chain, flat[static_cast<std::size_t>(x)].t);
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
    text += " -> " + task_text(chain, f.t) + " (" + why + ")";
  }
  return text;
}

}  // namespace detail

/// Runs `sch` with stage durations from `chain`; every Cube <-> Vector hand-over costs
/// `handoff` cycles (also on extra ordering edges that cross kinds). `clock` labels the Timeline.
inline ScheduleResult simulate_schedule(const StageChain& chain, const Schedule& sch,
                                        Cycles handoff = Cycles{0}, Hertz clock = Hertz{1e9}) {
  chain.validate();
  AMLA_REQUIRE(sch.blocks >= 1, "blocks", sch.blocks, ">= 1 KV block");
  AMLA_REQUIRE(handoff.count >= 0, "handoff", handoff.count, "non-negative cycles");
  const int S = chain.size();
  const int slots = S + 1;  // stages + tail
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
                   detail::task_text(chain, t) + " on unit '" + sch.units[u].name + "'",
                   std::string("a ") + to_string(chain.spec(t.stage).kind) +
                       " stage runs on a unit of that kind");
      AMLA_REQUIRE(where[key(t)] < 0, "task", detail::task_text(chain, t),
                   "each task appears once in the schedule");
      where[key(t)] = static_cast<int>(flat.size());
      flat.push_back({t, static_cast<int>(u), st.phase});
    }
  }
  for (const auto& [c, p] : sch.extra_deps)
    for (const TaskRef t : {c, p})
      AMLA_REQUIRE(is_task(t), "extra dependency",
                   "stage " + std::to_string(t.stage) + " block " + std::to_string(t.block),
                   "a task of the chain and block range");

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
        res.reason = "missing producer: " + detail::task_text(chain, t) + " needs " +
                     detail::task_text(chain, p) + ", which no unit runs";
        return res;
      }
      pred[i].push_back({where[key(p)], 0});
    }
  }
  for (const auto& [c, p] : sch.extra_deps) {
    if (where[key(c)] < 0) continue;  // an edge into a task nobody runs constrains nothing
    if (where[key(p)] < 0) {
      res.reason = "missing producer: " + detail::task_text(chain, c) + " is ordered after " +
                   detail::task_text(chain, p) + ", which no unit runs";
      return res;
    }
    pred[static_cast<std::size_t>(where[key(c)])].push_back({where[key(p)], 2});
  }
  // Data edges plus program order must be acyclic.
  {
    auto with_order = pred;
    for (const auto& u : sch.units)
      for (std::size_t j = 1; j < u.tasks.size(); ++j)
        with_order[static_cast<std::size_t>(where[key(u.tasks[j].task)])].push_back(
            {where[key(u.tasks[j - 1].task)], 1});
    std::string cyc = detail::find_cycle(chain, sch, flat, with_order);
    if (!cyc.empty()) {
      res.reason = std::move(cyc);
      return res;
    }
  }

  Engine e(true);
  std::vector<UnitId> units;
  for (const auto& u : sch.units) units.push_back(e.add_unit(u.name));
  std::vector<OpId> ops(flat.size());
  for (std::size_t i = 0; i < flat.size(); ++i) {
    const auto& f = flat[i];
    const auto& spec = chain.spec(f.t.stage);
    Label l;
    l.name = detail::task_text(chain, f.t);
    l.category = spec.name;
    l.phase = f.phase;
    ops[i] = e.add_op(units[static_cast<std::size_t>(f.unit)], Work::compute(spec.duration), l);
  }
  for (std::size_t i = 0; i < flat.size(); ++i) {
    for (const auto& w : pred[i]) {
      const auto& p = flat[static_cast<std::size_t>(w.producer)];
      const bool cross = chain.spec(p.t.stage).kind != chain.spec(flat[i].t.stage).kind;
      e.depend(ops[i], ops[static_cast<std::size_t>(w.producer)], cross ? handoff : Cycles{0});
    }
  }
  const RunResult run = e.run();
  AMLA_ASSERT(run.ok);  // acyclic and pool-free: it always completes
  res.feasible = true;
  res.makespan = run.makespan;
  res.events = run.events;
  for (std::size_t i = 0; i < flat.size(); ++i)
    res.tasks.push_back({flat[i].t, detail::task_text(chain, flat[i].t), flat[i].unit,
                         e.op_start(ops[i]), e.op_end(ops[i])});
  for (const auto u : units) res.units.push_back(e.unit_stats(u));
  res.timeline = e.timeline(sch.name + " schedule", clock);
  return res;
}

}  // namespace amla::sim
