// Tests of amla/sim/engine.hpp: in-order units, dependencies with latency, pools limiting
// run-ahead, fair sharing of a link, multiplicities, determinism, deadlocks and bad input.
// Every expected cycle count is worked out by hand in the comments.
#include <catch2/catch.hpp>

#include <cstdint>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "amla/sim/engine.hpp"

using namespace amla::sim;

namespace {
Label named(const char* n, const char* cat = "X") {
  Label l;
  l.name = n;
  l.category = cat;
  return l;
}
std::int64_t start(const Engine& e, OpId o) {
  return e.op_start(o).count;
}
std::int64_t end(const Engine& e, OpId o) {
  return e.op_end(o).count;
}
/// When an operation ran: [start, end) in cycles.
struct Span {
  std::int64_t start, end;
  bool operator==(const Span&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const Span& s) {
    return os << "[" << s.start << ", " << s.end << ")";
  }
};
Span span(const Engine& e, OpId o) {
  return {start(e, o), end(e, o)};
}

/// One transfer, starting at 0, on a unit of its own that stands for `weight` units.
struct Flow {
  double weight, bytes, port_bytes_per_cycle, priority = 1;
};
/// An engine that ran `flows` over one 10 B/cycle link, with their units and operations in order.
struct LinkRun {
  Engine e;
  LinkId link;
  std::vector<UnitId> units;
  std::vector<OpId> ops;
};
LinkRun transfers_on_a_link(const std::vector<Flow>& flows) {
  LinkRun r;
  r.link = r.e.add_link("hbm", BytesPerCycle{10});
  for (const Flow& f : flows) {
    std::string name(1, 'u');  // (appends, not "u" + to_string: GCC 12 -Wstringop-overflow)
    name += std::to_string(r.units.size());
    r.units.push_back(r.e.add_unit(name, f.weight));
    r.ops.push_back(r.e.add_op(r.units.back(),
                               Work::transfer(Bytes{f.bytes}, BytesPerCycle{f.port_bytes_per_cycle},
                                              Cycles{0}, r.link, f.priority)));
  }
  REQUIRE(r.e.run().ok);
  return r;
}
}  // namespace

TEST_CASE("a unit runs its program in order, one operation at a time", "[sim][engine]") {
  Engine e;
  const auto u = e.add_unit("u");
  // a: 0-5, b: 5-12 (7 cycles), c: 12-12 (empty), d: 12-15.
  const OpId a = e.add_op(u, Work::compute(Cycles{5}), named("a"));
  const OpId b = e.add_op(u, Work::compute(Cycles{7}), named("b"));
  const OpId c = e.add_op(u, Work::compute(Cycles{0}), named("c"));
  const OpId d = e.add_op(u, Work::compute(Cycles{3}), named("d"));
  const auto r = e.run();
  REQUIRE(r.ok);
  CHECK(span(e, a) == Span{0, 5});
  CHECK(span(e, b) == Span{5, 12});
  CHECK(span(e, c) == Span{12, 12});
  CHECK(span(e, d) == Span{12, 15});
  CHECK(r.makespan == Cycles{15});
  const auto s = e.unit_stats(u);
  CHECK(s.busy == Cycles{15});
  CHECK(s.stalled_on_data == Cycles{0});
  CHECK(s.idle == Cycles{0});
  CHECK(s.ops == 4);
}

TEST_CASE("dependencies wait for the producer's end plus its latency plus the edge delay",
          "[sim][engine]") {
  Engine e;
  const auto p = e.add_unit("producer");
  const auto q = e.add_unit("consumer");
  // x: transfer of 100 bytes at 10 B/cycle = 10 cycles (0-10), visible at 10 + latency 4 = 14.
  const OpId x = e.add_op(p, Work::transfer(Bytes{100}, BytesPerCycle{10}, Cycles{4}));
  // y depends on x with delay 3: ready at 17, runs 17-19. z (same unit, after y): 19-20.
  const OpId y = e.add_op(q, Work::compute(Cycles{2}));
  const OpId z = e.add_op(q, Work::compute(Cycles{1}));
  e.depend(y, x, Cycles{3});
  // w on the producer after x: not held back by the latency (a pipelined port): 10-16.
  const OpId w = e.add_op(p, Work::compute(Cycles{6}));
  const auto r = e.run();
  REQUIRE(r.ok);
  CHECK(end(e, x) == 10);
  CHECK(start(e, y) == 17);
  CHECK(end(e, z) == 20);
  CHECK(start(e, w) == 10);
  CHECK(r.makespan == Cycles{20});
  const auto s = e.unit_stats(q);
  CHECK(s.busy == Cycles{3});
  CHECK(s.stalled_on_data == Cycles{17});  // waited from 0 to 17 for x
  CHECK(s.idle == Cycles{0});
  const auto sp = e.unit_stats(p);
  CHECK(sp.idle == Cycles{4});  // done at 16, the run ends at 20
  // A transfer rounds up: 101 bytes at 10 B/cycle take 11 cycles.
  Engine e2;
  const auto u2 = e2.add_unit("u");
  const OpId t = e2.add_op(u2, Work::transfer(Bytes{101}, BytesPerCycle{10}));
  REQUIRE(e2.run().ok);
  CHECK(end(e2, t) == 11);
}

TEST_CASE("a pool limits how far a producer runs ahead of its consumer", "[sim][engine]") {
  // Producer P makes 4 items (2 cycles each), consumer C uses each (5 cycles); each item holds a
  // slot of a 2-slot pool from P's start to C's end.
  //   P0 0-2, P1 2-4 (2 slots taken), P2 waits for C0's end.
  //   C0 2-7 (releases), P2 7-9, C1 7-12, P3 waits for C1: 12-14, C2 12-17, C3 17-22.
  Engine e;
  const auto P = e.add_unit("P");
  const auto C = e.add_unit("C");
  const auto pool = e.add_pool("buffers", 2);
  std::vector<OpId> p, c;
  for (int i = 0; i < 4; ++i) {
    p.push_back(e.add_op(P, Work::compute(Cycles{2})));
    e.acquire(p.back(), pool);
    c.push_back(e.add_op(C, Work::compute(Cycles{5})));
    e.depend(c.back(), p.back());
    e.release(c.back(), pool);
  }
  const auto r = e.run();
  REQUIRE(r.ok);
  CHECK(start(e, p[2]) == 7);
  CHECK(start(e, p[3]) == 12);
  CHECK(start(e, c[0]) == 2);
  CHECK(end(e, c[3]) == 22);
  const auto s = e.unit_stats(P);
  CHECK(s.busy == Cycles{8});
  CHECK(s.stalled_on_buffer == Cycles{3 + 3});  // 4-7 and 9-12
  CHECK(s.idle == Cycles{22 - 14});
  // With 4 slots nothing waits: P runs 0-8, C 2-7, 7-12, 12-17, 17-22 (consumer-bound anyway).
  Engine e4;
  const auto P4 = e4.add_unit("P");
  const auto C4 = e4.add_unit("C");
  const auto pool4 = e4.add_pool("buffers", 4);
  OpId last_p;
  for (int i = 0; i < 4; ++i) {
    last_p = e4.add_op(P4, Work::compute(Cycles{2}));
    e4.acquire(last_p, pool4);
    const OpId ci = e4.add_op(C4, Work::compute(Cycles{5}));
    e4.depend(ci, last_p);
    e4.release(ci, pool4);
  }
  REQUIRE(e4.run().ok);
  CHECK(end(e4, last_p) == 8);
}

TEST_CASE("a link shares its bandwidth max-min fairly among the transfers on it", "[sim][engine]") {
  // Link 10 B/cycle. A (cap 8) and B (cap 8) start at 0 with 100 bytes each: 5 B/cycle each,
  // both end at 20. C (cap 3, 60 bytes) starts at 0 too in a second run: C gets its cap 3,
  // A and B share the other 7: 3.5 each. C ends at 20 (60 / 3). A and B have 100 - 70 = 30
  // left at 20, then 5 each: end at 26.
  {
    const LinkRun r = transfers_on_a_link({{1, 100, 8}, {1, 100, 8}});
    CHECK(end(r.e, r.ops[0]) == 20);
    CHECK(end(r.e, r.ops[1]) == 20);
    CHECK(r.e.link_stats(r.link).bytes.count == Approx(200));
    CHECK(r.e.link_stats(r.link).active == Cycles{20});
  }
  {
    const LinkRun r = transfers_on_a_link({{1, 100, 8}, {1, 100, 8}, {1, 60, 3}});
    CHECK(end(r.e, r.ops[2]) == 20);
    CHECK(end(r.e, r.ops[0]) == 26);
    CHECK(end(r.e, r.ops[1]) == 26);
  }
  {
    // A alone is capped by its port: 100 bytes at 8 B/cycle on a 10 B/cycle link: 13 cycles
    // (12.5 rounded up). B joins at 5 (after a 5-cycle op on its unit): A has 60 left, then both
    // get 5: A ends at 5 + 12 = 17, B (100 bytes) has 40 left at 17, alone at 8: 17 + 5 = 22.
    Engine e;
    const auto link = e.add_link("hbm", BytesPerCycle{10});
    const auto ua = e.add_unit("a");
    const auto ub = e.add_unit("b");
    const OpId a = e.add_op(ua, Work::transfer(Bytes{100}, BytesPerCycle{8}, Cycles{0}, link));
    e.add_op(ub, Work::compute(Cycles{5}));
    const OpId b = e.add_op(ub, Work::transfer(Bytes{100}, BytesPerCycle{8}, Cycles{0}, link));
    REQUIRE(e.run().ok);
    CHECK(end(e, a) == 17);
    CHECK(span(e, b) == Span{5, 22});
  }
}

TEST_CASE("a transfer's priority is its claim on a contended link (weighted max-min)",
          "[sim][engine]") {
  // Link 10 B/cycle. A (priority 2) and B (priority 1), 60 bytes each, ports of 100: A gets 20/3,
  // B 10/3; A ends at 9 (60 / (20/3)), B has 30 left and alone gets 10: ends at 12.
  const LinkRun r = transfers_on_a_link({{1, 60, 100, 2}, {1, 60, 100, 1}});
  CHECK(end(r.e, r.ops[0]) == 9);
  CHECK(end(r.e, r.ops[1]) == 12);
  // A port below its share keeps its port: A (priority 3, port 2) would get 7.5 but takes 2; B
  // gets the other 8. 40 bytes each: B ends at 5; then A, 30 left at its port 2: ends at 20.
  const LinkRun s = transfers_on_a_link({{1, 40, 2, 3}, {1, 40, 100, 1}});
  CHECK(end(s.e, s.ops[1]) == 5);
  CHECK(end(s.e, s.ops[0]) == 20);
  Engine e;
  CHECK_THROWS_WITH(
      e.add_op(e.add_unit("u"), Work::transfer(Bytes{1}, BytesPerCycle{1}, Cycles{0}, LinkId{}, 0)),
      Catch::Contains("'work.priority' = 0"));
}

TEST_CASE("a unit's multiplicity weighs its transfers as that many identical units",
          "[sim][engine]") {
  // One unit standing for 4 cores and one plain unit, each moving 100 bytes (cap 100) over a
  // 10 B/cycle link: five flows of 2 B/cycle; the representative's 100 bytes end at 50, like the
  // plain one's; the link carried 5 x 100 bytes.
  const LinkRun r = transfers_on_a_link({{4, 100, 100}, {1, 100, 100}});
  CHECK(end(r.e, r.ops[0]) == 50);
  CHECK(end(r.e, r.ops[1]) == 50);
  CHECK(r.e.link_stats(r.link).bytes.count == Approx(500));
  CHECK(r.e.unit_stats(r.units[0]).multiplicity == 4);
}

TEST_CASE("a unit's start time holds back its whole program and counts as idle", "[sim][engine]") {
  Engine e;
  const auto u = e.add_unit("late");
  e.set_start(u, Cycles{10});
  const OpId a = e.add_op(u, Work::compute(Cycles{4}));
  REQUIRE(e.run().ok);
  CHECK(start(e, a) == 10);
  const auto s = e.unit_stats(u);
  CHECK(s.busy == Cycles{4});
  CHECK(s.stalled_on_data == Cycles{0});
  CHECK(s.stalled_on_buffer == Cycles{0});
  CHECK(s.idle == Cycles{10});
}

TEST_CASE("runs are deterministic", "[sim][engine]") {
  auto build_and_run = [](std::uint32_t seed) {
    std::mt19937 rng(seed);
    Engine e(false);
    const auto link = e.add_link("l", BytesPerCycle{7});
    std::vector<amla::sim::UnitId> units;
    for (int u = 0; u < 6; ++u) {
      std::string name(1, 'u');  // (not "u" + to_string: GCC 12 -Wrestrict)
      name += std::to_string(u);
      units.push_back(e.add_unit(name));
    }
    const auto pool = e.add_pool("p", 3);
    std::vector<OpId> ops;
    for (int i = 0; i < 400; ++i) {
      const auto u = units[rng() % units.size()];
      auto pick = [&](std::uint32_t n) { return static_cast<std::int64_t>(rng() % n); };
      OpId o = pick(3) == 0
                   ? e.add_op(u, Work::transfer(Bytes{static_cast<double>(1 + pick(500))},
                                                BytesPerCycle{static_cast<double>(1 + pick(9))},
                                                Cycles{pick(5)}, link))
                   : e.add_op(u, Work::compute(Cycles{pick(20)}));
      if (!ops.empty() && pick(2) == 1)
        e.depend(o, ops[static_cast<std::size_t>(pick(static_cast<std::uint32_t>(ops.size())))],
                 Cycles{pick(3)});
      if (i % 50 == 10) {  // a balanced acquire/release pair on the same unit, in order
        e.acquire(o, pool);
        e.release(o, pool);
      }
      ops.push_back(o);
    }
    const auto r = e.run();
    std::vector<std::int64_t> times;
    for (const auto o : ops) times.push_back(e.op_end(o).count);
    return std::make_pair(r, times);
  };
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    const auto [r1, t1] = build_and_run(seed);
    const auto [r2, t2] = build_and_run(seed);
    REQUIRE(r1.ok);
    CHECK(r1.makespan == r2.makespan);
    CHECK(r1.events == r2.events);
    CHECK(t1 == t2);
  }
}

TEST_CASE("deadlocks come back as a result naming the stuck operations", "[sim][engine]") {
  {
    // b waits for a, but a sits behind b on the same unit.
    Engine e;
    const auto u = e.add_unit("core");
    const OpId b = e.add_op(u, Work::compute(Cycles{1}), named("second"));
    const OpId a = e.add_op(u, Work::compute(Cycles{1}), named("first"));
    e.depend(b, a);
    const auto r = e.run();
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.reason, Catch::Contains("deadlock"));
    CHECK_THAT(r.reason, Catch::Contains("second on core waits for first on core"));
  }
  {
    // Two slots held forever: the third acquire never succeeds.
    Engine e;
    const auto u = e.add_unit("mte2");
    const auto pool = e.add_pool("L1", 2);
    for (int i = 0; i < 3; ++i) e.acquire(e.add_op(u, Work::compute(Cycles{1})), pool);
    const auto r = e.run();
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.reason, Catch::Contains("waits for a free slot of pool 'L1' (0 of 2 free)"));
  }
}

TEST_CASE("malformed input throws amla::invalid_argument naming the argument", "[sim][engine]") {
  Engine e;
  const auto u = e.add_unit("u");
  CHECK_THROWS_AS(e.add_op(amla::sim::UnitId{7}, Work::compute(Cycles{1})), amla::invalid_argument);
  CHECK_THROWS_WITH(e.add_op(u, Work::compute(Cycles{-1})), Catch::Contains("work.cycles"));
  CHECK_THROWS_WITH(e.add_op(u, Work::transfer(Bytes{10}, BytesPerCycle{0})),
                    Catch::Contains("work.rate"));
  CHECK_THROWS_WITH(e.add_link("l", BytesPerCycle{0}), Catch::Contains("capacity"));
  CHECK_THROWS_WITH(e.add_pool("p", -1), Catch::Contains("capacity"));
  CHECK_THROWS_WITH(e.add_unit("m", 0.5), Catch::Contains("multiplicity"));
  const OpId a = e.add_op(u, Work::compute(Cycles{1}));
  CHECK_THROWS_WITH(e.depend(a, a), Catch::Contains("itself"));
  CHECK_THROWS_WITH(e.depend(a, OpId{99}), Catch::Contains("producer"));
  CHECK_THROWS_WITH(e.depend(a, a, Cycles{-2}), Catch::Contains("delay"));
  REQUIRE(e.run().ok);
}

namespace {
/// The message of the std::logic_error `call` throws when that is not an invalid argument (a
/// misuse of the object's state), "" otherwise.
template <class Call>
std::string state_error_of(Call&& call) {
  try {
    call();
  } catch (const std::invalid_argument&) {
    return "";
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("using an Engine again after run() is a std::logic_error, not a bad argument",
          "[sim][engine]") {
  Engine e;
  const auto u = e.add_unit("u");
  const OpId a = e.add_op(u, Work::compute(Cycles{1}));
  const auto p = e.add_pool("p", 1);
  REQUIRE(e.run().ok);
  CHECK_THAT(state_error_of([&] { e.run(); }),
             Catch::Contains("amla::sim::Engine::run") && Catch::Contains("runs once"));
  CHECK_THAT(state_error_of([&] { e.add_op(u, Work::compute(Cycles{1})); }),
             Catch::Contains("Engine::add_op"));
  CHECK_THAT(state_error_of([&] { e.add_unit("v"); }), Catch::Contains("Engine::add_unit"));
  CHECK_THAT(state_error_of([&] { e.add_pool("q", 1); }), Catch::Contains("Engine::add_pool"));
  CHECK_THAT(state_error_of([&] { e.add_link("l", BytesPerCycle{1}); }),
             Catch::Contains("Engine::add_link"));
  CHECK_THAT(state_error_of([&] { e.set_start(u, Cycles{1}); }),
             Catch::Contains("Engine::set_start"));
  CHECK_FALSE(state_error_of([&] { e.acquire(a, p); }).empty());
  CHECK_FALSE(state_error_of([&] { e.depend(a, a); }).empty());
}

TEST_CASE("a release without an acquire is a std::logic_error naming the pool and the operation",
          "[sim][engine]") {
  Engine e;
  const auto u = e.add_unit("u");
  const auto p = e.add_pool("L1", 2);
  const OpId a = e.add_op(u, Work::compute(Cycles{3}), named("freer"));
  e.release(a, p);  // the pool is full: nothing was taken
  const std::string why = state_error_of([&] { e.run(); });
  CHECK_THAT(why, Catch::Contains("pool 'L1'") && Catch::Contains("freer on u") &&
                      Catch::Contains("3 of its 2") &&
                      Catch::Contains("without a matching acquire"));
}

TEST_CASE("a run longer than max_run_cycles is refused with a reason, before it starts",
          "[sim][engine]") {
  // The reason run() gives for the engine `build` makes ("" when it runs).
  const auto refusal = [](void (*build)(Engine&)) {
    Engine e;
    build(e);
    const auto r = e.run();
    if (!r.ok) CHECK(r.makespan == Cycles{0});
    return r.ok ? std::string{} : r.reason;
  };
  {
    // A 1e30-byte transfer with no link: 1e30 cycles at its port's byte per cycle.
    Engine e;
    e.add_op(e.add_unit("dma"), Work::transfer(Bytes{1e30}, BytesPerCycle{1}), named("huge"));
    const auto r = e.run();
    CHECK_FALSE(r.ok);
    CHECK(r.makespan == Cycles{0});
    CHECK_THAT(r.reason, Catch::Contains("max_run_cycles") && Catch::Contains("huge on dma") &&
                             Catch::Contains("1e+30 cycles"));
  }
  // Over a link of 100 B/cycle the one flow's worst rate is the link's: 1e28 cycles.
  CHECK_THAT(refusal([](Engine& e) {
               const auto hbm = e.add_link("HBM", BytesPerCycle{100});
               e.add_op(e.add_unit("dma"),
                        Work::transfer(Bytes{1e30}, BytesPerCycle{1e9}, Cycles{0}, hbm));
             }),
             Catch::Contains("1e+28 cycles"));
  // A link of almost no bandwidth shared by four units: 64 bytes at 1e-18 / 4 per cycle.
  CHECK_THAT(refusal([](Engine& e) {
               const auto slow = e.add_link("slow", BytesPerCycle{1e-18});
               e.add_op(e.add_unit("dma", 4),
                        Work::transfer(Bytes{64}, BytesPerCycle{1}, Cycles{0}, slow));
             }),
             Catch::Contains("2.56e+20"));
  // Cycles that would sum past int64: 2^62 + 2^62.
  CHECK_THAT(refusal([](Engine& e) {
               const auto u = e.add_unit("u");
               e.add_op(u, Work::compute(Cycles{std::int64_t{1} << 62}));
               e.add_op(u, Work::compute(Cycles{std::int64_t{1} << 62}));
             }),
             Catch::Contains("9.22337e+18"));
  // Exactly the limit still runs: a start at 2^61, then two operations of 2^60.
  Engine e;
  const auto u = e.add_unit("u");
  e.set_start(u, Cycles{std::int64_t{1} << 61});
  const OpId a = e.add_op(u, Work::compute(Cycles{std::int64_t{1} << 60}));
  const OpId b = e.add_op(u, Work::compute(Cycles{std::int64_t{1} << 60}));
  e.depend(b, a);
  const auto r = e.run();
  REQUIRE(r.ok);
  CHECK(r.makespan.count == max_run_cycles);
}

TEST_CASE("the timeline has one lane per unit and one interval per operation", "[sim][engine]") {
  Engine e;
  const auto u = e.add_unit("cube0/MMAD");
  Label l = named("C1[0] MMAD", "C1");
  l.phase = amla::sim::Phase::preload;
  e.add_op(u, Work::compute(Cycles{3}), l);
  e.add_op(u, Work::compute(Cycles{2}), named("C2[0] MMAD", "C2"));
  REQUIRE(e.run().ok);
  const auto t = e.timeline("t", amla::sim::Hertz{1e9});
  REQUIRE(t.lanes.size() == 1);
  CHECK(t.lanes[0].name == "cube0/MMAD");
  REQUIRE(t.lanes[0].intervals.size() == 2);
  CHECK(t.lanes[0].intervals[0].name == "C1[0] MMAD");
  CHECK(t.lanes[0].intervals[0].category == "C1");
  CHECK(t.lanes[0].intervals[0].phase == amla::sim::Phase::preload);
  CHECK(t.lanes[0].intervals[1].start == Cycles{3});
  CHECK(t.lanes[0].intervals[1].end == Cycles{5});
  CHECK(t.makespan() == Cycles{5});
}
