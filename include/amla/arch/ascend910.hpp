// amla/arch/ascend910.hpp: public figures of the Ascend 910 (as in CloudMatrix384), numbers
// only, each with its source. Chips (sim/chip.hpp) and rooflines (mla/roofline.hpp) are built
// from these; behaviour lives there, never here.
#pragma once

#include <cstdint>

namespace amla::arch::ascend910 {

// AMLA paper, Section 2.3 / 5: two dies per package; each die has 24 AI cores, each AI core one
// Cube core and two Vector cores.
inline constexpr int dies = 2;
inline constexpr int cube_cores_per_die = 24;
inline constexpr int vector_cores_per_die = 48;
inline constexpr int vector_cores_per_cube_core = 2;

// Per die: HBM bandwidth and L2 size (AMLA paper, Section 2.3).
inline constexpr double hbm_bytes_per_s_per_die = 1.6e12;
inline constexpr double l2_bytes_per_die = 192.0 * 1024 * 1024;

// On-chip buffers per AI core (AMLA paper, Section 4.2).
inline constexpr double l1_bytes = 512.0 * 1024;
inline constexpr double l0a_bytes = 64.0 * 1024;
inline constexpr double l0b_bytes = 64.0 * 1024;
inline constexpr double l0c_bytes = 128.0 * 1024;
inline constexpr double ub_bytes = 192.0 * 1024;

// L1 -> L0A and L1 -> L0B (MTE1) of one AI core: bytes per cycle and the cycles until a load's
// data is visible. Huawei asc-devkit performance samples (tests/perf/load_data_perf), the
// theoretical figures listed for LoadData on the Atlas A2/A3 cores (dav-2201, the Ascend
// 910B/910C generation).
inline constexpr double mte1_l0a_bytes_per_cycle = 256;
inline constexpr double mte1_l0b_bytes_per_cycle = 128;
inline constexpr std::int64_t mte1_latency_cycles = 28;

// Cube: a 16x16x16 BF16 MAC array per core per cycle (implied by AMLA Table 5: FLOPs / (time * FU)
// gives about 7.07e14 FLOP/s for the package, i.e. 2 * 4096 * 48 cores * ~1.8 GHz).
inline constexpr int cube_m = 16;
inline constexpr int cube_n = 16;
inline constexpr int cube_k = 16;
inline constexpr double clock_hz = 1.8e9;
inline constexpr double bf16_peak_flops_per_s =
    2.0 * cube_m * cube_n * cube_k * cube_cores_per_die * dies * clock_hz;  // 7.08e14

}  // namespace amla::arch::ascend910
