// amla/sim/hopper_calibration.hpp: what the Hopper model (sim/hopper_decode.hpp) is checked
// against, and the fit of its two calibrated constants.
//
// Three kinds of reference:
//   HopperMeasurement  amla's Hopper kernel timed on an H100 by scripts/hopper-model.sh (the block
//                      hopper-measured of examples/SIM_RESULTS.md): the time per launch in a
//                      0.3 s stream of launches and the SM clock nvidia-smi sampled meanwhile (the
//                      pair the model predicts: cycles at that clock), and the median of 15 single
//                      launches after an L2 flush (which adds host and flush time);
//   ThroughputFigure   another project's reported TFLOPS for a workload: FlashMLA's on an H100,
//                      FlashMLA and FlashMLA-ETAP's on an H20 (ETAP paper, Figure 1);
// and the fit: fit_hopper_constants() sets amla's kernel CUDA-core factor and the H100's kernel
// overhead so that the two one-CTA runs of the standard kernel (s_k = 16384 and 1024: one SM's
// pipeline with nothing shared) come out exact, by alternating bisections; the committed values
// (gpu_chip.hpp, calibrated_hopper) are what it printed.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "amla/config.hpp"
#include "amla/problem/workload.hpp"
#include "amla/sim/gpu_chip.hpp"
#include "amla/sim/hopper_decode.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// One run of amla's Hopper kernel on the H100.
struct HopperMeasurement {
  std::string name;        ///< "uniform", "imbalanced", "mixed", "split", "one CTA", "one wave"
  bool amla_mode = false;  ///< hopper/amla (else hopper/standard)
  Workload workload;
  int splits = 0;        ///< the kernel's num_splits (0: its own choice)
  double stream_us = 0;  ///< per launch, launches back to back
  double clock_mhz = 0;  ///< SM clock sampled during the stream
  double median_us = 0;  ///< median of single launches after an L2 flush

  /// The measured chip: `base` at the sampled clock.
  GpuChip chip(const GpuChip& base = h100_sxm()) const {
    GpuChip c = base;
    c.clock = Hertz{clock_mhz * 1e6};
    return c;
  }
  /// The kernel as it ran (amla's, with its splits).
  HopperKernel kernel() const {
    HopperKernel k = amla_hopper_kernel(amla_mode);
    k.splits = splits;
    return k;
  }
};

namespace detail {
inline Workload varlen_workload(int s_q, int h_q, std::vector<int> seqlens) {
  Workload w = Workload::uniform(1, s_q, h_q, 1);
  w.seqlens = std::move(seqlens);
  w.validate("amla::sim::varlen_workload");
  return w;
}
}  // namespace detail

/// The imbalanced batch the measurements use (ThunderMLA's case): 128 sequences of 512 keys, every
/// 16th one of 16384.
inline std::vector<int> imbalanced_seqlens() {
  std::vector<int> l(128, 512);
  for (std::size_t i = 0; i < l.size(); i += 16) l[i] = 16384;
  return l;
}
/// The mixed batch: 128 sequences of 256 + (7919 i mod 7937) keys, 256 to 8192.
inline std::vector<int> mixed_seqlens() {
  std::vector<int> l(128);
  for (int i = 0; i < 128; ++i) l[static_cast<std::size_t>(i)] = 256 + (i * 7919) % 7937;
  return l;
}

/// amla's Hopper kernel on an H100 SXM5 (scripts/hopper-model.sh, examples/SIM_RESULTS.md block
/// hopper-measured, commit edc488d): h_q = 128 unless the name says one CTA or one wave (h_q = 64,
/// one row block), non-causal, page size 64.
inline std::vector<HopperMeasurement> hopper_h100_measurements() {
  std::vector<HopperMeasurement> m;
  auto add = [&](const char* name, bool amla, Workload w, int splits, double stream, double mhz,
                 double median) {
    m.push_back({name, amla, std::move(w), splits, stream, mhz, median});
  };
  // b = 128, s_q {1, 2}, s_k {1024, 4096, 16384}: {stream us, MHz, median us}.
  const double uniform[2][2][3][3] = {
      {{{115.0, 1977, 114.8}, {324.7, 1808, 306.0}, {1247.8, 1630, 1123.5}},
       {{204.0, 1744, 254.8}, {598.6, 1801, 553.6}, {2270.4, 1591, 2117.2}}},
      {{{131.4, 1754, 154.3}, {368.0, 1850, 345.2}, {1373.0, 1756, 1300.4}},
       {{226.6, 1811, 265.5}, {698.0, 1878, 647.6}, {2627.2, 1788, 2515.8}}}};
  const int s_ks[3] = {1024, 4096, 16384};
  for (int a = 0; a < 2; ++a)
    for (int q = 0; q < 2; ++q)
      for (int k = 0; k < 3; ++k) {
        const auto& x = uniform[a][q][k];
        add("uniform", a == 1, Workload::uniform(128, q + 1, 128, s_ks[k]), 0, x[0], x[1], x[2]);
      }
  for (const bool amla : {false, true}) {
    add("imbalanced", amla, detail::varlen_workload(1, 128, imbalanced_seqlens()), 0,
        amla ? 669.2 : 527.5, amla ? 1875 : 1827, amla ? 777.6 : 576.6);
    add("imbalanced", amla, detail::varlen_workload(2, 128, imbalanced_seqlens()), 0,
        amla ? 700.2 : 563.2, amla ? 1972 : 1975, amla ? 703.4 : 566.7);
    add("mixed", amla, detail::varlen_workload(1, 128, mixed_seqlens()), 0, amla ? 594.8 : 528.2,
        amla ? 1863 : 1734, amla ? 547.0 : 485.2);
  }
  add("split", false, Workload::uniform(16, 2, 128, 4096), 0, 127.2, 1904, 128.3);
  add("split", false, Workload::uniform(1, 2, 128, 16384), 0, 68.4, 1973, 70.9);
  add("one wave", false, Workload::uniform(66, 1, 128, 16384), 0, 603.8, 1740, 546.9);
  // The standard kernel's short one-CTA run is also the cold start's source (arch/h100.hpp).
  namespace am = arch::h100_sxm_measured;
  for (const bool amla : {false, true}) {
    add("one CTA", amla, Workload::uniform(1, 1, 64, 1024), 1,
        amla ? 47.7 : am::one_cta_warm_launch_s * 1e6, amla ? 1898 : 1840,
        amla ? 57.5 : am::one_cta_cold_launch_s * 1e6);
    add("one CTA", amla, Workload::uniform(1, 1, 64, 16384), 1, amla ? 573.8 : 441.7,
        amla ? 1972 : 1975, amla ? 576.5 : 450.1);
    add("one wave", amla, Workload::uniform(132, 1, 64, 16384), 1, amla ? 848.0 : 834.0,
        amla ? 1855 : 1821, amla ? 847.3 : 838.1);
  }
  return m;
}

/// A reported throughput.
struct ThroughputFigure {
  std::string source;
  Workload workload;
  double tflops = 0;
};

/// FlashMLA's measured H100 figures at b = 128, h_q = 128: 429 / 567 / 598 TFLOPS at s_q = 1 and
/// 485 / 656 / 720 at s_q = 2, for s_k = 1024 / 4096 / 16384 (as this project's tracker records
/// them; no clock given).
inline std::vector<ThroughputFigure> flashmla_h100_figures() {
  const double t[2][3] = {{429, 567, 598}, {485, 656, 720}};
  const int s_ks[3] = {1024, 4096, 16384};
  std::vector<ThroughputFigure> f;
  for (int q = 0; q < 2; ++q)
    for (int k = 0; k < 3; ++k)
      f.push_back({"FlashMLA, H100", Workload::uniform(128, q + 1, 128, s_ks[k]), t[q][k]});
  return f;
}

/// FlashMLA-ETAP, Figure 1 and Section 4.2 (H20, h_q = 16, s_q = 1): batch 16, FlashMLA 9 TFLOPS
/// at 512 keys and 32 at 64K, ETAP 13 and 89; batch 32 at 64K, FlashMLA 32 and ETAP 87.
inline std::vector<ThroughputFigure> etap_h20_figures() {
  return {{"FlashMLA", Workload::uniform(16, 1, 16, 512), 9},
          {"FlashMLA-ETAP", Workload::uniform(16, 1, 16, 512), 13},
          {"FlashMLA", Workload::uniform(16, 1, 16, 65536), 32},
          {"FlashMLA-ETAP", Workload::uniform(16, 1, 16, 65536), 89},
          {"FlashMLA", Workload::uniform(32, 1, 16, 65536), 32},
          {"FlashMLA-ETAP", Workload::uniform(32, 1, 16, 65536), 87}};
}

/// The model's time for one measurement (stream time at the sampled clock).
inline double predict_us(const HopperMeasurement& m, const GpuChip& base = h100_sxm(),
                         double cuda_factor = calibrated_hopper::amla_kernel_cuda_factor) {
  HopperKernel k = amla_hopper_kernel(m.amla_mode, cuda_factor);
  k.splits = m.splits;
  const HopperDecodeResult r = simulate_hopper_decode(m.chip(base), m.workload, k);
  AMLA_REQUIRE(r.ok, "measurement", r.reason, "a workload the model can run");
  return r.time.us();
}

/// The two constants and how well they reproduce the runs they were fitted to.
struct HopperFit {
  double cuda_factor = 0;
  double kernel_overhead_us = 0;
  double long_run_us = 0, short_run_us = 0;  ///< the model at the fitted values
  double long_measured_us = 0, short_measured_us = 0;
};

/// Fits amla's kernel CUDA-core factor to the one-CTA standard run at s_k = 16384 and the H100's
/// kernel overhead to the one at s_k = 1024, alternating a bisection of the factor (over
/// [1, 4]) with a fixed-point step of the overhead until both settle.
inline HopperFit fit_hopper_constants() {
  const auto ms = hopper_h100_measurements();
  const HopperMeasurement* lng = nullptr;
  const HopperMeasurement* shrt = nullptr;
  for (const auto& m : ms)
    if (m.name == "one CTA" && !m.amla_mode) (m.workload.max_seqlen() == 16384 ? lng : shrt) = &m;
  AMLA_ASSERT(lng != nullptr && shrt != nullptr);
  HopperFit f;
  GpuChip base = h100_sxm();
  base.kernel_overhead = Seconds{0};
  for (int round = 0; round < 8; ++round) {
    double lo = 1, hi = 4;
    for (int i = 0; i < 40; ++i) {
      const double mid = (lo + hi) / 2;
      (predict_us(*lng, base, mid) < lng->stream_us ? lo : hi) = mid;
    }
    f.cuda_factor = (lo + hi) / 2;
    const double gap = shrt->stream_us - predict_us(*shrt, base, f.cuda_factor);
    base.kernel_overhead = Seconds{base.kernel_overhead.count + gap * 1e-6};
    // A round that leaves the overhead as it was would be repeated exactly by every later one
    // (on the committed measurements the sixth round's gap is 0).
    if (gap == 0) break;
  }
  f.kernel_overhead_us = base.kernel_overhead.us();
  f.long_run_us = predict_us(*lng, base, f.cuda_factor);
  f.short_run_us = predict_us(*shrt, base, f.cuda_factor);
  f.long_measured_us = lng->stream_us;
  f.short_measured_us = shrt->stream_us;
  return f;
}

}  // namespace amla::sim
