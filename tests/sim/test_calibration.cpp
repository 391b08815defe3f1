// Tests of amla/sim/calibration.hpp: the model with its committed constants predicts AMLA
// Table 5 (Ascend 910, S_q = 1) within 5 percentage points of FLOPS utilisation, computing every
// prediction here; and the fit recovers constants it was given.
#include <catch2/catch.hpp>

#include <cmath>

#include "amla/sim/calibration.hpp"
#include "amla/sim/chip.hpp"

TEST_CASE("the reference data is Table 5's Ascend 910 row", "[sim][calibration]") {
  const auto ms = amla::sim::amla_table5_ascend910();
  REQUIRE(ms.size() == 6);
  CHECK(ms[0].workload.s_k == 1024);
  CHECK(ms[5].workload.s_k == 16384);
  CHECK(ms[5].duration_us == 830);
  CHECK(ms[5].fu_percent == 74.5);
  const double peak = amla::sim::ascend910().peak_flops_per_s();
  for (const auto& m : ms) {
    CHECK(m.workload.batch == 96);
    CHECK(m.workload.heads == 128);
    CHECK(m.workload.s_q == 1);
    // The table's FU is its FLOPs over its duration at the chip's peak (to the rounding of us).
    const double fu = 100 * m.workload.flops() / (m.duration_us * 1e-6 * peak);
    CHECK(fu == Approx(m.fu_percent).margin(0.6));
  }
}

TEST_CASE("Table 5, S_q = 1: every prediction within 5 points of the measured FU",
          "[sim][calibration]") {
  auto ms = amla::sim::amla_table5_ascend910();
#ifdef AMLA_TEST_REDUCED
  ms.pop_back();  // S_k = 16384 is the slowest simulation; the Release build checks it
#endif
  const auto preds = amla::sim::predict(amla::sim::ascend910(), ms);
  REQUIRE(preds.size() == ms.size());
  for (const auto& p : preds) {
    INFO("S_k = " << p.measured.workload.s_k << ": measured " << p.measured.duration_us
                  << " us, FU " << p.measured.fu_percent << "%; model " << p.predicted_us
                  << " us, FU " << p.predicted_fu_percent << "%");
    CHECK(std::fabs(p.fu_error_pp()) <= 5.0);
    // The time and FU are consistent with each other.
    CHECK(p.predicted_fu_percent ==
          Approx(100 * p.measured.workload.flops() /
                 (p.predicted_us * 1e-6 * amla::sim::ascend910().peak_flops_per_s())));
  }
}

TEST_CASE("the fit recovers constants it was given", "[sim][calibration]") {
  // Synthetic measurements from a chip with known constants (small workloads, to stay quick):
  // the fit must find a chip that reproduces them (to the grid's resolution).
  amla::sim::Chip truth = amla::sim::ascend910();
  truth.hbm_efficiency = 0.70;
  truth.core_start_stagger = amla::sim::Cycles{300};
  truth.fixed_overhead = amla::sim::Seconds{20e-6};
  std::vector<amla::sim::Measurement> ms;
  for (const int sk : {1024, 2048, 3072}) {
    amla::sim::Measurement m;
    m.workload.batch = 48;
    m.workload.s_k = sk;
    const auto r = amla::sim::simulate_decode(truth, m.workload);
    REQUIRE(r.feasible);
    m.duration_us = r.kernel_us();
    m.fu_percent = 100 * r.fu;
    ms.push_back(m);
  }
  amla::sim::CalibrationOptions o;
  o.min_efficiency = 0.62;
  o.max_efficiency = 0.78;
  o.coarse_efficiency_step = 0.04;
  o.fine_efficiency_step = 0.02;
  o.max_stagger_cycles = 600;
  o.coarse_stagger_step = 300;
  o.fine_stagger_step = 150;
  const auto fit = amla::sim::fit_constants(amla::sim::ascend910(), ms, o);
  CHECK(fit.hbm_efficiency == Approx(0.70).margin(1e-9));
  CHECK(fit.core_start_stagger == amla::sim::Cycles{300});
  CHECK(fit.fixed_overhead.us() == Approx(20).margin(0.05));
  CHECK(fit.rms_error_pp < 0.01);
  CHECK(fit.predictions.size() == 3);
}

TEST_CASE("fit_constants rejects bad input", "[sim][calibration]") {
  const auto chip = amla::sim::ascend910();
  CHECK_THROWS_WITH(amla::sim::fit_constants(chip, {}), Catch::Contains("measurements"));
  auto ms = amla::sim::amla_table5_ascend910();
  ms[0].fu_percent = 140;
  CHECK_THROWS_WITH(amla::sim::fit_constants(chip, ms), Catch::Contains("measurement"));
  amla::sim::CalibrationOptions o;
  o.max_efficiency = 1.5;
  CHECK_THROWS_WITH(amla::sim::fit_constants(chip, amla::sim::amla_table5_ascend910(), o),
                    Catch::Contains("efficiency range"));
}
