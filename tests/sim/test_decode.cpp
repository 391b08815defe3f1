// Tests of amla/sim/decode.hpp: the MLA decode kernel mapped onto a chip. A one-core toy chip is
// worked through by hand (AMLA preload pipeline and Base serial order); on the Ascend 910 the
// tests check the mechanisms: exact symmetry reduction, determinism, HBM traffic, the tail of
// an unbalanced batch, infeasible tilings and UB, and what AMLA buys over Base.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "amla/sim/chip.hpp"
#include "amla/sim/decode.hpp"

using amla::sim::BytesPerCycle;
using amla::sim::Chip;
using amla::sim::Cycles;
using amla::sim::DecodeOptions;
using amla::sim::DecodeWorkload;
using amla::sim::Variant;

namespace {

// One Cube core and one Vector core, no latencies, round rates, an HBM that is never the limit.
Chip toy_chip() {
  Chip c = amla::sim::ascend910();
  c.dies = 1;
  c.cube_cores_per_die = 1;
  c.vector_per_cube = 1;
  c.mte2 = BytesPerCycle{32};
  c.mte1 = BytesPerCycle{64};
  c.mte1_l0b = BytesPerCycle{64};
  c.mte1_latency = Cycles{0};
  c.fixp = BytesPerCycle{32};
  c.hbm_latency = c.l2_latency = c.handoff_latency = c.hbm_latency_jitter = Cycles{0};
  c.hbm_bytes_per_s_per_die = 1e15;
  c.hbm_efficiency = 1;
  c.mmad_overhead = Cycles{0};
  c.vector_fp32_lanes = 16;
  c.vector_gm = BytesPerCycle{32};
  c.amla_v1_ops_per_element = c.base_v1_ops_per_element = 1;
  c.base_v2_ops_per_element = c.final_v_ops_per_element = 1;
  c.core_start_stagger = Cycles{0};
  c.fixed_overhead = amla::sim::Seconds{0};
  return c;
}

// 16 rows (16 heads, S_q 1), d_qk 32, d_v 16, two KV blocks of 16; 16 x 16 x 16 tiles.
DecodeWorkload toy_workload() {
  DecodeWorkload w;
  w.batch = 1;
  w.heads = 16;
  w.s_q = 1;
  w.d_qk = 32;
  w.d_v = 16;
  w.kv_block = 16;
  w.s_k = 32;
  return w;
}

DecodeOptions toy_options(Variant v) {
  DecodeOptions o;
  o.variant = v;
  for (auto* t : {&o.c1, &o.c2}) {
    t->single_m = t->single_n = t->single_k = 16;
    t->base_m = t->base_n = t->base_k = 16;
  }
  return o;
}

Chip quiet_ascend() {  // the Ascend 910 with its cores identical (no jitter, no stagger)
  Chip c = amla::sim::ascend910();
  c.hbm_latency_jitter = Cycles{0};
  c.core_start_stagger = Cycles{0};
  return c;
}

}  // namespace

TEST_CASE("AMLA on a one-core toy chip, by hand", "[sim][decode]") {
  // Stripes are 16 x 16 BF16 = 512 B: 16 MTE2 cycles; an MTE1 step (A + B pieces, 1 KB) 16
  // cycles; MMAD 1 cycle; a 16 x 16 FP32 tile 1 KB: 32 FixP cycles. Q stays in L1 (2 stripes).
  // Cube program (preload count 2): C1[0], C1[1], C2[0], C2[1]; Vector: V1[0], V1[1], last V.
  //   C1[0]: MTE2 Q0 0-16, K00 16-32, Q1 32-48, K01 48-64; MTE1 32-48, 64-80; MMAD 48, 80;
  //          FixP 81-113.
  //   C1[1]: K10 64-80, K11 80-96; MTE1 80-96, 96-112; MMAD 96, 112; FixP 113-145.
  //   V1[0] (after C1[0]'s FixP): S in 1 KB + P out 512 B = 48 cycles at 32 B/cycle, 256
  //          elements x 1 op / 16 lanes = 16, one chunk: 48 + 16 = 64: 113-177.
  //   V1[1]: + the O rescale (AtomicAdd<INT32>, 1 KB): 80 + 16 = 96: 177-273.
  //   C2[0]: P0 (after V1[0]) 177-193, V0 193-209, MTE1 209-225, MMAD 225, FixP 226-258.
  //   C2[1]: P1 (after V1[1]) 273-289, V1 289-305, MTE1 305-321, MMAD 321, FixP 322-354.
  //   last V (after C2[1]): O in 1 KB + out 512 B: 48 + 16 = 64: 354-418.
  const auto r = amla::sim::simulate_decode(toy_chip(), toy_workload(), toy_options(Variant::amla));
  REQUIRE(r.feasible);
  CHECK(r.cycles == Cycles{418});
  CHECK(r.tasks == 1);
  CHECK(r.blocks_per_task == 2);
  // HBM: K twice (16 x 32 x 2 B) and Q once (16 x 32 x 2 B).
  CHECK(r.hbm_bytes.count == 3 * 1024);
  CHECK(r.flops == 2.0 * 16 * 32 * (32 + 16));
  CHECK(r.time.count == Approx(418 / 1.8e9));
  // The MMAD pipe ran 6 one-cycle steps: 4 of C1 and 2 of C2.
  REQUIRE(r.pipes.size() == 5);
  CHECK(r.pipes[2].pipe == "MMAD");
  CHECK(r.pipes[2].busy * 418 == Approx(6));
}

TEST_CASE("Base on a one-core toy chip, serial order, by hand", "[sim][decode]") {
  // Each stage waits for the previous one.
  //   C1[0] as above, FixP ends 113; V1[0] 113-177 (no rescale in Base);
  //   C2[0]: P 177-193, V 193-209, MTE1 209-225, MMAD 225, FixP (T) 226-258;
  //   V2[0]: T in 1 KB, O out 1 KB: 64 + 16 = 80: 258-338;
  //   C1[1] (after V2[0]): K 338-354, 354-370; MTE1 354-370, 370-386; MMAD 370, 386;
  //          FixP 387-419;
  //   V1[1] 419-483; C2[1]: P 483-499, V 499-515, MTE1 515-531, MMAD 531, FixP 532-564;
  //   V2[1]: T and O in (2 KB), O out (1 KB): 96 + 16 = 112: 564-676; last V 676-740.
  const auto r = amla::sim::simulate_decode(toy_chip(), toy_workload(), toy_options(Variant::base));
  REQUIRE(r.feasible);
  CHECK(r.cycles == Cycles{740});
}

TEST_CASE("the symmetry reduction is exact", "[sim][decode]") {
  // 50 batches on 48 cores: two classes per die (one or two tasks), a partial last KV block.
  DecodeWorkload w;
  w.batch = 50;
  w.s_k = 1300;
  for (const Variant v : {Variant::amla, Variant::base}) {
    DecodeOptions o;
    o.variant = v;
    o.symmetry = true;
    const auto a = amla::sim::simulate_decode(quiet_ascend(), w, o);
    o.symmetry = false;
    const auto b = amla::sim::simulate_decode(quiet_ascend(), w, o);
    REQUIRE(a.feasible);
    REQUIRE(b.feasible);
    CHECK(a.core_classes == 3);  // die 0: cores 0-1 have 2 tasks, 2-23 one; die 1: one each
    CHECK(b.core_classes == 48);
    CHECK(a.cycles == b.cycles);
    CHECK(a.hbm_bytes.count == Approx(b.hbm_bytes.count));
    for (std::size_t i = 0; i < a.pipes.size(); ++i) {
      CHECK(a.pipes[i].busy == Approx(b.pipes[i].busy));
      CHECK(a.pipes[i].stalled_on_data == Approx(b.pipes[i].stalled_on_data));
    }
    CHECK(a.operations < b.operations / 10);
  }
}

TEST_CASE("decode simulations are deterministic", "[sim][decode]") {
  DecodeWorkload w;
  w.s_k = 2048;
  const auto a = amla::sim::simulate_decode(amla::sim::ascend910(), w);
  const auto b = amla::sim::simulate_decode(amla::sim::ascend910(), w);
  REQUIRE(a.feasible);
  CHECK(a.cycles == b.cycles);
  CHECK(a.events == b.events);
  CHECK(a.hbm_bytes.count == b.hbm_bytes.count);
}

TEST_CASE("HBM traffic is the KV cache once plus Q once per task", "[sim][decode]") {
  for (const int s_q : {1, 2}) {
    DecodeWorkload w;
    w.s_k = 1536;
    w.s_q = s_q;
    const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w);
    REQUIRE(r.feasible);
    const double kv = 96.0 * 1536 * 576 * 2;
    const double q = 96.0 * 128 * s_q * 576 * 2;
    CHECK(r.hbm_bytes.count == Approx(kv + q));
    CHECK(r.rows_per_task == 128 * s_q);
    CHECK(r.hbm_utilization > 0);
    CHECK(r.hbm_utilization < 1);
  }
}

TEST_CASE("an unbalanced batch leaves a tail on the cores with more tasks", "[sim][decode]") {
  // 48 tasks: one per core. 49: core 0 runs two, and the kernel waits for it. The second task
  // runs alone on the HBM, so it costs at least its Cube time: 8 blocks x (24 C1 steps of 384
  // fractal cycles + 16 C2 steps of 512, each plus the chip's per-instruction cost).
  DecodeWorkload w;
  w.s_k = 4096;
  w.batch = 48;
  const auto even = amla::sim::simulate_decode(quiet_ascend(), w);
  w.batch = 49;
  const auto tail = amla::sim::simulate_decode(quiet_ascend(), w);
  REQUIRE(even.feasible);
  REQUIRE(tail.feasible);
  CHECK(even.max_tasks_per_core == 1);
  CHECK(tail.max_tasks_per_core == 2);
  CHECK(tail.cores_used == 48);
  const std::int64_t ov = quiet_ascend().mmad_overhead.count;
  CHECK(tail.cycles.count >= even.cycles.count + 8 * (24 * (384 + ov) + 16 * (512 + ov)));
  CHECK(tail.fu < even.fu);
  // Rows beyond max_rows_per_task split a batch entry into groups: 128 heads x S_q 4 = 512
  // rows -> 2 tasks of 256.
  DecodeWorkload w4;
  w4.batch = 4;
  w4.s_q = 4;
  w4.s_k = 1024;
  const auto g = amla::sim::simulate_decode(amla::sim::ascend910(), w4);
  REQUIRE(g.feasible);
  CHECK(g.tasks == 8);
  CHECK(g.rows_per_task == 256);
}

TEST_CASE("AMLA beats Base, and MTP (S_q = 2) raises the utilisation", "[sim][decode]") {
  DecodeWorkload w;
  w.s_k = 4096;
  DecodeOptions base;
  base.variant = Variant::base;
  const auto a1 = amla::sim::simulate_decode(amla::sim::ascend910(), w);
  const auto b1 = amla::sim::simulate_decode(amla::sim::ascend910(), w, base);
  w.s_q = 2;
  const auto a2 = amla::sim::simulate_decode(amla::sim::ascend910(), w);
  REQUIRE(a1.feasible);
  REQUIRE(b1.feasible);
  REQUIRE(a2.feasible);
  CHECK(b1.kernel_us() > 1.2 * a1.kernel_us());
  CHECK(a2.fu > a1.fu);
  CHECK(a2.flops == 2 * a1.flops);
  // Shares of each pipe add up to 1.
  for (const auto& p : a1.pipes)
    CHECK(p.busy + p.stalled_on_data + p.stalled_on_buffer + p.idle == Approx(1));
  // Base in AMLA's preload pipeline instead of the serial order is faster than serial Base.
  DecodeOptions bp = base;
  bp.schedule = amla::sim::DecodeSchedule::preload;
  w.s_q = 1;
  const auto b1p = amla::sim::simulate_decode(amla::sim::ascend910(), w, bp);
  REQUIRE(b1p.feasible);
  CHECK(b1p.kernel_us() < b1.kernel_us());
}

TEST_CASE("what does not fit comes back infeasible with the reason", "[sim][decode]") {
  DecodeWorkload w;
  w.s_k = 1024;
  {
    DecodeOptions o;
    o.c1.base_k = 288;  // L0A: 2 x 128 x 288 x 2 B
    const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w, o);
    CHECK_FALSE(r.feasible);
    CHECK_THAT(r.reason, Catch::StartsWith("[C1] tiling (M 128, N 512, K 576): L0A overflow"));
  }
  {
    DecodeOptions o;
    o.c2.b_slots = 2;  // C1 keeps 3: the two stages would not share one L1 arrangement
    const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w, o);
    CHECK_FALSE(r.feasible);
    CHECK_THAT(r.reason, Catch::Contains("Remark 4.1"));
  }
  {
    // Base keeping O in UB (Section 3.1): 64 rows x 512 x 4 B = 128 KB next to [V1]'s buffers.
    DecodeOptions o;
    o.variant = Variant::base;
    o.base_o_in_ub = true;
    const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w, o);
    CHECK_FALSE(r.feasible);
    CHECK_THAT(r.reason, Catch::StartsWith("[V1] UB overflow"));
    o.variant = Variant::amla;
    CHECK_THROWS_WITH(amla::sim::simulate_decode(amla::sim::ascend910(), w, o),
                      Catch::Contains("base_o_in_ub"));
  }
  DecodeWorkload bad = w;
  bad.s_k = 0;
  CHECK_THROWS_WITH(amla::sim::simulate_decode(amla::sim::ascend910(), bad),
                    Catch::Contains("s_k"));
}

TEST_CASE("the Timeline shows stages, pipes and Vector cores with phases", "[sim][decode]") {
  DecodeWorkload w;
  w.batch = 2;
  w.s_k = 2048;
  DecodeOptions o;
  o.record_timeline = true;
  o.timeline_cores = 1;
  const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w, o);
  REQUIRE(r.feasible);
  REQUIRE(r.timeline.lanes.size() == 7);  // stages, 4 pipes, 2 Vector cores
  CHECK(r.timeline.lanes[0].name == "cube0");
  CHECK(r.timeline.lanes[1].name == "cube0/MTE2");
  CHECK(r.timeline.lanes[5].name == "vec0.0");
  const auto& stages = r.timeline.lanes[0].intervals;
  REQUIRE(stages.size() == 8);  // 4 blocks x (C1, C2)
  CHECK(stages[0].name == "C1[b0 k0]");
  CHECK(stages[0].phase == amla::sim::Phase::preload);
  CHECK(stages[2].name == "C1[b0 k2]");
  CHECK(stages[2].phase == amla::sim::Phase::steady);
  CHECK(stages[3].name == "C2[b0 k0]");
  CHECK(stages.back().phase == amla::sim::Phase::drain);
  CHECK(r.timeline.lanes[5].intervals.back().category == "LastV");
  CHECK(r.timeline.makespan() <= r.cycles);
}
