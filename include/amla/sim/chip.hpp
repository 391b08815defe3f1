// amla/sim/chip.hpp: a Cube/Vector accelerator as the simulator sees it. Public figures come from
// arch/<chip>.hpp; what no paper publishes (pipe bandwidths, latencies, Vector throughput) is
// a named parameter here with its default and the reason for that value; the simulator's three
// calibrated constants (fitted to AMLA Table 5 and the paper's stated best FLOPS utilisation by
// `example_04_amla_decode_model --calibrate`, see scripts/calibrate_sim.sh) are named as such,
// and so is the one quantity derived from them (the core start stagger).
//
// A Chip is plain data: change any field to ask "what if".
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "amla/arch/ascend910.hpp"
#include "amla/arch/typhoon_npu.hpp"
#include "amla/config.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// Per-core figures no paper publishes, with the defaults the simulator uses (the MTE1 rates are
/// the exception: Huawei's own performance samples give them, and arch/ascend910.hpp holds them).
/// Shared by the Da Vinci V220 chips below (Ascend 910 and the TyphoonMLA NPU have the same core
/// design).
namespace davinci_defaults {

// GM -> L1 port of one Cube core (MTE2). The AMLA tiling needs about 80 B/cycle to keep the
// 16x16x16 MMAD fed when every operand streams (C1 at M = 128: 576 KB of K + 144 KB of Q per
// 9216 MMAD cycles), and Section 4.2 says the overlap is perfect; 128 B/cycle (230 GB/s per core,
// 11 TB/s over 48 cores, 3.5x the HBM) makes the port a limit only for L2-resident data.
inline constexpr double mte2_bytes_per_cycle = 128;
// L1 -> L0A and L1 -> L0B (MTE1): 256 and 128 bytes per cycle, each load's data visible 28 cycles
// after it ends. These are public (arch/ascend910.hpp gives the source). One C1 step (128x128x96)
// then loads its A piece in 96 cycles and its B piece in 192, 288 of the step's 384 fractal cycles;
// one C2 step (128x128x128) 384 of 512: MTE1 stays hidden, as the paper draws it in Figure 9.
inline constexpr double mte1_l0a_bytes_per_cycle = arch::ascend910::mte1_l0a_bytes_per_cycle;
inline constexpr double mte1_l0b_bytes_per_cycle = arch::ascend910::mte1_l0b_bytes_per_cycle;
inline constexpr std::int64_t mte1_latency_cycles = arch::ascend910::mte1_latency_cycles;
// L0C -> GM (FixP), FP32 results: one 128x128 FP32 tile (64 KB) in 512 cycles, hidden behind the
// next tile's 2304-3072 MMAD cycles by L0C double buffering, as the paper intends. (The same
// asc-devkit samples give 128 B/cycle for L0C -> L1 with a cast on the way; L0C -> GM is not
// listed.)
inline constexpr double fixp_bytes_per_cycle = 128;
// First-byte latency of a GM read that misses L2 (HBM), and of one that hits L2, in core cycles
// (about 550 ns and 220 ns at 1.8 GHz: the usual order for HBM accelerators). Pipelined requests
// hide it except at the start of a dependency chain.
inline constexpr std::int64_t hbm_latency_cycles = 1000;
inline constexpr std::int64_t l2_latency_cycles = 400;
// Spread of the HBM latency from one access to the next (row hit or miss, refresh, bank
// conflicts; about +-100 ns): each HBM transfer adds a deterministic pseudo-random 0..this many
// cycles. Besides realism it breaks the symmetry of identical cores: lock-step is an unstable
// equilibrium of a fairly shared HBM, and this is the noise that lets cores drift apart as they
// do on hardware (see sim/decode.hpp).
inline constexpr std::int64_t hbm_latency_jitter_cycles = 200;
// Cube <-> Vector hand-over through GM: the producer's last write becomes visible and the
// consumer's cross-core flag wait returns. About 0.5 us.
inline constexpr std::int64_t handoff_latency_cycles = 900;
// Vector core: a 2048-bit SIMD unit (Huawei's Da Vinci description), i.e. 64 FP32 lanes/cycle.
inline constexpr int vector_fp32_lanes = 64;
// GM <-> UB port of one Vector core (its MTE2/MTE3 together). Half the Cube core's MTE2 port:
// the two Vector cores of an AI core share its path to the L2.
inline constexpr double vector_gm_bytes_per_cycle = 64;
// Vector instructions per score element in AMLA's [V1] (Algorithm 2 lines 7-12): scale, row max,
// subtract, exp (counted as 2), row sum, multiply by S16, cast to BF16, plus ~2 for the running
// statistics and the integer N of lines 13-14 spread over the row. Base's [V1] is the same minus
// the S16 product and N (8). [V2] of Base is a multiply and an add per O element.
inline constexpr double amla_v1_ops_per_element = 10;
inline constexpr double base_v1_ops_per_element = 8;
inline constexpr double base_v2_ops_per_element = 2;
inline constexpr double final_v_ops_per_element = 2;
// UB chunking of a Vector stage: loads, compute and stores overlap over double-buffered chunks of
// this many bytes of input: 8 rows of a 512-wide FP32 S. With P, AMLA's O-rescale tile and a
// scratch row per input row, double-buffered, [V1]'s working set is 112 KB of the 192 KB UB.
inline constexpr double vector_chunk_bytes = 16.0 * 1024;

}  // namespace davinci_defaults

/// The calibrated constants (three, the project's limit), fitted by `example_04_amla_decode_model
/// --calibrate` (scripts/calibrate_sim.sh runs amla::sim::fit_constants) to seven public numbers
/// about the AMLA kernel on the Ascend 910 (B = 96, H = 128): Table 5's six measured S_q = 1
/// points and the paper's statement (abstract, Sections 1, 5.2 and 6) that AMLA reaches "up to
/// 86.8%" FLOPS utilisation, which the model reads as the maximum over the S_q = 2 row (the S_q = 1
/// row peaks at 74.5%, and FU rises with S_k). The values below are what that fit printed; see
/// examples/SIM_RESULTS.md for the errors. Everything else is a public figure, a documented
/// default above, or derived (the core start stagger, below), never fitted.
namespace calibrated {

// Fraction of the HBM's peak bandwidth achieved while 24 cores of a die stream the KV cache
// (refresh, bank conflicts, page misses). Applied to each die's 1.6 TB/s. At S_q = 1 (M = 128
// rows per task) the kernel is HBM-bound once the cores are out of step: 48 cores x 576 KB of K
// per block against 17,408 MMAD cycles needs 91% of the peak, so this sets the slope of time
// against S_k of the S_q = 1 row. (The GPU row of Table 5 implies a similar ~75% of its 3.35 TB/s.)
inline constexpr double ascend910_hbm_efficiency = 0.76;
// Fixed cost of each MMAD instruction on top of its fractal cycles (one 16x16x16 step per cycle):
// the Cube array's fill and drain between dependent accumulations into one L0C tile and the
// MTE1 -> MMAD flag handshake (Ascend's tuning guides ask for large Mmad calls for this reason;
// the cost itself is not published). It sets the S_q = 2 row: at M = 256 rows per task the
// kernel is Cube-bound (the MMAD pipe is busy 98% of the time at S_k = 16384, the HBM at 41% of
// its peak, the Vector cores hidden; the public tiling keeps every other pipe fed), so besides
// the fixed overhead and the pipeline's fill and drain this cost is all that keeps the model
// below the MAC array's peak there, and the paper's 86.8% is what pins it. The fitted value makes
// AMLA's 128x128x96 and 128x128x128 steps run at 89% and 92% of the MAC array, close to the 84%
// of nominal that AIBench (Xiao and Wang, CCF THPC 2024) measured on a first-generation Ascend
// 910's matrix unit. The S_q = 1 row, HBM-bound, depends on it only weakly.
inline constexpr std::int64_t ascend910_mmad_overhead_cycles = 46;
// Kernel time the cycle model does not produce: launch, tiling-data load, core start-up and the
// end-of-kernel synchronisation. Table 5's durations extrapolate linearly to about 42 us at
// S_k = 0 (the GPU row to about 40 us); the model's own start (stagger, pipeline fill) and drain
// account for the rest.
inline constexpr double ascend910_fixed_overhead_us = 15.8;

}  // namespace calibrated

/// A Cube/Vector accelerator: public figures plus the parameters above. A default-constructed
/// Chip is one uncalibrated Ascend 910 die (its figures read from arch/ascend910.hpp); the presets
/// below build whole chips.
struct Chip {
  std::string name;
  Hertz clock{arch::ascend910::clock_hz};

  // Cores: `dies` dies, each with `cube_cores_per_die` Cube cores and `vector_per_cube` Vector
  // cores per Cube core; each die has its own HBM stacks and L2.
  int dies = 1;
  int cube_cores_per_die = arch::ascend910::cube_cores_per_die;
  int vector_per_cube = arch::ascend910::vector_cores_per_cube_core;

  // Cube core: an m x n x k MAC array per cycle (BF16 in, FP32 accumulate) and its buffers.
  int cube_m = arch::ascend910::cube_m, cube_n = arch::ascend910::cube_n,
      cube_k = arch::ascend910::cube_k;
  Bytes l1{arch::ascend910::l1_bytes};
  Bytes l0a{arch::ascend910::l0a_bytes};
  Bytes l0b{arch::ascend910::l0b_bytes};
  Bytes l0c{arch::ascend910::l0c_bytes};
  Bytes ub{arch::ascend910::ub_bytes};  ///< per Vector core

  // Memory: HBM peak per die and the achievable fraction; L2 per die.
  double hbm_bytes_per_s_per_die = arch::ascend910::hbm_bytes_per_s_per_die;
  double hbm_efficiency = 1.0;
  Bytes l2_per_die{arch::ascend910::l2_bytes_per_die};

  // Pipes of a Cube core (bytes per core cycle).
  BytesPerCycle mte2{davinci_defaults::mte2_bytes_per_cycle};
  BytesPerCycle mte1{davinci_defaults::mte1_l0a_bytes_per_cycle};      ///< L1 -> L0A
  BytesPerCycle mte1_l0b{davinci_defaults::mte1_l0b_bytes_per_cycle};  ///< L1 -> L0B
  Cycles mte1_latency{davinci_defaults::mte1_latency_cycles};
  BytesPerCycle fixp{davinci_defaults::fixp_bytes_per_cycle};
  Cycles mmad_overhead{0};  ///< per MMAD instruction (0: an ideal array; see calibrated::)
  Cycles hbm_latency{davinci_defaults::hbm_latency_cycles};
  Cycles l2_latency{davinci_defaults::l2_latency_cycles};
  Cycles hbm_latency_jitter{davinci_defaults::hbm_latency_jitter_cycles};
  Cycles handoff_latency{davinci_defaults::handoff_latency_cycles};

  // Vector core.
  int vector_fp32_lanes = davinci_defaults::vector_fp32_lanes;
  BytesPerCycle vector_gm{davinci_defaults::vector_gm_bytes_per_cycle};
  double amla_v1_ops_per_element = davinci_defaults::amla_v1_ops_per_element;
  double base_v1_ops_per_element = davinci_defaults::base_v1_ops_per_element;
  double base_v2_ops_per_element = davinci_defaults::base_v2_ops_per_element;
  double final_v_ops_per_element = davinci_defaults::final_v_ops_per_element;
  Bytes vector_chunk{davinci_defaults::vector_chunk_bytes};

  // Whole-kernel time outside the cycle model (launch, set-up, final synchronisation; see
  // calibrated:: above), and the start offset between consecutive Cube cores of a die (see
  // hbm_turn_stagger() below).
  Seconds fixed_overhead{0};
  Cycles core_start_stagger{0};

  int cube_cores() const { return dies * cube_cores_per_die; }
  int vector_cores() const { return cube_cores() * vector_per_cube; }
  /// MACs per Cube core per cycle.
  std::int64_t macs_per_cycle() const {
    return static_cast<std::int64_t>(cube_m) * cube_n * cube_k;
  }
  /// Peak dense BF16 FLOP/s of the whole chip (2 FLOPs per MAC).
  double peak_flops_per_s() const {
    return 2.0 * static_cast<double>(macs_per_cycle()) * cube_cores() * clock.count;
  }
  /// Achievable HBM bandwidth of one die in bytes per core cycle.
  BytesPerCycle hbm_per_die() const {
    return BytesPerCycle{hbm_bytes_per_s_per_die * hbm_efficiency / clock.count};
  }

  /// Throws amla::invalid_argument naming the first field that makes no sense and its value
  /// (e.g. "amla::sim::Chip::validate: argument 'chip.vector_gm' = nan violates: ..."): every
  /// number must be finite and inside the sane range chip_limits gives for its kind.
  void validate() const;
};

/// The ranges Chip::validate accepts: wide enough for any accelerator one might ask "what if"
/// about, narrow enough that no derived quantity (a buffer's tile count, a transfer's cycles, a
/// sum of latencies) can overflow or make a simulation run for ever.
namespace chip_limits {
inline constexpr double min_clock_hz = 1e6, max_clock_hz = 1e11;  // 1 MHz .. 100 GHz
inline constexpr int max_dies = 64;
inline constexpr int max_cube_cores_per_die = 4096;
inline constexpr int max_vector_per_cube = 64;
inline constexpr int max_mac_dim = 1024;                    // cube_m, cube_n, cube_k
inline constexpr double max_buffer_bytes = 0x1p32;          // L1, L0A/B/C, UB, vector_chunk: 4 GiB
inline constexpr double max_l2_bytes = 0x1p40;              // 1 TiB
inline constexpr double min_hbm_bytes_per_s = 1e6;          // 1 MB/s
inline constexpr double max_hbm_bytes_per_s = 1e16;         // 10 PB/s
inline constexpr double min_hbm_efficiency = 1e-3;          // in [0.001, 1]
inline constexpr double min_pipe_bytes_per_cycle = 1e-3;    // MTE2, MTE1, FixP, Vector GM
inline constexpr double max_pipe_bytes_per_cycle = 0x1p20;  // 1 MiB per cycle
inline constexpr std::int64_t max_latency_cycles = std::int64_t{1} << 32;  // every Cycles field
inline constexpr int max_vector_lanes = 65536;
inline constexpr double max_ops_per_element = 1e6;
inline constexpr double max_fixed_overhead_s = 1.0;
}  // namespace chip_limits

inline void Chip::validate() const {
  namespace L = chip_limits;
  auto fail = [](const char* field, const std::string& value, const std::string& rule) {
    amla::detail::throw_invalid("amla::sim::Chip::validate", field, value, rule);
  };
  auto real = [&](double v, const char* field, double lo, double hi, const char* what) {
    if (!(std::isfinite(v) && v >= lo && v <= hi))
      fail(field, amla::detail::to_text(v),
           std::string(what) + " in [" + amla::detail::to_text(lo) + ", " +
               amla::detail::to_text(hi) + "]");
  };
  auto positive = [&](double v, const char* field, double hi, const char* what) {
    if (!(std::isfinite(v) && v > 0 && v <= hi))
      fail(field, amla::detail::to_text(v),
           std::string(what) + ", positive and at most " + amla::detail::to_text(hi));
  };
  auto count = [&](int v, const char* field, int hi, const char* what) {
    if (v < 1 || v > hi)
      fail(field, std::to_string(v), std::string(what) + " in [1, " + std::to_string(hi) + "]");
  };
  auto cycles = [&](Cycles c, const char* field) {
    if (c.count < 0 || c.count > L::max_latency_cycles)
      fail(field, std::to_string(c.count), "cycles in [0, 2^32]");
  };
  real(clock.count, "chip.clock", L::min_clock_hz, L::max_clock_hz, "a clock (Hz)");
  count(dies, "chip.dies", L::max_dies, "dies");
  count(cube_cores_per_die, "chip.cube_cores_per_die", L::max_cube_cores_per_die, "Cube cores");
  count(vector_per_cube, "chip.vector_per_cube", L::max_vector_per_cube, "Vector cores");
  count(cube_m, "chip.cube_m", L::max_mac_dim, "a MAC array dimension");
  count(cube_n, "chip.cube_n", L::max_mac_dim, "a MAC array dimension");
  count(cube_k, "chip.cube_k", L::max_mac_dim, "a MAC array dimension");
  const char* buffer = "a buffer size (bytes)";
  positive(l1.count, "chip.l1", L::max_buffer_bytes, buffer);
  positive(l0a.count, "chip.l0a", L::max_buffer_bytes, buffer);
  positive(l0b.count, "chip.l0b", L::max_buffer_bytes, buffer);
  positive(l0c.count, "chip.l0c", L::max_buffer_bytes, buffer);
  positive(ub.count, "chip.ub", L::max_buffer_bytes, buffer);
  positive(l2_per_die.count, "chip.l2_per_die", L::max_l2_bytes, buffer);
  real(hbm_bytes_per_s_per_die, "chip.hbm_bytes_per_s_per_die", L::min_hbm_bytes_per_s,
       L::max_hbm_bytes_per_s, "a bandwidth (bytes/s)");
  real(hbm_efficiency, "chip.hbm_efficiency", L::min_hbm_efficiency, 1.0, "a fraction of the peak");
  const char* pipe = "a pipe's bytes per cycle";
  real(mte2.count, "chip.mte2", L::min_pipe_bytes_per_cycle, L::max_pipe_bytes_per_cycle, pipe);
  real(mte1.count, "chip.mte1", L::min_pipe_bytes_per_cycle, L::max_pipe_bytes_per_cycle, pipe);
  real(mte1_l0b.count, "chip.mte1_l0b", L::min_pipe_bytes_per_cycle, L::max_pipe_bytes_per_cycle,
       pipe);
  real(fixp.count, "chip.fixp", L::min_pipe_bytes_per_cycle, L::max_pipe_bytes_per_cycle, pipe);
  real(vector_gm.count, "chip.vector_gm", L::min_pipe_bytes_per_cycle, L::max_pipe_bytes_per_cycle,
       pipe);
  cycles(mmad_overhead, "chip.mmad_overhead");
  cycles(mte1_latency, "chip.mte1_latency");
  cycles(hbm_latency, "chip.hbm_latency");
  cycles(l2_latency, "chip.l2_latency");
  cycles(hbm_latency_jitter, "chip.hbm_latency_jitter");
  cycles(handoff_latency, "chip.handoff_latency");
  count(vector_fp32_lanes, "chip.vector_fp32_lanes", L::max_vector_lanes, "SIMD lanes");
  const char* ops = "Vector instructions per element";
  positive(amla_v1_ops_per_element, "chip.amla_v1_ops_per_element", L::max_ops_per_element, ops);
  positive(base_v1_ops_per_element, "chip.base_v1_ops_per_element", L::max_ops_per_element, ops);
  positive(base_v2_ops_per_element, "chip.base_v2_ops_per_element", L::max_ops_per_element, ops);
  positive(final_v_ops_per_element, "chip.final_v_ops_per_element", L::max_ops_per_element, ops);
  positive(vector_chunk.count, "chip.vector_chunk", L::max_buffer_bytes, buffer);
  real(fixed_overhead.count, "chip.fixed_overhead", 0.0, L::max_fixed_overhead_s,
       "a kernel overhead (seconds)");
  cycles(core_start_stagger, "chip.core_start_stagger");
}

/// Bytes of one KV block of the AMLA kernel, the unit in which its Cube cores stream the cache
/// (Section 4.2: 512 tokens x d_qk 576 x BF16 = 576 KB).
inline constexpr double amla_kv_block_bytes = 512.0 * 576 * 2;

/// The core start stagger the simulator uses, derived rather than fitted: the spacing of a die's
/// Cube cores in the steady state of an HBM-bound kernel. Lock-step cores are an unstable
/// equilibrium of a fairly shared HBM (a core that leads gets the HBM to itself while the others
/// compute, so its lead grows; see sim/decode.hpp); the state they drift into keeps the HBM busy
/// all the time, each core taking `block_bytes` of it per block, so one block period is
/// cores x block_bytes / bandwidth and the cores are spread evenly over it, one block's transfer
/// time at the die's achievable bandwidth apart. Starting them that way skips a transient that no
/// measurement constrains. For the AMLA kernel on the Ascend 910 (576 KB blocks, 1.6 TB/s x the
/// calibrated efficiency per die) this is about 870 cycles: the 24 cores of a die start over one
/// HBM-bound block period (~11 us).
inline Cycles hbm_turn_stagger(const Chip& chip, double block_bytes = amla_kv_block_bytes) {
  AMLA_REQUIRE(block_bytes > 0 && block_bytes <= chip_limits::max_buffer_bytes, "block_bytes",
               block_bytes, "positive and at most 2^32 bytes");
  chip.validate();
  const double cycles = block_bytes / chip.hbm_per_die().count;
  AMLA_REQUIRE(cycles <= static_cast<double>(chip_limits::max_latency_cycles), "block_bytes",
               block_bytes,
               "one block's transfer at the die's achievable HBM rate must take at most 2^32 "
               "cycles (it would take " +
                   amla::detail::to_text(cycles) + ")");
  return Cycles{std::llround(cycles)};
}

/// Ascend 910 (CloudMatrix384), as in the AMLA paper: two dies, 24 Cube + 48 Vector cores and
/// 1.6 TB/s HBM and 192 MB L2 each; BF16 peak 7.08e14 FLOP/s. Calibrated constants and the
/// derived core start stagger included.
inline Chip ascend910() {
  namespace a = arch::ascend910;
  Chip c;
  c.name = "Ascend 910";
  c.clock = Hertz{a::clock_hz};
  c.dies = a::dies;
  c.cube_cores_per_die = a::cube_cores_per_die;
  c.vector_per_cube = a::vector_cores_per_cube_core;
  c.cube_m = a::cube_m;
  c.cube_n = a::cube_n;
  c.cube_k = a::cube_k;
  c.l1 = Bytes{a::l1_bytes};
  c.l0a = Bytes{a::l0a_bytes};
  c.l0b = Bytes{a::l0b_bytes};
  c.l0c = Bytes{a::l0c_bytes};
  c.ub = Bytes{a::ub_bytes};
  c.hbm_bytes_per_s_per_die = a::hbm_bytes_per_s_per_die;
  c.l2_per_die = Bytes{a::l2_bytes_per_die};
  c.hbm_efficiency = calibrated::ascend910_hbm_efficiency;
  c.mmad_overhead = Cycles{calibrated::ascend910_mmad_overhead_cycles};
  c.fixed_overhead = Seconds{calibrated::ascend910_fixed_overhead_us * 1e-6};
  c.core_start_stagger = hbm_turn_stagger(c);
  return c;
}

/// The NPU of the TyphoonMLA paper: one die of 24 Da Vinci cores (48 Vector cores), 376 TFLOPS
/// FP16, 1.8 TB/s. The clock is implied by the peak with a 16x16x16 array (1.91 GHz); buffer
/// sizes and L2 are assumed equal to the Ascend 910's die (same core generation, not published).
/// The Ascend 910's calibrated HBM efficiency, MMAD instruction cost and fixed overhead are carried
/// over (same core, memory system and runtime; not fitted to this chip), and the core start
/// stagger is derived again from this chip's HBM.
inline Chip typhoon_npu() {
  namespace t = arch::typhoon_npu;
  Chip c = ascend910();
  c.name = "TyphoonMLA NPU";
  c.dies = 1;
  c.cube_cores_per_die = t::cube_cores;
  c.vector_per_cube = t::vector_cores / t::cube_cores;
  c.clock =
      Hertz{t::fp16_peak_flops_per_s / (2.0 * c.cube_m * c.cube_n * c.cube_k * t::cube_cores)};
  c.hbm_bytes_per_s_per_die = t::hbm_bytes_per_s;
  c.core_start_stagger = hbm_turn_stagger(c);
  return c;
}

}  // namespace amla::sim
