// Tests of amla/sim/hopper_decode.hpp: one CTA on a toy SM worked through by hand, the tile
// schedulers' decompositions, the list scheduling of CTAs, L2 sharing, the expected rescale
// work, symmetry, and what the model refuses.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "amla/sim/hopper_decode.hpp"
#include "common/error_message.hpp"

using amla::Workload;
using namespace amla::sim;

namespace {

// One SM at 1 GHz: 4096 FLOP per cycle, no latencies, a TMA of 64 bytes per cycle over an HBM
// that never limits it, tensor and CUDA work claiming the SM alike.
GpuChip toy_chip(int sms = 1) {
  GpuChip c = h100_sxm();
  c.name = "toy";
  c.clock = Hertz{1e9};
  c.sms = sms;
  c.tensor_flops_per_cycle = 4096;
  c.wgmma_n64_latency = Cycles{0};
  c.wgmma_n256_latency = Cycles{0};
  c.hbm_bytes_per_s = 1e15;
  c.hbm_efficiency = 1;
  c.l2_refetch = 0;
  c.memory_latency = Seconds{0};
  c.tma_bytes_per_cycle = 64;
  c.kernel_overhead = Seconds{0};
  c.cta_launch = Seconds{0};
  c.tensor_priority = 1;
  return c;
}

// amla's pairs schedule with round stage costs, every warpgroup able to use the whole SM.
HopperKernel toy_kernel() {
  HopperKernel k;
  k.name = "toy";
  k.schedule = HopperSchedule::amla_pairs;
  k.tiles = TileScheduler::grid;
  k.splits = 1;
  k.softmax = {100, 1};
  k.rescale = {10, 1};
  k.p_rescale = {5, 1};
  k.epilogue = {20, 1};
  return k;
}

}  // namespace

TEST_CASE("one CTA of one block on a toy SM, by hand", "[sim][hopper_decode]") {
  // TMA: Q (64 x 576 BF16 = 73,728 B) 0-1152; the block's chunks 0-3 (32 KB) 1152-1664, 4-7
  // 1664-2176, 8 (8 KB) 2176-2304. WG0's Q K^T consumes them as they come: 16 x m64n64k16 = 512
  // cycles 1664-2176, 512 more 2176-2688, 4 more 2688-2816. Softmax 2816-2916. Both warpgroups'
  // rescales (10 each) share the SM: 2916-2936; both halves of P V (4 x m64n256k16 = 512 cycles
  // each) share it: 2936-3960; both epilogues (20 each): 3960-4000.
  const HopperDecodeResult r =
      simulate_hopper_decode(toy_chip(), Workload::uniform(1, 1, 64, 64), toy_kernel());
  REQUIRE(r.ok);
  CHECK(r.cycles == Cycles{4000});
  CHECK(r.time.us() == Approx(4.0));
  CHECK(r.ctas == 1);
  CHECK(r.row_blocks == 1);
  // Tensor work: 36 + 8 instructions' worth, 1152 + 1024 cycles of 4000.
  CHECK(r.tensor_busy == Approx(2176.0 / 4000));
  // CUDA-core work: softmax 100, two rescales, two epilogues: 160 of 4000.
  CHECK(r.cuda_busy == Approx(160.0 / 4000));
  // HBM traffic: Q and the block, once.
  CHECK(r.hbm_bytes.count == Approx(73728 + 73728));
}

TEST_CASE("a wgmma batch costs its FLOPs or its shared-memory reads, whichever is more",
          "[sim][hopper_decode]") {
  const GpuChip c = toy_chip();
  // m64n64k16: 131,072 FLOP; A and B 2 KB each, 32 cycles at 128 B/cycle = 131,072 FLOP's worth.
  CHECK(detail::wgmma_work(c, 64, 64, 16, 36) == 36 * 131072.0);
  // m64n256k16: 524,288 FLOP; 10 KB of tiles, 80 cycles: the FLOPs.
  CHECK(detail::wgmma_work(c, 64, 256, 16, 4) == 4 * 524288.0);
  // m64n16k16: 32,768 FLOP but 2.5 KB of tiles, 20 cycles = 81,920 FLOP's worth.
  CHECK(detail::wgmma_work(c, 64, 16, 16, 1) == 81920.0);
  // On the H20's slower tensor cores (958 FLOP/cycle) the reads hide: 32,768 FLOP.
  CHECK(detail::wgmma_work(h20(), 64, 16, 16, 1) == 32768.0);
}

TEST_CASE("the grid: row blocks, KV splits and the causal mask", "[sim][hopper_decode]") {
  HopperKernel k = toy_kernel();
  k.splits = 0;  // the amla kernel's own choice
  int splits = 0, row_blocks = 0;
  // One sequence of 16 blocks, one row block, 4 SMs: 1 CTA < 4, so 4 splits of 4 blocks.
  auto ctas =
      detail::grid_ctas(toy_chip(4), k, Workload::uniform(1, 1, 64, 1024), splits, row_blocks);
  CHECK(splits == 4);
  REQUIRE(ctas.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(ctas[static_cast<std::size_t>(i)].segments[0].first_block == 4 * i);
    CHECK(ctas[static_cast<std::size_t>(i)].blocks() == 4);
    CHECK(ctas[static_cast<std::size_t>(i)].segments[0].partial);
  }
  // Enough CTAs: no split. s_q 2 x h_q 64 = two row blocks per sequence, launched row block
  // fastest; causal with 65 keys: token 0 sees 64 (1 block), token 1 all 65 (2 blocks).
  Workload w = Workload::uniform(3, 2, 64, 65);
  w.causal = true;
  ctas = detail::grid_ctas(toy_chip(4), k, w, splits, row_blocks);
  CHECK(splits == 1);
  CHECK(row_blocks == 2);
  REQUIRE(ctas.size() == 6);
  CHECK(ctas[0].segments[0].sequence == 0);
  CHECK(ctas[1].segments[0].sequence == 0);
  CHECK(ctas[2].segments[0].sequence == 1);
  CHECK(ctas[0].blocks() == 1);
  CHECK(ctas[1].blocks() == 2);
  CHECK(ctas[0].segments[0].sharing == 2);
}

TEST_CASE("the balanced tile scheduler: equal payloads, sequences split at part boundaries",
          "[sim][hopper_decode]") {
  HopperKernel k = flashmla_kernel();
  int parts = 0, row_blocks = 0;
  // s_q 1, h_q 128: two row blocks, so 4 SMs make 2 parts. Sequences of 20 and 1 blocks plus 5
  // each: 31, payload ceil(31 / 2) + 5 = 21. Part 0 takes 16 of the first sequence (16 + 5 = 21);
  // part 1 its last 4 (9) and the second sequence (6).
  Workload w = Workload::uniform(2, 1, 128, 64);
  w.seqlens = {1280, 64};
  const auto ctas = detail::balanced_ctas(toy_chip(4), k, w, parts, row_blocks);
  CHECK(parts == 2);
  CHECK(row_blocks == 2);
  REQUIRE(ctas.size() == 4);
  REQUIRE(ctas[0].segments.size() == 1);
  CHECK(ctas[0].segments[0].blocks == 16);
  CHECK(ctas[0].segments[0].partial);
  CHECK(ctas[1].segments[0].row_block == 1);
  REQUIRE(ctas[2].segments.size() == 2);
  CHECK(ctas[2].segments[0].first_block == 16);
  CHECK(ctas[2].segments[0].blocks == 4);
  CHECK(ctas[2].segments[1].sequence == 1);
  CHECK(ctas[2].segments[1].blocks == 1);
  CHECK_FALSE(ctas[2].segments[1].partial);
  CHECK(ctas[3].segments[0].sharing == 2);
  // The split sequence costs a combine kernel.
  const HopperDecodeResult r = simulate_hopper_decode(toy_chip(4), w, k);
  REQUIRE(r.ok);
  CHECK(r.combine_time.count > 0);
  CHECK(r.splits == 2);
}

TEST_CASE("an SM takes the next CTA when its own ends (list scheduling in launch order)",
          "[sim][hopper_decode]") {
  // Two SMs, three sequences of 10, 1 and 1 blocks: SM 0 takes the long one, SM 1 the first short
  // one and, being free first, the second.
  Workload w = Workload::uniform(3, 1, 64, 64);
  w.seqlens = {640, 64, 64};
  const HopperDecodeResult r = simulate_hopper_decode(toy_chip(2), w, toy_kernel());
  REQUIRE(r.ok);
  CHECK(r.cta_sm == std::vector<int>{0, 1, 1});
  CHECK(r.sm_finish[0] > r.sm_finish[1]);
  CHECK(r.cycles == r.sm_finish[0]);
}

TEST_CASE("a block read by R SMs at once costs HBM 1 + refetch (R - 1) fetches",
          "[sim][hopper_decode]") {
  // s_q 2, h_q 128: four row blocks read each block together; with no refetch the HBM carries
  // each block once, and Q once per CTA.
  GpuChip c = toy_chip(4);
  const HopperDecodeResult r =
      simulate_hopper_decode(c, Workload::uniform(1, 2, 128, 128), toy_kernel());
  REQUIRE(r.ok);
  CHECK(r.hbm_bytes.count == Approx(4 * 73728.0 + 2 * 73728.0));
  c.l2_refetch = 0.5;  // each extra reader half a fetch: 1 + 1.5 fetches per block
  const HopperDecodeResult s =
      simulate_hopper_decode(c, Workload::uniform(1, 2, 128, 128), toy_kernel());
  REQUIRE(s.ok);
  CHECK(s.hbm_bytes.count == Approx(4 * 73728.0 + 2 * 73728.0 * 2.5));
}

TEST_CASE("the standard kernel pays the expected rescale of i.i.d. scores",
          "[sim][hopper_decode]") {
  CHECK(detail::unit_rescale_probability(0) == 1);
  CHECK(detail::unit_rescale_probability(1) == Approx(1 - std::pow(0.5, 64)));
  // Block 63: each of 64 rows moves with probability 1/64; some row does with 1 - (63/64)^64.
  CHECK(detail::unit_rescale_probability(63) == Approx(0.63502).epsilon(1e-4));
  CHECK(detail::unit_rescale_probability(100000) < 0.001);
  CHECK_THROWS_WITH(detail::unit_rescale_probability(-1), Catch::Contains("'k' = -1"));
  // The AMLA kernel always adds; the standard one skips: it takes less CUDA-core work.
  const Workload w = Workload::uniform(1, 1, 64, 64 * 64);
  HopperKernel always = toy_kernel(), skips = toy_kernel();
  skips.skip_unit_rescale = true;
  const auto a = simulate_hopper_decode(toy_chip(), w, always);
  const auto s = simulate_hopper_decode(toy_chip(), w, skips);
  REQUIRE(a.ok);
  REQUIRE(s.ok);
  CHECK(s.cuda_busy * static_cast<double>(s.cycles.count) <
        a.cuda_busy * static_cast<double>(a.cycles.count));
}

TEST_CASE("identical SMs simulated once give what simulating every SM gives",
          "[sim][hopper_decode]") {
  for (const HopperKernel& k : {amla_hopper_kernel(false), flashmla_kernel()}) {
    HopperDecodeOptions sym, all;
    all.symmetry = false;
    const Workload w = Workload::uniform(12, 1, 128, 512);
    const auto a = simulate_hopper_decode(toy_chip(8), w, k, sym);
    const auto b = simulate_hopper_decode(toy_chip(8), w, k, all);
    REQUIRE(a.ok);
    REQUIRE(b.ok);
    CHECK(a.sm_classes < b.sm_classes);
    CHECK(a.cycles == b.cycles);
    CHECK(a.hbm_bytes.count == Approx(b.hbm_bytes.count));
  }
}

TEST_CASE("the three schedules run, and the timeline draws one SM's five units",
          "[sim][hopper_decode]") {
  HopperDecodeOptions o;
  o.record_timeline = true;
  for (const HopperKernel& k : {amla_hopper_kernel(false), amla_hopper_kernel(true),
                                flashmla_kernel(), flashmla_etap_kernel()}) {
    const auto r = simulate_hopper_decode(h100_sxm(), Workload::uniform(4, 1, 64, 300), k, o);
    INFO(k.name);
    REQUIRE(r.ok);
    CHECK(r.timeline.lanes.size() == 5);
    CHECK(r.sm_units.size() == 5);
    CHECK(r.tflops() > 0);
    CHECK(r.timeline.makespan() <= r.cycles);
  }
}

TEST_CASE("what the model refuses, and malformed input", "[sim][hopper_decode]") {
  Workload w = Workload::uniform(1, 1, 64, 64);
  w.h_kv = 2;
  auto r = simulate_hopper_decode(toy_chip(), w, toy_kernel());
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("h_kv 2"));
  w = Workload::uniform(1, 1, 64, 64, 128, 128);
  r = simulate_hopper_decode(toy_chip(), w, toy_kernel());
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("d_qk 128"));
  GpuChip small = toy_chip();
  small.smem_bytes_per_block = 100 * 1024;
  r = simulate_hopper_decode(small, Workload::uniform(1, 1, 64, 64), toy_kernel());
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("shared memory"));
  // Work beyond the documented limit is refused before any memory is taken.
  r = simulate_hopper_decode(h100_sxm(), Workload::uniform(4096, 1, 128, 1 << 20),
                             amla_hopper_kernel(false));
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("max_hopper_operations"));
  CHECK(r.operations == 0);
  HopperDecodeOptions bad;
  bad.timeline_sm = 5;
  CHECK_THROWS_WITH(
      simulate_hopper_decode(toy_chip(), Workload::uniform(1, 1, 64, 64), toy_kernel(), bad),
      Catch::Contains("'options.timeline_sm' = 5"));
  HopperKernel k = toy_kernel();
  k.rows_per_cta = 0;
  CHECK_THROWS_WITH(k.validate(), Catch::Contains("'kernel.rows_per_cta' = 0"));
  k = toy_kernel();
  k.softmax.share = 0;
  CHECK_THROWS_WITH(k.validate(), Catch::Contains("kernel.softmax"));
  CHECK_THROWS_WITH(VectorStage::measured(100, 300), Catch::Contains("'two_wg' = 300"));
  const VectorStage v = VectorStage::measured(780, 1131.3);
  CHECK(v.work_cycles == Approx(565.65));
  CHECK(v.alone_cycles() == Approx(780));
}
