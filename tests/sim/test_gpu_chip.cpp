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
  // TMA: a 72 KB block every 1168.0 cycles streaming; 1987.7 cycles alone: 819.7 cycles of
  // latency at the probe's 1995 MHz.
  CHECK(c.tma_bytes_per_cycle == Approx(73728 / 1168.0));
  CHECK(c.memory_latency.count == Approx(819.7 / 1.995e9));
  CHECK(c.hbm_efficiency == Approx(3.136 / 3.35));
  // Side by side, 2000 batches of 1503.5 cycles (3,007,000) and 3179 stages of 1332.6
  // (4,236,335.4): the last 1,229,335.4 cycles ran 1606.3 stages alone at 765.3, so the 1572.7
  // that overlapped took 1912.1 each. Shares: 1152 / 1503.5 = 0.7662 and (1006.5 / 2) / 1912.1 =
  // 0.2632.
  CHECK(GpuChip::measured_tensor_priority() == Approx(0.7662 / 0.2632).epsilon(1e-3));
  CHECK(c.tensor_priority == GpuChip::measured_tensor_priority());
  // Refetches per extra reader: 2 x 3.136 / 5.9763 - 1 = 0.04948 (R = 2), 4 x 3.136 / 10.6047 - 1
  // = 0.18287 over 3 extra readers (R = 4); least squares through the origin: 0.05981.
  CHECK(c.l2_refetch == Approx((0.04948 + 3 * 0.18287) / 10).epsilon(1e-3));
  CHECK(c.hbm_fraction(1) == 1);
  CHECK(c.hbm_fraction(2) == Approx((1 + c.l2_refetch) / 2));
  CHECK(c.hbm_fraction(4) == Approx((1 + 3 * c.l2_refetch) / 4));
  // A cold CTA: the one-CTA launch after an L2 flush less back to back, 49.4 - 38.6 = 10.8 us,
  // less what launching alone adds to an empty kernel, 5.23 - 3.37 = 1.86 us: 8.94 us.
  CHECK(c.cta_cold_start.us() == Approx(8.94));
  CHECK(c.cta_cold_start.count == GpuChip::measured_cta_cold_start());
  // Bytes per cycle at the clock, and cycles of a duration.
  CHECK(c.hbm_bytes_per_cycle() == Approx(3.136e12 / 1.83e9));
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
  CHECK_THAT(error([](GpuChip& c) { c.cta_cold_start = amla::sim::Seconds{0.5}; }),
             Catch::Contains("'chip.cta_cold_start' = 0.5"));
}
