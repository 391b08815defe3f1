// amla/arch/h100.hpp: NVIDIA Hopper GPUs, numbers only, each with its source.
#pragma once

namespace amla::arch {

namespace h100_sxm {
// NVIDIA H100 SXM5 80GB datasheet: 989 TFLOPS dense BF16 tensor, 3.35 TB/s HBM3, 132 SMs, 50 MB L2.
inline constexpr int sms = 132;
inline constexpr double bf16_peak_flops_per_s = 989e12;
inline constexpr double hbm_bytes_per_s = 3.35e12;
inline constexpr double l2_bytes = 50.0 * 1024 * 1024;
inline constexpr double smem_bytes_per_sm = 228.0 * 1024;
}  // namespace h100_sxm

namespace h800_sxm {
// FlashMLA deep dive: 990 TFLOPS peak, 3.35 TB/s, but clocks throttle to ~1600 MHz under load, so
// the practical peak is about 865 TFLOPS.
inline constexpr int sms = 132;
inline constexpr double bf16_peak_flops_per_s = 990e12;
inline constexpr double bf16_practical_flops_per_s = 865e12;
inline constexpr double hbm_bytes_per_s = 3.35e12;
}  // namespace h800_sxm

}  // namespace amla::arch
