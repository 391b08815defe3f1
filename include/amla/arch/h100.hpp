// amla/arch/h100.hpp: NVIDIA Hopper GPUs (H100 SXM, H800 SXM, H20), numbers only, each with its
// source. Chips (sim/gpu_chip.hpp) and rooflines (mla/roofline.hpp) are built from these.
//
// Figures measured on an H100 by this project count as sources: the command that measures them
// is scripts/hopper-model.sh (bench/cuda/bm_hopper_model.cu), and examples/SIM_RESULTS.md keeps
// its output (block hopper-measured) with the date, the commit and the card.
#pragma once

namespace amla::arch {

namespace h100_sxm {
// NVIDIA H100 SXM5 80GB datasheet: 989 TFLOPS dense BF16 tensor, 3.35 TB/s HBM3, 132 SMs, 50 MB L2.
inline constexpr int sms = 132;
inline constexpr double bf16_peak_flops_per_s = 989e12;
inline constexpr double hbm_bytes_per_s = 3.35e12;
inline constexpr double l2_bytes = 50.0 * 1024 * 1024;
inline constexpr double smem_bytes_per_sm = 228.0 * 1024;
// NVIDIA Hopper whitepaper / CUDA C Programming Guide (compute capability 9.0): at most 227 KB of
// shared memory per block, 65,536 32-bit registers per SM, four tensor cores per SM; the
// datasheet's 989.4 TFLOPS is 132 SMs x 4096 dense BF16 FLOP per SM per cycle at the 1830 MHz
// boost clock, and 1980 MHz is the card's maximum SM clock (nvidia-smi clocks.max.sm).
inline constexpr double smem_bytes_per_block = 227.0 * 1024;
inline constexpr int registers_per_sm = 65536;
inline constexpr double bf16_flops_per_cycle_per_sm = 4096;
inline constexpr double boost_clock_hz = 1.83e9;
inline constexpr double max_clock_hz = 1.98e9;
}  // namespace h100_sxm

namespace h800_sxm {
// FlashMLA deep dive: 990 TFLOPS peak, 3.35 TB/s, but clocks throttle to ~1600 MHz under load, so
// the practical peak is about 865 TFLOPS.
inline constexpr int sms = 132;
inline constexpr double bf16_peak_flops_per_s = 990e12;
inline constexpr double bf16_practical_flops_per_s = 865e12;
inline constexpr double hbm_bytes_per_s = 3.35e12;
inline constexpr double throttled_clock_hz = 1.6e9;
}  // namespace h800_sxm

namespace h20 {
// FlashMLA-ETAP paper, Section 4.1: 96 GB HBM3 at 4.0 TB/s, 148 TFLOPS dense BF16/FP16. 78 SMs:
// the card's Geekbench 6 listing (reported by Wccftech, November 2023). Neither NVIDIA nor the
// paper gives its clock; the GH100's maximum SM clock stands in for it.
inline constexpr int sms = 78;
inline constexpr double bf16_peak_flops_per_s = 148e12;
inline constexpr double hbm_bytes_per_s = 4.0e12;
inline constexpr double assumed_clock_hz = 1.98e9;
// The full GH100 die's L2 (Chips and Cheese, "Nvidia's H100: Funny L2, and Tons of Bandwidth",
// 2023); the H20's own is not published.
inline constexpr double l2_bytes = 60.0 * 1024 * 1024;
}  // namespace h20

namespace h100_sxm_measured {
// scripts/hopper-model.sh on an H100 SXM5 80GB (driver 580.159.04, power limit 700 W), the block
// hopper-measured of examples/SIM_RESULTS.md. Cycles are SM cycles (clock64), one CTA per SM.

// A 4 GiB read stream: 3.036e12 B/s (91% of the datasheet's 3.35e12).
inline constexpr double hbm_read_bytes_per_s = 3.036e12;

// wgmma batches, each warpgroup issuing one batch and waiting for it: Q K^T of a 64-key block
// (36 x m64n64k16, B K-major) 1240.3 cycles for one warpgroup alone and 2304.6 each for two at
// once; one warpgroup's half of P V (4 x m64n256k16, B MN-major) 589.3 alone and 1024.4 each for
// two. Two at once run at 4095 and 4094 FLOP per cycle: the tensor cores' full 4096. One alone
// finishes a batch 88 (m64n64) or 77 (m64n256) cycles after its share of the tensor cores: the
// pipeline's drain.
inline constexpr double wgmma_qk_batch_one_wg_cycles = 1240.3;
inline constexpr double wgmma_qk_batch_two_wg_cycles = 2304.6;
inline constexpr double wgmma_pv_batch_one_wg_cycles = 589.3;
inline constexpr double wgmma_pv_batch_two_wg_cycles = 1024.4;

// The Hopper decode kernel's CUDA-core work per 64-key block, run through the kernel's own
// functions (bench/cuda/bm_hopper_model.cu, section vector), one warpgroup alone and each of two
// at once: the softmax stage of one warpgroup (scale, row max, frame step, exp2, P to BF16 in
// shared memory, its barrier) and the rescale of its 64 x 256 half of O.
inline constexpr double softmax_standard_one_wg_cycles = 789.1;
inline constexpr double softmax_standard_two_wg_cycles = 1133.6;
inline constexpr double softmax_amla_one_wg_cycles = 1334.2;
inline constexpr double softmax_amla_two_wg_cycles = 1759.9;
inline constexpr double rescale_standard_one_wg_cycles = 199.0;
inline constexpr double rescale_standard_two_wg_cycles = 328.2;
inline constexpr double rescale_amla_one_wg_cycles = 233.0;
inline constexpr double rescale_amla_two_wg_cycles = 342.0;

// Side by side (section overlap): warpgroup 0 ran 2000 Q K^T batches at 1740.8 cycles each while
// warpgroup 1 ran 3179 standard softmax stages at 1397.3 cycles each on average; the stages after
// warpgroup 0 had finished ran alone (789.1 each), so those that overlapped it took 1774.5 cycles
// each. The tensor cores and the CUDA cores of an SM do not work independently: side by side, a
// Q K^T batch ran at 0.66 and a softmax stage at 0.44 of its speed alone.
inline constexpr int overlap_qk_batches = 2000;
inline constexpr double overlap_qk_batch_cycles = 1740.8;
inline constexpr int overlap_softmax_stages = 3179;
inline constexpr double overlap_softmax_stage_cycles = 1397.3;

// TMA loads with the kernel's tensor map (64 x 64 BF16 boxes, 128-byte swizzle), one thread
// issuing (section tma): one 64-key block (9 boxes, 72 KB) alone from HBM 2008.7 cycles from issue
// to completion; one SM streaming blocks two in flight, from HBM or L2, 1160.5 cycles a block
// (63.5 bytes per cycle: the SM's TMA port); all 132 SMs from L2 63.0 bytes per cycle each (no
// chip-wide L2 limit below that), from HBM 11.93 (3.142e12 B/s in all), and with 2 or 4 SMs
// reading each block at once 22.64 and 40.79 bytes per cycle each (5.96e12 and 10.74e12 B/s: the
// L2 serves the other readers, not quite all of them).
inline constexpr double tma_block_alone_cycles = 2008.7;
inline constexpr double tma_block_stream_cycles = 1160.5;
inline constexpr double tma_hbm_all_sms_bytes_per_s = 3.142e12;
inline constexpr double tma_shared2_all_sms_bytes_per_s = 5.9616e12;
inline constexpr double tma_shared4_all_sms_bytes_per_s = 10.7382e12;
inline constexpr double tma_probe_clock_hz = 1.994e9;

// An SM takes its next CTA (each holding the decode kernel's shared memory) 0.148 us after the
// previous one retires: 50 waves of empty CTAs in 14.43 us, one wave in 7.20 us.
inline constexpr double cta_turnaround_s = 0.148e-6;
}  // namespace h100_sxm_measured

}  // namespace amla::arch
