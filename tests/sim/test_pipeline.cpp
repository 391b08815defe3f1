// Tests of amla/sim/pipeline.hpp: stage-level schedules (serial Base, AMLA's preload pipeline,
// user arrangements) with hand-computed timings, phase marking, and the rejection of schedules
// that cannot run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "amla/sim/pipeline.hpp"

using namespace amla::sim;

namespace {
constexpr int C1 = 0, V1 = 1, C2 = 2, V2 = 3;
std::int64_t start_of(const amla::sim::ScheduleResult& r, TaskRef t) {
  return r.at(t).start.count;
}
std::int64_t end_of(const amla::sim::ScheduleResult& r, TaskRef t) {
  return r.at(t).end.count;
}
std::string order_text(const Schedule& s, int unit) {
  std::string o;
  for (const auto& t : s.units[static_cast<std::size_t>(unit)].tasks)
    o += std::to_string(t.task.stage) + ":" + std::to_string(t.task.block) + " ";
  return o;
}
}  // namespace

TEST_CASE("AMLA's preload pipeline: the order of Figure 7", "[sim][pipeline]") {
  const auto chain = StageChain::amla(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{3});
  const auto arr = amla::sim::preload_arrangement(chain);
  REQUIRE(arr.cube.size() == 2);
  CHECK(arr.cube[0].stage == C1);
  CHECK(arr.cube[0].offset == 2);
  CHECK(arr.cube[1].stage == C2);
  CHECK(arr.cube[1].offset == 0);
  REQUIRE(arr.vector.size() == 1);
  CHECK(arr.vector[0].offset == 1);
  const Schedule s = amla::sim::cyclic_schedule(chain, 5, arr, "amla");
  // Preload C1[0], C1[1] (with V1[0]); steady [C1(k+2), C2(k), V1(k+1)]; drain C2[3], C2[4],
  // V1[4]; then the last V.
  CHECK(order_text(s, 0) == "0:0 0:1 0:2 2:0 0:3 2:1 0:4 2:2 2:3 2:4 ");
  CHECK(order_text(s, 1) == "1:0 1:1 1:2 1:3 1:4 3:0 ");
  const auto& cube = s.units[0].tasks;
  CHECK(cube[0].phase == Phase::preload);
  CHECK(cube[1].phase == Phase::preload);
  CHECK(cube[2].phase == Phase::steady);
  CHECK(cube[7].phase == Phase::steady);  // C2[2], last steady cycle k = 2
  CHECK(cube[8].phase == Phase::drain);
  CHECK(s.units[1].tasks.front().phase == Phase::preload);  // V1[0]
  CHECK(s.units[1].tasks.back().phase == Phase::drain);     // last V
}

TEST_CASE("in steady cycles of the preload arrangement no task depends on another of the cycle",
          "[sim][pipeline]") {
  for (const auto& chain :
       {StageChain::amla(Cycles{1}, Cycles{1}, Cycles{1}, Cycles{1}),
        StageChain::base(Cycles{1}, Cycles{1}, Cycles{1}, Cycles{1}, Cycles{1})}) {
    const auto arr = amla::sim::preload_arrangement(chain);
    std::vector<amla::sim::ArrangementSlot> all(arr.cube);
    all.insert(all.end(), arr.vector.begin(), arr.vector.end());
    for (const auto& a : all)
      for (const auto& b : all)  // b's block k + off_b needs stage s - 1 of the same block
        if (b.stage == a.stage + 1) CHECK(b.offset < a.offset);
    // The preload count (the [C1] stages run in the Preload phase, Section 4.1.2) is S - 1:
    // 2 for AMLA (Figure 7), 3 for Base (Figure 5).
    const auto s = amla::sim::cyclic_schedule(chain, 6, arr);
    const auto preload = std::count_if(
        s.units[0].tasks.begin(), s.units[0].tasks.end(),
        [](const auto& t) { return t.phase == Phase::preload && t.task.stage == C1; });
    CHECK(preload == chain.size() - 1);
  }
}

TEST_CASE("AMLA preload pipeline, 3 blocks, by hand", "[sim][pipeline]") {
  // C1 = 10, V1 = 6, C2 = 8, last V = 3, hand-over 1.
  // Cube: C1[0] 0-10, C1[1] 10-20, C1[2] 20-30, C2[0] 30-38, C2[1] 38-46, C2[2] 46-54.
  // Vector: V1[0] 11-17 (C1[0] + 1), V1[1] 21-27, V1[2] 31-37, last V 55-58 (C2[2] + 1).
  // C2[k] needs V1[k] + 1 (18, 28, 38): the Cube never waits after the preload.
  const auto chain = StageChain::amla(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{3});
  const auto s = amla::sim::cyclic_schedule(chain, 3, amla::sim::preload_arrangement(chain));
  const auto r = amla::sim::simulate_schedule(chain, s, Cycles{1});
  REQUIRE(r.ok);
  CHECK(r.makespan == Cycles{58});
  CHECK(start_of(r, {C2, 0}) == 30);
  CHECK(start_of(r, {V1, 0}) == 11);
  CHECK(start_of(r, {V1, 2}) == 31);
  CHECK(end_of(r, {C2, 2}) == 54);
  CHECK(start_of(r, {3, 0}) == 55);  // the tail
  CHECK(r.units[0].busy == Cycles{54});
  CHECK(r.units[0].stalled_on_data == Cycles{0});
  CHECK(r.units[1].busy == Cycles{21});
  // A Vector-bound chain (V1 = 15 > C1 + C2 = ... per cycle only partly hidden):
  // C1 = 4, V1 = 15, C2 = 4, hand-over 0, 3 blocks.
  // Cube: C1[0] 0-4, C1[1] 4-8, C1[2] 8-12; V1[0] 4-19, V1[1] 19-34, V1[2] 34-49;
  // C2[0] 19-23, C2[1] 34-38, C2[2] 49-53; last V (3) 53-56.
  const auto vb = StageChain::amla(Cycles{4}, Cycles{15}, Cycles{4}, Cycles{3});
  const auto r2 = amla::sim::simulate_schedule(
      vb, amla::sim::cyclic_schedule(vb, 3, amla::sim::preload_arrangement(vb)));
  REQUIRE(r2.ok);
  CHECK(r2.makespan == Cycles{56});
  CHECK(start_of(r2, {C2, 1}) == 34);
  CHECK(r2.units[0].stalled_on_data == Cycles{7 + 11 + 11});  // 12-19, 23-34, 38-49
}

TEST_CASE("Base serial order, 2 blocks, by hand", "[sim][pipeline]") {
  // C1 = 10, V1 = 6, C2 = 8, V2 = 5, last V = 3, hand-over 1; every task after the previous one.
  // C1[0] 0-10, V1[0] 11-17, C2[0] 18-26, V2[0] 27-32, C1[1] 33-43, V1[1] 44-50, C2[1] 51-59,
  // V2[1] 60-65, last V 65-68 (same unit as V2: no hand-over).
  const auto chain = StageChain::base(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{5}, Cycles{3});
  const auto s = amla::sim::serial_schedule(chain, 2);
  const auto r = amla::sim::simulate_schedule(chain, s, Cycles{1});
  REQUIRE(r.ok);
  CHECK(r.makespan == Cycles{68});
  CHECK(start_of(r, {C1, 1}) == 33);
  CHECK(start_of(r, {V2, 1}) == 60);
  CHECK(r.units[0].busy == Cycles{36});
  // The same chain in Base's preload pipeline (count 3): C1[0..2] back to back, then
  // [C1(k+3), C2(k+1)] / [V1(k+2), V2(k)] cycles; 3 blocks, hand-over 0, C1 = C2 = 4, V1 = V2 = 2:
  // Cube: C1[0] 0-4, C1[1] 4-8, C1[2] 8-12, C2[0] 12-16, C2[1] 16-20, C2[2] 20-24.
  // Vector: V1[0] 4-6, V1[1] 8-10, V2[0] 16-18, V1[2] 18-20, V2[1] 20-22, V2[2] 24-26, last V
  // 26-29.
  const auto b2 = StageChain::base(Cycles{4}, Cycles{2}, Cycles{4}, Cycles{2}, Cycles{3});
  const auto sp = amla::sim::cyclic_schedule(b2, 3, amla::sim::preload_arrangement(b2));
  CHECK(order_text(sp, 0) == "0:0 0:1 0:2 2:0 2:1 2:2 ");
  CHECK(order_text(sp, 1) == "1:0 1:1 1:2 3:0 3:1 3:2 4:0 ");
  const auto rp = amla::sim::simulate_schedule(b2, sp);
  REQUIRE(rp.ok);
  CHECK(rp.makespan == Cycles{29});
  CHECK(start_of(rp, {V1, 2}) == 12);
  CHECK(start_of(rp, {V2, 1}) == 20);
}

TEST_CASE("schedules that cannot run are rejected, naming the tasks", "[sim][pipeline]") {
  const auto chain = StageChain::amla(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{3});
  const Schedule good = amla::sim::cyclic_schedule(chain, 3, amla::sim::preload_arrangement(chain));
  SECTION("a cycle through program order and data") {
    Schedule s = good;  // the Cube runs C2[0] first, but C2[0] needs V1[0], which needs C1[0]
    std::swap(s.units[0].tasks[0], s.units[0].tasks[3]);
    const auto r = amla::sim::simulate_schedule(chain, s);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.reason, Catch::StartsWith("dependency cycle"));
    CHECK_THAT(r.reason, Catch::Contains("V1[0] (needs its data)"));
    CHECK_THAT(r.reason, Catch::Contains("C2[0] (needs its data)"));
    CHECK_THAT(r.reason, Catch::Contains("comes after it in cube's program"));
  }
  SECTION("a missing producer") {
    Schedule s = good;
    s.units[1].tasks.erase(s.units[1].tasks.begin() + 1);  // drop V1[1]
    const auto r = amla::sim::simulate_schedule(chain, s);
    CHECK_FALSE(r.ok);
    CHECK(r.reason == "missing producer: C2[1] needs V1[1], which no unit runs");
  }
  SECTION("an extra ordering edge that closes a cycle") {
    Schedule s = good;
    s.extra_deps.push_back({{C1, 0}, {C2, 2}});  // C1[0] after C2[2]
    const auto r = amla::sim::simulate_schedule(chain, s);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.reason, Catch::Contains("is ordered after it"));
  }
}

TEST_CASE("malformed schedules throw amla::invalid_argument", "[sim][pipeline]") {
  const auto chain = StageChain::amla(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{3});
  const Schedule good = amla::sim::cyclic_schedule(chain, 3, amla::sim::preload_arrangement(chain));
  Schedule dup = good;
  dup.units[0].tasks.push_back(dup.units[0].tasks.front());
  CHECK_THROWS_WITH(amla::sim::simulate_schedule(chain, dup),
                    Catch::Contains("each task appears once"));
  Schedule wrong = good;
  wrong.units[0].tasks.push_back({{V1, 0}, Phase::none});
  wrong.units[1].tasks.erase(wrong.units[1].tasks.begin());
  CHECK_THROWS_WITH(amla::sim::simulate_schedule(chain, wrong),
                    Catch::Contains("V1[0] on unit 'cube'"));
  Schedule range = good;
  range.units[0].tasks.push_back({{C1, 7}, Phase::none});
  CHECK_THROWS_AS(amla::sim::simulate_schedule(chain, range), amla::invalid_argument);
  CHECK_THROWS_WITH(amla::sim::simulate_schedule(chain, good, Cycles{-1}),
                    Catch::Contains("handoff"));
  auto bad = chain;
  bad.stages[1].duration = Cycles{-3};
  CHECK_THROWS_WITH(amla::sim::simulate_schedule(bad, good), Catch::Contains("V1 = -3"));
  amla::sim::Arrangement twice = amla::sim::preload_arrangement(chain);
  twice.cube.push_back(twice.cube.front());
  CHECK_THROWS_WITH(amla::sim::cyclic_schedule(chain, 3, twice), Catch::Contains("exactly once"));
  CHECK_THROWS_WITH(amla::sim::cyclic_schedule(chain, 0, amla::sim::preload_arrangement(chain)),
                    Catch::Contains("blocks"));
}

TEST_CASE("any user arrangement runs, and the result is deterministic", "[sim][pipeline]") {
  // A hand-made arrangement: cube [C2(k), C1(k+2)] (the other order of AMLA's cycle).
  const auto chain = StageChain::amla(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{3});
  amla::sim::Arrangement arr;
  arr.cube = {{C2, 0}, {C1, 2}};
  arr.vector = {{V1, 1}};
  const auto s = amla::sim::cyclic_schedule(chain, 4, arr, "swapped");
  CHECK(order_text(s, 0) == "0:0 0:1 2:0 0:2 2:1 0:3 2:2 2:3 ");
  const auto r1 = amla::sim::simulate_schedule(chain, s, Cycles{1});
  const auto r2 = amla::sim::simulate_schedule(chain, s, Cycles{1});
  REQUIRE(r1.ok);
  CHECK(r1.makespan == r2.makespan);
  CHECK(r1.events == r2.events);
  for (std::size_t i = 0; i < r1.tasks.size(); ++i) CHECK(r1.tasks[i].start == r2.tasks[i].start);
  // Cube: C1[0] 0-10, C1[1] 10-20, C2[0] (V1[0] 11-17, +1) 20-28, C1[2] 28-38, C2[1] (V1[1]
  // 21-27) 38-46, C1[3] 46-56, C2[2] (V1[2] 39-45) 56-64, C2[3] (V1[3] 57-63) 64-72, last V 73-76.
  CHECK(r1.makespan == Cycles{76});
  CHECK(r1.timeline.lanes.size() == 2);
}

TEST_CASE("check_arrangement says why an arrangement does not fit the chain", "[sim][pipeline]") {
  using amla::sim::Arrangement;
  const auto chain = StageChain::amla(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{3});
  const Arrangement fig7 = amla::sim::preload_arrangement(chain);
  CHECK(amla::sim::check_arrangement(chain, fig7).ok);
  CHECK(fig7.lead() == 2);
  CHECK(amla::sim::arrangement_text(chain, fig7) == "cube [C1(k+2), C2(k)], vector [V1(k+1)]");
  const auto twice = amla::sim::check_arrangement(chain, Arrangement{{{0, 2}, {0, 1}}, {{1, 1}}});
  CHECK_FALSE(twice.ok);
  CHECK(twice.reason ==
        "arrangement has C1 2 times; every stage of the chain appears exactly once");
  const auto range = amla::sim::check_arrangement(chain, Arrangement{{{0, 2}, {5, 0}}, {{1, 1}}});
  CHECK_FALSE(range);
  CHECK_THAT(range.reason, Catch::Contains("stage 5 on the Cube unit is not a stage"));
  const auto kind = amla::sim::check_arrangement(chain, Arrangement{{{0, 2}}, {{1, 1}, {2, 0}}});
  CHECK_FALSE(kind);
  CHECK(kind.reason == "arrangement puts C2, a Cube stage, on the Vector unit");
}

TEST_CASE("a zero-length task takes no unit time and holds nothing up", "[sim][pipeline]") {
  // Base's chain with [V2] = 0 (what AMLA removes): V2[b] happens when C2[b] ends and never
  // holds up the Vector unit's V1 stages, whatever its place in the program. Hand-over 1.
  //   Cube: C1[0] 0-10, C1[1] 10-20, C1[2] 20-30, C2[0] 30-38 (V1[0] 11-17), C2[1] 38-46,
  //         C2[2] 46-54; Vector: V1[0] 11-17, V1[1] 21-27, V1[2] 31-37;
  //   V2[b] at C2[b]'s end + 1: 39, 47, 55; last V after V2[2] (no hand-over, both Vector) 55-58.
  const auto chain = StageChain::base(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{0}, Cycles{3});
  const auto s = amla::sim::cyclic_schedule(chain, 3, amla::sim::preload_arrangement(chain));
  const auto r = amla::sim::simulate_schedule(chain, s, Cycles{1});
  REQUIRE(r.ok);
  CHECK(start_of(r, {V1, 2}) == 31);
  CHECK(start_of(r, {V2, 0}) == 39);
  CHECK(end_of(r, {V2, 0}) == 39);
  CHECK(start_of(r, {V2, 2}) == 55);
  CHECK(start_of(r, {4, 0}) == 55);
  CHECK(r.makespan == Cycles{58});
  CHECK(r.units[1].busy == Cycles{21});  // V1 x 3 + last V
}

TEST_CASE("arrangements, chains and schedules beyond the documented limits are refused",
          "[sim][pipeline]") {
  using amla::sim::Arrangement;
  const auto chain = StageChain::amla(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{3});
  // An offset of INT_MAX once made cyclic_schedule loop over 2^31 cycles.
  const Arrangement far{{{C1, 2147483647}, {C2, 0}}, {{V1, 1}}};
  const auto v = amla::sim::check_arrangement(chain, far);
  CHECK_FALSE(v.ok);
  CHECK(v.reason ==
        "arrangement offset 2147483647 of C1 is outside [-1024, 1024] "
        "(max_arrangement_offset)");
  CHECK_THROWS_WITH(amla::sim::cyclic_schedule(chain, 3, far),
                    Catch::Contains("'arrangement'") && Catch::Contains("2147483647"));
  const Arrangement edge{{{C1, 1024}, {C2, -1024}}, {{V1, 0}}};
  CHECK(amla::sim::check_arrangement(chain, edge).ok);
  // Blocks: at most 10^6, and blocks x (stages + 1) at most 10^7.
  CHECK_THROWS_WITH(
      amla::sim::cyclic_schedule(chain, 1000001, amla::sim::preload_arrangement(chain)),
      Catch::Contains("'blocks' = 1000001"));
  CHECK_THROWS_WITH(amla::sim::serial_schedule(chain, 2500001), Catch::Contains("in [1, 10^6]"));
  Schedule huge;
  huge.blocks = 2000000000;
  huge.units = {{"cube", UnitKind::cube, {}}, {"vector", UnitKind::vector, {}}};
  const auto r = amla::sim::simulate_schedule(chain, huge);
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("2000000000 KV blocks") && Catch::Contains("10^7 tasks"));
  // Durations: at most 2^40 cycles a stage.
  auto slow = chain;
  slow.stages[0].duration = Cycles{(std::int64_t{1} << 40) + 1};
  CHECK_THROWS_WITH(slow.validate(), Catch::Contains("C1 = 1099511627777"));
  CHECK_THROWS_WITH(amla::sim::simulate_schedule(chain, amla::sim::serial_schedule(chain, 2),
                                                 Cycles{std::int64_t{1} << 41}),
                    Catch::Contains("handoff"));
}
