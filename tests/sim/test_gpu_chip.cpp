// Tests of amla/sim/gpu_chip.hpp: the Hopper presets, the figures derived from the H100
// measurements (worked out by hand from arch/h100.hpp), and validation.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "amla/arch/h100.hpp"
#include "amla/sim/gpu_chip.hpp"
#include "common/error_message.hpp"

using amla::sim::GpuChip;

TEST_CASE("H100 SXM: 132 SMs of 4096 FLOP per cycle, the datasheet's 989 TFLOPS at 1830 MHz",
          "[sim][gpu_chip]") {
  const GpuChip c = amla::sim::h100_sxm();
  CHECK(c.sms == 132);
  CHECK(c.tensor_flops_per_cycle == 4096);
  CHECK(c.clock.count == 1.83e9);
  CHECK(c.peak_flops_per_s() == Approx(amla::arch::h100_sxm::bf16_peak_flops_per_s).epsilon(1e-3));
  CHECK(c.smem_bytes_per_block == 227 * 1024);
  CHECK(c.kernel_overhead.us() == Approx(amla::sim::calibrated_hopper::h100_kernel_overhead_us));
  CHECK_NOTHROW(c.validate());
}

TEST_CASE("the H100's derived figures follow from its measurements", "[sim][gpu_chip]") {
  const GpuChip c = amla::sim::h100_sxm();
  // TMA: a 72 KB block every 1160.5 cycles streaming; 2008.7 cycles alone: 848.2 cycles of
  // latency at the probe's 1994 MHz.
  CHECK(c.tma_bytes_per_cycle == Approx(73728 / 1160.5));
  CHECK(c.memory_latency.count == Approx(848.2 / 1.994e9));
  CHECK(c.hbm_efficiency == Approx(3.142 / 3.35));
  // Side by side, 2000 batches of 1740.8 cycles (3,481,600) and 3179 stages of 1397.3
  // (4,442,016.7): the last 960,416.7 cycles ran 1217.1 stages alone at 789.1, so the 1961.9 that
  // overlapped took 1774.6 each. Shares: 1152 / 1740.8 = 0.6618 and (1133.6 / 2) / 1774.6 = 0.3194.
  CHECK(GpuChip::measured_tensor_priority() == Approx(0.6618 / 0.3194).epsilon(1e-3));
  CHECK(c.tensor_priority == GpuChip::measured_tensor_priority());
  // Refetches per extra reader: 2 x 3.142 / 5.9616 - 1 = 0.05408 (R = 2), 4 x 3.142 / 10.7382 - 1
  // = 0.17040 over 3 extra readers (R = 4); least squares through the origin: 0.05653.
  CHECK(c.l2_refetch == Approx((0.05408 + 3 * 0.17040) / 10).epsilon(1e-3));
  CHECK(c.hbm_fraction(1) == 1);
  CHECK(c.hbm_fraction(2) == Approx((1 + c.l2_refetch) / 2));
  CHECK(c.hbm_fraction(4) == Approx((1 + 3 * c.l2_refetch) / 4));
  // Bytes per cycle at the clock, and cycles of a duration.
  CHECK(c.hbm_bytes_per_cycle() == Approx(3.142e12 / 1.83e9));
  CHECK(c.cycles_of(amla::sim::Seconds{1e-6}) == amla::sim::Cycles{1830});
}

TEST_CASE("H800 and H20 presets", "[sim][gpu_chip]") {
  const GpuChip h800 = amla::sim::h800_sxm();
  CHECK(h800.sms == 132);
  CHECK(h800.clock.count == 1.6e9);
  CHECK(h800.peak_flops_per_s() == Approx(865e12).epsilon(0.01));  // the deep dive's practical peak
  const GpuChip h20 = amla::sim::h20();
  CHECK(h20.sms == 78);
  // 148 TFLOPS over 78 SMs at 1.98 GHz: 958.3 FLOP per SM per cycle, the peak exactly.
  CHECK(h20.tensor_flops_per_cycle == Approx(148e12 / (78 * 1.98e9)));
  CHECK(h20.peak_flops_per_s() == Approx(148e12));
  CHECK(h20.hbm_bytes_per_s == 4.0e12);
  CHECK_NOTHROW(h20.validate());
}

TEST_CASE("GpuChip::validate names the field at fault with its value", "[sim][gpu_chip]") {
  const auto error = [](void (*edit)(GpuChip&)) {
    GpuChip c = amla::sim::h100_sxm();
    edit(c);
    return amla_test::error_of([&] { c.validate(); });
  };
  CHECK_THAT(error([](GpuChip& c) { c.sms = 0; }), Catch::Contains("'chip.sms' = 0"));
  CHECK_THAT(error([](GpuChip& c) { c.clock = amla::sim::Hertz{NAN}; }),
             Catch::Contains("'chip.clock' = nan"));
  CHECK_THAT(error([](GpuChip& c) { c.tensor_flops_per_cycle = 0; }),
             Catch::Contains("'chip.tensor_flops_per_cycle' = 0"));
  CHECK_THAT(error([](GpuChip& c) { c.hbm_efficiency = 1.5; }),
             Catch::Contains("'chip.hbm_efficiency' = 1.5"));
  CHECK_THAT(error([](GpuChip& c) { c.tma_bytes_per_cycle = INFINITY; }),
             Catch::Contains("'chip.tma_bytes_per_cycle' = inf"));
  CHECK_THAT(error([](GpuChip& c) { c.l2_refetch = -0.1; }),
             Catch::Contains("'chip.l2_refetch' = -0.1"));
  CHECK_THAT(error([](GpuChip& c) { c.tensor_priority = 0; }),
             Catch::Contains("'chip.tensor_priority' = 0"));
  CHECK_THAT(error([](GpuChip& c) { c.smem_bytes_per_block = 1e9; }),
             Catch::Contains("'chip.smem_bytes_per_block'"));
  CHECK_THAT(error([](GpuChip& c) { c.wgmma_n64_latency = amla::sim::Cycles{-1}; }),
             Catch::Contains("'chip.wgmma_n64_latency' = -1"));
  CHECK_THAT(error([](GpuChip& c) { c.kernel_overhead = amla::sim::Seconds{2}; }),
             Catch::Contains("'chip.kernel_overhead' = 2"));
}
