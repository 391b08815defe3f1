// amla/sim/engine.hpp: the discrete-event engine under every level of the simulator.
//
// The model is the one hardware pipes obey. A *unit* (a Cube core's MTE2 / MTE1 / MMAD / FixP
// pipe, a Vector core, a whole Cube core in a stage-level schedule) executes its *program*, a list
// of operations, strictly in order, one at a time. An operation starts when
//   * it is at the head of its unit's program and the unit is free,
//   * every producer it depends on has ended, plus the producer's data latency and the edge's
//   delay,
//   * the buffer slots it acquires are free in their *pools* (counting semaphores: L1 K/V slots,
//     double-buffered L0A/L0B/L0C, ...); the slots come back when the operation that frees them
//     ends (usually a later consumer, which is what limits how far a pipe may run ahead).
// An operation costs either a fixed number of cycles (a MMAD, a Vector stage) or moves bytes at
// its unit's port rate; a transfer may also cross a shared *link* (HBM), whose bandwidth is split
// among the transfers on it by max-min fairness (processor sharing), recomputed whenever a
// transfer starts or ends. A unit may stand for several identical units (its multiplicity): its
// transfers then weigh that many times on links, which lets a symmetric many-core simulation run
// one representative per class of identical cores, exactly.
//
// Events are ordered by (cycle, insertion sequence), so a run is deterministic: the same inputs
// give the same cycles, bit for bit, on a given build (link sharing is computed in doubles, so a
// compiler that contracts floating-point expressions differently may move a rounding boundary).
// Time is integral Cycles; bytes are Bytes; rates are BytesPerCycle; a link's finishing time is
// rounded up to the next whole cycle.
//
// Deadlocks (a dependency cycle through the units' program orders, a pool too small for what is
// held at once) are not exceptions: run() returns a RunResult whose reason names the stuck
// operations. So is a run too long to represent: before simulating, run() bounds the makespan by
// the sum of every operation's own duration (a transfer at the slowest rate max-min fairness can
// give it), latency and dependency delays, plus the latest unit start; when that bound exceeds
// max_run_cycles (2^62) the run is refused with a reason naming the longest operation, so no time
// the engine computes can overflow. Malformed input (an unknown unit, a negative duration) throws
// amla::invalid_argument; misusing the object's state (building or running it again after run(),
// a release that returns more slots to a pool than it holds) throws std::logic_error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/sim/status.hpp"
#include "amla/sim/timeline.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// Handles into an Engine (indices; strong types so a unit is never passed as a pool).
struct UnitId {
  std::int32_t index = -1;
};
struct OpId {
  std::int32_t index = -1;
  constexpr bool valid() const { return index >= 0; }
};
struct PoolId {
  std::int32_t index = -1;
};
struct LinkId {
  std::int32_t index = -1;
  constexpr bool valid() const { return index >= 0; }
};
/// An interned Timeline category ("C1", "MTE2", ...), for building many operations cheaply.
struct CategoryId {
  std::uint16_t index = 0;
};

/// What an operation costs on its unit: a fixed number of cycles, or bytes moved at `rate`
/// (optionally across a shared link). `latency` delays when consumers see the operation's result
/// without keeping the unit busy (a pipelined memory access: the port is free for the next
/// request while the data is still in flight). `priority` is the share of a contended link the
/// transfer claims relative to the others on it (weighted max-min fairness: two transfers of
/// priorities 2 and 1 split the link 2:1 while neither is held by its own rate); all 1 is plain
/// max-min fairness.
struct Work {
  Cycles cycles{0};
  Bytes bytes{0};
  BytesPerCycle rate{0};
  LinkId link{};
  Cycles latency{0};
  double priority = 1;

  static Work compute(Cycles c, Cycles latency = Cycles{0}) {
    Work w;
    w.cycles = c;
    w.latency = latency;
    return w;
  }
  static Work transfer(Bytes b, BytesPerCycle rate, Cycles latency = Cycles{0},
                       LinkId link = LinkId{}, double priority = 1) {
    Work w;
    w.bytes = b;
    w.rate = rate;
    w.latency = latency;
    w.link = link;
    w.priority = priority;
    return w;
  }
};

/// How an operation shows up in a Timeline (and in deadlock messages).
struct Label {
  std::string name;      ///< e.g. "C1[b0,k3] MMAD m0n1k2"; may be empty when not recording
  std::string category;  ///< colour key: "C1", "V1", "C2", "V2", "LastV", "MTE2", ...
  Phase phase = Phase::none;
};

/// Time accounting of one unit over a run: busy + stalled_on_data + stalled_on_buffer + idle is
/// the makespan. "Stalled" means the unit had its next operation waiting: on producers (data) or
/// on a free buffer slot; "idle" means its program was finished (or not started by any cause the
/// engine knows of).
struct UnitStats {
  std::string name;
  Cycles busy{0};
  Cycles stalled_on_data{0};
  Cycles stalled_on_buffer{0};
  Cycles idle{0};
  std::int64_t ops = 0;
  double multiplicity = 1;
};

/// What crossed a shared link.
struct LinkStats {
  std::string name;
  Bytes bytes{0};    ///< counting multiplicities
  Cycles active{0};  ///< cycles with at least one transfer in flight
  BytesPerCycle capacity{0};
};

/// The outcome of Engine::run: ok, or a deadlock whose reason names the stuck operations and what
/// they wait on.
struct RunResult : Status {
  Cycles makespan{0};
  std::int64_t events = 0;
};

/// The longest run the engine accepts, in cycles (see run()).
inline constexpr std::int64_t max_run_cycles = std::int64_t{1} << 62;

/// The discrete-event engine. Build units, pools, links and operations, then run() once.
class Engine {
 public:
  /// With `record` false, labels' names are dropped (only categories kept) to save memory in big
  /// runs; timelines then name intervals by category.
  explicit Engine(bool record = true) : record_(record) { categories_.emplace_back(); }

  bool recording() const { return record_; }

  UnitId add_unit(std::string name, double multiplicity = 1) {
    AMLA_REQUIRE(multiplicity >= 1 && std::isfinite(multiplicity), "multiplicity", multiplicity,
                 "a unit stands for at least one real unit");
    require_building("add_unit");
    UnitState u;
    u.stats.name = std::move(name);
    u.stats.multiplicity = multiplicity;
    units_.push_back(std::move(u));
    return UnitId{static_cast<std::int32_t>(units_.size() - 1)};
  }

  /// `unit` starts nothing before cycle `start` (counted as idle, not as a stall).
  void set_start(UnitId unit, Cycles start) {
    require_building("set_start");
    AMLA_REQUIRE(unit.index >= 0 && unit.index < static_cast<std::int32_t>(units_.size()), "unit",
                 unit.index, "an id returned by add_unit");
    AMLA_REQUIRE(start.count >= 0, "start", start.count, "non-negative cycles");
    units_[static_cast<std::size_t>(unit.index)].start_at = start.count;
  }

  PoolId add_pool(std::string name, int capacity) {
    require_building("add_pool");
    AMLA_REQUIRE(capacity >= 0, "capacity", capacity, "a pool holds zero or more slots");
    PoolState p;
    p.name = std::move(name);
    p.capacity = capacity;
    p.available = capacity;
    pools_.push_back(std::move(p));
    return PoolId{static_cast<std::int32_t>(pools_.size() - 1)};
  }

  LinkId add_link(std::string name, BytesPerCycle capacity) {
    require_building("add_link");
    AMLA_REQUIRE(capacity.count > 0 && std::isfinite(capacity.count), "capacity", capacity.count,
                 "a link moves a positive, finite number of bytes per cycle");
    LinkState l;
    l.stats.name = std::move(name);
    l.stats.capacity = capacity;
    links_.push_back(std::move(l));
    return LinkId{static_cast<std::int32_t>(links_.size() - 1)};
  }

  /// Interns a category name (the same name always gives the same id).
  CategoryId category(std::string_view name) { return CategoryId{intern_category(name)}; }

  /// Reserves room for `ops` operations and `edges` dependencies (a speed hint only).
  void reserve(std::size_t ops, std::size_t edges) {
    ops_.reserve(ops);
    if (record_) names_.reserve(ops);
    edges_.reserve(edges);
    acquires_.reserve(ops);
    releases_.reserve(ops);
  }

  /// Appends an operation to `unit`'s program (program order = call order).
  OpId add_op(UnitId unit, const Work& work, Label label = {}) {
    return add_op(unit, work, category(label.category), label.phase, std::move(label.name));
  }

  /// The same with a pre-interned category; `name` is dropped unless recording.
  OpId add_op(UnitId unit, const Work& work, CategoryId cat, Phase phase, std::string name = {}) {
    require_building("add_op");
    AMLA_REQUIRE(unit.index >= 0 && unit.index < static_cast<std::int32_t>(units_.size()), "unit",
                 unit.index, "an id returned by add_unit");
    AMLA_REQUIRE(work.cycles.count >= 0, "work.cycles", work.cycles.count, "non-negative");
    AMLA_REQUIRE(work.latency.count >= 0, "work.latency", work.latency.count, "non-negative");
    AMLA_REQUIRE(work.bytes.count >= 0 && std::isfinite(work.bytes.count), "work.bytes",
                 work.bytes.count, "non-negative and finite");
    AMLA_REQUIRE(work.bytes.count == 0 || (work.rate.count > 0 && std::isfinite(work.rate.count)),
                 "work.rate", work.rate.count, "a transfer needs a positive finite port rate");
    AMLA_REQUIRE(work.bytes.count == 0 || work.cycles.count == 0, "work.cycles", work.cycles.count,
                 "an operation is either fixed cycles or a transfer, not both");
    AMLA_REQUIRE(!work.link.valid() || work.link.index < static_cast<std::int32_t>(links_.size()),
                 "work.link", work.link.index, "an id returned by add_link");
    AMLA_REQUIRE(work.priority >= 1e-6 && work.priority <= 1e6, "work.priority", work.priority,
                 "a share weight in [1e-6, 1e6]");
    OpState o;
    o.cycles = work.cycles.count;
    o.bytes = work.bytes.count;
    o.rate = work.rate.count;
    o.priority = work.priority;
    o.latency = work.latency.count;
    o.unit = unit.index;
    o.link = work.link.index;
    AMLA_REQUIRE(cat.index < categories_.size(), "category", cat.index,
                 "an id returned by category()");
    o.category = cat.index;
    o.phase = phase;
    ops_.push_back(o);
    if (record_) names_.push_back(std::move(name));
    units_[static_cast<std::size_t>(unit.index)].program.push_back(
        static_cast<std::int32_t>(ops_.size() - 1));
    return OpId{static_cast<std::int32_t>(ops_.size() - 1)};
  }

  /// `consumer` may start only `delay` cycles after `producer`'s result is visible
  /// (producer end + producer latency).
  void depend(OpId consumer, OpId producer, Cycles delay = Cycles{0}) {
    check_op(consumer, "consumer");
    check_op(producer, "producer");
    AMLA_REQUIRE(delay.count >= 0, "delay", delay.count, "non-negative");
    AMLA_REQUIRE(consumer.index != producer.index, "producer", producer.index,
                 "an operation cannot depend on itself");
    edges_.push_back(Edge{producer.index, consumer.index, delay.count});
  }

  /// `op` takes `count` slots of `pool` when it starts.
  void acquire(OpId op, PoolId pool, int count = 1) {
    check_op(op, "op");
    check_pool(pool);
    AMLA_REQUIRE(count > 0, "count", count, "positive");
    acquires_.push_back(PoolUse{op.index, pool.index, count});
  }

  /// `op` gives `count` slots back to `pool` when it ends.
  void release(OpId op, PoolId pool, int count = 1) {
    check_op(op, "op");
    check_pool(pool);
    AMLA_REQUIRE(count > 0, "count", count, "positive");
    releases_.push_back(PoolUse{op.index, pool.index, count});
  }

  std::size_t op_count() const { return ops_.size(); }
  std::size_t unit_count() const { return units_.size(); }

  /// Runs the simulation to completion (or to a deadlock, or refuses a run longer than
  /// max_run_cycles). Call once: a second call throws std::logic_error.
  RunResult run() {
    require_building("run");
    ran_ = true;
    finalize();
    if (std::string why = work_bound_violation(); !why.empty()) {
      RunResult refused;
      refused.set_failed(std::move(why));
      return refused;
    }
    for (auto& u : units_) {
      u.free_since = u.start_at;
      for (const std::int32_t op : u.program) {
        auto& o = ops_[static_cast<std::size_t>(op)];
        o.ready_at = std::max(o.ready_at, u.start_at);
      }
    }
    for (std::size_t u = 0; u < units_.size(); ++u) try_start(static_cast<std::int32_t>(u));
    while (!queue_.empty()) {
      const Event ev = queue_.top();
      queue_.pop();
      now_ = ev.time;
      ++events_;
      switch (ev.kind) {
        case EventKind::op_end:
          finish(ev.id);
          break;
        case EventKind::try_start: {
          auto& u = units_[static_cast<std::size_t>(ev.id)];
          if (u.try_at == ev.time) {
            u.try_at = -1;
            try_start(ev.id);
          }
          break;
        }
        case EventKind::link_check:
          if (links_[static_cast<std::size_t>(ev.id)].version == ev.aux) link_check(ev.id);
          break;
      }
    }
    RunResult r;
    r.events = events_;
    r.makespan = Cycles{makespan_};
    if (finished_ != ops_.size()) r.set_failed(deadlock_report());
    for (auto& u : units_) {
      const std::int64_t accounted =
          u.stats.busy.count + u.stats.stalled_on_data.count + u.stats.stalled_on_buffer.count;
      // Before start_at the unit is idle (free_since began there, so no stall was counted).
      u.stats.idle = Cycles{std::max<std::int64_t>(0, makespan_ - accounted)};
    }
    return r;
  }

  // ---- results (valid after run) ----
  Cycles op_start(OpId op) const {
    return Cycles{ops_.at(static_cast<std::size_t>(op.index)).start};
  }
  Cycles op_end(OpId op) const { return Cycles{ops_.at(static_cast<std::size_t>(op.index)).end}; }
  bool op_done(OpId op) const { return ops_.at(static_cast<std::size_t>(op.index)).end >= 0; }

  UnitStats unit_stats(UnitId unit) const {
    return units_.at(static_cast<std::size_t>(unit.index)).stats;
  }
  LinkStats link_stats(LinkId link) const {
    return links_.at(static_cast<std::size_t>(link.index)).stats;
  }

  /// The run as a Timeline: one lane per unit (filtered by `keep_unit` when given), one interval
  /// per operation that ran.
  Timeline timeline(std::string title, Hertz clock,
                    const std::function<bool(UnitId)>& keep_unit = {}) const {
    Timeline t;
    t.title = std::move(title);
    t.clock = clock;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (keep_unit && !keep_unit(UnitId{static_cast<std::int32_t>(u)})) continue;
      Lane lane;
      lane.name = units_[u].stats.name;
      for (const std::int32_t op : units_[u].program) {
        const auto& o = ops_[static_cast<std::size_t>(op)];
        if (o.end < 0) continue;
        Interval iv;
        iv.start = Cycles{o.start};
        iv.end = Cycles{o.end};
        iv.category = categories_[o.category];
        iv.name = record_ && !names_[static_cast<std::size_t>(op)].empty()
                      ? names_[static_cast<std::size_t>(op)]
                      : iv.category;
        iv.phase = o.phase;
        lane.intervals.push_back(std::move(iv));
      }
      t.lanes.push_back(std::move(lane));
    }
    return t;
  }

 private:
  enum class EventKind : std::uint8_t { op_end, try_start, link_check };
  struct Event {
    std::int64_t time;
    std::uint64_t seq;
    std::int64_t aux;
    std::int32_t id;
    EventKind kind;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct OpState {
    std::int64_t cycles = 0;
    double bytes = 0;
    double rate = 0;
    double priority = 1;
    std::int64_t latency = 0;
    std::int32_t unit = -1;
    std::int32_t link = -1;
    std::int64_t ready_at = 0;
    std::int32_t pending = 0;
    std::int64_t start = -1;
    std::int64_t end = -1;
    std::uint16_t category = 0;
    Phase phase = Phase::none;
  };
  struct Edge {
    std::int32_t from;
    std::int32_t to;
    std::int64_t delay;
  };
  struct PoolUse {
    std::int32_t op;
    std::int32_t pool;
    std::int32_t count;
  };
  struct UnitState {
    UnitStats stats;  // name, multiplicity and the time accounting, kept as the run goes
    std::vector<std::int32_t> program;
    std::size_t next = 0;
    bool running = false;
    std::int64_t start_at = 0;
    std::int64_t free_since = 0;
    std::int64_t try_at = -1;
    std::int32_t waiting_pool = -1;
  };
  struct PoolState {
    std::string name;
    int capacity = 0;
    int available = 0;
    std::vector<std::int32_t> waiters;  // units, FIFO
  };
  struct Flow {
    std::int32_t op;
    double remaining;
    double cap;
    double weight;  // the flows it stands for (its unit's multiplicity)
    double prio;    // its claim on the link per flow (Work::priority)
    double rate;
  };
  struct LinkState {
    LinkStats stats;  // name, capacity, bytes and active cycles, kept as the run goes
    std::vector<Flow> flows;
    std::int64_t last_update = 0;
    std::int64_t version = 0;
  };

  void check_op(OpId op, const char* what) const {
    require_building("depend/acquire/release");
    AMLA_REQUIRE(op.index >= 0 && op.index < static_cast<std::int32_t>(ops_.size()), what, op.index,
                 "an id returned by add_op");
  }
  void require_building(const char* function) const {
    if (ran_)
      throw std::logic_error(std::string("amla::sim::Engine::") + function +
                             ": the engine has run; an Engine runs once, so build everything "
                             "before run() and build a new Engine for another run");
  }

  /// Cycles operation `oi` can take on its own at worst: its fixed cycles, or its bytes at the
  /// slowest rate weighted max-min fairness can leave it (its port rate, or its share of its link
  /// when every unit that uses the link, counted with multiplicity, claims the link's largest
  /// priority), plus its latency.
  double worst_cycles(std::size_t oi, const std::vector<double>& link_weight,
                      const std::vector<double>& link_prio) const {
    const auto& o = ops_[oi];
    double t = static_cast<double>(o.cycles);
    if (o.bytes > 0) {
      double rate = o.rate;
      if (o.link >= 0) {
        const auto l = static_cast<std::size_t>(o.link);
        rate = std::min(
            rate, links_[l].stats.capacity.count * o.priority / (link_weight[l] * link_prio[l]));
      }
      t = std::ceil(o.bytes / rate);
    }
    return t + static_cast<double>(o.latency);
  }

  /// "" when every time of the run fits under max_run_cycles, else why not.
  std::string work_bound_violation() const {
    std::vector<double> link_weight(links_.size(), 0.0), link_prio(links_.size(), 0.0);
    for (const auto& o : ops_)
      if (o.link >= 0 && o.bytes > 0) {
        double& p = link_prio[static_cast<std::size_t>(o.link)];
        p = std::max(p, o.priority);
      }
    {
      std::vector<std::pair<std::int32_t, std::int32_t>> uses;  // (link, unit)
      for (const auto& o : ops_)
        if (o.link >= 0 && o.bytes > 0) uses.emplace_back(o.link, o.unit);
      std::sort(uses.begin(), uses.end());
      uses.erase(std::unique(uses.begin(), uses.end()), uses.end());
      for (const auto& [l, u] : uses)
        link_weight[static_cast<std::size_t>(l)] +=
            units_[static_cast<std::size_t>(u)].stats.multiplicity;
    }
    double bound = 0, longest = -1;
    std::size_t longest_op = 0;
    for (const auto& u : units_) bound = std::max(bound, static_cast<double>(u.start_at));
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const double t = worst_cycles(i, link_weight, link_prio);
      bound += t;
      if (t > longest) {
        longest = t;
        longest_op = i;
      }
    }
    for (const auto& e : edges_) bound += static_cast<double>(e.delay);
    if (bound <= static_cast<double>(max_run_cycles)) return {};
    return "the run could take up to " + amla::detail::to_text(bound) +
           " cycles (the sum of every operation's worst duration, latency and delay), more than "
           "the engine's limit max_run_cycles = 2^62; the longest operation, " +
           op_text(static_cast<std::int32_t>(longest_op)) + ", can take " +
           amla::detail::to_text(longest) + " cycles on its own";
  }
  void check_pool(PoolId pool) const {
    AMLA_REQUIRE(pool.index >= 0 && pool.index < static_cast<std::int32_t>(pools_.size()), "pool",
                 pool.index, "an id returned by add_pool");
  }

  std::uint16_t intern_category(std::string_view c) {
    for (std::size_t i = 0; i < categories_.size(); ++i)
      if (categories_[i] == c) return static_cast<std::uint16_t>(i);
    AMLA_REQUIRE(categories_.size() < 65535, "category", std::string(c), "at most 65535 kinds");
    categories_.emplace_back(c);
    return static_cast<std::uint16_t>(categories_.size() - 1);
  }

  /// Groups `items` by operation (key(item) in [0, n)), keeping their order within a group:
  /// group i is out[offsets[i], offsets[i + 1]) (compressed adjacency).
  template <class T, class Key>
  static void group_by_op(std::size_t n, const std::vector<T>& items, Key key,
                          std::vector<std::int32_t>& offsets, std::vector<T>& out) {
    offsets.assign(n + 1, 0);
    for (const T& x : items) ++offsets[static_cast<std::size_t>(key(x)) + 1];
    for (std::size_t i = 0; i < n; ++i) offsets[i + 1] += offsets[i];
    out.resize(items.size());
    std::vector<std::int32_t> fill(offsets.begin(), offsets.end() - 1);
    for (const T& x : items)
      out[static_cast<std::size_t>(fill[static_cast<std::size_t>(key(x))]++)] = x;
  }

  void finalize() {
    const std::size_t n = ops_.size();
    group_by_op(
        n, edges_, [](const Edge& e) { return e.from; }, succ_offsets_, succ_);
    for (const auto& e : edges_) ++ops_[static_cast<std::size_t>(e.to)].pending;
    const auto op_of = [](const PoolUse& u) { return u.op; };
    group_by_op(n, acquires_, op_of, acq_offsets_, acq_);
    group_by_op(n, releases_, op_of, rel_offsets_, rel_);
  }

  void push(std::int64_t time, EventKind kind, std::int32_t id, std::int64_t aux = 0) {
    queue_.push(Event{time, seq_++, aux, id, kind});
  }

  void try_start(std::int32_t ui) {
    auto& u = units_[static_cast<std::size_t>(ui)];
    if (u.running || u.next >= u.program.size()) return;
    const std::int32_t oi = u.program[u.next];
    auto& o = ops_[static_cast<std::size_t>(oi)];
    if (o.pending > 0) return;  // woken by the last producer's end
    if (o.ready_at > now_) {
      if (u.try_at != o.ready_at) {
        u.try_at = o.ready_at;
        push(o.ready_at, EventKind::try_start, ui);
      }
      return;
    }
    const auto a0 = static_cast<std::size_t>(acq_offsets_[static_cast<std::size_t>(oi)]);
    const auto a1 = static_cast<std::size_t>(acq_offsets_[static_cast<std::size_t>(oi) + 1]);
    for (std::size_t a = a0; a < a1; ++a) {
      auto& p = pools_[static_cast<std::size_t>(acq_[a].pool)];
      if (p.available < acq_[a].count) {
        if (u.waiting_pool != acq_[a].pool) {
          u.waiting_pool = acq_[a].pool;
          p.waiters.push_back(ui);
        }
        return;
      }
    }
    for (std::size_t a = a0; a < a1; ++a)
      pools_[static_cast<std::size_t>(acq_[a].pool)].available -= acq_[a].count;
    u.waiting_pool = -1;
    start(ui, oi);
  }

  void start(std::int32_t ui, std::int32_t oi) {
    auto& u = units_[static_cast<std::size_t>(ui)];
    auto& o = ops_[static_cast<std::size_t>(oi)];
    const std::int64_t gap = now_ - u.free_since;
    const std::int64_t data = std::clamp<std::int64_t>(o.ready_at - u.free_since, 0, gap);
    u.stats.stalled_on_data.count += data;
    u.stats.stalled_on_buffer.count += gap - data;
    u.running = true;
    o.start = now_;
    if (o.link >= 0 && o.bytes > 0) {
      auto& l = links_[static_cast<std::size_t>(o.link)];
      link_advance(l);
      l.flows.push_back(Flow{oi, o.bytes, o.rate, u.stats.multiplicity, o.priority, 0});
      link_reschedule(o.link);
      return;
    }
    std::int64_t d = o.cycles;
    if (o.bytes > 0) d = static_cast<std::int64_t>(std::ceil(o.bytes / o.rate - 1e-9));
    push(now_ + d, EventKind::op_end, oi);
  }

  void finish(std::int32_t oi) {
    auto& o = ops_[static_cast<std::size_t>(oi)];
    auto& u = units_[static_cast<std::size_t>(o.unit)];
    o.end = now_;
    u.running = false;
    u.free_since = now_;
    u.stats.busy.count += o.end - o.start;
    ++u.stats.ops;
    ++u.next;
    ++finished_;
    makespan_ = std::max(makespan_, now_);
    const std::int64_t visible = now_ + o.latency;
    // Producers -> consumers.
    const auto s0 = static_cast<std::size_t>(succ_offsets_[static_cast<std::size_t>(oi)]);
    const auto s1 = static_cast<std::size_t>(succ_offsets_[static_cast<std::size_t>(oi) + 1]);
    wake_.clear();
    for (std::size_t s = s0; s < s1; ++s) {
      auto& c = ops_[static_cast<std::size_t>(succ_[s].to)];
      c.ready_at = std::max(c.ready_at, visible + succ_[s].delay);
      if (--c.pending == 0) wake_.push_back(c.unit);
    }
    // Slots freed.
    const auto r0 = static_cast<std::size_t>(rel_offsets_[static_cast<std::size_t>(oi)]);
    const auto r1 = static_cast<std::size_t>(rel_offsets_[static_cast<std::size_t>(oi) + 1]);
    for (std::size_t r = r0; r < r1; ++r) {
      auto& p = pools_[static_cast<std::size_t>(rel_[r].pool)];
      p.available += rel_[r].count;
      if (p.available > p.capacity)
        throw std::logic_error(
            "amla::sim::Engine::run: " + op_text(oi) + " returns " + std::to_string(rel_[r].count) +
            " slot(s) to pool '" + p.name + "', which then holds " + std::to_string(p.available) +
            " of its " + std::to_string(p.capacity) + ": a release without a matching acquire");
      for (const auto w : p.waiters) {
        units_[static_cast<std::size_t>(w)].waiting_pool = -1;
        wake_.push_back(w);
      }
      p.waiters.clear();
    }
    // The unit's own next operation first (program order), then those woken, in wake order.
    // (try_start never calls finish, so wake_ is not touched while iterated.)
    try_start(o.unit);
    for (const auto w : wake_) try_start(w);
  }

  void link_advance(LinkState& l) {
    const std::int64_t dt = now_ - l.last_update;
    if (dt > 0) {
      if (!l.flows.empty()) l.stats.active.count += dt;
      for (auto& f : l.flows) {
        const double moved = std::min(f.remaining, f.rate * static_cast<double>(dt));
        f.remaining -= f.rate * static_cast<double>(dt);
        l.stats.bytes.count += moved * f.weight;
      }
    }
    l.last_update = now_;
  }

  // Weighted max-min fair rates (water filling): each flow stands for `weight` identical flows
  // and claims `prio` shares per flow; a flow held below its share by its own cap gets the cap,
  // the others split what is left in proportion to their shares.
  void link_rates(LinkState& l) {
    double cap_left = l.stats.capacity.count;
    double shares_left = 0;
    bool uniform = true;
    for (const auto& f : l.flows) {
      shares_left += f.weight * f.prio;
      uniform = uniform && f.cap == l.flows.front().cap && f.prio == l.flows.front().prio;
    }
    if (uniform) {  // the common case: one kind of port, one priority
      const double r = std::min(l.flows.front().cap, cap_left / shares_left * l.flows.front().prio);
      for (auto& f : l.flows) f.rate = r;
      return;
    }
    order_.resize(l.flows.size());
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    // Insertion sort by cap per share (stable, no allocation; a link carries few flows).
    const auto key = [&](std::size_t k) { return l.flows[k].cap / l.flows[k].prio; };
    for (std::size_t i = 1; i < order_.size(); ++i)
      for (std::size_t j = i; j > 0 && key(order_[j]) < key(order_[j - 1]); --j)
        std::swap(order_[j], order_[j - 1]);
    std::size_t i = 0;
    for (; i < order_.size(); ++i) {
      auto& f = l.flows[order_[i]];
      const double per_share = cap_left / shares_left;
      if (f.cap > per_share * f.prio) break;
      f.rate = f.cap;
      cap_left -= f.cap * f.weight;
      shares_left -= f.weight * f.prio;
    }
    const double per_share = shares_left > 0 ? cap_left / shares_left : 0;
    for (; i < order_.size(); ++i) l.flows[order_[i]].rate = per_share * l.flows[order_[i]].prio;
  }

  void link_reschedule(std::int32_t li) {
    auto& l = links_[static_cast<std::size_t>(li)];
    ++l.version;
    if (l.flows.empty()) return;
    link_rates(l);
    double soonest = std::numeric_limits<double>::infinity();
    for (const auto& f : l.flows) soonest = std::min(soonest, f.remaining / f.rate);
    const auto dt = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(soonest - 1e-9)));
    push(now_ + dt, EventKind::link_check, li, l.version);
  }

  void link_check(std::int32_t li) {
    auto& l = links_[static_cast<std::size_t>(li)];
    link_advance(l);
    done_.clear();
    std::size_t keep = 0;
    for (std::size_t i = 0; i < l.flows.size(); ++i) {
      const auto& f = l.flows[i];
      const double bytes = ops_[static_cast<std::size_t>(f.op)].bytes;
      if (f.remaining <= 1e-9 * bytes + 1e-6)
        done_.push_back(f.op);
      else
        l.flows[keep++] = f;
    }
    l.flows.resize(keep);
    link_reschedule(li);
    for (const auto op : done_) finish(op);
  }

  std::string op_text(std::int32_t oi) const {
    const auto& o = ops_[static_cast<std::size_t>(oi)];
    const std::string n = record_ ? names_[static_cast<std::size_t>(oi)] : std::string{};
    return (n.empty() ? categories_[o.category] + "#" + std::to_string(oi) : n) + " on " +
           units_[static_cast<std::size_t>(o.unit)].stats.name;
  }

  std::string deadlock_report() const {
    std::string r = "deadlock: " + std::to_string(ops_.size() - finished_) +
                    " operation(s) never ran; stuck at the head of their units:";
    int shown = 0;
    for (std::size_t ui = 0; ui < units_.size() && shown < 6; ++ui) {
      const auto& u = units_[ui];
      if (u.next >= u.program.size()) continue;
      const std::int32_t oi = u.program[u.next];
      const auto& o = ops_[static_cast<std::size_t>(oi)];
      r += "\n  ";
      r += op_text(oi);
      if (o.pending > 0) {
        r += " waits for";
        int listed = 0;
        for (const auto& e : edges_) {
          if (e.to != oi || ops_[static_cast<std::size_t>(e.from)].end >= 0) continue;
          if (listed++ == 3) {
            r += " ...";
            break;
          }
          r += ' ';  // (appends, not " " + text: GCC 12 -Wrestrict)
          r += op_text(e.from);
          r += ';';
        }
      } else if (u.waiting_pool >= 0) {
        const auto& p = pools_[static_cast<std::size_t>(u.waiting_pool)];
        r += " waits for a free slot of pool '" + p.name + "' (" + std::to_string(p.available) +
             " of " + std::to_string(p.capacity) + " free)";
      }
      ++shown;
    }
    return r;
  }

  bool record_;
  bool ran_ = false;
  std::vector<UnitState> units_;
  std::vector<PoolState> pools_;
  std::vector<LinkState> links_;
  std::vector<OpState> ops_;
  std::vector<std::string> names_;
  std::vector<std::string> categories_;
  std::vector<Edge> edges_;
  std::vector<PoolUse> acquires_, releases_;
  std::vector<std::int32_t> succ_offsets_, acq_offsets_, rel_offsets_;
  std::vector<Edge> succ_;
  std::vector<PoolUse> acq_, rel_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  std::vector<std::int32_t> wake_, done_;
  std::vector<std::size_t> order_;
  std::uint64_t seq_ = 0;
  std::int64_t now_ = 0;
  std::int64_t makespan_ = 0;
  std::int64_t events_ = 0;
  std::size_t finished_ = 0;
};

/// For a simulation's result (a Status with `events` and `operations`): records the run's event
/// count and the engine's operation count and, when the run failed, its reason. True when ok.
template <class Result>
bool take_run(Result& res, const Engine& e, const RunResult& run) {
  res.events = run.events;
  res.operations = e.op_count();
  if (!run.ok) res.set_failed(run.reason);
  return run.ok;
}

}  // namespace amla::sim
