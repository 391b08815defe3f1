// amla/sim/calibration.hpp: public measurements the simulator is checked against, and the fit of
// its (at most three) calibrated constants to them.
//
// Two kinds of public number:
//   Measurement  one kernel's measured duration and FLOPS utilisation (AMLA Table 5, S_q = 1);
//   PeakClaim    a stated best FLOPS utilisation over a set of workloads (AMLA: "up to 86.8%";
//                the model's prediction is the maximum of its FU over those workloads).
// The constants (see sim/chip.hpp, namespace calibrated):
//   hbm_efficiency   achievable fraction of the HBM peak (the slope of time against S_k where the
//                    kernel is HBM-bound: the S_q = 1 row),
//   mmad_overhead    cycles each MMAD instruction costs beyond its fractal steps (the Cube's own
//                    efficiency, which sets the Cube-bound S_q = 2 row and so the 86.8%),
//   fixed_overhead   kernel time outside the cycle model (the intercept).
// The core start stagger is not a fourth constant: fit_constants() derives it from each candidate
// HBM efficiency (hbm_turn_stagger in sim/chip.hpp), as sim::ascend910() does.
// fit_constants() searches the efficiency and the MMAD cost on a grid (coarse, then fine around
// the best point) and, for each pair, the fixed overhead by golden-section search (the
// cycle-model times do not depend on it). The error is the root mean square, over every
// measurement and every peak claim alike, of the FLOPS-utilisation error in percentage points.
// The committed values were produced by `example_04_amla_decode_model --calibrate`
// (scripts/calibrate_sim.sh).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "amla/config.hpp"
#include "amla/problem/workload.hpp"
#include "amla/sim/chip.hpp"
#include "amla/sim/decode.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// One measured kernel: its workload, duration and the FLOPS utilisation the source reports.
struct Measurement {
  Workload workload;
  double duration_us = 0;
  double fu_percent = 0;
};

/// The Table 5 S_k values (AMLA paper, Section 5.2).
inline std::vector<int> amla_table5_s_k() {
  return {1024, 2048, 3072, 4096, 6144, 16384};
}

/// AMLA paper, Table 5, Ascend 910 row (B = 96, H = 128, S_q = 1, BF16): the AMLA kernel's
/// measured duration and FLOPS utilisation for S_k = 1024 ... 16384.
inline std::vector<Measurement> amla_table5_ascend910() {
  const auto s_k = amla_table5_s_k();
  const double us[] = {95, 140, 186, 241, 331, 830};
  const double fu[] = {40.9, 55.1, 62.4, 64.1, 70.2, 74.5};
  std::vector<Measurement> m;
  for (std::size_t i = 0; i < s_k.size(); ++i) {
    Measurement x;
    x.workload = Workload::uniform(96, 1, 128, s_k[i]);
    x.duration_us = us[i];
    x.fu_percent = fu[i];
    m.push_back(x);
  }
  return m;
}

/// A published best case: the largest FLOPS utilisation a kernel reaches over `workloads`.
struct PeakClaim {
  std::vector<Workload> workloads;
  double fu_percent = 0;
  std::string source;
};

/// AMLA paper (abstract, Sections 1, 5.2 and 6): on the Ascend 910 the AMLA kernel "achieves up
/// to 86.8% FLOPS utilization" (614 TFLOPS). Table 5's S_q = 1 row peaks at 74.5%, so the 86.8% is
/// a point of its S_q = 2 row (B = 96, H = 128, the same six S_k), whose values the paper's public
/// version withholds: the claim is read as the maximum over that row.
inline PeakClaim amla_peak_fu_ascend910() {
  PeakClaim c;
  for (const int sk : amla_table5_s_k()) {
    c.workloads.push_back(Workload::uniform(96, 2, 128, sk));
  }
  c.fu_percent = 86.8;
  c.source = "AMLA paper: up to 86.8% FLOPS utilisation on Ascend 910 (Table 5, S_q = 2 row)";
  return c;
}

/// A model prediction next to its measurement.
struct Prediction {
  Measurement measured;
  double predicted_us = 0;
  double predicted_fu_percent = 0;
  double fu_error_pp() const { return predicted_fu_percent - measured.fu_percent; }
};

/// The model's FU over a peak claim's workloads, and its maximum.
struct PeakPrediction {
  PeakClaim claim;
  std::vector<double> predicted_us, predicted_fu_percent;  ///< per workload, in order
  double max_fu_percent = 0;
  std::size_t argmax = 0;  ///< index of the workload where the maximum is reached
  double fu_error_pp() const { return max_fu_percent - claim.fu_percent; }
};

namespace detail {
inline void check_claim_workloads(const PeakClaim& c) {
  AMLA_REQUIRE(!c.workloads.empty(), "peak claim workloads", c.workloads.size(), "at least one");
}
inline void check_claim(const PeakClaim& c) {
  check_claim_workloads(c);
  AMLA_REQUIRE(c.fu_percent > 0 && c.fu_percent <= 100, "peak claim fu_percent", c.fu_percent,
               "in (0, 100]");
}
inline void check_measurement(const Measurement& m) {
  AMLA_REQUIRE(m.duration_us > 0 && m.fu_percent > 0 && m.fu_percent <= 100, "measurement",
               m.fu_percent, "a positive duration and FLOPS utilisation in (0, 100]");
}
}  // namespace detail

/// Predicts every measurement with `chip` (AMLA kernel unless `opt` says otherwise).
inline std::vector<Prediction> predict(const Chip& chip, const std::vector<Measurement>& ms,
                                       const DecodeOptions& opt = {}) {
  std::vector<Prediction> out;
  for (const auto& m : ms) {
    const DecodeResult r = simulate_decode(chip, m.workload, opt);
    AMLA_REQUIRE(r.ok, "workload", r.reason, "a workload the chip can run");
    Prediction p;
    p.measured = m;
    p.predicted_us = r.kernel_us();
    p.predicted_fu_percent = 100 * r.fu;
    out.push_back(p);
  }
  return out;
}

/// Predicts every workload of a peak claim with `chip` and takes the maximum FU (the claim's own
/// fu_percent is only carried along, for fu_error_pp()).
inline PeakPrediction predict_peak(const Chip& chip, const PeakClaim& claim,
                                   const DecodeOptions& opt = {}) {
  detail::check_claim_workloads(claim);
  PeakPrediction p;
  p.claim = claim;
  for (std::size_t i = 0; i < claim.workloads.size(); ++i) {
    const DecodeResult r = simulate_decode(chip, claim.workloads[i], opt);
    AMLA_REQUIRE(r.ok, "workload", r.reason, "a workload the chip can run");
    p.predicted_us.push_back(r.kernel_us());
    p.predicted_fu_percent.push_back(100 * r.fu);
    if (i == 0 || 100 * r.fu > p.max_fu_percent) {
      p.max_fu_percent = 100 * r.fu;
      p.argmax = i;
    }
  }
  return p;
}

/// What fit_constants found.
struct CalibrationResult {
  double hbm_efficiency = 1;
  Cycles mmad_overhead{0};
  Seconds fixed_overhead{0};
  Cycles core_start_stagger{0};  ///< derived from hbm_efficiency (or the base chip's), not fitted
  double rms_error_pp = 0;       ///< over every measurement and peak claim, FU percentage points
  double max_error_pp = 0;       ///< largest |FU error| over the measurements
  double max_peak_error_pp = 0;  ///< largest |FU error| over the peak claims
  int simulations = 0;
  std::vector<Prediction> predictions;
  std::vector<PeakPrediction> peak_predictions;

  /// `base` with the fitted constants (and the stagger) in place.
  Chip apply(Chip base) const {
    base.hbm_efficiency = hbm_efficiency;
    base.mmad_overhead = mmad_overhead;
    base.fixed_overhead = fixed_overhead;
    base.core_start_stagger = core_start_stagger;
    return base;
  }
};

/// The most grid points each of fit_constants' two grids may have (each point simulates every
/// workload).
inline constexpr double max_fit_grid_points = 1e4;

/// Search ranges and resolution of the fit.
struct CalibrationOptions {
  double min_efficiency = 0.60, max_efficiency = 1.0;
  double coarse_efficiency_step = 0.04;
  double fine_efficiency_step = 0.01;
  std::int64_t min_mmad_overhead_cycles = 0, max_mmad_overhead_cycles = 112;
  std::int64_t coarse_mmad_step = 16;
  std::int64_t fine_mmad_step = 2;
  double max_fixed_overhead_us = 100;
  /// Derive the core start stagger from each candidate efficiency (hbm_turn_stagger with this
  /// block size), as sim::ascend910() does; false keeps the base chip's stagger.
  bool derive_stagger = true;
  double stagger_block_bytes = amla_kv_block_bytes;
};

namespace detail {

struct FitPoint {
  double eta;
  std::int64_t mmad;
  double t0_s;
  double rms;
};

inline Chip candidate(const Chip& base, double eta, std::int64_t mmad,
                      const CalibrationOptions& o) {
  Chip c = base;
  c.hbm_efficiency = eta;
  c.mmad_overhead = Cycles{mmad};
  c.fixed_overhead = Seconds{0};
  if (o.derive_stagger) c.core_start_stagger = hbm_turn_stagger(c, o.stagger_block_bytes);
  return c;
}

// For fixed (eta, mmad): the cycle-model times, then the best fixed overhead.
inline FitPoint fit_at(const Chip& base, const std::vector<Measurement>& ms,
                       const std::vector<PeakClaim>& peaks, double eta, std::int64_t mmad,
                       const CalibrationOptions& o, int& sims) {
  const Chip c = candidate(base, eta, mmad, o);
  auto run = [&](const Workload& w, double& t, double& f) {
    const DecodeResult r = simulate_decode(c, w);
    AMLA_REQUIRE(r.ok, "calibration workload", r.reason, "a workload the chip can run");
    t = r.time.count;
    f = r.flops;
    ++sims;
  };
  std::vector<double> t(ms.size()), f(ms.size());
  for (std::size_t i = 0; i < ms.size(); ++i) run(ms[i].workload, t[i], f[i]);
  std::vector<std::vector<double>> pt(peaks.size()), pf(peaks.size());
  for (std::size_t j = 0; j < peaks.size(); ++j) {
    pt[j].resize(peaks[j].workloads.size());
    pf[j].resize(peaks[j].workloads.size());
    for (std::size_t i = 0; i < peaks[j].workloads.size(); ++i)
      run(peaks[j].workloads[i], pt[j][i], pf[j][i]);
  }
  const double peak = c.peak_flops_per_s();
  const auto n = static_cast<double>(ms.size() + peaks.size());
  auto err = [&](double t0) {
    double s = 0;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      const double d = 100 * f[i] / ((t[i] + t0) * peak) - ms[i].fu_percent;
      s += d * d;
    }
    for (std::size_t j = 0; j < peaks.size(); ++j) {
      double mx = 0;
      for (std::size_t i = 0; i < pt[j].size(); ++i)
        mx = std::max(mx, 100 * pf[j][i] / ((pt[j][i] + t0) * peak));
      const double d = mx - peaks[j].fu_percent;
      s += d * d;
    }
    return std::sqrt(s / n);
  };
  double lo = 0, hi = o.max_fixed_overhead_us * 1e-6;
  const double g = (std::sqrt(5.0) - 1) / 2;
  for (int it = 0; it < 80; ++it) {
    const double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    if (err(a) <= err(b))
      hi = b;
    else
      lo = a;
  }
  const double t0 = (lo + hi) / 2;
  return {eta, mmad, t0, err(t0)};
}

}  // namespace detail

/// Fits hbm_efficiency, mmad_overhead and fixed_overhead of `base` to the measurements `ms` and
/// the peak claims `peaks` (AMLA kernels), deriving the core start stagger from the efficiency
/// unless `o.derive_stagger` is false.
inline CalibrationResult fit_constants(const Chip& base, const std::vector<Measurement>& ms,
                                       const std::vector<PeakClaim>& peaks,
                                       const CalibrationOptions& o = {}) {
  base.validate();
  AMLA_REQUIRE(!ms.empty(), "measurements", ms.size(), "at least one");
  AMLA_REQUIRE(
      o.min_efficiency > 0 && o.min_efficiency <= o.max_efficiency && o.max_efficiency <= 1,
      "efficiency range", o.min_efficiency, "0 < min <= max <= 1");
  AMLA_REQUIRE(
      o.min_mmad_overhead_cycles >= 0 && o.min_mmad_overhead_cycles <= o.max_mmad_overhead_cycles,
      "mmad overhead range", o.min_mmad_overhead_cycles, "0 <= min <= max cycles");
  AMLA_REQUIRE(o.coarse_efficiency_step > 0 && o.fine_efficiency_step > 0 &&
                   o.coarse_mmad_step > 0 && o.fine_mmad_step > 0,
               "steps", o.coarse_efficiency_step, "positive");
  AMLA_REQUIRE(o.max_fixed_overhead_us > 0 &&
                   o.max_fixed_overhead_us <= chip_limits::max_fixed_overhead_s * 1e6,
               "max_fixed_overhead_us", o.max_fixed_overhead_us, "in (0, 10^6] microseconds");
  AMLA_REQUIRE(o.max_mmad_overhead_cycles <= chip_limits::max_latency_cycles,
               "max_mmad_overhead_cycles", o.max_mmad_overhead_cycles, "at most 2^32 cycles");
  // Work bound: each grid point is a simulation of every workload.
  const double coarse_points =
      (std::floor((o.max_efficiency - o.min_efficiency) / o.coarse_efficiency_step + 1e-9) + 1) *
      (std::floor(static_cast<double>(o.max_mmad_overhead_cycles - o.min_mmad_overhead_cycles) /
                  static_cast<double>(o.coarse_mmad_step)) +
       1);
  const double fine_points =
      (2 * std::floor(std::round(o.coarse_efficiency_step / o.fine_efficiency_step) / 2) + 1) *
      (2 * std::floor(static_cast<double>(o.coarse_mmad_step / o.fine_mmad_step) / 2) + 1);
  AMLA_REQUIRE(coarse_points <= max_fit_grid_points, "steps", coarse_points,
               "at most 10^4 coarse grid points (range / step, efficiency x MMAD cost)");
  AMLA_REQUIRE(fine_points <= max_fit_grid_points, "fine steps", fine_points,
               "at most 10^4 fine grid points (coarse step / fine step, efficiency x MMAD cost)");
  for (const auto& m : ms) detail::check_measurement(m);
  for (const auto& p : peaks) detail::check_claim(p);
  int sims = 0;
  detail::FitPoint best{1, 0, 0, 1e300};
  auto consider = [&](double eta, std::int64_t mmad) {
    eta = std::clamp(eta, o.min_efficiency, o.max_efficiency);
    mmad = std::clamp(mmad, o.min_mmad_overhead_cycles, o.max_mmad_overhead_cycles);
    const auto p = detail::fit_at(base, ms, peaks, eta, mmad, o, sims);
    if (p.rms < best.rms) best = p;
  };
  const int ne = static_cast<int>(
      std::floor((o.max_efficiency - o.min_efficiency) / o.coarse_efficiency_step + 1e-9));
  for (int i = 0; i <= ne; ++i)
    for (std::int64_t m = o.min_mmad_overhead_cycles; m <= o.max_mmad_overhead_cycles;
         m += o.coarse_mmad_step)
      consider(o.min_efficiency + i * o.coarse_efficiency_step, m);
  const detail::FitPoint coarse = best;
  // Fine grid over half a coarse step around the coarse optimum.
  const int fe =
      static_cast<int>(std::lround(o.coarse_efficiency_step / o.fine_efficiency_step)) / 2;
  const auto fm = o.coarse_mmad_step / o.fine_mmad_step / 2;
  for (int i = -fe; i <= fe; ++i)
    for (std::int64_t j = -fm; j <= fm; ++j)
      if (i != 0 || j != 0)
        consider(coarse.eta + i * o.fine_efficiency_step, coarse.mmad + j * o.fine_mmad_step);

  CalibrationResult r;
  const Chip c = detail::candidate(base, best.eta, best.mmad, o);
  r.hbm_efficiency = best.eta;
  r.mmad_overhead = Cycles{best.mmad};
  r.fixed_overhead = Seconds{best.t0_s};
  r.core_start_stagger = c.core_start_stagger;
  r.rms_error_pp = best.rms;
  const Chip fitted = r.apply(base);
  r.predictions = predict(fitted, ms);
  for (const auto& p : r.predictions)
    r.max_error_pp = std::max(r.max_error_pp, std::fabs(p.fu_error_pp()));
  for (const auto& p : peaks) {
    r.peak_predictions.push_back(predict_peak(fitted, p));
    r.max_peak_error_pp =
        std::max(r.max_peak_error_pp, std::fabs(r.peak_predictions.back().fu_error_pp()));
  }
  r.simulations = sims + static_cast<int>(ms.size());
  for (const auto& p : peaks) r.simulations += static_cast<int>(p.workloads.size());
  return r;
}

/// Fits to measurements alone (no peak claim).
inline CalibrationResult fit_constants(const Chip& base, const std::vector<Measurement>& ms,
                                       const CalibrationOptions& o = {}) {
  return fit_constants(base, ms, std::vector<PeakClaim>{}, o);
}

}  // namespace amla::sim
