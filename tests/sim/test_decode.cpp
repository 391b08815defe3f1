// Tests of amla/sim/decode.hpp: the MLA decode kernel mapped onto a chip. A one-core toy chip is
// worked through by hand (AMLA preload pipeline and Base serial order); on the Ascend 910 the
// tests check the mechanisms: exact symmetry reduction, determinism, HBM traffic, the tail of
// an unbalanced batch, infeasible tilings and UB, and what AMLA buys over Base.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "amla/sim/chip.hpp"
#include "amla/sim/decode.hpp"

using amla::Workload;
using namespace amla::sim;

namespace {

// One Cube core and one Vector core, no latencies, round rates, an HBM that is never the limit.
Chip one_core_chip() {
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

// 16 rows (16 heads, S_q 1), d_qk 32, d_v 16, two KV blocks of 16 (toy_options); 16 x 16 x 16
// tiles.
Workload toy_workload() {
  return Workload::uniform(1, 1, 16, 32, 32, 16);
}

DecodeOptions toy_options(Variant v) {
  DecodeOptions o;
  o.variant = v;
  o.kv_block = 16;
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

// Runs `w` with one representative per class of identical cores and with every core, and checks
// that the two agree: cycles, HBM bytes and every pipe's shares.
std::pair<amla::sim::DecodeResult, amla::sim::DecodeResult> reduced_and_full(const Workload& w,
                                                                             DecodeOptions o) {
  o.symmetry = true;
  auto a = amla::sim::simulate_decode(quiet_ascend(), w, o);
  o.symmetry = false;
  auto b = amla::sim::simulate_decode(quiet_ascend(), w, o);
  REQUIRE(a.ok);
  REQUIRE(b.ok);
  CHECK(a.cycles == b.cycles);
  CHECK(a.hbm_bytes.count == Approx(b.hbm_bytes.count));
  for (std::size_t i = 0; i < a.pipes.size(); ++i) {
    CHECK(a.pipes[i].busy == Approx(b.pipes[i].busy));
    CHECK(a.pipes[i].stalled_on_data == Approx(b.pipes[i].stalled_on_data));
  }
  return {std::move(a), std::move(b)};
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
  const auto r =
      amla::sim::simulate_decode(one_core_chip(), toy_workload(), toy_options(Variant::amla));
  REQUIRE(r.ok);
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
  const auto r =
      amla::sim::simulate_decode(one_core_chip(), toy_workload(), toy_options(Variant::base));
  REQUIRE(r.ok);
  CHECK(r.cycles == Cycles{740});
}

TEST_CASE("the symmetry reduction is exact", "[sim][decode]") {
  // 50 batches on 48 cores: two classes per die (one or two tasks), a partial last KV block.
  const Workload w = Workload::uniform(50, 1, 128, 1300);
  for (const Variant v : {Variant::amla, Variant::base}) {
    DecodeOptions o;
    o.variant = v;
    const auto [a, b] = reduced_and_full(w, o);
    CHECK(a.core_classes == 3);  // die 0: cores 0-1 have 2 tasks, 2-23 one; die 1: one each
    CHECK(b.core_classes == 48);
    CHECK(a.operations < b.operations / 10);
  }
}

TEST_CASE("decode simulations are deterministic", "[sim][decode]") {
  const Workload w = Workload::uniform(96, 1, 128, 2048);
  const auto a = amla::sim::simulate_decode(amla::sim::ascend910(), w);
  const auto b = amla::sim::simulate_decode(amla::sim::ascend910(), w);
  REQUIRE(a.ok);
  CHECK(a.cycles == b.cycles);
  CHECK(a.events == b.events);
  CHECK(a.hbm_bytes.count == b.hbm_bytes.count);
}

TEST_CASE("HBM traffic is the KV cache once plus Q once per task", "[sim][decode]") {
  for (const int s_q : {1, 2}) {
    const Workload w = Workload::uniform(96, s_q, 128, 1536);
    const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w);
    REQUIRE(r.ok);
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
  Workload w = Workload::uniform(48, 1, 128, 4096);
  const auto even = amla::sim::simulate_decode(quiet_ascend(), w);
  w.seqlens.push_back(4096);  // 49 sequences
  const auto tail = amla::sim::simulate_decode(quiet_ascend(), w);
  REQUIRE(even.ok);
  REQUIRE(tail.ok);
  CHECK(even.max_tasks_per_core == 1);
  CHECK(tail.max_tasks_per_core == 2);
  CHECK(tail.cores_used == 48);
  const std::int64_t ov = quiet_ascend().mmad_overhead.count;
  CHECK(tail.cycles.count >= even.cycles.count + 8 * (24 * (384 + ov) + 16 * (512 + ov)));
  CHECK(tail.fu < even.fu);
  // Rows beyond max_rows_per_task split a batch entry into groups: 128 heads x S_q 4 = 512
  // rows -> 2 tasks of 256.
  const Workload w4 = Workload::uniform(4, 4, 128, 1024);
  const auto g = amla::sim::simulate_decode(amla::sim::ascend910(), w4);
  REQUIRE(g.ok);
  CHECK(g.tasks == 8);
  CHECK(g.rows_per_task == 256);
}

TEST_CASE("AMLA beats Base, and MTP (S_q = 2) raises the utilisation", "[sim][decode]") {
  Workload w = Workload::uniform(96, 1, 128, 4096);
  DecodeOptions base;
  base.variant = Variant::base;
  const auto a1 = amla::sim::simulate_decode(amla::sim::ascend910(), w);
  const auto b1 = amla::sim::simulate_decode(amla::sim::ascend910(), w, base);
  w.s_q = 2;
  const auto a2 = amla::sim::simulate_decode(amla::sim::ascend910(), w);
  REQUIRE(a1.ok);
  REQUIRE(b1.ok);
  REQUIRE(a2.ok);
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
  REQUIRE(b1p.ok);
  CHECK(b1p.kernel_us() < b1.kernel_us());
}

TEST_CASE("what does not fit comes back infeasible with the reason", "[sim][decode]") {
  const Workload w = Workload::uniform(96, 1, 128, 1024);
  {
    DecodeOptions o;
    o.c1.base_k = 288;  // L0A: 2 x 128 x 288 x 2 B
    const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w, o);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.reason, Catch::StartsWith("[C1] tiling (M 128, N 512, K 576): L0A overflow"));
  }
  {
    DecodeOptions o;
    o.c2.b_slots = 2;  // C1 keeps 3: the two stages would not share one L1 arrangement
    const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w, o);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.reason, Catch::Contains("Remark 4.1"));
  }
  {
    // Base keeping O in UB (Section 3.1): 64 rows x 512 x 4 B = 128 KB next to [V1]'s buffers.
    DecodeOptions o;
    o.variant = Variant::base;
    o.base_o_in_ub = true;
    const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w, o);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.reason, Catch::StartsWith("[V1] UB overflow"));
    o.variant = Variant::amla;
    CHECK_THROWS_WITH(amla::sim::simulate_decode(amla::sim::ascend910(), w, o),
                      Catch::Contains("base_o_in_ub"));
  }
  // Malformed workloads throw, naming the field and its value.
  Workload bad = w;
  bad.seqlens[3] = -1;
  CHECK_THROWS_WITH(amla::sim::simulate_decode(amla::sim::ascend910(), bad),
                    Catch::Contains("workload.seqlens") && Catch::Contains("seqlens[3] = -1"));
  bad = w;
  bad.h_kv = 2;
  bad.h_q = 128;
  CHECK_THROWS_WITH(amla::sim::simulate_decode(amla::sim::ascend910(), bad),
                    Catch::Contains("workload.h_kv") && Catch::Contains("= 2"));
  DecodeOptions no_block;
  no_block.kv_block = 0;
  CHECK_THROWS_WITH(amla::sim::simulate_decode(amla::sim::ascend910(), w, no_block),
                    Catch::Contains("options.kv_block' = 0"));
}

TEST_CASE("the Timeline shows stages, pipes and Vector cores with phases", "[sim][decode]") {
  const Workload w = Workload::uniform(2, 1, 128, 2048);
  DecodeOptions o;
  o.record_timeline = true;
  o.timeline_cores = 1;
  const auto r = amla::sim::simulate_decode(amla::sim::ascend910(), w, o);
  REQUIRE(r.ok);
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

TEST_CASE("the decode model runs any arrangement of its stage chain", "[sim][decode]") {
  using amla::sim::Arrangement;
  using amla::sim::DecodeSchedule;
  const Chip chip = one_core_chip();
  const Workload w = toy_workload();
  DecodeOptions o = toy_options(Variant::amla);
  // The stage durations the preload theory sees on the toy chip (one full block, a later one):
  // C1 113 and C2 81 cycles as in the hand-worked run above, V1 96 (with the O rescale), last V
  // 64. Theorem B.1 (n = 2, C = (113, 81), V = (96, 0)): a_1 = 96 - 81, a_2 = 0 - 113, F is least
  // at m = 2, so the Cube runs C2 then C1 and V1 starts the Cycle: C1 -> V1 and V1 -> C2 are
  // external, C2 -> V2 internal; lags C1 2, V1 1, C2 0.
  const amla::sim::StageChain chain = amla::sim::decode_stage_chain(chip, w, o);
  REQUIRE(chain.size() == 3);
  CHECK(chain.stages[0].duration == Cycles{113});
  CHECK(chain.stages[1].duration == Cycles{96});
  CHECK(chain.stages[2].duration == Cycles{81});
  CHECK(chain.tail->duration == Cycles{64});
  const Arrangement b1 = amla::sim::preload::theorem_b1_arrangement(chain);
  CHECK(b1 == Arrangement{{{2, 0}, {0, 2}}, {{1, 1}}});
  CHECK(amla::sim::arrangement_text(chain, b1) == "cube [C2(k), C1(k+2)], vector [V1(k+1)]");
  // Over two blocks both arrangements give the Cube program C1[0], C1[1], C2[0], C2[1] and so the
  // hand-worked 418 cycles; Figure 7's passed explicitly is the default, bit for bit.
  const auto def = amla::sim::simulate_decode(chip, w, o);
  o.schedule = DecodeSchedule::theorem_b1;
  const auto thm = amla::sim::simulate_decode(chip, w, o);
  o.schedule = DecodeSchedule::automatic;
  o.arrangement = amla::sim::preload_arrangement(chain);
  const auto fig7 = amla::sim::simulate_decode(chip, w, o);
  REQUIRE(def.ok);
  REQUIRE(thm.ok);
  REQUIRE(fig7.ok);
  CHECK(def.cycles == Cycles{418});
  CHECK(thm.cycles == Cycles{418});
  CHECK(fig7.cycles == def.cycles);
  CHECK(fig7.events == def.events);
  // An arrangement that does not fit the chain, or whose order can never run, is a result with
  // the reason; asking for both an arrangement and a schedule is malformed.
  o.arrangement = Arrangement{{{0, 1}}, {{1, 0}}};
  const auto missing = amla::sim::simulate_decode(chip, w, o);
  CHECK_FALSE(missing.ok);
  CHECK_THAT(missing.reason, Catch::Contains("C2 0 times"));
  o.arrangement = Arrangement{{{0, 0}, {1, 0}}, {{2, 0}}};
  const auto wrong_unit = amla::sim::simulate_decode(chip, w, o);
  CHECK_FALSE(wrong_unit.ok);
  CHECK_THAT(wrong_unit.reason, Catch::Contains("puts V1, a Vector stage, on the Cube unit"));
  o.arrangement = Arrangement{{{2, 0}, {0, 0}}, {{1, 0}}};  // C2[k] before the C1[k] it needs
  const auto cyclic = amla::sim::simulate_decode(chip, w, o);
  CHECK_FALSE(cyclic.ok);
  CHECK_THAT(cyclic.reason, Catch::Contains("cannot run") && Catch::Contains("dependency cycle"));
  o.schedule = DecodeSchedule::serial;
  CHECK_THROWS_WITH(amla::sim::simulate_decode(chip, w, o),
                    Catch::Contains("'options.schedule' = serial"));
  // Theorem B.1's arrangement on the Ascend 910 decode kernel: one call.
  DecodeOptions b1_opt;
  b1_opt.schedule = DecodeSchedule::theorem_b1;
  const auto asc =
      amla::sim::simulate_decode(quiet_ascend(), Workload::uniform(48, 1, 128, 2048), b1_opt);
  REQUIRE(asc.ok);
  CHECK(asc.cycles > Cycles{0});
}

TEST_CASE("a varlen batch: each sequence runs its own KV blocks", "[sim][decode]") {
  // Base, serial order, one core: the tasks run one after the other and each waits for the
  // previous one's last V. The 2-block sequence takes the hand-worked 740 cycles; the 1-block
  // one (16 keys) starts from an idle core: C1 113 (Q loaded again), V1 64, C2 81, V2 80 (T in,
  // O out, no O to read), last V 64: 402 cycles. 740 + 402 = 1142 in either order.
  Workload w = toy_workload();
  w.seqlens = {32, 16};
  const auto r = amla::sim::simulate_decode(one_core_chip(), w, toy_options(Variant::base));
  REQUIRE(r.ok);
  CHECK(r.cycles == Cycles{1142});
  CHECK(r.tasks == 2);
  CHECK(r.blocks_per_task == 2);
  CHECK(r.flops == 2.0 * 16 * (32 + 16) * (32 + 16));
  w.seqlens = {16, 32};
  CHECK(amla::sim::simulate_decode(one_core_chip(), w, toy_options(Variant::base)).cycles ==
        Cycles{1142});
  // The same batch read off the very problem a reference would compute (paged, 16-key pages).
  const amla::DecodeShape shape{2, 1, 16, 1, 32, 16, 4, 16, 2};
  std::vector<float> q(static_cast<std::size_t>(shape.q_elems())),
      kv(static_cast<std::size_t>(shape.kv_elems()));
  const std::vector<std::int32_t> table{0, 1, 2, 3}, seqlens{32, 16};
  const amla::DecodeInputs<float> in{shape, q, kv, {}, table, seqlens};
  const auto from_problem =
      amla::sim::simulate_decode(one_core_chip(), Workload::of(in), toy_options(Variant::base));
  REQUIRE(from_problem.ok);
  CHECK(from_problem.cycles == Cycles{1142});
  // An empty sequence has no task; a batch of them only starts and ends.
  w.seqlens = {0, 32};
  const auto one = amla::sim::simulate_decode(one_core_chip(), w, toy_options(Variant::amla));
  REQUIRE(one.ok);
  CHECK(one.tasks == 1);
  CHECK(one.cycles == Cycles{418});
  w.seqlens = {0, 0};
  const auto none = amla::sim::simulate_decode(one_core_chip(), w, toy_options(Variant::amla));
  REQUIRE(none.ok);
  CHECK(none.cycles == Cycles{0});
  CHECK(none.flops == 0);
}

TEST_CASE("a causal mask counts the attended pairs, the Cube runs every block", "[sim][decode]") {
  // 8 heads x S_q 2 = the toy's 16 rows: the same 418 cycles. Token 0 sees 31 keys, token 1 32.
  Workload w = Workload::uniform(1, 2, 8, 32, 32, 16);
  const auto full = amla::sim::simulate_decode(one_core_chip(), w, toy_options(Variant::amla));
  w.causal = true;
  const auto causal = amla::sim::simulate_decode(one_core_chip(), w, toy_options(Variant::amla));
  REQUIRE(full.ok);
  REQUIRE(causal.ok);
  CHECK(full.cycles == Cycles{418});
  CHECK(causal.cycles == Cycles{418});
  CHECK(full.flops == 2.0 * 8 * 64 * 48);
  CHECK(causal.flops == 2.0 * 8 * 63 * 48);
  CHECK(causal.fu < full.fu);
}

TEST_CASE("the symmetry reduction is exact for a varlen batch", "[sim][decode]") {
  // Lengths 1300 and 700 in turn over 50 sequences: core classes by die and task shapes.
  Workload w = Workload::uniform(50, 1, 128, 1300);
  for (std::size_t b = 1; b < w.seqlens.size(); b += 2) w.seqlens[b] = 700;
  const auto [a, b] = reduced_and_full(w, DecodeOptions{});
  CHECK(a.core_classes < b.core_classes);
  CHECK(a.blocks_per_task == 3);
  CHECK(a.hbm_bytes.count == Approx(25.0 * (1300 + 700) * 576 * 2 + 50.0 * 128 * 576 * 2));
}

TEST_CASE("uniform workloads keep their pinned cycle counts", "[sim][decode]") {
  // B = 50 on the calibrated Ascend 910: the cycle model's makespans, pinned so that a change to
  // the scheduler or the task mapping that moves them is seen.
  struct Pin {
    Variant v;
    int s_q, s_k;
    std::int64_t cycles;
  };
  const Pin pins[] = {{Variant::amla, 1, 1000, 93246},  {Variant::amla, 1, 4096, 346583},
                      {Variant::amla, 2, 1000, 165406}, {Variant::amla, 2, 4096, 629642},
                      {Variant::base, 1, 1000, 159264}, {Variant::base, 1, 4096, 631066},
                      {Variant::base, 2, 1000, 283232}, {Variant::base, 2, 4096, 1130323}};
  for (const Pin& p : pins) {
    DecodeOptions o;
    o.variant = p.v;
    const auto r = amla::sim::simulate_decode(amla::sim::ascend910(),
                                              Workload::uniform(50, p.s_q, 128, p.s_k), o);
    INFO(amla::sim::to_string(p.v) << " S_q " << p.s_q << " S_k " << p.s_k);
    REQUIRE(r.ok);
    CHECK(r.cycles.count == p.cycles);
  }
}

TEST_CASE("work beyond the documented limits comes back not ok, before memory is taken",
          "[sim][decode]") {
  // S_k = 2^20 on the Ascend 910 (its cores staggered, so every one is simulated): 48 cores x 2
  // tasks x (2048 blocks x 114 operations + the last V on 2 Vector cores) = 22,413,504, which
  // once took 4 GB of engine state. Per block: C1 4 x (2 + 2 x 6 + 1) + 2 = 62, C2
  // 4 x (2 + 2 x 4 + 1) + 2 = 46, and 3 stages on 2 Vector cores.
  const auto big = simulate_decode(ascend910(), Workload::uniform(96, 1, 128, 1 << 20));
  CHECK_FALSE(big.ok);
  CHECK_THAT(big.reason, Catch::Contains("2.24135e+07 engine operations") &&
                             Catch::Contains("48 simulated Cube cores") &&
                             Catch::Contains("max_decode_operations"));
  CHECK(big.operations == 0);
  // One-key blocks over 2^21 keys: more blocks than a stage schedule holds.
  DecodeOptions tiny_blocks;
  tiny_blocks.kv_block = 1;
  const auto many =
      simulate_decode(ascend910(), Workload::uniform(1, 1, 128, 1 << 21), tiny_blocks);
  CHECK_FALSE(many.ok);
  CHECK_THAT(many.reason,
             Catch::Contains("2097152 KV blocks of 1") && Catch::Contains("max_schedule_blocks"));
  // An arrangement offset beyond the limit is a reason, not a loop over 2^31 cycles.
  DecodeOptions far;
  far.arrangement = Arrangement{{{0, 2147483647}, {2, 0}}, {{1, 1}}};
  const auto r = simulate_decode(ascend910(), Workload::uniform(2, 1, 128, 1024), far);
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("outside [-1024, 1024]"));
}
