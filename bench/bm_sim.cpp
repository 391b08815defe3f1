// bench/bm_sim.cpp: speed of the cycle simulator.
//  * engine_chain: the bare engine, a long dependency chain over 8 units with a shared link and
//    a pool (events per second, without any model around it).
//  * cube_stage: one AMLA [C1] stage at M = 256, tile by tile.
//  * decode: one Table 5 point (Ascend 910, B = 96, H = 128, S_q = 1), all 48 cores simulated
//    (the calibrated chip has HBM latency jitter and a start stagger, so no symmetry reduction).
//  * decode_symmetric: the same with identical cores (jitter and stagger 0), one representative
//    per class.
//  * table5_sweep: the whole S_q = 1 row of Table 5 (six simulations), the project's "well
//    under a second" target.
// Counters: events/s and operations/s (simulated events and operations per wall second).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "amla/sim/calibration.hpp"
#include "amla/sim/chip.hpp"
#include "amla/sim/cube_stage.hpp"
#include "amla/sim/decode.hpp"
#include "amla/sim/engine.hpp"

namespace {

using amla::sim::Cycles;

void engine_chain(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  std::int64_t events = 0;
  for (auto _ : state) {
    amla::sim::Engine e(false);
    const auto link = e.add_link("l", amla::sim::BytesPerCycle{64});
    const auto pool = e.add_pool("p", 4);
    amla::sim::UnitId units[8];
    for (int u = 0; u < 8; ++u) {
      std::string name = "unit ";  // (built in two steps: GCC 12's false -Wrestrict, PR 105329)
      name += std::to_string(u);
      units[u] = e.add_unit(name);
    }
    const auto cat = e.category("X");
    amla::sim::OpId prev;
    for (int i = 0; i < n; ++i) {
      const auto u = units[i % 8];
      const auto w = (i % 3 == 0)
                         ? amla::sim::Work::transfer(amla::sim::Bytes{4096},
                                                     amla::sim::BytesPerCycle{32}, Cycles{10}, link)
                         : amla::sim::Work::compute(Cycles{7 + i % 5});
      const auto o = e.add_op(u, w, cat, amla::sim::Phase::none);
      if (prev.valid() && i % 2 == 0) e.depend(o, prev);
      if (i % 8 == 0) {
        e.acquire(o, pool);
        e.release(o, pool);
      }
      prev = o;
    }
    const auto r = e.run();
    events += r.events;
    benchmark::DoNotOptimize(r.makespan);
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(engine_chain)->Arg(100000)->Unit(benchmark::kMillisecond);

void cube_stage(benchmark::State& state) {
  const auto chip = amla::sim::ascend910();
  const auto t = amla::sim::amla_c1_tiling(256);
  amla::sim::CubeStageOptions o;
  o.record = false;
  for (auto _ : state) {
    const auto r = amla::sim::simulate_cube_stage(chip, t, o);
    benchmark::DoNotOptimize(r.cycles);
  }
}
BENCHMARK(cube_stage)->Unit(benchmark::kMicrosecond);

void run_decode(benchmark::State& state, const amla::sim::Chip& chip) {
  const amla::Workload w = amla::Workload::uniform(96, 1, 128, static_cast<int>(state.range(0)));
  std::int64_t events = 0, ops = 0;
  for (auto _ : state) {
    const auto r = amla::sim::simulate_decode(chip, w);
    events += r.events;
    ops += static_cast<std::int64_t>(r.operations);
    benchmark::DoNotOptimize(r.cycles);
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["ops/s"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsRate);
}

void decode(benchmark::State& state) {
  run_decode(state, amla::sim::ascend910());
}
BENCHMARK(decode)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

void decode_symmetric(benchmark::State& state) {
  auto chip = amla::sim::ascend910();
  chip.hbm_latency_jitter = Cycles{0};
  chip.core_start_stagger = Cycles{0};
  run_decode(state, chip);
}
BENCHMARK(decode_symmetric)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

void table5_sweep(benchmark::State& state) {
  const auto chip = amla::sim::ascend910();
  const auto ms = amla::sim::amla_table5_ascend910();
  for (auto _ : state) {
    const auto p = amla::sim::predict(chip, ms);
    benchmark::DoNotOptimize(p.data());
  }
}
BENCHMARK(table5_sweep)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
