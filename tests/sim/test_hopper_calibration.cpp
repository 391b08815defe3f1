// Tests of amla/sim/hopper_calibration.hpp: the measurement tables, the fit of the two calibrated
// constants, and how close the model comes to what it did not see.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "amla/sim/hopper_calibration.hpp"

using namespace amla::sim;

TEST_CASE("the H100 measurements: the issue's 12 shapes, varlen, split, one CTA, one wave",
          "[sim][hopper_calibration]") {
  const auto ms = hopper_h100_measurements();
  CHECK(ms.size() == 27);
  CHECK(std::count_if(ms.begin(), ms.end(), [](const auto& m) { return m.name == "uniform"; }) ==
        12);
  const auto imb = imbalanced_seqlens();
  CHECK(std::count(imb.begin(), imb.end(), 16384) == 8);
  CHECK(std::count(imb.begin(), imb.end(), 512) == 120);
  const auto mixed = mixed_seqlens();
  CHECK(*std::min_element(mixed.begin(), mixed.end()) >= 256);
  CHECK(*std::max_element(mixed.begin(), mixed.end()) <= 8192);
  for (const auto& m : ms) {
    CHECK(m.stream_us > 0);
    CHECK(m.clock_mhz > 1600);
    CHECK(m.chip().clock.count == m.clock_mhz * 1e6);
  }
}

TEST_CASE("the fit reproduces the committed constants from the one-CTA runs",
          "[sim][hopper_calibration]") {
  const HopperFit f = fit_hopper_constants();
  CHECK(f.cuda_factor == Approx(calibrated_hopper::amla_kernel_cuda_factor).epsilon(1e-3));
  CHECK(f.kernel_overhead_us == Approx(calibrated_hopper::h100_kernel_overhead_us).epsilon(1e-2));
  CHECK(f.long_run_us == Approx(f.long_measured_us).epsilon(1e-3));
  CHECK(f.short_run_us == Approx(f.short_measured_us).epsilon(1e-3));
}

TEST_CASE("amla's kernels: the model within 10% of the runs it was not fitted to",
          "[sim][hopper_calibration]") {
  int uniform = 0, uniform_within = 0;
  for (const HopperMeasurement& m : hopper_h100_measurements()) {
    if (m.name == "split" || (m.name == "one CTA" && !m.amla_mode)) continue;
    const double err = predict_us(m) / m.stream_us - 1;
    INFO(m.name << (m.amla_mode ? " amla" : " standard") << " s_q " << m.workload.s_q << " s_k "
                << m.workload.max_seqlen() << ": " << 100 * err << "%");
    if (m.name == "uniform") {
      ++uniform;
      uniform_within += std::fabs(err) <= 0.10;
      CHECK(std::fabs(err) <= 0.16);  // the one miss: standard, s_q 1, s_k 1024 (-15.5%)
    } else {
      CHECK(std::fabs(err) <= 0.10);  // varlen, one wave, the AMLA kernel's one CTA
    }
  }
  CHECK(uniform == 12);
  CHECK(uniform_within == 11);
}

TEST_CASE("FlashMLA's H100 figures: the seesaw schedule at the card's 1980 MHz",
          "[sim][hopper_calibration]") {
  int within = 0;
  for (const ThroughputFigure& f : flashmla_h100_figures()) {
    GpuChip c = h100_sxm();
    c.clock = Hertz{amla::arch::h100_sxm::max_clock_hz};
    const auto r = simulate_hopper_decode(c, f.workload, flashmla_kernel());
    REQUIRE(r.ok);
    const double err = r.tflops() / f.tflops - 1;
    INFO("s_q " << f.workload.s_q << " s_k " << f.workload.max_seqlen() << ": " << 100 * err);
    CHECK(std::fabs(err) <= 0.12);
    within += std::fabs(err) <= 0.10;
  }
  CHECK(within == 5);  // s_q 2, s_k 1024 predicted 11% above the figure
}

TEST_CASE("H20: ETAP's lead over FlashMLA grows with the keys, FlashMLA flattens near 32 TFLOPS",
          "[sim][hopper_calibration]") {
  const GpuChip c = h20();
  double last_ratio = 0;
  for (const int sk : {512, 4096, 65536}) {
    const auto w = amla::Workload::uniform(16, 1, 16, sk);
    const auto f = simulate_hopper_decode(c, w, flashmla_kernel());
    const auto e = simulate_hopper_decode(c, w, flashmla_etap_kernel());
    REQUIRE(f.ok);
    REQUIRE(e.ok);
    const double ratio = e.tflops() / f.tflops();
    CHECK(ratio > last_ratio);
    last_ratio = ratio;
    if (sk == 65536) {
      CHECK(f.tflops() == Approx(32).epsilon(0.10));  // the paper: 32
      CHECK(ratio > 2);                               // the paper: 2.78
      CHECK(e.hbm_utilization > 0.9);                 // ETAP is memory-bound there
    }
  }
}
