// amla/sim/gpu_chip.hpp: a Hopper GPU as the simulator sees it, for warp-specialised kernels
// (sim/hopper_decode.hpp). Public figures come from arch/h100.hpp; figures measured on an H100 by
// scripts/hopper-model.sh come from there too (namespace h100_sxm_measured), each named as such.
//
// The vocabulary is the engine's (sim/engine.hpp): per SM, one shared link carries the work of
// its tensor cores and of its CUDA cores, in cycles: a wgmma batch is its FLOPs over the tensor
// rate, at most the whole link; a CUDA-core stage its cycles of issue, at most the share one
// warpgroup can use; side by side they split the link by `tensor_priority` to 1 (measured: the
// two do not work independently). The TMA is a load engine whose transfers cross the chip's HBM
// link at the SM's port rate at most. Everything is in SM cycles at `clock`, the clock of the run
// being modelled (a power-capped H100 runs between about 1.7 and 1.98 GHz; pass the one
// measured, or the preset's).
//
// A GpuChip is plain data: change any field to ask "what if".
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "amla/arch/h100.hpp"
#include "amla/config.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// The Hopper model's calibrated constants, fitted by fit_hopper_constants
/// (sim/hopper_calibration.hpp; `example_06_hopper_decode_model --calibrate`; the kernel model
/// is sim/hopper_decode.hpp) to amla's standard
/// kernel run as one CTA alone on the H100 (s_k = 16384 and 1024): the SM's own pipeline, with
/// nothing to share. Every other measurement is a prediction.
namespace calibrated_hopper {
/// amla's kernel spends this many times the CUDA-core cycles its stages take in isolation (the
/// probe runs the kernel's own functions, but not the named barriers, frame messages, proxy
/// fences and wgmma waits between them). Fitted to the one-CTA run at s_k = 16384.
inline constexpr double amla_kernel_cuda_factor = 1.863;
/// Kernel time outside the SMs' work in a stream of launches on the H100 (launch, first CTA's
/// start, the last one's retirement). Fitted to the one-CTA run at s_k = 1024.
inline constexpr double h100_kernel_overhead_us = 5.62;
}  // namespace calibrated_hopper

/// A Hopper-class GPU: SMs with tensor cores, CUDA cores, shared memory and a TMA, over one HBM.
struct GpuChip {
  std::string name;
  Hertz clock{arch::h100_sxm::boost_clock_hz};  ///< SM clock of the modelled run
  int sms = arch::h100_sxm::sms;

  /// Dense BF16 FLOP per SM per cycle that two warpgroups issuing wgmma at once reach.
  double tensor_flops_per_cycle = arch::h100_sxm::bf16_flops_per_cycle_per_sm;
  /// Cycles from a warpgroup's last wgmma of a batch getting its share of the tensor cores to
  /// the batch's results being in registers (the pipeline's drain, seen when one warpgroup
  /// issues a batch and waits for it), per instruction width: N = 64 (Q K^T) and N = 256 (P V).
  Cycles wgmma_n64_latency{88};
  Cycles wgmma_n256_latency{77};

  double smem_bytes_per_sm = arch::h100_sxm::smem_bytes_per_sm;
  double smem_bytes_per_block = arch::h100_sxm::smem_bytes_per_block;
  int registers_per_sm = arch::h100_sxm::registers_per_sm;
  Bytes l2{arch::h100_sxm::l2_bytes};

  /// HBM peak and the fraction the SMs' TMA loads reach together.
  double hbm_bytes_per_s = arch::h100_sxm::hbm_bytes_per_s;
  double hbm_efficiency =
      arch::h100_sxm_measured::tma_hbm_all_sms_bytes_per_s / arch::h100_sxm::hbm_bytes_per_s;
  /// A block read by R SMs at once is fetched from HBM 1 + l2_refetch (R - 1) times: the L2
  /// serves the other readers, not quite all of them.
  double l2_refetch = measured_l2_refetch();
  /// From a TMA load's issue to its data in shared memory, beyond its transfer time.
  Seconds memory_latency{(arch::h100_sxm_measured::tma_block_alone_cycles -
                          arch::h100_sxm_measured::tma_block_stream_cycles) /
                         arch::h100_sxm_measured::tma_probe_clock_hz};
  /// Bytes per cycle one SM's TMA moves into its shared memory at most.
  double tma_bytes_per_cycle = 9.0 * 64 * 128 / arch::h100_sxm_measured::tma_block_stream_cycles;
  /// A wgmma batch's claim on the SM's shared tensor/CUDA-core link against a CUDA-core stage's.
  double tensor_priority = measured_tensor_priority();
  /// Kernel time outside the SMs' work: the launch and the wait for the last CTA to retire (the
  /// H100's is calibrated: calibrated_hopper above).
  Seconds kernel_overhead{0};
  /// The time an SM takes to start its next CTA after one retires.
  Seconds cta_launch{arch::h100_sxm_measured::cta_turnaround_s};

  /// The share of the SM a Q K^T batch and a softmax stage took side by side on the H100
  /// (arch::h100_sxm_measured, section overlap), as a ratio: the batch's 1152 cycles of tensor work
  /// over its 1740.8 cycles, against the stage's work (half the 1133.6 cycles each of two took at
  /// once) over the 1774.5 cycles it took while the batches ran (the stages after them ran alone,
  /// 789.1 each). About 2.07.
  static double measured_tensor_priority() {
    namespace m = arch::h100_sxm_measured;
    const double qk_total = m::overlap_qk_batches * m::overlap_qk_batch_cycles;
    const double sm_total = m::overlap_softmax_stages * m::overlap_softmax_stage_cycles;
    const double alone = (sm_total - qk_total) / m::softmax_standard_one_wg_cycles;
    const double side_by_side = qk_total / (m::overlap_softmax_stages - alone);
    const double qk_work = 36 * 2.0 * 64 * 64 * 16 / arch::h100_sxm::bf16_flops_per_cycle_per_sm;
    const double qk_share = qk_work / m::overlap_qk_batch_cycles;
    const double sm_share = m::softmax_standard_two_wg_cycles / 2 / side_by_side;
    return qk_share / sm_share;
  }
  /// l2_refetch from the H100's blocks read by 2 and 4 SMs at once: each reader beyond the first
  /// costs 0.054 (R = 2) and 0.057 (R = 4) of a fetch; the least-squares line through both, 0.056.
  static double measured_l2_refetch() {
    namespace m = arch::h100_sxm_measured;
    const double extra2 =
        2 * m::tma_hbm_all_sms_bytes_per_s / m::tma_shared2_all_sms_bytes_per_s - 1;
    const double extra4 =
        4 * m::tma_hbm_all_sms_bytes_per_s / m::tma_shared4_all_sms_bytes_per_s - 1;
    return (extra2 * 1 + extra4 * 3) / (1 + 9);
  }
  /// Of a block's bytes, the share one of `sharing` SMs reading it at once draws from HBM.
  double hbm_fraction(int sharing) const { return (1 + l2_refetch * (sharing - 1)) / sharing; }

  /// Dense BF16 peak of the whole chip at `clock`.
  double peak_flops_per_s() const { return tensor_flops_per_cycle * sms * clock.count; }
  /// Achievable HBM bandwidth in bytes per SM cycle (the whole chip's).
  double hbm_bytes_per_cycle() const { return hbm_bytes_per_s * hbm_efficiency / clock.count; }
  /// A duration in SM cycles at `clock` (rounded to the nearest cycle).
  Cycles cycles_of(Seconds s) const { return Cycles{std::llround(s.count * clock.count)}; }

  /// Throws amla::invalid_argument naming the first field that makes no sense, with its value.
  void validate() const {
    const char* fn = "amla::sim::GpuChip::validate";
    auto real = [&](double v, const char* field, double lo, double hi, const char* what) {
      if (!(std::isfinite(v) && v >= lo && v <= hi))
        amla::detail::throw_invalid(fn, field, amla::detail::to_text(v),
                                    std::string(what) + " in [" + amla::detail::to_text(lo) + ", " +
                                        amla::detail::to_text(hi) + "]");
    };
    auto cycles = [&](Cycles c, const char* field) {
      if (c.count < 0 || c.count > (std::int64_t{1} << 32))
        amla::detail::throw_invalid(fn, field, std::to_string(c.count), "cycles in [0, 2^32]");
    };
    real(clock.count, "chip.clock", 1e6, 1e11, "a clock (Hz)");
    if (sms < 1 || sms > 4096)
      amla::detail::throw_invalid(fn, "chip.sms", std::to_string(sms), "SMs in [1, 4096]");
    real(tensor_flops_per_cycle, "chip.tensor_flops_per_cycle", 1, 1e6, "FLOP per SM per cycle");
    cycles(wgmma_n64_latency, "chip.wgmma_n64_latency");
    cycles(wgmma_n256_latency, "chip.wgmma_n256_latency");
    real(smem_bytes_per_sm, "chip.smem_bytes_per_sm", 1024, 0x1p32, "bytes");
    real(smem_bytes_per_block, "chip.smem_bytes_per_block", 1024, smem_bytes_per_sm,
         "bytes, at most the SM's");
    if (registers_per_sm < 1 || registers_per_sm > (1 << 24))
      amla::detail::throw_invalid(fn, "chip.registers_per_sm", std::to_string(registers_per_sm),
                                  "registers in [1, 2^24]");
    real(l2.count, "chip.l2", 0, 0x1p40, "bytes");
    real(hbm_bytes_per_s, "chip.hbm_bytes_per_s", 1e6, 1e16, "a bandwidth (bytes/s)");
    real(hbm_efficiency, "chip.hbm_efficiency", 1e-3, 1, "a fraction of the peak");
    real(memory_latency.count, "chip.memory_latency", 0, 1e-3, "seconds");
    real(tma_bytes_per_cycle, "chip.tma_bytes_per_cycle", 1e-3, 0x1p20, "bytes per cycle");
    real(l2_refetch, "chip.l2_refetch", 0, 1, "a fraction of a fetch");
    real(tensor_priority, "chip.tensor_priority", 1e-3, 1e3, "a share weight");
    real(kernel_overhead.count, "chip.kernel_overhead", 0, 1, "seconds");
    real(cta_launch.count, "chip.cta_launch", 0, 1e-3, "seconds");
  }
};

/// H100 SXM5 80GB at its 1830 MHz boost clock: the datasheet's figures, and what
/// scripts/hopper-model.sh measured on one: the wgmma rate and latencies, the tensor/CUDA-core
/// split, the TMA's port, latency and HBM rate, L2 sharing, the CTA turnaround; and the calibrated
/// kernel overhead.
inline GpuChip h100_sxm() {
  GpuChip c;
  c.name = "H100 SXM";
  c.kernel_overhead = Seconds{calibrated_hopper::h100_kernel_overhead_us * 1e-6};
  return c;
}

/// H800 SXM5: an H100 SXM5 with the FlashMLA deep dive's figures (990 TFLOPS, 3.35 TB/s) at the
/// 1600 MHz it says the card throttles to under load.
inline GpuChip h800_sxm() {
  GpuChip c = h100_sxm();
  c.name = "H800 SXM";
  c.clock = Hertz{arch::h800_sxm::throttled_clock_hz};
  c.hbm_bytes_per_s = arch::h800_sxm::hbm_bytes_per_s;
  return c;
}

/// H20: 78 SMs, 148 TFLOPS dense BF16 and 4.0 TB/s (FlashMLA-ETAP Section 4.1), 60 MB L2; the
/// clock is not published (the GH100's maximum stands in), so the tensor rate per SM and cycle is
/// the published peak over 78 SMs at that clock: about 958 FLOP, a quarter of an H100 SM's.
/// Everything else is an H100 SM's (the same GH100 die): CUDA cores, TMA, latencies, L2 sharing,
/// and the HBM efficiency measured on the H100.
inline GpuChip h20() {
  namespace a = arch::h20;
  GpuChip c = h100_sxm();
  c.name = "H20";
  c.sms = a::sms;
  c.clock = Hertz{a::assumed_clock_hz};
  c.tensor_flops_per_cycle = a::bf16_peak_flops_per_s / (a::sms * a::assumed_clock_hz);
  c.hbm_bytes_per_s = a::hbm_bytes_per_s;
  c.l2 = Bytes{a::l2_bytes};
  return c;
}

}  // namespace amla::sim
