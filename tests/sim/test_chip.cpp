// Tests of amla/sim/chip.hpp: the chips' derived figures and validation.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "amla/arch/ascend910.hpp"
#include "amla/sim/chip.hpp"
#include "common/error_message.hpp"

using amla::sim::Chip;

TEST_CASE("Ascend 910: 48 Cube and 96 Vector cores, 7.08e14 BF16 FLOP/s, 3.2 TB/s", "[sim][chip]") {
  const Chip c = amla::sim::ascend910();
  CHECK(c.cube_cores() == 48);
  CHECK(c.vector_cores() == 96);
  CHECK(c.macs_per_cycle() == 4096);
  // 2 x 4096 MACs x 48 cores x 1.8 GHz, the peak Table 5's durations and FU imply.
  CHECK(c.peak_flops_per_s() == Approx(7.0779e14).epsilon(1e-4));
  CHECK(c.peak_flops_per_s() == Approx(amla::arch::ascend910::bf16_peak_flops_per_s));
  CHECK(c.dies * c.hbm_bytes_per_s_per_die == Approx(3.2e12));
  // Achievable HBM per die in bytes per cycle: 1.6e12 x efficiency / 1.8e9.
  CHECK(c.hbm_per_die().count == Approx(1.6e12 * c.hbm_efficiency / 1.8e9));
  CHECK(c.l1.count == 512 * 1024);
  CHECK(c.l0a.count == 64 * 1024);
  CHECK(c.l0c.count == 128 * 1024);
  CHECK(c.ub.count == 192 * 1024);
  CHECK(c.hbm_efficiency > 0);
  CHECK(c.hbm_efficiency <= 1);
  CHECK_NOTHROW(c.validate());
}

TEST_CASE("TyphoonMLA NPU: 24 cores, 376 TFLOPS, 1.8 TB/s", "[sim][chip]") {
  const Chip c = amla::sim::typhoon_npu();
  CHECK(c.cube_cores() == 24);
  CHECK(c.vector_cores() == 48);
  CHECK(c.peak_flops_per_s() == Approx(376e12));
  CHECK(c.clock.count == Approx(376e12 / (2.0 * 4096 * 24)));
  CHECK(c.dies * c.hbm_bytes_per_s_per_die == Approx(1.8e12));
  CHECK_NOTHROW(c.validate());
}

namespace {
/// The message Chip::validate throws for an Ascend 910 with one edit ("" if it does not throw).
std::string error(void (*edit)(Chip&)) {
  Chip c = amla::sim::ascend910();
  edit(c);
  return amla_test::error_of([&] { c.validate(); });
}
}  // namespace

TEST_CASE("Chip::validate names the field that makes no sense", "[sim][chip]") {
  using namespace amla::sim;
  CHECK_THAT(error([](Chip& c) { c.hbm_efficiency = 1.5; }),
             Catch::Contains("'chip.hbm_efficiency' = 1.5"));
  CHECK_FALSE(error([](Chip& c) { c.dies = 0; }).empty());
  CHECK_THAT(error([](Chip& c) { c.mte2 = BytesPerCycle{0}; }), Catch::Contains("'chip.mte2' = 0"));
  CHECK_THAT(error([](Chip& c) { c.mte1_l0b = BytesPerCycle{0}; }),
             Catch::Contains("'chip.mte1_l0b' = 0"));
  CHECK_THAT(error([](Chip& c) { c.mte1_latency = Cycles{-1}; }),
             Catch::Contains("'chip.mte1_latency' = -1"));
  // Each field is reported with its own value, and the function with its full name.
  CHECK_THAT(
      error([](Chip& c) { c.vector_gm = BytesPerCycle{std::nan("")}; }),
      Catch::Contains("amla::sim::Chip::validate") && Catch::Contains("'chip.vector_gm' = nan"));
  CHECK_THAT(error([](Chip& c) { c.l0c = Bytes{-1}; }), Catch::Contains("'chip.l0c' = -1"));
  CHECK_THAT(error([](Chip& c) { c.handoff_latency = Cycles{-7}; }),
             Catch::Contains("'chip.handoff_latency' = -7"));
  CHECK_THAT(error([](Chip& c) { c.core_start_stagger = Cycles{-1}; }),
             Catch::Contains("core_start_stagger"));
  CHECK_THAT(error([](Chip& c) { c.mmad_overhead = Cycles{-5}; }),
             Catch::Contains("mmad_overhead"));
  CHECK_THAT(error([](Chip& c) { c.clock = Hertz{0}; }), Catch::Contains("clock"));
}

TEST_CASE("the core start stagger is derived: one KV block at the die's achievable HBM rate",
          "[sim][chip]") {
  // AMLA's K block is 512 tokens x 576 x 2 bytes = 589,824 bytes; a die moves
  // 1.6e12 x efficiency / 1.8e9 bytes per cycle.
  CHECK(amla::sim::amla_kv_block_bytes == 589824);
  Chip c = amla::sim::ascend910();
  const double per_cycle = 1.6e12 * c.hbm_efficiency / 1.8e9;
  CHECK(c.core_start_stagger.count == std::llround(589824 / per_cycle));
  CHECK(amla::sim::hbm_turn_stagger(c) == c.core_start_stagger);
  // At the full peak: 589,824 / 888.9 = 663.55 -> 664 cycles; at half the bandwidth twice that.
  c.hbm_efficiency = 1;
  CHECK(amla::sim::hbm_turn_stagger(c) == amla::sim::Cycles{664});
  c.hbm_efficiency = 0.5;
  CHECK(amla::sim::hbm_turn_stagger(c) == amla::sim::Cycles{1327});
  CHECK(amla::sim::hbm_turn_stagger(c, 888.8889 * 0.5) == amla::sim::Cycles{1});
  // The TyphoonMLA NPU derives its own from its 1.8 TB/s single die.
  const Chip t = amla::sim::typhoon_npu();
  CHECK(t.core_start_stagger ==
        amla::sim::Cycles{std::llround(589824 / (1.8e12 * t.hbm_efficiency / t.clock.count))});
  CHECK_THROWS_WITH(amla::sim::hbm_turn_stagger(c, 0), Catch::Contains("block_bytes"));
  c.hbm_efficiency = 0;
  CHECK_THROWS_WITH(amla::sim::hbm_turn_stagger(c), Catch::Contains("hbm_efficiency"));
}

TEST_CASE("Chip::validate bounds every field: finite and inside chip_limits", "[sim][chip]") {
  using namespace amla::sim;
  struct Case {
    const char* field;
    const char* value;
    void (*edit)(Chip&);
  };
  // Each edit breaks one rule; the message names that field with its own value. The first three
  // passed validation once and then failed deep inside a simulation.
  const Case rejected[] = {
      {"chip.l2_per_die", "0", [](Chip& c) { c.l2_per_die = Bytes{0}; }},
      {"chip.mte2", "inf", [](Chip& c) { c.mte2 = BytesPerCycle{INFINITY}; }},
      {"chip.l0c", "2.81475e+14", [](Chip& c) { c.l0c = Bytes{0x1p48}; }},
      {"chip.clock", "1e+12", [](Chip& c) { c.clock = Hertz{1e12}; }},
      {"chip.clock", "999999", [](Chip& c) { c.clock = Hertz{999999}; }},
      {"chip.dies", "65", [](Chip& c) { c.dies = 65; }},
      {"chip.cube_cores_per_die", "4097", [](Chip& c) { c.cube_cores_per_die = 4097; }},
      {"chip.vector_per_cube", "0", [](Chip& c) { c.vector_per_cube = 0; }},
      {"chip.cube_k", "1025", [](Chip& c) { c.cube_k = 1025; }},
      {"chip.l1", "8.58993e+09", [](Chip& c) { c.l1 = Bytes{0x1p33}; }},
      {"chip.ub", "nan", [](Chip& c) { c.ub = Bytes{NAN}; }},
      {"chip.hbm_bytes_per_s_per_die", "1e-06", [](Chip& c) { c.hbm_bytes_per_s_per_die = 1e-6; }},
      {"chip.hbm_bytes_per_s_per_die", "1e+17", [](Chip& c) { c.hbm_bytes_per_s_per_die = 1e17; }},
      {"chip.hbm_efficiency", "0.0001", [](Chip& c) { c.hbm_efficiency = 1e-4; }},
      {"chip.mte1", "0.0001", [](Chip& c) { c.mte1 = BytesPerCycle{1e-4}; }},
      {"chip.fixp", "2.09715e+06", [](Chip& c) { c.fixp = BytesPerCycle{0x1p21}; }},
      {"chip.hbm_latency", "8589934592", [](Chip& c) { c.hbm_latency = Cycles{1LL << 33}; }},
      {"chip.core_start_stagger", "8589934592",
       [](Chip& c) { c.core_start_stagger = Cycles{1LL << 33}; }},
      {"chip.vector_fp32_lanes", "65537", [](Chip& c) { c.vector_fp32_lanes = 65537; }},
      {"chip.amla_v1_ops_per_element", "1e+07", [](Chip& c) { c.amla_v1_ops_per_element = 1e7; }},
      {"chip.vector_chunk", "inf", [](Chip& c) { c.vector_chunk = Bytes{INFINITY}; }},
      {"chip.fixed_overhead", "2", [](Chip& c) { c.fixed_overhead = Seconds{2}; }},
  };
  for (const Case& k : rejected) {
    INFO(k.field << " = " << k.value);
    CHECK_THAT(error(k.edit), Catch::Contains(std::string("'") + k.field + "' = " + k.value));
  }
  // The bounds themselves are accepted.
  const Case at_bounds[] = {
      {"", "", [](Chip& c) { c.clock = Hertz{chip_limits::max_clock_hz}; }},
      {"", "", [](Chip& c) { c.clock = Hertz{chip_limits::min_clock_hz}; }},
      {"", "", [](Chip& c) { c.dies = chip_limits::max_dies; }},
      {"", "", [](Chip& c) { c.l0c = Bytes{chip_limits::max_buffer_bytes}; }},
      {"", "", [](Chip& c) { c.hbm_efficiency = chip_limits::min_hbm_efficiency; }},
      {"", "", [](Chip& c) { c.hbm_latency = Cycles{chip_limits::max_latency_cycles}; }},
      {"", "", [](Chip& c) { c.fixed_overhead = Seconds{chip_limits::max_fixed_overhead_s}; }},
  };
  for (const Case& k : at_bounds) CHECK(error(k.edit).empty());
}

TEST_CASE("hbm_turn_stagger refuses a block whose transfer would not fit its cycle range",
          "[sim][chip]") {
  amla::sim::Chip c = amla::sim::ascend910();
  c.hbm_bytes_per_s_per_die = amla::sim::chip_limits::min_hbm_bytes_per_s;
  c.hbm_efficiency = amla::sim::chip_limits::min_hbm_efficiency;
  // 576 KB at 1e6 x 1e-3 / 1.8e9 bytes per cycle: 1.06e12 cycles, more than 2^32.
  CHECK_THAT(amla_test::error_of([&] { amla::sim::hbm_turn_stagger(c); }),
             Catch::Contains("'block_bytes' = 589824") && Catch::Contains("1.06168e+12"));
  CHECK_THROWS_WITH(amla::sim::hbm_turn_stagger(amla::sim::ascend910(), 0x1p33),
                    Catch::Contains("block_bytes"));
}
