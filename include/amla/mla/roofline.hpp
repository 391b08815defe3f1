// amla/mla/roofline.hpp: the roofline model (Williams, Waterman and Patterson, 2009) of a kernel
// on a chip described by two numbers, its peak arithmetic rate and its HBM bandwidth.
//
// A kernel that performs F floating-point operations and moves Y bytes to or from HBM cannot take
// less than F / peak (compute) nor less than Y / bandwidth (memory); the roofline estimate is the
// larger of the two, i.e. it assumes perfect overlap of compute and memory traffic. A kernel is
// compute-bound when F / Y (its arithmetic intensity) is at least the chip's ridge point
// peak / bandwidth.
//
// The chip figures are not repeated here: the named descriptions below read them from
// amla/arch/, the one place the simulator also takes them from.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include "amla/arch/ascend910.hpp"
#include "amla/arch/h100.hpp"
#include "amla/arch/typhoon_npu.hpp"
#include "amla/config.hpp"

namespace amla::mla {

/// What the roofline needs to know about a chip.
struct Hardware {
  double peak_flops_per_s = 0;  ///< dense matrix throughput, FLOP/s (one MAC = 2 FLOP)
  double hbm_bytes_per_s = 0;   ///< HBM bandwidth, bytes/s
  std::string_view name;        ///< for tables and legends

  /// The arithmetic intensity (FLOP/byte) above which a kernel is compute-bound.
  constexpr double ridge_flops_per_byte() const { return peak_flops_per_s / hbm_bytes_per_s; }
};

namespace detail {
/// Throws amla::invalid_argument, attributed to `function`, unless both rates are finite and > 0.
inline void validate_hardware(const char* function, const Hardware& hw) {
  amla::detail::require_finite_positive(function, "hw.peak_flops_per_s", hw.peak_flops_per_s);
  amla::detail::require_finite_positive(function, "hw.hbm_bytes_per_s", hw.hbm_bytes_per_s);
}
}  // namespace detail

/// Throws amla::invalid_argument unless both rates are finite and > 0.
inline void validate(const Hardware& hw) {
  detail::validate_hardware("amla::mla::validate", hw);
}

namespace hardware {

/// The Ascend NPU of the TyphoonMLA paper's experiments: 376 TOPS FP16, 1.8 TB/s (the figures
/// of its equation 1).
inline constexpr Hardware typhoon_npu{arch::typhoon_npu::fp16_peak_flops_per_s,
                                      arch::typhoon_npu::hbm_bytes_per_s,
                                      "Ascend NPU (TyphoonMLA)"};

/// Ascend 910 package as in the AMLA paper: both dies' Cube cores and both dies' HBM.
inline constexpr Hardware ascend910{arch::ascend910::bf16_peak_flops_per_s,
                                    arch::ascend910::hbm_bytes_per_s_per_die* arch::ascend910::dies,
                                    "Ascend 910"};

/// NVIDIA H100 SXM5, datasheet: 989 TFLOPS dense BF16, 3.35 TB/s.
inline constexpr Hardware h100_sxm{arch::h100_sxm::bf16_peak_flops_per_s,
                                   arch::h100_sxm::hbm_bytes_per_s, "H100 SXM"};

/// NVIDIA H800 SXM5 at its datasheet peak (990 TFLOPS, 3.35 TB/s).
inline constexpr Hardware h800_sxm{arch::h800_sxm::bf16_peak_flops_per_s,
                                   arch::h800_sxm::hbm_bytes_per_s, "H800 SXM"};

/// NVIDIA H800 SXM5 at the throttled clock of the FlashMLA deep dive (~865 TFLOPS, 3.35 TB/s).
inline constexpr Hardware h800_sxm_throttled{arch::h800_sxm::bf16_practical_flops_per_s,
                                             arch::h800_sxm::hbm_bytes_per_s,
                                             "H800 SXM (throttled)"};

}  // namespace hardware

/// The two lower bounds of a kernel's time and which one binds.
struct RooflineTime {
  double compute_s = 0;  ///< FLOP / peak
  double memory_s = 0;   ///< bytes / bandwidth

  /// The roofline estimate: the larger bound (compute and memory overlap perfectly).
  constexpr double time_s() const { return std::max(compute_s, memory_s); }
  /// True when the compute bound is at least the memory bound.
  constexpr bool compute_bound() const { return compute_s >= memory_s; }
};

/// Roofline time of a kernel with `flops` operations and `hbm_bytes` of HBM traffic on `hw`.
/// Throws amla::invalid_argument for negative or non-finite work or an invalid `hw`.
inline RooflineTime roofline(double flops, double hbm_bytes, const Hardware& hw) {
  detail::validate_hardware("amla::mla::roofline", hw);
  AMLA_REQUIRE(std::isfinite(flops) && flops >= 0, "flops", flops, "must be finite and >= 0");
  AMLA_REQUIRE(std::isfinite(hbm_bytes) && hbm_bytes >= 0, "hbm_bytes", hbm_bytes,
               "must be finite and >= 0");
  return {flops / hw.peak_flops_per_s, hbm_bytes / hw.hbm_bytes_per_s};
}

}  // namespace amla::mla
