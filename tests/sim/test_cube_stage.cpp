// Tests of amla/sim/cube_stage.hpp: a Cube stage tile by tile through MTE2 -> MTE1 -> MMAD ->
// FixP, with hand-computed cycle counts for small tilings, the run-ahead limit of the L1 K/V
// buffers, HBM sharing, and the AMLA preset on the Ascend 910.
#include <catch2/catch.hpp>

#include "amla/sim/chip.hpp"
#include "amla/sim/cube_stage.hpp"
#include "amla/sim/tiling.hpp"

using namespace amla::sim;

namespace {

// Round numbers, no latencies, an HBM that is never the limit.
Chip toy_chip() {
  Chip c = amla::sim::ascend910();
  c.mte2 = BytesPerCycle{32};
  c.mte1 = BytesPerCycle{64};
  c.mte1_l0b = BytesPerCycle{64};
  c.mte1_latency = Cycles{0};
  c.fixp = BytesPerCycle{32};
  c.hbm_latency = Cycles{0};
  c.l2_latency = Cycles{0};
  c.hbm_latency_jitter = Cycles{0};
  c.hbm_bytes_per_s_per_die = 1e15;
  c.hbm_efficiency = 1;
  c.mmad_overhead = Cycles{0};
  return c;
}

Tiling tiny(std::int64_t m, std::int64_t n, std::int64_t k) {
  Tiling t;
  t.M = m;
  t.N = n;
  t.K = k;
  t.single_m = t.single_n = t.single_k = 16;
  t.base_m = t.base_n = t.base_k = 16;
  return t;
}

amla::sim::CubeStageOptions one_core() {
  amla::sim::CubeStageOptions o;
  o.concurrent_cores = 1;
  return o;
}

}  // namespace

TEST_CASE("16 x 16 x 32: two k stripes through the four pipes, by hand", "[sim][cube_stage]") {
  // Every stripe (A or B) is 16 x 16 x 2 B = 512 B: 16 cycles on MTE2 at 32 B/cycle.
  // MTE2 order: A(k0) 0-16, B(k0) 16-32, A(k1) 32-48, B(k1) 48-64.
  // MTE1 moves A + B pieces (2 x 512 B) at 64 B/cycle: 16 cycles; MMAD 16x16x16 = 1 cycle.
  //   MTE1(k0) waits for B(k0): 32-48, MMAD 48-49; MTE1(k1) waits for B(k1): 64-80, MMAD 80-81.
  // FixP writes 16 x 16 x 4 B = 1024 B at 32 B/cycle: 81-113.
  const auto r = amla::sim::simulate_cube_stage(toy_chip(), tiny(16, 16, 32), one_core());
  REQUIRE(r.ok);
  CHECK(r.cycles == Cycles{113});
  CHECK(r.mmad_cycles == Cycles{2});
  CHECK(r.mte2.busy == Cycles{64});
  CHECK(r.mte1.busy == Cycles{32});
  CHECK(r.fixp.busy == Cycles{32});
  CHECK(r.mmad.stalled_on_data == Cycles{48 + 31});  // waits 0-48 and 49-80
  CHECK(r.flops == 2.0 * 16 * 16 * 32);
  CHECK(r.hbm_bytes.count == 1024);  // B from HBM
  CHECK(r.l2_bytes.count == 1024);   // A from L2
  // The Timeline has one lane per pipe with one interval per operation.
  REQUIRE(r.timeline.lanes.size() == 4);
  CHECK(r.timeline.lanes[0].intervals.size() == 4);  // MTE2
  CHECK(r.timeline.lanes[2].intervals.size() == 2);  // MMAD
  CHECK(r.timeline.makespan() == Cycles{113});
}

TEST_CASE("the K/V buffer count limits how far MTE2 runs ahead, by hand", "[sim][cube_stage]") {
  // M = 16, N = 48 (three column blocks), K = 16: one A stripe, three B stripes; FixP fast
  // (1024 B/cycle: 1 cycle per tile).
  Chip c = toy_chip();
  c.fixp = BytesPerCycle{1024};
  Tiling t = tiny(16, 48, 16);
  SECTION("one K/V buffer: each B stripe waits for MTE1 to free the previous one") {
    // A 0-16, B(n0) 16-32; MTE1(n0) 32-48 frees the buffer; B(n1) 48-64, MTE1(n1) 64-80;
    // B(n2) 80-96, MTE1(n2) 96-112; MMADs 48-49, 80-81, 112-113; FixPs 49-50, 81-82, 113-114.
    t.b_slots = 1;
    const auto r = amla::sim::simulate_cube_stage(c, t, one_core());
    REQUIRE(r.ok);
    CHECK(r.cycles == Cycles{114});
    CHECK(r.mte2.stalled_on_buffer == Cycles{16 + 16});  // 32-48 and 64-80
  }
  SECTION("three K/V buffers: MTE2 streams back to back") {
    // A 0-16, B 16-32, 32-48, 48-64; MTE1 32-48, 48-64, 64-80; MMADs 48, 64, 80 (+1);
    // last FixP 81-82.
    t.b_slots = 3;
    const auto r = amla::sim::simulate_cube_stage(c, t, one_core());
    REQUIRE(r.ok);
    CHECK(r.cycles == Cycles{82});
    CHECK(r.mte2.stalled_on_buffer == Cycles{0});
    CHECK(r.mte2.busy == Cycles{64});
  }
}

TEST_CASE("cores streaming at once share the die's HBM", "[sim][cube_stage]") {
  // HBM per die limited to 8 B/cycle: with 1 core the B stripes (512 B) take 512 / 8 = 64
  // cycles; with 4 cores each gets 2 B/cycle: 256 cycles. A comes from L2 (16 cycles).
  // 1 core: A 0-16, B(k0) 16-80, A(k1) 80-96, B(k1) 96-160; MTE1 160-176, MMAD 176-177 ->
  //   MTE1(k0) 80-96, MMAD 96-97, MTE1(k1) 160-176, MMAD 176-177, FixP 177-209.
  Chip c = toy_chip();
  c.hbm_bytes_per_s_per_die = 8 * c.clock.count;
  auto o = one_core();
  const auto r1 = amla::sim::simulate_cube_stage(c, tiny(16, 16, 32), o);
  CHECK(r1.cycles == Cycles{209});
  // 4 cores: B(k0) 16-272, A(k1) 272-288, B(k1) 288-544; MTE1 544-560, MMAD 560-561,
  //   FixP 561-593.
  o.concurrent_cores = 4;
  const auto r4 = amla::sim::simulate_cube_stage(c, tiny(16, 16, 32), o);
  CHECK(r4.cycles == Cycles{593});
}

TEST_CASE("AMLA's C1 tiling at M = 128 on one Ascend 910 core, by hand", "[sim][cube_stage]") {
  // No HBM contention (one core), no jitter, a 32-cycle cost per MMAD instruction (fixed here
  // rather than the calibrated value, so the hand count stays put when the chip is refitted).
  // Q stripes (72 KB) from L2, K stripes (72 KB) from HBM, 576 cycles each at 128 B/cycle. First
  // data: A(k0) 0-576 (visible +400), B(n0,k0) 576-1152 (visible +1000 = 2152). MTE1 of a
  // 128x128x96 step: the 24 KB A piece at 256 B/cycle (96) then the 24 KB B piece at 128 (192),
  // 2152-2440, visible 28 cycles later: 2468. From then MMAD never waits (MTE1 needs 288 + 28 per
  // step; each stripe feeds 3 steps of 8x8x6 = 384 fractal cycles + 32 per instruction = 416,
  // 1248 cycles, while MTE2 needs 576 per stripe; the tightest point, step 4, has its B stripe
  // visible at 3304, its MTE1 visible at 3620, before step 3 ends at 3716): 24 steps = 9984
  // cycles, ending at 12452; the last 128x128 FP32 tile (64 KB) leaves through FixP at
  // 128 B/cycle: 512 cycles -> 12964.
  Chip c = amla::sim::ascend910();
  c.hbm_latency_jitter = Cycles{0};
  c.mmad_overhead = Cycles{32};
  REQUIRE(c.mte1.count == 256);
  REQUIRE(c.mte1_l0b.count == 128);
  REQUIRE(c.mte1_latency == Cycles{28});
  const auto r = amla::sim::simulate_cube_stage(c, amla::sim::amla_c1_tiling(128), one_core());
  REQUIRE(r.ok);
  CHECK(r.mmad_cycles == Cycles{24 * 416});
  CHECK(r.cycles == Cycles{2468 + 24 * 416 + 512});
  CHECK(r.mmad.stalled_on_data == Cycles{2468});
  CHECK(r.mte1.busy == Cycles{24 * 288});
  CHECK(r.hbm_bytes.count == 512 * 576 * 2);
  CHECK(r.l2_bytes.count == 128 * 576 * 2);
  // C2 (V from L2: latency 400): P(k0) 64 KB 0-512, V(n0,k0) 512-1024 visible 1424; MTE1 moves
  // 32 KB of P at 256 B/cycle and 32 KB of V at 128: 384 cycles, 1424-1808, visible 1836; 16
  // steps x (512 + 32) = 8704 MMAD cycles (the tightest point: step 3's V stripe is visible at
  // 2448, its MTE1 visible at 2860, before step 2 ends at 2924); FixP 512.
  auto o = one_core();
  o.b_from_hbm = false;
  const auto r2 = amla::sim::simulate_cube_stage(c, amla::sim::amla_c2_tiling(128), o);
  REQUIRE(r2.ok);
  CHECK(r2.cycles == Cycles{1836 + 16 * 544 + 512});
  CHECK(r2.hbm_bytes.count == 0);
  // Without the per-instruction cost the MAC array is the only limit: 1836 + 8192 + 512 (step 3's
  // MTE1 is visible exactly when step 2 ends, at 2860).
  c.mmad_overhead = Cycles{0};
  CHECK(amla::sim::simulate_cube_stage(c, amla::sim::amla_c2_tiling(128), o).cycles ==
        Cycles{1836 + 8192 + 512});
}

TEST_CASE("an infeasible tiling comes back with its reason, not a crash", "[sim][cube_stage]") {
  Tiling t = amla::sim::amla_c1_tiling(128);
  t.base_k = 288;  // 2 x 128 x 288 x 2 B = 144 KB of L0A
  const auto r = amla::sim::simulate_cube_stage(amla::sim::ascend910(), t);
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::StartsWith("L0A overflow"));
  CHECK(r.cycles == Cycles{0});
  auto o = one_core();
  o.concurrent_cores = 99;
  CHECK_THROWS_WITH(
      amla::sim::simulate_cube_stage(amla::sim::ascend910(), amla::sim::amla_c1_tiling(128), o),
      Catch::Contains("concurrent_cores"));
}

TEST_CASE("a stage of more than max_stage_operations is refused before it is built",
          "[sim][cube_stage]") {
  // AMLA's C1 tiling over 2^20 keys: 8192 column blocks x (2 B stripes + 2 x 6 L0 steps + 1 FixP)
  // + 2 A stripes.
  Tiling t = amla::sim::amla_c1_tiling(128, std::int64_t{1} << 20);
  CHECK(amla::sim::cube_stage_operations(t) == 8192.0 * (2 + 2 * 6 + 1) + 2);
  CHECK(amla::sim::cube_stage_operations(t, false) == 8192.0 * (2 + 2 * 6 + 1));
  // 16-wide column and K steps: 65536 blocks x (2 + 2 x 36 + 1) + 2 = 4,915,202 > 2^22. It fits
  // the chip's buffers; only the bound refuses it.
  t.base_n = 16;
  t.base_k = 16;
  REQUIRE(amla::sim::check_fit(t, amla::sim::ascend910()).ok);
  CHECK(amla::sim::cube_stage_operations(t) == 4915202.0);
  const auto r = amla::sim::simulate_cube_stage(amla::sim::ascend910(), t, one_core());
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason,
             Catch::Contains("4.9152e+06 operations") && Catch::Contains("max_stage_operations"));
}

TEST_CASE("an L0C of 2^32 bytes and a tiny accumulator tile run without overflow",
          "[sim][cube_stage]") {
  auto chip = amla::sim::ascend910();
  chip.l0c = amla::sim::Bytes{amla::sim::chip_limits::max_buffer_bytes};
  Tiling t = amla::sim::amla_c1_tiling(128);
  t.acc_bytes = 0.125;  // 2^32 / (128 x 128 x 0.125) = 2^21 tiles: once cast to int and wrapped
  const auto r = amla::sim::simulate_cube_stage(chip, t, one_core());
  REQUIRE(r.ok);
  CHECK(r.cycles > Cycles{0});
}
