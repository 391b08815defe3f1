// amla/sim/calibration.hpp: measured kernel times the simulator is checked against, and the fit
// of its (at most three) calibrated constants to such measurements.
//
// The constants (see sim/chip.hpp, namespace calibrated):
//   hbm_efficiency      achievable fraction of the HBM peak (the slope of time against S_k when
//                       the kernel is HBM-bound),
//   core_start_stagger  start offset between consecutive cores of a die (how soon the cores
//                       leave the lock-step in which they contend for HBM),
//   fixed_overhead      kernel time outside the cycle model (the intercept).
// fit_constants() searches the first two on a grid (coarse, then fine around the best point) and,
// for each pair, the fixed overhead by golden-section search (the cycle-model times do not depend
// on it); the error is the root mean square of the FLOPS-utilisation error in percentage points.
// The committed values were produced by `example_04_amla_decode_model --calibrate`
// (scripts/calibrate_sim.sh).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "amla/config.hpp"
#include "amla/sim/chip.hpp"
#include "amla/sim/decode.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// One measured kernel: its workload, duration and the FLOPS utilisation the source reports.
struct Measurement {
  DecodeWorkload workload;
  double duration_us = 0;
  double fu_percent = 0;
};

/// AMLA paper, Table 5, Ascend 910 row (B = 96, H = 128, S_q = 1, BF16): the AMLA kernel's
/// measured duration and FLOPS utilisation for S_k = 1024 ... 16384.
inline std::vector<Measurement> amla_table5_ascend910() {
  const int s_k[] = {1024, 2048, 3072, 4096, 6144, 16384};
  const double us[] = {95, 140, 186, 241, 331, 830};
  const double fu[] = {40.9, 55.1, 62.4, 64.1, 70.2, 74.5};
  std::vector<Measurement> m;
  for (int i = 0; i < 6; ++i) {
    Measurement x;
    x.workload.batch = 96;
    x.workload.heads = 128;
    x.workload.s_q = 1;
    x.workload.s_k = s_k[i];
    x.duration_us = us[i];
    x.fu_percent = fu[i];
    m.push_back(x);
  }
  return m;
}

/// A model prediction next to its measurement.
struct Prediction {
  Measurement measured;
  double predicted_us = 0;
  double predicted_fu_percent = 0;
  double fu_error_pp() const { return predicted_fu_percent - measured.fu_percent; }
};

/// Predicts every measurement with `chip` (AMLA kernel unless `opt` says otherwise).
inline std::vector<Prediction> predict(const Chip& chip, const std::vector<Measurement>& ms,
                                       const DecodeOptions& opt = {}) {
  std::vector<Prediction> out;
  for (const auto& m : ms) {
    const DecodeResult r = simulate_decode(chip, m.workload, opt);
    AMLA_REQUIRE(r.feasible, "workload", r.reason, "a workload the chip can run");
    Prediction p;
    p.measured = m;
    p.predicted_us = r.kernel_us();
    p.predicted_fu_percent = 100 * r.fu;
    out.push_back(p);
  }
  return out;
}

/// What fit_constants found.
struct CalibrationResult {
  double hbm_efficiency = 1;
  Cycles core_start_stagger{0};
  Seconds fixed_overhead{0};
  double rms_error_pp = 0;  ///< FLOPS utilisation, percentage points
  double max_error_pp = 0;
  int simulations = 0;
  std::vector<Prediction> predictions;
};

/// Search ranges and resolution of the fit.
struct CalibrationOptions {
  double min_efficiency = 0.55, max_efficiency = 1.0;
  // The stagger and the fixed overhead are nearly interchangeable once the cores' start offsets
  // exceed one block period (the extra offset is then pure delay): the fit, left free, trades
  // one for the other until the overhead reaches 0. The stagger is therefore bounded by its
  // physical role, spreading the 24 cores of a die over at most one block's Cube time (17,408
  // MMAD cycles at M = 128): 23 x 750 < 17,408.
  std::int64_t max_stagger_cycles = 750;
  double coarse_efficiency_step = 0.04;
  std::int64_t coarse_stagger_step = 150;
  double fine_efficiency_step = 0.01;
  std::int64_t fine_stagger_step = 50;
  double max_fixed_overhead_us = 100;
};

namespace detail {

struct FitPoint {
  double eta;
  std::int64_t stagger;
  double t0_s;
  double rms, max;
};

// For fixed (eta, stagger): the cycle-model times, then the best fixed overhead.
inline FitPoint fit_at(const Chip& base, const std::vector<Measurement>& ms, double eta,
                       std::int64_t stagger, const CalibrationOptions& o, int& sims) {
  Chip c = base;
  c.hbm_efficiency = eta;
  c.core_start_stagger = Cycles{stagger};
  c.fixed_overhead = Seconds{0};
  std::vector<double> t(ms.size()), f(ms.size());
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const DecodeResult r = simulate_decode(c, ms[i].workload);
    AMLA_REQUIRE(r.feasible, "measurement workload", r.reason, "a workload the chip can run");
    t[i] = r.time.count;
    f[i] = r.flops;
    ++sims;
  }
  const double peak = c.peak_flops_per_s();
  auto err = [&](double t0, double& mx) {
    double s = 0;
    mx = 0;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      const double d = 100 * f[i] / ((t[i] + t0) * peak) - ms[i].fu_percent;
      s += d * d;
      mx = std::max(mx, std::fabs(d));
    }
    return std::sqrt(s / static_cast<double>(ms.size()));
  };
  double lo = 0, hi = o.max_fixed_overhead_us * 1e-6, mx = 0;
  const double g = (std::sqrt(5.0) - 1) / 2;
  for (int it = 0; it < 80; ++it) {
    const double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    if (err(a, mx) <= err(b, mx))
      hi = b;
    else
      lo = a;
  }
  const double t0 = (lo + hi) / 2;
  const double rms = err(t0, mx);
  return {eta, stagger, t0, rms, mx};
}

}  // namespace detail

/// Fits hbm_efficiency, core_start_stagger and fixed_overhead of `base` to `ms` (AMLA kernels).
inline CalibrationResult fit_constants(const Chip& base, const std::vector<Measurement>& ms,
                                       const CalibrationOptions& o = {}) {
  base.validate();
  AMLA_REQUIRE(!ms.empty(), "measurements", ms.size(), "at least one");
  AMLA_REQUIRE(
      o.min_efficiency > 0 && o.min_efficiency <= o.max_efficiency && o.max_efficiency <= 1,
      "efficiency range", o.min_efficiency, "0 < min <= max <= 1");
  AMLA_REQUIRE(o.coarse_efficiency_step > 0 && o.fine_efficiency_step > 0 &&
                   o.coarse_stagger_step > 0 && o.fine_stagger_step > 0,
               "steps", o.coarse_efficiency_step, "positive");
  AMLA_REQUIRE(o.max_stagger_cycles >= 0 && o.max_fixed_overhead_us > 0, "ranges",
               o.max_stagger_cycles, "non-negative stagger, positive overhead bound");
  for (const auto& m : ms)
    AMLA_REQUIRE(m.duration_us > 0 && m.fu_percent > 0 && m.fu_percent <= 100, "measurement",
                 m.fu_percent, "a positive duration and FLOPS utilisation in (0, 100]");
  int sims = 0;
  detail::FitPoint best{1, 0, 0, 1e300, 1e300};
  auto consider = [&](double eta, std::int64_t st) {
    eta = std::clamp(eta, o.min_efficiency, o.max_efficiency);
    st = std::clamp<std::int64_t>(st, 0, o.max_stagger_cycles);
    const auto p = detail::fit_at(base, ms, eta, st, o, sims);
    if (p.rms < best.rms) best = p;
  };
  const int ne = static_cast<int>(
      std::floor((o.max_efficiency - o.min_efficiency) / o.coarse_efficiency_step + 1e-9));
  for (int i = 0; i <= ne; ++i)
    for (std::int64_t st = 0; st <= o.max_stagger_cycles; st += o.coarse_stagger_step)
      consider(o.min_efficiency + i * o.coarse_efficiency_step, st);
  const detail::FitPoint coarse = best;
  // Fine grid over half a coarse step around the coarse optimum.
  const int fe =
      static_cast<int>(std::lround(o.coarse_efficiency_step / o.fine_efficiency_step)) / 2;
  const auto fs = o.coarse_stagger_step / o.fine_stagger_step / 2;
  for (int i = -fe; i <= fe; ++i)
    for (std::int64_t j = -fs; j <= fs; ++j)
      if (i != 0 || j != 0)
        consider(coarse.eta + i * o.fine_efficiency_step, coarse.stagger + j * o.fine_stagger_step);

  CalibrationResult r;
  r.hbm_efficiency = best.eta;
  r.core_start_stagger = Cycles{best.stagger};
  r.fixed_overhead = Seconds{best.t0_s};
  r.rms_error_pp = best.rms;
  r.max_error_pp = best.max;
  Chip c = base;
  c.hbm_efficiency = r.hbm_efficiency;
  c.core_start_stagger = r.core_start_stagger;
  c.fixed_overhead = r.fixed_overhead;
  r.predictions = predict(c, ms);
  r.simulations = sims + static_cast<int>(ms.size());
  return r;
}

}  // namespace amla::sim
