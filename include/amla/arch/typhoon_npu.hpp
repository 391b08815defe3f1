// amla/arch/typhoon_npu.hpp: the Ascend NPU of the TyphoonMLA paper (Section 5), numbers only.
#pragma once

namespace amla::arch::typhoon_npu {

// TyphoonMLA, "Experiments on NPUs": 24 Davinci cores, 64 GB HBM, 376 TOPS FP16, 1.8 TB/s.
inline constexpr int cube_cores = 24;
inline constexpr int vector_cores = 48;  // two Vector cores per Davinci core (as on Ascend 910)
inline constexpr double fp16_peak_flops_per_s = 376e12;
inline constexpr double hbm_bytes_per_s = 1.8e12;
inline constexpr double hbm_capacity_bytes = 64e9;

}  // namespace amla::arch::typhoon_npu
