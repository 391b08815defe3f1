// amla/sim/hopper_decode.hpp: a warp-specialised MLA decode kernel on a Hopper GPU, mapped onto
// the discrete-event engine (sim/engine.hpp) one SM at a time.
//
// ---- The mapping ---------------------------------------------------------------------------
// The engine's vocabulary is units running programs in order, dependencies, buffer pools and
// shared links. One SM of a warp-specialised kernel becomes:
//   * Cube pipe: each warpgroup's stream of wgmma batches is a unit ("wg0 wgmma", "wg1 wgmma").
//     A batch is a transfer over the SM's link ("SM issue"), its amount the batch's FLOPs over the
//     SM's dense rate (GpuChip::tensor_flops_per_cycle): cycles of the tensor cores, at most the
//     whole link, so that two warpgroups issuing at once share the tensor cores fairly and one
//     alone has them all. An SS wgmma also reads its A and B tiles from shared memory at 128 bytes
//     per cycle (32 banks of 4 bytes), which bounds narrow instructions (m64n16k16 moves 2.5 KB for
//     8 cycles of tensor work): a batch costs the larger of the two. The batch's result is visible
//     the chip's wgmma latency after its work.
//   * Vector pipe: each warpgroup's CUDA-core work (softmax, the rescale of its half of O, the
//     epilogue) is a unit ("wg0 CUDA", "wg1 CUDA") whose stages cross the same link: a stage
//     measured at t1 cycles for one warpgroup alone and t2 for each of two at once is t2 / 2
//     cycles of the link, of which one warpgroup alone uses the share (t2 / 2) / t1
//     (VectorStage::measured). One link for both because on the H100 they do not work
//     independently: side by side a Q K^T batch and a softmax stage slowed to 0.82 and 0.40 of
//     their speed alone; the link splits between them by GpuChip::tensor_priority (2.91) to 1.
//   * Load engine: the TMA is one unit ("TMA") whose loads cross the chip's HBM link at the SM's
//     TMA rate at most; a KV block read by R CTAs at once (the row blocks of one request) is
//     fetched from HBM about once (GpuChip::hbm_fraction: 1 + l2_refetch (R - 1) fetches in all),
//     so each CTA's load moves that fraction of its bytes over the HBM link at that fraction of the
//     port rate (its own time uncontended is bytes / rate, its HBM traffic its share). The data is
//     visible GpuChip::memory_latency after the transfer.
//   * Buffer pools: the two KV buffers of 64 x 576 BF16 in shared memory, each in three chunk
//     groups (chunks 0-3: V's left half and K, 4-7: V's right half and K, 8: K's RoPE part) with
//     one slot each: a load takes its group's slot, the operation after which the kernel refills
//     that group gives it back.
//   * O lives in registers (128 per thread): it costs no traffic; its rescales are CUDA-core work.
// A CTA runs on one SM from its Q load to its epilogue; CTAs follow each other on an SM as the
// tile scheduler assigns them (below). A launch whose Q and KV exceed the L2 finds none of them
// there when it starts (back to back, each launch evicts them before the next reads them): each
// of its CTAs first spends GpuChip::cta_cold_start, measured as what a one-CTA launch after an L2
// flush takes beyond the same launch back to back. A smaller launch starts warm. SMs with the same
// CTA list are one unit set standing for all of them (the engine's multiplicity): exact for
// identical SMs.
//
// ---- The schedules -------------------------------------------------------------------------
// HopperSchedule::amla_pairs, amla's Hopper kernel (backend/cuda/detail/hopper_kernel.cuh), per
// pair of blocks A (buffer 0) and B (buffer 1): WG0 S_A = Q K_A^T; WG1 S_B once WG0 has issued S_A;
// WG0 softmax A; WG1 softmax B once S_B and frame A (published at the start of WG0's softmax) are
// there, beside WG0's; both rescale their O half for A and run P_A V_A (WG1 after its softmax B),
// WG1 publishing P_B after issuing its half; both rescale for B and run P_B V_B. WG0 refills
// buffer 0's chunks 0-3 after its P_A V_A; WG1 chunks 4-8 after both halves of P_A V_A (chunk 8
// holds P_A); the same for B.
//
// HopperSchedule::seesaw, FlashMLA's kernel as its deep dive describes it: WG0 S_0, WG1 S_1; WG0
// softmax 0, rescale O_L, P_0 V_0L; WG1 softmax 1 (with WG0's max), rescale O_R, P_1 V_1R; WG0
// P_0 *= scale_1; WG1 P_0 V_0R; WG0 rescale O_L, P_1 V_1L. A chunk group is refilled as soon as
// its last reader is done (P lives outside the KV buffers), so buffer 0's left half and RoPE chunk
// come back right after WG0's work on block 0.
//
// HopperSchedule::transposed, FlashMLA-ETAP (Algorithm 1 of its paper): per block, WG0 computes
// S^T = K Q^T (M = 64 keys, N = the CTA's query rows), the softmax along keys and its half of O^T;
// WG1 its half once WG0 has stored the rescale factors. Narrow N: no padding to 64 rows.
//
// ---- Tile schedulers -----------------------------------------------------------------------
// TileScheduler::grid, amla's kernel: one CTA per (row block of 64 rows, sequence, KV split), in
// launch order row block fastest; an SM takes the next CTA when its current one ends (list
// scheduling over estimated CTA times, the estimates from a one-CTA simulation of the same
// kernel), so a varlen batch's long sequences can leave a tail. TileScheduler::balanced,
// FlashMLA's: one persistent CTA per SM; the SMs are split into parts of `row blocks` SMs, each
// part walks the batch's (sequence, block) list with an equal payload (a sequence costs its
// blocks plus kernel.sequence_overhead_blocks), splitting sequences at part boundaries; split
// sequences are merged by a combine kernel.
//
// ---- Kernels around the decode kernel ----
// amla's kernel with the schedule sized on the GPU (splits 0) is preceded in the stream by its
// plan kernel (one CTA), which the decode kernel waits for: one more kernel overhead. Split
// sequences are merged by a combine kernel: its bytes at the HBM's achievable rate, plus (amla's
// kernel) one kernel overhead.
//
// ---- Data-dependent work -------------------------------------------------------------------
// The standard kernel skips a warp's O rescale when none of its 16 rows' running max moved
// (HopperKernel::skip_unit_rescale). With scores drawn i.i.d. (the benchmarks' random inputs),
// block k of a CTA (k = 0 first) holds a new maximum of a given row with probability 1 / (k + 1),
// so a warpgroup (64 rows) pays the rescale with probability 1 - (k / (k + 1))^64; the model
// charges that expected cost.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/enum_name.hpp"
#include "amla/problem/shape.hpp"
#include "amla/problem/workload.hpp"
#include "amla/sim/engine.hpp"
#include "amla/sim/gpu_chip.hpp"
#include "amla/sim/status.hpp"
#include "amla/sim/timeline.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// CUDA-core work of one stage on one SM.
struct VectorStage {
  double work_cycles = 0;  ///< cycles of the whole SM's CUDA cores
  double share = 1;        ///< the fraction of them one warpgroup alone can use, in (0, 1]

  /// From a measurement: one warpgroup alone takes `one_wg` cycles, each of two at once `two_wg`.
  static VectorStage measured(double one_wg, double two_wg) {
    AMLA_REQUIRE(one_wg > 0 && two_wg >= one_wg && two_wg <= 2 * one_wg, "two_wg", two_wg,
                 "between one_wg and 2 x one_wg (one_wg = " + amla::detail::to_text(one_wg) + ")");
    return {two_wg / 2, two_wg / 2 / one_wg};
  }
  /// The same work on a fraction `f` of the elements.
  VectorStage scaled(double f) const { return {work_cycles * f, share}; }
  /// Cycles one warpgroup alone takes.
  double alone_cycles() const { return work_cycles / share; }
};

/// Which per-SM schedule the kernel runs (see the file comment).
enum class HopperSchedule { amla_pairs, seesaw, transposed };
inline const char* to_string(HopperSchedule s) {
  return amla::detail::enum_name(s, {"amla pairs", "seesaw", "transposed"});
}

/// How CTAs and their work are laid out over the SMs (see the file comment).
enum class TileScheduler { grid, balanced };
inline const char* to_string(TileScheduler t) {
  return amla::detail::enum_name(t, {"grid", "balanced"});
}

/// A warp-specialised MLA decode kernel: its schedule, tiles and per-block CUDA-core costs.
struct HopperKernel {
  std::string name;
  HopperSchedule schedule = HopperSchedule::amla_pairs;
  TileScheduler tiles = TileScheduler::grid;
  int rows_per_cta =
      64;               ///< query rows of a CTA; a row block with fewer is padded (not transposed)
  int block_keys = 64;  ///< keys per KV block
  int splits = 0;       ///< grid: KV splits per sequence (0: the amla kernel's own choice)
  VectorStage softmax;  ///< one block's softmax by one warpgroup (64 rows x 64 keys)
  VectorStage rescale;  ///< one warpgroup's 64 x 256 FP32 half of O
  VectorStage p_rescale;           ///< seesaw: P *= scale over one 64 x 64 tile
  VectorStage epilogue;            ///< O / l and the store of one warpgroup's half of the output
  bool skip_unit_rescale = false;  ///< a warp skips its rescale when no row's max moved
  /// balanced: what a sequence costs the tile scheduler beyond its blocks (its Q load, epilogue
  /// and combine), in blocks.
  int sequence_overhead_blocks = 5;

  void validate() const {
    const char* fn = "amla::sim::HopperKernel::validate";
    if (static_cast<int>(schedule) < 0 || static_cast<int>(schedule) > 2)
      amla::detail::throw_invalid(fn, "kernel.schedule", std::to_string(static_cast<int>(schedule)),
                                  "a HopperSchedule");
    if (static_cast<int>(tiles) < 0 || static_cast<int>(tiles) > 1)
      amla::detail::throw_invalid(fn, "kernel.tiles", std::to_string(static_cast<int>(tiles)),
                                  "a TileScheduler");
    if (rows_per_cta < 1 || rows_per_cta > 256)
      amla::detail::throw_invalid(fn, "kernel.rows_per_cta", std::to_string(rows_per_cta),
                                  "in [1, 256]");
    if (block_keys != 64)
      amla::detail::throw_invalid(fn, "kernel.block_keys", std::to_string(block_keys),
                                  "64 (the KV buffers' chunk layout)");
    if (splits < 0 || splits > 64)
      amla::detail::throw_invalid(fn, "kernel.splits", std::to_string(splits), "in [0, 64]");
    if (sequence_overhead_blocks < 0 || sequence_overhead_blocks > 1024)
      amla::detail::throw_invalid(fn, "kernel.sequence_overhead_blocks",
                                  std::to_string(sequence_overhead_blocks), "in [0, 1024]");
    const std::pair<const VectorStage*, const char*> stages[] = {{&softmax, "kernel.softmax"},
                                                                 {&rescale, "kernel.rescale"},
                                                                 {&p_rescale, "kernel.p_rescale"},
                                                                 {&epilogue, "kernel.epilogue"}};
    for (const auto& [st, field] : stages) {
      if (!(std::isfinite(st->work_cycles) && st->work_cycles >= 0 && st->work_cycles <= 1e9))
        amla::detail::throw_invalid(fn, field, amla::detail::to_text(st->work_cycles),
                                    "work in [0, 1e9] cycles");
      if (!(st->share > 0 && st->share <= 1))
        amla::detail::throw_invalid(fn, field, "share " + amla::detail::to_text(st->share),
                                    "a share in (0, 1]");
    }
  }
};

namespace detail {
/// The measured stage costs of amla's Hopper kernel (arch/h100.hpp, h100_sxm_measured) with the
/// kernel's own cycles around each stage: the standard kernel's stages take `factor` times their
/// probe cycles; the AMLA kernel's take the same extra cycles as the standard ones (the barriers,
/// frame messages, fences and waits around a stage are the same code in both modes).
inline void amla_kernel_costs(HopperKernel& k, bool amla_mode, double factor) {
  namespace m = arch::h100_sxm_measured;
  AMLA_REQUIRE(factor > 0 && factor <= 100, "cuda_factor", factor, "in (0, 100]");
  const VectorStage std_softmax =
      VectorStage::measured(m::softmax_standard_one_wg_cycles, m::softmax_standard_two_wg_cycles);
  // The standard rescale; the epilogue multiplies O by 1 / l (the same work) before its stores,
  // and P *= s is a multiply over a quarter of the elements of an O half.
  const VectorStage multiply =
      VectorStage::measured(m::rescale_standard_one_wg_cycles, m::rescale_standard_two_wg_cycles);
  k.softmax = amla_mode ? VectorStage::measured(m::softmax_amla_one_wg_cycles,
                                                m::softmax_amla_two_wg_cycles)
                        : std_softmax;
  k.rescale = amla_mode ? VectorStage::measured(m::rescale_amla_one_wg_cycles,
                                                m::rescale_amla_two_wg_cycles)
                        : multiply;
  k.softmax.work_cycles += (factor - 1) * std_softmax.work_cycles;
  k.rescale.work_cycles += (factor - 1) * multiply.work_cycles;
  k.epilogue = multiply.scaled(factor);
  k.p_rescale = multiply.scaled(0.25 * factor);
}
}  // namespace detail

/// amla's Hopper kernel (backend/cuda/detail/hopper_kernel.cuh) in its standard (FP32 rescale,
/// skipped when no row's max moved) or AMLA (integer add on O's bits, always) form: the CUDA-core
/// stage costs measured on an H100 with the kernel's own cycles around them, `cuda_factor` times
/// the standard stages' (the calibrated factor by default; detail::amla_kernel_costs).
inline HopperKernel amla_hopper_kernel(
    bool amla_mode, double cuda_factor = calibrated_hopper::amla_kernel_cuda_factor) {
  HopperKernel k;
  k.name = amla_mode ? "hopper/amla" : "hopper/standard";
  k.schedule = HopperSchedule::amla_pairs;
  k.tiles = TileScheduler::grid;
  detail::amla_kernel_costs(k, amla_mode, cuda_factor);
  k.skip_unit_rescale = !amla_mode;
  return k;
}

/// FlashMLA's kernel as its deep dive describes it: the seesaw schedule over a balanced tile
/// scheduler. Its CUDA-core stages are taken to cost what the same operations (the softmax of a
/// 64 x 64 block, the FP32 rescale of a 64 x 256 half of O) cost in the H100 probe, without amla's
/// kernel's calibrated factor (FlashMLA's synchronisation is its own, and cannot be measured here)
/// and without the skip of unit rescales, which the deep dive does not mention.
inline HopperKernel flashmla_kernel() {
  HopperKernel k;
  k.name = "FlashMLA";
  k.schedule = HopperSchedule::seesaw;
  k.tiles = TileScheduler::balanced;
  detail::amla_kernel_costs(k, false, 1.0);
  return k;
}

/// FlashMLA-ETAP: the transposed schedule over FlashMLA's tile scheduler, its CTA holding all the
/// query rows of a sequence (N of the transposed products). Its softmax and rescale run over the
/// transposed tiles, of N x 64 and N x 256 elements: taken as the standard kernel's costs scaled
/// by N / 64 (set per workload by simulate_hopper_decode).
inline HopperKernel flashmla_etap_kernel() {
  HopperKernel k = flashmla_kernel();
  k.name = "FlashMLA-ETAP";
  k.schedule = HopperSchedule::transposed;
  return k;
}

/// Options of simulate_hopper_decode.
struct HopperDecodeOptions {
  bool symmetry = true;  ///< one unit set per class of identical SMs
  bool record_timeline = false;
  int timeline_sm = 0;  ///< which SM the timeline draws (an SM index, 0-based)
};

/// One CTA's work: a run of KV blocks of one (sequence, row block), or for a balanced tile
/// scheduler several such segments in turn.
struct CtaSegment {
  int sequence = 0;
  int row_block = 0;
  int rows = 0;         ///< query rows computed (rows_per_cta unless transposed)
  int first_block = 0;  ///< of the sequence's KV blocks
  int blocks = 0;
  int sharing = 1;       ///< CTAs that read these blocks at the same time (one HBM fetch)
  bool partial = false;  ///< writes a partial result for a combine kernel
};
struct CtaWork {
  std::vector<CtaSegment> segments;
  int blocks() const {
    int n = 0;
    for (const auto& s : segments) n += s.blocks;
    return n;
  }
};

/// The outcome of simulate_hopper_decode: ok, or why the kernel cannot run the workload.
struct HopperDecodeResult : Status {
  Cycles cycles{0};         ///< the SMs' makespan
  Seconds time{0};          ///< plan kernel + cycles / clock + the kernel overhead + combine kernel
  Seconds plan_time{0};     ///< the plan kernel of a schedule sized on the GPU, if any
  Seconds combine_time{0};  ///< the combine kernel of split sequences, if any
  bool cold = false;        ///< the CTAs start cold (the launch's inputs exceed the L2)
  double flops = 0;         ///< the workload's (Workload::flops)
  double tflops() const { return time.count > 0 ? flops / time.count / 1e12 : 0; }
  int ctas = 0, splits = 1, row_blocks = 0, sm_classes = 0;
  std::vector<int> cta_sm;        ///< the SM each CTA ran on (launch order)
  std::vector<Cycles> sm_finish;  ///< when each SM's last CTA ended
  double tensor_busy = 0;         ///< tensor work over SMs x makespan (cycles at full rate)
  double cuda_busy = 0;           ///< CUDA-core work over SMs x makespan
  double hbm_utilization = 0;     ///< HBM bytes / (achievable bandwidth x makespan)
  Bytes hbm_bytes{0};
  std::vector<UnitStats> sm_units;  ///< the drawn SM's units (wgmma, CUDA, TMA)
  Timeline timeline;                ///< the drawn SM (record_timeline)
  std::int64_t events = 0;
  std::size_t operations = 0;
};

/// The most engine operations simulate_hopper_decode builds; a larger simulation is refused with
/// the count in the reason.
inline constexpr double max_hopper_operations = 0x1p22;

namespace detail {

inline constexpr int kv_chunk_bytes = 64 * 128;  // 64 keys x 64 columns of BF16
inline constexpr int d_qk = 576, d_v = 512;

/// Splits amla's kernel chooses: enough CTAs for about one wave, at least two blocks a split.
inline int amla_kernel_splits(int ctas, int sms, int max_blocks) {
  const int cap = std::max(1, std::min(64, max_blocks / 2));
  if (ctas >= sms) return 1;
  return std::max(1, std::min(cap, sms / ctas));
}

/// A wgmma batch's cost on the tensor-core link: its FLOPs, or the FLOPs the tensor cores could
/// have done while shared memory delivered its A and B tiles, whichever is larger.
inline double wgmma_work(const GpuChip& chip, int m, int n, int k, int count) {
  const double flops = 2.0 * m * n * k;
  const double smem_bytes = 2.0 * (m * k + n * k);  // A and B tiles, BF16
  const double smem_cycles = smem_bytes / 128.0;
  return count * std::max(flops, smem_cycles * chip.tensor_flops_per_cycle);
}

/// The engine objects of one SM (or of one class of identical SMs).
struct SmUnits {
  UnitId wgmma[2], cuda[2], tma;
  LinkId issue;  // the SM's tensor and CUDA cores
  double mult = 1;
  double tensor_cycles = 0, cuda_cycles = 0;  // work emitted, per SM
  PoolId buffer[2][3];                        // [buffer][chunk group: 0-3, 4-7, 8]
  std::vector<OpId> last;                     // the previous CTA's final operations
  std::string name;
};

/// The chance that a warpgroup of 64 rows must rescale its O at block k (0 first) of its CTA when
/// the kernel skips rescales whose factor is 1 for all its rows, with i.i.d. scores: each row's
/// running max moves at block k with probability 1 / (k + 1).
inline double unit_rescale_probability(int k) {
  AMLA_REQUIRE(k >= 0, "k", k, ">= 0");
  return k == 0 ? 1.0 : 1 - std::pow(static_cast<double>(k) / (k + 1), 64);
}

/// Whether a launch's CTAs start cold: its Q and KV (BF16) exceed the chip's L2, so that back to
/// back launches do not find them there (a smaller launch's inputs stay in the L2 between
/// launches, and its CTAs start warm).
inline bool starts_cold(const GpuChip& chip, const Workload& w) {
  const double q_bytes = static_cast<double>(w.batch()) * w.s_q * w.h_q * w.d_qk * 2.0;
  return w.kv_bytes(2) + q_bytes > chip.l2.count;
}

/// Builds the operations of CTAs on one SM for a kernel, a chip and a workload.
class CtaEmitter {
 public:
  CtaEmitter(Engine& e, const GpuChip& chip, const HopperKernel& k, const Workload& w, LinkId hbm)
      : e_(e), chip_(chip), k_(k), hbm_(hbm), cold_(starts_cold(chip, w)) {
    qk_ = e.category("QK");
    pv_ = e.category("PV");
    softmax_ = e.category("softmax");
    rescale_ = e.category("rescale");
    load_ = e.category("load");
    sync_ = e.category("sync");
    epi_ = e.category("epilogue");
  }

  SmUnits add_sm(const std::string& name, double mult) {
    SmUnits s;
    s.name = name;
    for (int g = 0; g < 2; ++g) {
      const std::string wg = name + " wg" + std::to_string(g);
      s.wgmma[g] = e_.add_unit(wg + " wgmma", mult);
      s.cuda[g] = e_.add_unit(wg + " CUDA", mult);
    }
    s.tma = e_.add_unit(name + " TMA", mult);
    // The class's link stands for `mult` SMs' links.
    s.issue = e_.add_link(name + " issue", BytesPerCycle{mult});
    s.mult = mult;
    for (int b = 0; b < 2; ++b)
      for (int g = 0; g < 3; ++g)
        s.buffer[b][g] = e_.add_pool(name + " KV" + std::to_string(b) + " chunks " +
                                         (g == 0   ? "0-3"
                                          : g == 1 ? "4-7"
                                                   : "8"),
                                     1);
    return s;
  }

  /// Appends CTA `cta` to SM `s` (after its previous CTA).
  void emit(SmUnits& s, const CtaWork& cta, const std::string& tag) {
    s_ = &s;
    tag_ = tag;
    prev_end_ = s.last;
    const Cycles cold = chip_.cycles_of(chip_.cta_cold_start);
    if (cold_ && cold.count > 0) {
      const OpId start =
          e_.add_op(s_->tma, Work::compute(cold), sync_, Phase::none, label("cold start"));
      after(start, prev_end_);
      prev_end_ = {start};
    }
    for (const CtaSegment& seg : cta.segments) emit_segment(seg);
    s.last = prev_end_;
  }

 private:
  // ---- primitives ----
  std::string label(const std::string& what) const {
    return e_.recording() ? tag_ + " " + what : std::string{};
  }
  /// A wgmma batch of `flops` (FLOPs, or the FLOPs its shared-memory reads are worth).
  OpId tensor(int wg, double flops, Cycles latency, CategoryId cat, const std::string& what) {
    const double cycles = flops / chip_.tensor_flops_per_cycle;
    s_->tensor_cycles += cycles;
    return e_.add_op(
        s_->wgmma[wg],
        Work::transfer(Bytes{cycles}, BytesPerCycle{1}, latency, s_->issue, chip_.tensor_priority),
        cat, Phase::none, label(what));
  }
  OpId vector(int wg, const VectorStage& st, double fraction, CategoryId cat,
              const std::string& what) {
    const double work = st.work_cycles * fraction;
    if (work <= 0) return zero(wg, what);
    s_->cuda_cycles += work;
    return e_.add_op(s_->cuda[wg],
                     Work::transfer(Bytes{work}, BytesPerCycle{st.share}, Cycles{0}, s_->issue),
                     cat, Phase::none, label(what));
  }
  OpId zero(int wg, const std::string& what) {
    return e_.add_op(s_->cuda[wg], Work::compute(Cycles{0}), sync_, Phase::none, label(what));
  }
  /// A TMA load of `bytes` read by `sharing` CTAs at once.
  OpId load(double bytes, int sharing, const std::string& what) {
    const double f = chip_.hbm_fraction(sharing);
    return e_.add_op(s_->tma,
                     Work::transfer(Bytes{bytes * f}, BytesPerCycle{chip_.tma_bytes_per_cycle * f},
                                    chip_.cycles_of(chip_.memory_latency), hbm_),
                     load_, Phase::none, label(what));
  }
  void after(OpId op, const std::vector<OpId>& producers, Cycles delay = Cycles{0}) {
    for (const OpId p : producers)
      if (p.valid()) e_.depend(op, p, delay);
  }
  void after(OpId op, OpId producer) {
    if (producer.valid()) e_.depend(op, producer);
  }

  double rescale_fraction(int k) const {
    return k_.skip_unit_rescale ? unit_rescale_probability(k) : 1.0;
  }

  /// The load of chunk group g (0: chunks 0-3, 1: 4-7, 2: 8) of a block into buffer b; it takes
  /// the group's slot.
  OpId load_group(int b, int block, int g, int sharing) {
    const double bytes = (g == 2 ? 1 : 4) * static_cast<double>(kv_chunk_bytes);
    const OpId ld = load(bytes, sharing,
                         "load K" + std::to_string(block) + " chunks " +
                             (g == 0   ? "0-3"
                              : g == 1 ? "4-7"
                                       : "8"));
    e_.acquire(ld, s_->buffer[b][g]);
    return ld;
  }
  /// The chunk-group loads of a segment's blocks, recorded as they are issued: the first two
  /// blocks' at the CTA's start, in `order` ((block, group) pairs).
  std::vector<std::vector<OpId>> start_loads(const CtaSegment& seg,
                                             std::initializer_list<std::pair<int, int>> order) {
    std::vector<std::vector<OpId>> grp(static_cast<std::size_t>(seg.blocks));
    load_in_order(grp, seg, order);
    return grp;
  }
  /// Loads of (block, group) in the order given, into buffer block % 2, recorded in grp.
  void load_in_order(std::vector<std::vector<OpId>>& grp, const CtaSegment& seg,
                     std::initializer_list<std::pair<int, int>> order) {
    for (const auto& [blk, g] : order) {
      if (blk >= seg.blocks) continue;
      auto& v = grp[static_cast<std::size_t>(blk)];
      if (v.empty()) v.assign(3, OpId{});
      v[static_cast<std::size_t>(g)] = load_group(blk % 2, seg.first_block + blk, g, seg.sharing);
    }
  }

  /// Q K^T of one block on warpgroup `wg`, consuming chunk groups as they arrive; returns the last.
  OpId qk(int wg, int rows, int block, const std::vector<OpId>& loads, OpId issue,
          const int (&order)[3]) {
    OpId last;
    for (const int g : order) {
      const int chunks = g == 2 ? 1 : 4;
      const bool final_group = g == order[2];
      // S = Q K^T: m64n64k16 (64 rows, padded); transposed S^T = K Q^T: m64 (keys) n(rows)k16.
      const OpId op = tensor(wg, wgmma_work(chip_, 64, transposed() ? rows : 64, 16, 4 * chunks),
                             final_group ? chip_.wgmma_n64_latency : Cycles{0}, qk_,
                             "QK" + std::to_string(block));
      after(op, loads[static_cast<std::size_t>(g)]);
      after(op, issue);
      last = op;
    }
    return last;
  }
  /// Q K^T of `block` on warpgroup wg, issued once `prev` and `also` (when valid) are done: a
  /// zero-time issue op, then qk() over the chunk groups in `order`; returns qk()'s last op.
  OpId issue_qk(int wg, int rows, int block, const std::vector<OpId>& loads, OpId prev,
                const int (&order)[3], OpId also = OpId{}) {
    const OpId issue = zero(wg, "issue QK" + std::to_string(block));
    after(issue, prev);
    after(issue, also);
    return qk(wg, rows, block, loads, issue, order);
  }
  /// The blocks a and b = a + 1 of a schedule that works on pairs; b exists when has_b.
  struct BlockPair {
    int a, b;
    bool has_b;
    std::string A, B;  ///< their numbers, for labels
  };
  static BlockPair pair_at(int a, int blocks) {
    return {a, a + 1, a + 1 < blocks, std::to_string(a), std::to_string(a + 1)};
  }
  /// The chunk groups of a block in load order (0: chunks 0-3, 1: 4-7, 2: the RoPE chunk 8).
  static constexpr int groups_in_order[3] = {0, 1, 2};

  /// One warpgroup's half of P V for one block.
  OpId pv(int wg, int rows, int block, const std::string& half) {
    const double work =
        transposed() ? wgmma_work(chip_, 64, rows, 16, 16) : wgmma_work(chip_, 64, 256, 16, 4);
    return tensor(wg, work, transposed() ? chip_.wgmma_n64_latency : chip_.wgmma_n256_latency, pv_,
                  "PV" + std::to_string(block) + half);
  }
  bool transposed() const { return k_.schedule == HopperSchedule::transposed; }

  // ---- one segment: a run of blocks of one (sequence, row block) ----
  void emit_segment(const CtaSegment& seg) {
    // Q: 64 rows x 576 BF16 (the transposed kernel loads only its rows).
    const double q_bytes = (transposed() ? seg.rows : 64) * static_cast<double>(d_qk) * 2;
    const OpId q = load(q_bytes, 1, "load Q");
    after(q, prev_end_);
    std::vector<OpId> ends;
    if (seg.blocks > 0) {
      switch (k_.schedule) {
        case HopperSchedule::amla_pairs:
          ends = amla_pairs(seg, q);
          break;
        case HopperSchedule::seesaw:
          ends = seesaw(seg, q);
          break;
        case HopperSchedule::transposed:
          ends = transposed_blocks(seg, q);
          break;
      }
    } else {
      ends = {q};
    }
    // Epilogue: each warpgroup normalises and stores its half of the output.
    std::vector<OpId> epi;
    for (int g = 0; g < 2; ++g) {
      const double f = transposed() ? static_cast<double>(seg.rows) / 64 : 1.0;
      const OpId op = vector(g, k_.epilogue, f, epi_, "epilogue");
      after(op, ends);
      epi.push_back(op);
    }
    prev_end_ = epi;
    // The next CTA starts the launch time after both warpgroups are done.
    const Cycles launch = chip_.cycles_of(chip_.cta_launch);
    if (launch.count > 0) {
      const OpId gap =
          e_.add_op(s_->tma, Work::compute(launch), sync_, Phase::none, label("launch"));
      after(gap, epi);
      prev_end_ = {gap};
    }
  }

  /// amla's refill of block blk's buffer: chunks 0-3 once WG0's half of its P V is done, 4-8 once
  /// both halves are (chunk 8 holds the P both read), by WG1; then the loads of block blk + 2.
  /// Returns WG1's refill point.
  OpId refill_pair_buffer(std::vector<std::vector<OpId>>& grp, const CtaSegment& seg, int blk,
                          OpId pv_left, OpId pv_right) {
    e_.release(pv_left, s_->buffer[blk % 2][0]);
    const OpId done = zero(1, "refill K" + std::to_string(blk) + " 4-8");
    after(done, {pv_left, pv_right});
    e_.release(done, s_->buffer[blk % 2][1]);
    e_.release(done, s_->buffer[blk % 2][2]);
    load_in_order(grp, seg, {{blk + 2, 0}, {blk + 2, 1}, {blk + 2, 2}});
    return done;
  }

  // Loads for the first two blocks are issued at the CTA's start; a refill of a buffer's group
  // takes the group's slot, which its last reader gives back.
  std::vector<OpId> amla_pairs(const CtaSegment& seg, OpId q) {
    const int rows = seg.rows;
    auto grp = start_loads(seg, {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}});
    OpId wg0_prev = q, wg1_prev = q;
    for (int i = 0; i < seg.blocks; i += 2) {
      const auto [a, b, has_b, A, B] = pair_at(i, seg.blocks);
      const auto& la = grp[static_cast<std::size_t>(a)];
      // WG0: S_A (after the previous pair's P_B V_B), softmax A.
      const OpId qk_a = issue_qk(0, rows, a, la, wg0_prev, groups_in_order);
      const OpId sm_a = vector(0, k_.softmax, 1, softmax_, "softmax" + A);
      after(sm_a, qk_a);
      // WG1: S_B once WG0 has issued S_A (its last chunk group arrived).
      OpId qk_b;
      if (has_b) {
        qk_b = issue_qk(1, rows, b, grp[static_cast<std::size_t>(b)], wg1_prev, groups_in_order,
                        la[2]);
      }
      // WG1's softmax of B once S_B and frame A are there (WG0 publishes frame A after its row
      // max, the first few instructions of its softmax: taken as the softmax's start), beside
      // WG0's softmax of A.
      OpId sm_b;
      if (has_b) {
        sm_b = vector(1, k_.softmax, 1, softmax_, "softmax" + B);
        after(sm_b, {qk_b, qk_a});
      }
      // Both rescale for A and run P_A V_A (WG1 after its softmax of B and WG0's P_A).
      const OpId rs_a0 = vector(0, k_.rescale, rescale_fraction(a), rescale_, "rescale" + A);
      const OpId pv_a0 = pv(0, rows, a, "L");
      after(pv_a0, rs_a0);
      const OpId rs_a1 = vector(1, k_.rescale, rescale_fraction(a), rescale_, "rescale" + A);
      after(rs_a1, {sm_a, qk_b.valid() ? qk_b : wg1_prev});
      const OpId pv_a1 = pv(1, rows, a, "R");
      after(pv_a1, rs_a1);
      const OpId done_a = refill_pair_buffer(grp, seg, a, pv_a0, pv_a1);
      if (!has_b) {
        wg0_prev = pv_a0;
        wg1_prev = done_a;
        break;
      }
      // Both rescale for B and run P_B V_B; buffer 1 refilled the same way.
      const OpId rs_b0 = vector(0, k_.rescale, rescale_fraction(b), rescale_, "rescale" + B);
      after(rs_b0, {pv_a0, sm_b, rs_a1});  // P_B is published once WG1 has issued P_A V_A[:, R]
      const OpId pv_b0 = pv(0, rows, b, "L");
      after(pv_b0, rs_b0);
      const OpId rs_b1 = vector(1, k_.rescale, rescale_fraction(b), rescale_, "rescale" + B);
      after(rs_b1, sm_b);
      const OpId pv_b1 = pv(1, rows, b, "R");
      after(pv_b1, rs_b1);
      const OpId done_b = refill_pair_buffer(grp, seg, b, pv_b0, pv_b1);
      wg0_prev = pv_b0;
      wg1_prev = done_b;
    }
    return {wg0_prev, wg1_prev};
  }

  std::vector<OpId> seesaw(const CtaSegment& seg, OpId q) {
    // Chunk groups in the order their buffers free: buffer 0's RoPE chunk and left half (after
    // WG0's work on block 0), buffer 1's RoPE chunk and right half (after WG1's), then the
    // remaining halves; Q K^T consumes them in that order.
    static constexpr int order0[3] = {2, 0, 1};
    static constexpr int order1[3] = {2, 1, 0};
    const int rows = seg.rows;
    auto grp = start_loads(seg, {{0, 2}, {0, 0}, {0, 1}, {1, 2}, {1, 1}, {1, 0}});
    OpId wg0_prev = q, wg1_prev = q;
    for (int i = 0; i < seg.blocks; i += 2) {
      const auto [a, b, has_b, A, B] = pair_at(i, seg.blocks);
      const OpId qk0 = issue_qk(0, rows, a, grp[static_cast<std::size_t>(a)], wg0_prev, order0);
      OpId qk1;
      if (has_b) qk1 = issue_qk(1, rows, b, grp[static_cast<std::size_t>(b)], wg1_prev, order1);
      // [0] softmax 0, rescale O_L, P_0 V_0L.
      const OpId sm0 = vector(0, k_.softmax, 1, softmax_, "softmax" + A);
      after(sm0, qk0);
      e_.release(qk0, s_->buffer[a % 2][2]);
      const OpId rs0 = vector(0, k_.rescale, 1, rescale_, "rescale" + A);
      const OpId pv0l = pv(0, rows, a, "L");
      after(pv0l, rs0);
      e_.release(pv0l, s_->buffer[a % 2][0]);
      if (!has_b) {
        // A last single block: WG1 rescales O_R and runs P_0 V_0R.
        const OpId rs = vector(1, k_.rescale, 1, rescale_, "rescale" + A);
        after(rs, {sm0, wg1_prev});
        const OpId pv0r = pv(1, rows, a, "R");
        after(pv0r, rs);
        e_.release(pv0r, s_->buffer[a % 2][1]);
        wg0_prev = pv0l;
        wg1_prev = pv0r;
        break;
      }
      // [1] softmax 1 with WG0's max, rescale O_R, P_1 V_1R.
      e_.release(qk1, s_->buffer[b % 2][2]);
      const OpId sm1 = vector(1, k_.softmax, 1, softmax_, "softmax" + B);
      after(sm1, {qk1, sm0});
      const OpId rs1r = vector(1, k_.rescale, 1, rescale_, "rescale" + B);
      const OpId pv1r = pv(1, rows, b, "R");
      after(pv1r, rs1r);
      e_.release(pv1r, s_->buffer[b % 2][1]);
      // [0] P_0 *= scale_1; [1] P_0 V_0R.
      const OpId ps0 = vector(0, k_.p_rescale, 1, rescale_, "P" + A + " *= s");
      after(ps0, sm1);
      const OpId pv0r = pv(1, rows, a, "R");
      after(pv0r, {ps0, pv1r});
      e_.release(pv0r, s_->buffer[a % 2][1]);
      // [0] rescale O_L by scale_1, P_1 V_1L.
      const OpId rs1l = vector(0, k_.rescale, 1, rescale_, "rescale" + B);
      after(rs1l, {pv0l, sm1});
      const OpId pv1l = pv(0, rows, b, "L");
      after(pv1l, rs1l);
      e_.release(pv1l, s_->buffer[b % 2][0]);
      load_in_order(grp, seg,
                    {{a + 2, 2}, {b + 2, 2}, {a + 2, 0}, {b + 2, 1}, {a + 2, 1}, {b + 2, 0}});
      wg0_prev = pv1l;
      wg1_prev = pv0r;
    }
    return {wg0_prev, wg1_prev};
  }

  std::vector<OpId> transposed_blocks(const CtaSegment& seg, OpId q) {
    const int rows = seg.rows;
    const double f = static_cast<double>(rows) / 64;  // transposed tiles: rows x 64, rows x 256
    auto grp = start_loads(seg, {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}});
    OpId wg0_prev = q, wg1_prev = q;
    for (int j = 0; j < seg.blocks; ++j) {
      const OpId s =
          issue_qk(0, rows, j, grp[static_cast<std::size_t>(j)], wg0_prev, groups_in_order);
      const OpId sm = vector(0, k_.softmax, f, softmax_, "softmax" + std::to_string(j));
      after(sm, s);
      const OpId rs0 = vector(0, k_.rescale, f, rescale_, "rescale" + std::to_string(j));
      const OpId pv0 = pv(0, rows, j, "0");
      after(pv0, rs0);
      const OpId rs1 = vector(1, k_.rescale, f, rescale_, "rescale" + std::to_string(j));
      after(rs1, {sm, wg1_prev});
      const OpId pv1 = pv(1, rows, j, "1");
      after(pv1, rs1);
      const OpId done = zero(1, "release K" + std::to_string(j));
      after(done, {pv0, pv1});
      for (int g = 0; g < 3; ++g) e_.release(done, s_->buffer[j % 2][g]);
      load_in_order(grp, seg, {{j + 2, 0}, {j + 2, 1}, {j + 2, 2}});
      wg0_prev = pv0;
      wg1_prev = done;
    }
    return {wg0_prev, wg1_prev};
  }

  Engine& e_;
  const GpuChip& chip_;
  const HopperKernel& k_;
  LinkId hbm_;
  bool cold_ = false;
  SmUnits* s_ = nullptr;
  std::string tag_;
  std::vector<OpId> prev_end_;
  CategoryId qk_, pv_, softmax_, rescale_, load_, sync_, epi_;
};

/// The CTAs of the amla kernel's grid, in launch order.
inline std::vector<CtaWork> grid_ctas(const GpuChip& chip, const HopperKernel& k, const Workload& w,
                                      int& splits, int& row_blocks) {
  const int rows = w.s_q * w.h_q;
  row_blocks = (rows + k.rows_per_cta - 1) / k.rows_per_cta;
  std::vector<int> blocks(static_cast<std::size_t>(w.batch()));
  int max_blocks = 0;
  for (int b = 0; b < w.batch(); ++b) {
    const int keys = w.seqlens[static_cast<std::size_t>(b)];
    blocks[static_cast<std::size_t>(b)] = (keys + k.block_keys - 1) / k.block_keys;
    max_blocks = std::max(max_blocks, blocks[static_cast<std::size_t>(b)]);
  }
  splits = k.splits > 0 ? std::min(k.splits, std::max(1, max_blocks))
                        : amla_kernel_splits(row_blocks * w.batch(), chip.sms, max_blocks);
  std::vector<CtaWork> ctas;
  for (int z = 0; z < splits; ++z)
    for (int b = 0; b < w.batch(); ++b)
      for (int x = 0; x < row_blocks; ++x) {
        // The row block's key range: the visible keys of its last row (causal masks trim).
        const int last_row = std::min(rows, (x + 1) * k.rows_per_cta) - 1;
        const int vis =
            visible_keys(w.seqlens[static_cast<std::size_t>(b)], w.s_q, last_row / w.h_q, w.causal);
        const int nb = (vis + k.block_keys - 1) / k.block_keys;
        const int per = (nb + splits - 1) / splits;
        const int begin = std::min(nb, z * per), end = std::min(nb, begin + per);
        CtaSegment s{b, x, k.rows_per_cta, begin, end - begin, row_blocks, splits > 1};
        ctas.push_back(CtaWork{{s}});
      }
  return ctas;
}

/// FlashMLA's balanced tile scheduler: one CTA per SM, `row_blocks` per part.
inline std::vector<CtaWork> balanced_ctas(const GpuChip& chip, const HopperKernel& k,
                                          const Workload& w, int& parts, int& row_blocks) {
  const int rows = w.s_q * w.h_q;
  const bool transposed = k.schedule == HopperSchedule::transposed;
  // A transposed CTA holds all of a sequence's rows (up to 64, the N of its products).
  row_blocks = transposed ? 1 : (rows + k.rows_per_cta - 1) / k.rows_per_cta;
  const int cta_rows = transposed ? std::min(rows, 64) : k.rows_per_cta;
  parts = std::max(1, chip.sms / row_blocks);
  std::vector<int> blocks(static_cast<std::size_t>(w.batch()));
  std::int64_t total = 0;
  for (int b = 0; b < w.batch(); ++b) {
    blocks[static_cast<std::size_t>(b)] =
        (w.seqlens[static_cast<std::size_t>(b)] + k.block_keys - 1) / k.block_keys;
    total += blocks[static_cast<std::size_t>(b)] + k.sequence_overhead_blocks;
  }
  const std::int64_t payload = (total + parts - 1) / parts + k.sequence_overhead_blocks;
  std::vector<std::vector<CtaSegment>> part_segments(static_cast<std::size_t>(parts));
  std::vector<int> pieces(static_cast<std::size_t>(w.batch()), 0);
  int seq = 0, done = 0;  // the next (sequence, block) to hand out
  for (int p = 0; p < parts && seq < w.batch(); ++p) {
    std::int64_t left = payload;
    while (seq < w.batch()) {
      const int rest = blocks[static_cast<std::size_t>(seq)] - done;
      if (left >= rest + k.sequence_overhead_blocks) {
        part_segments[static_cast<std::size_t>(p)].push_back(
            {seq, 0, cta_rows, done, rest, 1, false});
        ++pieces[static_cast<std::size_t>(seq)];
        left -= rest + k.sequence_overhead_blocks;
        ++seq;
        done = 0;
        continue;
      }
      const std::int64_t take = left - k.sequence_overhead_blocks;
      if (take > 0) {
        part_segments[static_cast<std::size_t>(p)].push_back(
            {seq, 0, cta_rows, done, static_cast<int>(take), 1, false});
        ++pieces[static_cast<std::size_t>(seq)];
        done += static_cast<int>(take);
      }
      break;
    }
  }
  std::vector<CtaWork> ctas;
  for (int p = 0; p < parts; ++p)
    for (int x = 0; x < row_blocks; ++x) {
      CtaWork c;
      for (CtaSegment s : part_segments[static_cast<std::size_t>(p)]) {
        s.row_block = x;
        s.sharing = row_blocks;
        s.partial = pieces[static_cast<std::size_t>(s.sequence)] > 1;
        c.segments.push_back(s);
      }
      ctas.push_back(std::move(c));
    }
  return ctas;
}

/// Key of a CTA list for grouping identical SMs.
inline std::vector<int> cta_key(const std::vector<const CtaWork*>& list) {
  std::vector<int> key;
  for (const CtaWork* c : list) {
    key.push_back(-1);
    for (const auto& s : c->segments) key.insert(key.end(), {s.rows, s.blocks, s.sharing});
  }
  return key;
}

}  // namespace detail

/// Simulates one decode call of `kernel` on `chip` for the workload (its per-sequence lengths as
/// they are). Malformed arguments throw amla::invalid_argument; a kernel that cannot run the
/// workload (shared memory, shapes) or work beyond max_hopper_operations comes back not ok.
inline HopperDecodeResult simulate_hopper_decode(const GpuChip& chip, const Workload& w,
                                                 const HopperKernel& kernel_in,
                                                 const HopperDecodeOptions& opt = {}) {
  const char* fn = "amla::sim::simulate_hopper_decode";
  chip.validate();
  kernel_in.validate();
  w.validate(fn);
  HopperDecodeResult res;
  if (w.h_kv != 1 || w.d_qk != detail::d_qk || w.d_v != detail::d_v || !w.v_in_kv) {
    res.set_failed(
        "the Hopper kernels serve MLA's shape: h_kv = 1, d_qk = 576, d_v = 512 with V "
        "in the K cache (got h_kv " +
        std::to_string(w.h_kv) + ", d_qk " + std::to_string(w.d_qk) + ", d_v " +
        std::to_string(w.d_v) + ")");
    return res;
  }
  if (opt.timeline_sm < 0 || opt.timeline_sm >= chip.sms)
    amla::detail::throw_invalid(fn, "options.timeline_sm", std::to_string(opt.timeline_sm),
                                "an SM index in [0, chip.sms)");
  const double smem = 3.0 * 9 * detail::kv_chunk_bytes + 2048;  // Q + two KV buffers + messages
  if (smem > chip.smem_bytes_per_block) {
    res.set_failed("the kernel's " + amla::detail::to_text(smem / 1024) +
                   " KB of shared memory exceed the chip's " +
                   amla::detail::to_text(chip.smem_bytes_per_block / 1024) + " KB per block");
    return res;
  }
  HopperKernel kernel = kernel_in;
  res.flops = w.flops();

  // ---- CTAs ----
  std::vector<CtaWork> ctas;
  if (kernel.tiles == TileScheduler::grid) {
    ctas = detail::grid_ctas(chip, kernel, w, res.splits, res.row_blocks);
  } else {
    int parts = 0;
    ctas = detail::balanced_ctas(chip, kernel, w, parts, res.row_blocks);
    res.splits = 0;
    for (const auto& c : ctas)
      for (const auto& s : c.segments) res.splits = std::max(res.splits, s.partial ? 2 : 1);
  }
  res.ctas = static_cast<int>(ctas.size());
  double total_blocks = 0;
  for (const auto& c : ctas) total_blocks += c.blocks() + static_cast<double>(c.segments.size());
  if (total_blocks * 24 > max_hopper_operations) {
    res.set_failed("the simulation needs about " + amla::detail::to_text(total_blocks * 24) +
                   " engine operations, more than max_hopper_operations = 2^22");
    return res;
  }

  // ---- assignment to SMs ----
  res.cta_sm.assign(ctas.size(), 0);
  if (kernel.tiles == TileScheduler::balanced) {
    for (std::size_t i = 0; i < ctas.size(); ++i)
      res.cta_sm[i] = static_cast<int>(i % static_cast<std::size_t>(chip.sms));
  } else {
    // List scheduling in launch order over estimated CTA times: a fixed part plus a part per
    // block, from a simulation of one CTA of 4 and of 12 blocks with every SM loading alike.
    auto estimate = [&](int blocks) {
      Engine e(false);
      const LinkId hbm = e.add_link("HBM", BytesPerCycle{chip.hbm_bytes_per_cycle()});
      detail::CtaEmitter em(e, chip, kernel, w, hbm);
      detail::SmUnits sm = em.add_sm("sm", static_cast<double>(chip.sms));
      CtaSegment s{0, 0, kernel.rows_per_cta, 0, blocks, res.row_blocks, false};
      em.emit(sm, CtaWork{{s}}, "");
      return static_cast<double>(e.run().makespan.count);
    };
    const double t4 = estimate(4), t12 = estimate(12);
    const double per_block = (t12 - t4) / 8, fixed = t4 - 4 * per_block;
    std::vector<double> free_at(static_cast<std::size_t>(chip.sms), 0.0);
    for (std::size_t i = 0; i < ctas.size(); ++i) {
      const auto sm = static_cast<std::size_t>(std::min_element(free_at.begin(), free_at.end()) -
                                               free_at.begin());
      res.cta_sm[i] = static_cast<int>(sm);
      free_at[sm] += fixed + per_block * ctas[i].blocks();
    }
  }
  std::vector<std::vector<const CtaWork*>> sm_ctas(static_cast<std::size_t>(chip.sms));
  for (std::size_t i = 0; i < ctas.size(); ++i)
    sm_ctas[static_cast<std::size_t>(res.cta_sm[i])].push_back(&ctas[i]);

  // ---- classes of identical SMs ----
  std::map<std::vector<int>, int> class_of;
  std::vector<int> rep;      // representative SM of each class
  std::vector<double> size;  // SMs in each class
  std::vector<int> sm_class(static_cast<std::size_t>(chip.sms), -1);
  for (int sm = 0; sm < chip.sms; ++sm) {
    const auto& list = sm_ctas[static_cast<std::size_t>(sm)];
    if (list.empty()) continue;
    const auto key = detail::cta_key(list);
    const auto it = opt.symmetry ? class_of.find(key) : class_of.end();
    if (it != class_of.end() && sm != opt.timeline_sm) {
      sm_class[static_cast<std::size_t>(sm)] = it->second;
      size[static_cast<std::size_t>(it->second)] += 1;
      continue;
    }
    const int id = static_cast<int>(rep.size());
    if (opt.symmetry && it == class_of.end()) class_of.emplace(key, id);
    rep.push_back(sm);
    size.push_back(1);
    sm_class[static_cast<std::size_t>(sm)] = id;
  }
  res.sm_classes = static_cast<int>(rep.size());

  // ---- the engine ----
  Engine e(opt.record_timeline);
  const LinkId hbm = e.add_link("HBM", BytesPerCycle{chip.hbm_bytes_per_cycle()});
  detail::CtaEmitter em(e, chip, kernel, w, hbm);
  std::vector<detail::SmUnits> units;
  for (std::size_t c = 0; c < rep.size(); ++c) {
    units.push_back(em.add_sm("SM" + std::to_string(rep[c]), size[c]));
    int n = 0;
    for (const CtaWork* cta : sm_ctas[static_cast<std::size_t>(rep[c])])
      em.emit(units.back(), *cta, "c" + std::to_string(n++));
  }
  const RunResult run = e.run();
  if (!take_run(res, e, run)) return res;
  res.cycles = run.makespan;

  // ---- combine kernel (split sequences) ----
  double partial_rows = 0;
  for (const auto& c : ctas)
    for (const auto& s : c.segments)
      if (s.partial) partial_rows += s.rows;
  if (partial_rows > 0) {
    // Read every partial (512 FP32 + an lse per row), write the BF16 output: one pass at the
    // HBM's achievable rate, plus a kernel's overhead.
    const double bytes = partial_rows * (detail::d_v * 4 + 4) +
                         static_cast<double>(w.batch()) * w.s_q * w.h_q * detail::d_v * 2;
    // FlashMLA's combine is taken as overlapping the main kernel's tail; amla's, though launched
    // with programmatic dependent launch too, runs for longer than its bytes take (one row per
    // CTA, 14-16 us for 16.8 MB on the H100), and one kernel overhead stands for that.
    const double launch =
        kernel.tiles == TileScheduler::balanced ? 0.0 : chip.kernel_overhead.count;
    res.combine_time = Seconds{bytes / (chip.hbm_bytes_per_s * chip.hbm_efficiency) + launch};
  }
  // ---- plan kernel (amla's schedule sized on the GPU) ----
  // A one-CTA kernel launched before the decode kernel, which waits for it: in a stream, one
  // kernel's overhead (its own work, a few reads and prefix sums, is negligible).
  if (kernel.tiles == TileScheduler::grid && kernel.splits == 0)
    res.plan_time = chip.kernel_overhead;
  res.cold = detail::starts_cold(chip, w);
  res.time =
      res.plan_time + chip.clock.to_seconds(res.cycles) + chip.kernel_overhead + res.combine_time;

  // ---- summaries ----
  const double span = static_cast<double>(res.cycles.count);
  double tensor = 0, cores = 0;
  res.sm_finish.assign(static_cast<std::size_t>(chip.sms), Cycles{0});
  for (const auto& u : units) {
    tensor += u.tensor_cycles * u.mult;
    cores += u.cuda_cycles * u.mult;
  }
  if (span > 0) {
    res.tensor_busy = tensor / (span * chip.sms);
    res.cuda_busy = cores / (span * chip.sms);
  }
  res.hbm_bytes = e.link_stats(hbm).bytes;
  res.hbm_utilization = span > 0 ? res.hbm_bytes.count / (chip.hbm_bytes_per_cycle() * span) : 0;
  // Each SM's finish: the end of its class's last CTA.
  for (int sm = 0; sm < chip.sms; ++sm) {
    const int c = sm_class[static_cast<std::size_t>(sm)];
    if (c < 0) continue;
    for (const OpId op : units[static_cast<std::size_t>(c)].last)
      res.sm_finish[static_cast<std::size_t>(sm)] =
          std::max(res.sm_finish[static_cast<std::size_t>(sm)], e.op_end(op));
  }
  const int drawn = sm_class[static_cast<std::size_t>(opt.timeline_sm)];
  if (drawn >= 0) {
    const auto& u = units[static_cast<std::size_t>(drawn)];
    for (const UnitId id : {u.wgmma[0], u.wgmma[1], u.cuda[0], u.cuda[1], u.tma})
      res.sm_units.push_back(e.unit_stats(id));
    if (opt.record_timeline) {
      res.timeline =
          e.timeline(kernel.name + " (" + to_string(kernel.schedule) + "), SM " +
                         std::to_string(opt.timeline_sm) + " of " + chip.name,
                     chip.clock, [&](UnitId id) {
                       for (const UnitId x : {u.wgmma[0], u.wgmma[1], u.cuda[0], u.cuda[1], u.tma})
                         if (x.index == id.index) return true;
                       return false;
                     });
    }
  }
  return res;
}

}  // namespace amla::sim
