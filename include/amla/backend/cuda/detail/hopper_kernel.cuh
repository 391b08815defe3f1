// amla/backend/cuda/detail/hopper_kernel.cuh: the fast MLA decode kernel for Hopper (sm_90a). In a
// compilation for any other architecture the kernel is declared and its body traps (ptx.cuh).
//
// Shape it serves: d_qk = 576, d_v = 512 (values are the first 512 columns of the K cache),
// h_kv = 1, BF16 q and cache, page_size a multiple of 64 or one of 8, 16, 32. Any batch, s_q, h_q,
// seqlens, causal or not.
//
// ---- Work decomposition: a tile schedule ------------------------------------------------------
// The s_q * h_q query rows of a request (r = t * h_q + h, token-major as amla's HeadGroup) are cut
// into row blocks of 64 rows. The grid is (row_blocks, pieces): CTA (m, i) runs row block m of
// piece i of the split-KV schedule (problem/split_schedule.hpp: piece_at), one request's
// contiguous range of 64-key KV blocks. A piece that is a whole request writes out and lse; a
// piece of a request cut into several writes its normalised FP32 partial and lse to its slot, and
// combine.cuh merges the slots. CTAs past the schedule's last piece (the launch sizes the grid by
// a bound, the GPU computes the plan) return at once. For a batch the sized schedule may cut
// (fewer requests than a wave's pieces) the CTAs size it themselves (the SizeHere instantiation:
// every warp runs split_plan.cuh's warp functions) and CTA (0, 0) writes the plan for the
// combine. A plan made once by plan_decode (split_plan's plan kernel) and reused
// (params::plan_reused) is read instead, each CTA taking its piece from the plan's piece list
// (params::piece_list) and checking its request's piece count against the current length
// (plan_matches). When the host's bounds say that no request is cut (params::whole_requests: a
// batch that fills a wave), piece b is request b and no plan is made or read, except a reused
// plan's list of the requests longest first (params::order), which the CTAs take in that order.
//
// ---- Shared memory (220 KB) --------------------------------------------------------------
//   Q         64 x 576 BF16 as 9 column chunks of 64 x 64 (8 KB each, 128-byte swizzle)  72 KB
//   KV[0..1]  two KV blocks of 64 keys x 576, the same 9-chunk layout                    144 KB
//   (at the end, Q's tile and KV[0] stage the output rows for coalesced stores: staged_unit)
//   messages  per-row frame steps (with AMLA's scalars) the warpgroups pass each other, the
//             l exchange, mbarriers                                                       4 KB
// Chunk c of a buffer holds columns [64c, 64c + 64). Chunks 0-3 are V's left half, 4-7 V's right
// half, chunk 8 the RoPE part of K, used only by Q K^T; once that product is done, chunk 8 holds
// the block's P (64 x 64 BF16, the same 8 KB swizzled layout) that both warpgroups' P V read. Every
// chunk has its own mbarrier, so the TMA refills a chunk as soon as its last reader is done and Q
// K^T consumes chunks in arrival order. The wgmma operands are addressed through descriptors built
// once per buffer and stepped by one add (smem_desc).
//
// ---- The schedule: two warpgroups, O split by columns, blocks in pairs --------------------
// Two consumer warpgroups, no producer warp: WG0 owns O_L = O[:, 0:256], WG1 owns
// O_R = O[:, 256:512] (each 64 x 256 FP32 = 128 registers per thread). Each iteration takes two
// KV blocks, A (buffer 0) and B (buffer 1); each block's Q K^T is computed by one warpgroup, its
// P V by both:
//   1. WG0: S_A = Q K_A^T (wgmma SS, 36 x m64n64k16); WG1: S_B = Q K_B^T, issued once WG0 has
//      issued S_A (named barrier 5, CudaDecodeOptions::stagger_qk), so that WG0's softmax of A
//      overlaps S_B on the tensor cores.
//   2. WG0: frame A = step(frame, rowmax S_A), published at once (named barrier 8); then
//      P_A = exp2(S_A - m_A) into KV[0] chunk 8 (named barrier 1).
//   3. WG1, as soon as S_B and frame A are there: frame B = step(frame A, rowmax S_B) and
//      P_B = exp2(S_B - m_B), its softmax overlapping WG0's; P_B into KV[1] chunk 8 (barrier 2)
//      after O_R = step_A(O_R) + P_A V_A[:, R] is issued.
//   4. WG0: O_L = step_A(O_L) + P_A V_A[:, L] (both halves wgmma SS with P_A from shared
//      memory: its fragments would cost 16 registers per thread across the O rescale, and the
//      AMLA kernels have none to spare).
//   5. WG0: O_L = step_B(O_L) + P_B V_B[:, L]; WG1: O_R = step_B(O_R) + P_B V_B[:, R] (SS).
// Both halves therefore follow the CPU recurrence's block order exactly, block size 64 (Base:
// O = O exp(m_old - m_new) + BF16(P) V; AMLA: O = AS_FP32(AS_INT32(O) + k) + BF16(P S16) V).
// This is the FlashMLA deep dive's idea (two warpgroups, one output split in halves, P handed
// across in shared memory) without its seesaw reordering: block A's P V runs on both halves right
// after frame A, so all of KV[0] is free one P V earlier and the next pair's first Q K^T finds its
// data. (The seesaw itself, with the next Q K^T issued behind the last P V and P from registers,
// measured slower on an H100: bench/CUDA_RESULTS.md.) Refills: KV[b] chunks 0-3 by WG0 after its
// step 4 (b = 0) or 5 (b = 1); KV[b] chunks 4-8 by WG1 after its own P V and after WG0 has
// signalled (named barriers 6, 7) that it is done with chunk 8, the P tile both read. A refill
// is issued by the first thread of each of the warpgroup's four warps (load_kv<4>: chunk
// c_lo + w by warp w, WG1's warp 0 also chunk 8), after a warpgroup barrier (every warp's wgmma is
// complete), so that its copies leave together rather than one after another from one thread
// (bench/CUDA_RESULTS.md: faster at s_q 2 and in the split shapes; at s_q 1 up to 1.2% slower
// in one comparison and level in another); each of those threads reads the block's table entry
// while that P V still runs (block_row).
// WG0 moves O_L to frame B as soon as WG1 has published frame B (named barrier 9), before P_B
// arrives, so that only the P V's issue lies between P_B and its product.
//
// ---- Keys a row does not see (problem/conventions.hpp) --------------------------------------
// Scores of keys past a row's visible count are -inf before the max. V rows the tensor cores
// multiply by P = 0 must be finite (0 * NaN = NaN), so before each P V the warpgroup zeroes, in
// its half of V, the keys past the CTA's last visible one (vis_max: past the sequence, or hidden
// from every row), and replaces the non-finite values of the keys a causal mask shows to some
// rows of the CTA only ([vis_min, vis_max), when a CTA holds several tokens) by 0. Those values
// still reach the rows that see them: V is the first 512 columns of K, so a NaN or Inf there
// makes the row's score NaN or +-inf, and a NaN or +inf score makes the row NaN. Only a score of
// -inf (an infinite K value against a query value of the other sign) differs from the float64
// golden: the key weighs 0, and golden's 0 * Inf puts NaN in the columns of its infinite values,
// where the kernel has their value without that key. Scores are NaN-propagating: the row max uses
// max.NaN, so a NaN in Q or a visible K makes the row's out and lse NaN; a score that overflows
// FP32 to +inf makes the row NaN (inf - inf), and a row whose every visible score is -inf gets
// NaN, not the empty-row result, which only a row with no visible key gets.
//
// ---- In the simulator's vocabulary (amla/sim) ---------------------------------------------
//   Cube: the tensor cores, driven by wgmma from both warpgroups: C1 (Q K^T) per block, C2 (P V)
//     in two halves per block (V_L by WG0, V_R by WG1).
//   Vector: the CUDA cores of the same two warpgroups: V1 (mask, max, exp2, P cast, publish) and
//     the rescale of O in registers (standard: an FP32 multiply; AMLA: an integer add).
//   Preload depth: two KV blocks resident (KV[0], KV[1]); block A of the next pair streams in
//     while the current pair's block-B P V runs, block B while the next block A's Q K^T runs.
//   Each warpgroup is both Cube issuer and Vector worker. The overlap comes from the pairing:
//     WG0's V1 of block A runs while WG1's C1 of block B occupies the tensor cores, WG1's V1 of
//     block B while both halves of block A's C2 run.
//
// ---- Rescaling modes (rescale.cuh) ----------------------------------------------------------
// Standard: O *= exp2(m_old - m_new), skipped when every row of the warp has factor 1 (exact).
// AMLA: O's bits += k for every row that has seen a key, P scaled by S16 before its BF16 cast,
// out = O / (l * S16). With the paper's step k is never 0 (the +1e-6 nudge alone gives 8); with
// params::skip_unmoved an unmoved row's k is 0 and the add is skipped when the whole warp agrees,
// as the standard mode skips its multiply. A row's AMLA step (its scalars and k) is computed by the
// two threads of its quad that publish it, not by all four (step_rows).
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/detail/ptx.cuh"
#include "amla/backend/cuda/detail/split_plan.cuh"
#include "amla/backend/cuda/rescale.cuh"

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "amla/problem/shape.hpp"
#include "amla/problem/split_schedule.hpp"

// AMLA_CUDA_PHASE_TIMES=1 (ptx.cuh) builds the timing probes into the Hopper kernel: every CTA
// records %globaltimer and clock64 at the phases of its run (hopper::phase) into
// CudaDecodeOptions::phase_times, which bm_cuda_decode --phases summarises.

// The paths of the kernel that the steady state of the common layout never takes are functions of
// their own (AMLA_CUDA_COLD: inline __noinline__), so that the block loop's code stays compact in
// the instruction cache (measured in bench/CUDA_RESULTS.md). With relocatable device code (-rdc)
// ptxas calls such a function as an external one and then serialises every wgmma of the kernel
// (C7509), so there they are inlined. (Such a build still serialises the wgmma: the helpers of
// 64-bit integer division and the slow paths of float division are external calls there too.)
#if defined(__CUDACC_RDC__)
#define AMLA_CUDA_COLD __forceinline__
#else
#define AMLA_CUDA_COLD inline __noinline__
#endif

namespace amla::cuda::detail::hopper {

inline constexpr int rows_per_cta = 64;
inline constexpr int block_keys = 64;
inline constexpr int d_qk = 576;
inline constexpr int d_v = 512;
inline constexpr int chunks = 9;
inline constexpr int chunk_bytes = 64 * 128;
inline constexpr int tile_bytes = chunks * chunk_bytes;
inline constexpr int threads = 256;

/// Whether this build records phase times (AMLA_CUDA_PHASE_TIMES).
inline constexpr bool phase_times_built = AMLA_CUDA_PHASE_TIMES != 0;

/// The moments of a CTA's run that a timing build records, in order. Each CTA writes
/// phase_slots words at phase_times + (blockIdx.y * gridDim.x + blockIdx.x) * phase_slots: word
/// ph the %globaltimer (ns) at phase ph, word phase_clock + ph the SM's clock64 there, word
/// phase_sm the SM's id. A CTA past the schedule's last piece writes no entry (the report skips
/// records without one).
enum phase : int {
  phase_entry = 0,      ///< the kernel's first instruction (thread 0)
  phase_barriers,       ///< mbarriers initialised, tensor maps prefetched (after the CTA barrier)
  phase_griddep,        ///< griddep_wait returned: the kernel before this one is complete
  phase_piece_found,    ///< the CTA has its piece (where the CTA sizes the schedule: sized)
  phase_loads_issued,   ///< piece found, its Q and first two KV blocks' TMA loads issued
  phase_q_landed,       ///< Q in shared memory
  phase_first_s,        ///< WG0's first S_A computed (its K block landed)
  phase_loop_end_wg0,   ///< WG0 out of the block loop
  phase_loop_end_wg1,   ///< WG1 out of the block loop (thread 128)
  phase_epilogue_sync,  ///< l exchanged between the warpgroups (the epilogue's CTA barrier)
  phase_stores_issued,  ///< thread 0 has issued its out and lse stores
  phase_stores_done,    ///< every thread's stores issued and fenced (a fence and a CTA barrier;
                        ///< a cut piece's bulk copies have read their rows, their writes may
                        ///< still drain)
  phase_count
};
inline constexpr int phase_clock = 16;
inline constexpr int phase_sm = 15;

/// A timing build also traces the block loop: for trace_pairs pairs from the middle of the
/// piece's (trace_first), the leader of each warpgroup records the low 32 bits of clock64 at the
/// events below, as std::uint32_t entries from word trace_word of the CTA's record: the k-th
/// traced pair's WG0 entries at (2k) trace_events, WG1's at (2k + 1) trace_events. An entry left
/// 0 was not reached. An event after a named barrier is recorded once a shared memory load
/// issued after the barrier has returned (trace_after_barrier): the barrier lets the warp go on
/// issuing instructions that touch no memory, so a clock read right after it can precede its
/// release.
enum trace_wg0 : int {
  tr0_top = 0,             ///< the pair's loop iteration begins
  tr0_chunk = 1,           ///< + ci: S_A's wait for its ci-th chunk (in consumption order) returned
  tr0_s_done = 10,         ///< S_A complete
  tr0_frame = 11,          ///< frame A published
  tr0_p_published = 12,    ///< P_A stored and published
  tr0_pv_a_rescaled = 13,  ///< O_L moved to frame A; P_A V_A[:, L] about to be issued
  tr0_pv_a_issued = 14,    ///< P_A V_A[:, L]'s last wgmma issued
  tr0_pv_a_done = 15,      ///< P_A V_A[:, L] complete in every warp of WG0
  tr0_refill_a = 16,       ///< KV[0] chunks 0-3 refill issued
  tr0_pv_b_rescaled = 17,  ///< O_L moved to frame B (once WG1 has published it, before P_B)
  tr0_p_b = 18,            ///< P_B received
  tr0_pv_b_issued = 19,
  tr0_pv_b_done = 20,
  tr0_refill_b = 21,  ///< KV[1] chunks 0-3 refill issued
  tr0_count = 22
};
enum trace_wg1 : int {
  tr1_top = 0,
  tr1_stagger = 1,   ///< released to issue S_B
  tr1_chunk = 2,     ///< + ci: S_B's wait for its ci-th chunk returned
  tr1_s_done = 11,   ///< S_B complete
  tr1_frame_a = 12,  ///< frame A received
  tr1_exps = 13,     ///< frame B published, P_B's exponentials done
  tr1_p_a = 14,      ///< P_A received
  tr1_pv_a_rescaled = 15,
  tr1_pv_a_issued = 16,
  tr1_p_published = 17,  ///< P_B stored and published
  tr1_pv_a_done = 18,
  tr1_a_done = 19,    ///< WG0 done with KV[0] chunk 8
  tr1_refill_a = 20,  ///< KV[0] chunks 4-8 refill issued
  tr1_pv_b_rescaled = 21,
  tr1_pv_b_issued = 22,
  tr1_pv_b_done = 23,
  tr1_b_done = 24,    ///< WG0 done with KV[1] chunk 8
  tr1_refill_b = 25,  ///< KV[1] chunks 4-8 refill issued
  tr1_count = 26
};
inline constexpr int trace_word = 32;
inline constexpr int trace_pairs = 8;
inline constexpr int trace_events = 32;
inline constexpr int phase_slots = trace_word + trace_pairs * 2 * trace_events / 2;
static_assert(phase_count <= phase_sm, "the phases fit below the SM id's word");
static_assert(phase_clock + phase_count <= trace_word, "the clocks fit below the trace");

enum barrier_id : int {
  bar_p_a = 1,      ///< WG0 -> WG1: frame A and P_A published
  bar_p_b = 2,      ///< WG1 -> WG0: frame B and P_B published
  bar_wg0 = 3,      ///< WG0 alone (128 threads)
  bar_wg1 = 4,      ///< WG1 alone
  bar_qk = 5,       ///< WG0 -> WG1: S_A issued, WG1 may issue S_B (params::stagger_qk)
  bar_a_done = 6,   ///< WG0 -> WG1: WG0's P_A V_A done (KV[0] chunk 8 may be refilled)
  bar_b_done = 7,   ///< WG0 -> WG1: WG0's P_B V_B done (KV[1] chunk 8 may be refilled)
  bar_frame_a = 8,  ///< WG0 -> WG1: frame A published (before P_A)
  bar_frame_b = 9,  ///< WG1 -> WG0: frame B published (before P_B)
};

/// A row's frame as published to the other warpgroup, with the step that produced it and (AMLA)
/// the frame's scalars, which the next step starts from (rescale.cuh, step_frame).
struct frame_message {
  row_frame frame;
  float o_scale;
  std::int32_t o_add;
  amla_scalars scalars;
};

struct shared_storage {
  std::uint8_t q[tile_bytes];
  std::uint8_t kv[2][tile_bytes];
  frame_message msg_a[rows_per_cta];
  frame_message msg_b[rows_per_cta];
  float l_part[2][rows_per_cta];  ///< the epilogue's l exchange
  std::uint64_t bar_q;
  std::uint64_t bar_kv[2][chunks];
};

/// The AMLA scalars of this warpgroup's frame `f` of a row, published in `msg` by the step that
/// made it: the defaults while the row has seen no key (msg not yet written), nothing in the
/// standard mode.
template <rescale_mode Mode>
__device__ __forceinline__ amla_scalars scalars_of(const row_frame& f, const frame_message& msg) {
  if constexpr (Mode == rescale_mode::amla) {
    if (f.m != neg_inf_f) return msg.scalars;
  }
  return amla_scalars{};
}

/// c ? a : b, field by field (a select of the whole struct goes through the stack).
__device__ __forceinline__ frame_step select_step(bool c, const frame_step& a,
                                                  const frame_step& b) {
  frame_step r;
  r.next.m = c ? a.next.m : b.next.m;
  r.o_scale = c ? a.o_scale : b.o_scale;
  r.o_add = c ? a.o_add : b.o_add;
  r.p_scale = c ? a.p_scale : b.p_scale;
  r.l_scale = c ? a.l_scale : b.l_scale;
  return r;
}

/// The frame steps of this thread's two rows r0 (st0) and r1 (st1) to the running maxima m0, m1
/// (>= the old ones). The four threads of a quad hold the same two rows, so in AMLA mode each row's
/// scalars and k (the moved step's exp2, BF16 rounding and two divisions) are computed by half of
/// the quad only: threads with quad < 2 compute row r0's, those with quad >= 2 row r1's (the own
/// row, `upper` = quad >= 2), and each takes the other row's k and S16 from lane ^ 2, which holds
/// the same rows and computed the other one. A warp thus runs the moved step's arithmetic once per
/// block, not once per row, with the same values bit for bit. prev_own: the own row's previous
/// scalars; own receives its new ones. `mine` is the own row's step (st1 if upper, else st0). The
/// standard mode steps both rows (an exp2 each). unmoved_k: amla_unmoved_k(step), computed once
/// by the kernel.
template <rescale_mode Mode>
__device__ __forceinline__ void step_rows(const row_frame& f0, const row_frame& f1, float m0,
                                          float m1, bool upper, const amla_scalars& prev_own,
                                          amla_scalars& own, const amla_step_options& step,
                                          std::int32_t unmoved_k, frame_step& st0, frame_step& st1,
                                          frame_step& mine) {
  if constexpr (Mode == rescale_mode::standard) {
    amla_scalars none;
    st0 = step_frame<Mode>(f0, amla_scalars{}, m0, none, step);
    st1 = step_frame<Mode>(f1, amla_scalars{}, m1, none, step);
    own = amla_scalars{};
    mine = select_step(upper, st1, st0);
  } else {
    mine = step_frame<Mode>(row_frame{upper ? f1.m : f0.m}, prev_own, upper ? m1 : m0, own, step,
                            unmoved_k);
    // The other row: its frame and l scale as the standard step has them (no AMLA scalars), its
    // add and S16 from the partner lane.
    amla_scalars none;
    frame_step other = step_frame<rescale_mode::standard>(
        row_frame{upper ? f0.m : f1.m}, amla_scalars{}, upper ? m0 : m1, none, step);
    other.o_scale = 1.0f;
    other.o_add = __shfl_xor_sync(0xffffffffu, mine.o_add, 2);
    other.p_scale = __shfl_xor_sync(0xffffffffu, mine.p_scale, 2);
    st0 = select_step(upper, other, mine);
    st1 = select_step(upper, mine, other);
  }
}

/// Dynamic shared memory to request. Its start is 1024-byte aligned (the 128-byte swizzle repeats
/// every 1024 bytes and the descriptors assume aligned tiles; the kernel checks it).
inline constexpr std::size_t smem_bytes = sizeof(shared_storage);
static_assert(smem_bytes <= 227 * 1024, "the Hopper kernel's shared memory exceeds 227 KB");

struct params {
  DecodeShape shape;  ///< offsets and the mask come from problem/shape.hpp (h_kv = 1)
  int rows;           ///< s_q * h_q
  int row_blocks;     ///< ceil(rows / 64)
  bool causal;
  int kv_l2_hint;    ///< 0 none, 1 evict first, 2 evict last (TMA loads of Q and the KV cache)
  int stagger_qk;    ///< 1: WG1 issues S_B only after WG0 has issued S_A
  int skip_unmoved;  ///< 1: AMLA's identity steps add 0 (CudaDecodeOptions::skip_unmoved)
  /// 1: the schedule cuts no request, as the host knows from its bounds (one fixed split, or a
  /// sized schedule of a batch that fills a wave): piece b is request b, whole, found without
  /// reading the plan (piece_of_cta).
  int whole_requests;
  /// With whole_requests, a reused plan's list of the requests longest first
  /// (split_plan::order_kernel): piece i is request order[i]. nullptr: request i.
  const std::int32_t* order;
  float scale_log2;
  const std::int32_t* block_table;
  const std::int32_t* seqlens;
  /// The split-KV schedule: its seqlens are `seqlens`; a sized one takes its piece length from
  /// `plan` (split_plan.cuh computes it on the GPU).
  SplitScheduleView schedule;
  const split_plan::header* plan;
  /// 1: `plan` was made by an earlier plan_decode for lengths that may have changed since; each
  /// CTA checks its request's piece count against the current length (plan_matches).
  int plan_reused;
  /// A reused plan's piece list (split_plan::piece_entry, gridDim.y entries) where the schedule
  /// may cut a request: CTA (m, i) reads piece i there. nullptr: piece_at's search.
  const split_plan::piece_entry* piece_list;
  /// The kernel that sizes the schedule itself (decode_kernel's SizeHere; a sized schedule of a
  /// small batch): every warp of every CTA sizes it for this many slots
  /// (split_plan::search_piece_blocks, scan_plan) and the first warp of CTA (0, 0) writes the plan
  /// for the combine to plan_written (without the piece list, which only a reused plan has).
  int fused_plan_slots;
  split_plan::plan_out plan_written;
  __nv_bfloat16* out;  ///< final outputs (pieces with slot -1)
  float* lse;
  float* out_part;  ///< [slots, rows, 512]
  float* lse_part;  ///< [slots, rows]
  /// A timing build's record (AMLA_CUDA_PHASE_TIMES; enum phase), or nullptr: none.
  std::uint64_t* phase_times;
};

/// Records phase `ph` of this CTA in a timing build (the caller picks the one thread that does);
/// nothing otherwise.
/// This CTA's phase_slots words of params::phase_times.
__device__ __forceinline__ std::uint64_t* phase_record(const params& p) {
  return p.phase_times + (static_cast<std::uint64_t>(blockIdx.y) * gridDim.x + blockIdx.x) *
                             static_cast<std::uint64_t>(phase_slots);
}

__device__ __forceinline__ void mark_phase(const params& p, int ph) {
  if constexpr (phase_times_built) {
    if (p.phase_times == nullptr) return;
    std::uint64_t* rec = phase_record(p);
    const std::uint64_t clk = static_cast<std::uint64_t>(clock64());
    rec[ph] = ptx::globaltimer_ns();
    rec[phase_clock + ph] = clk;
  }
}

/// The first traced pair of a piece of `pairs` pairs: the middle, so that the trace sees the
/// running maxima settled as most of a long piece does.
__device__ __forceinline__ int trace_first(int pairs) {
  return max(0, min(pairs / 2, pairs - trace_pairs));
}

/// This warpgroup leader's trace entries for pair j in a timing build, or nullptr (not traced).
__device__ __forceinline__ std::uint32_t* trace_of(const params& p, int j, int first, int wg,
                                                   bool leader) {
  if constexpr (phase_times_built) {
    if (p.phase_times != nullptr && leader && j >= first && j < first + trace_pairs) {
      return reinterpret_cast<std::uint32_t*>(phase_record(p) + trace_word) +
             ((j - first) * 2 + wg) * trace_events;
    }
  }
  return nullptr;
}

/// Records event e in a trace (trace_of); nothing when tr is nullptr or in a default build.
__device__ __forceinline__ void trace(std::uint32_t* tr, int e) {
  if constexpr (phase_times_built) {
    if (tr != nullptr) tr[e] = static_cast<std::uint32_t>(clock64());
  }
}

/// trace() after a named barrier: first a shared memory load, which the barrier holds back until
/// its release, and a branch on its value, which the warp cannot pass before the load returns.
__device__ __forceinline__ void trace_after_barrier(std::uint32_t* tr, int e, const void* word) {
  if constexpr (phase_times_built) {
    if (tr != nullptr) {
      const std::uint32_t v = *static_cast<const volatile std::uint32_t*>(word);
      if (v == 0x7FC00001u) tr[trace_events - 1] = v;  // never taken: a NaN payload no l holds
      tr[e] = static_cast<std::uint32_t>(clock64());
    }
  }
}

/// The schedule as the kernel reads it: a sized one's piece length comes from the plan the kernel
/// before this one wrote.
__device__ __forceinline__ SplitScheduleView schedule_of(const params& p) {
  SplitScheduleView v = p.schedule;
  if (v.num_splits == 0) {
    v.piece_blocks = p.plan->piece_blocks;
  }
  return v;
}

/// A reused plan (params::plan_reused) gave request b `planned` pieces: the current length must
/// need as many with the plan's piece length, else the plan is stale and the CTA traps (a schedule
/// whose piece counts match is valid for the current lengths; every request has a piece, so some
/// CTA checks each).
__device__ __forceinline__ void plan_matches(const params& p, const SplitScheduleView& v, int b,
                                             int planned) {
  if (!p.plan_reused) return;
  const int now = split_schedule::pieces_for(split_schedule::blocks_of(v.seqlens[b], v.block_keys),
                                             v.piece_blocks);
  // No printf here: a call in the kernel serialises its wgmma pipeline (ptxas C7510).
  if (now != planned) __trap();
}

/// Request b whole: its one piece.
__device__ __forceinline__ SplitPiece whole_request(const params& p, int b) {
  return split_schedule::piece_of(b, split_schedule::blocks_of(p.seqlens[b], block_keys), 1, 0, 0);
}

/// Piece `index` of the schedule (split_schedule::piece_at's piece) for a kernel that does not
/// size the schedule itself: whole requests (params::whole_requests: a batch that fills a wave,
/// in a reused plan's order), a reused plan's piece list (params::piece_list: one load, where
/// piece_at would search piece_prefix with log2(batch) loads, each waiting for the last), or else
/// fixed splits (arithmetic). Returns false past the last piece.
__device__ __forceinline__ bool piece_of_cta(const params& p, int index, SplitPiece& piece) {
  if (p.whole_requests) {
    if (index >= p.schedule.batch) return false;
    piece = whole_request(p, p.order != nullptr ? p.order[index] : index);
    return true;
  }
  if (p.piece_list != nullptr) {
    const split_plan::piece_entry e = p.piece_list[index];
    if (e.request < 0) return false;
    plan_matches(p, schedule_of(p), e.request, e.pieces);
    piece = split_schedule::piece_of(e.request,
                                     split_schedule::blocks_of(p.seqlens[e.request], block_keys),
                                     e.pieces, e.index, e.first_slot);
    return true;
  }
  return split_schedule::piece_at(p.schedule, index, piece);
}

/// Visible keys of request row r (token t = r / h_q).
__device__ __forceinline__ int row_visible(const params& p, int seqlen, int r) {
  return visible_keys(seqlen, p.shape.s_q, r / p.shape.h_q, p.causal);
}

/// One piece as this CTA's rows see it: the block range clipped to the row block's last visible
/// key, the visible counts of this thread's rows r0, r1 and of the CTA's first and last real rows.
struct piece_rows {
  int request, slot, seqlen;
  int kb_begin, kb_end;
  int vis0, vis1, vis_min, vis_max;
  const std::int32_t* table;
};

__device__ __forceinline__ piece_rows rows_of(const params& p, const SplitPiece& pc, int row_first,
                                              int r0, int r1) {
  piece_rows c;
  c.request = pc.request;
  c.slot = pc.slot;
  c.seqlen = p.seqlens[pc.request];
  const int row_last = min(row_first + rows_per_cta, p.rows) - 1;
  c.vis_min = row_visible(p, c.seqlen, row_first);
  c.vis_max = row_visible(p, c.seqlen, row_last);
  // Padding rows (past p.rows) see as much as the last real row: they compute finite garbage
  // that is never written, and never widen the key range.
  c.vis0 = row_first + r0 <= row_last ? row_visible(p, c.seqlen, row_first + r0) : c.vis_max;
  c.vis1 = row_first + r1 <= row_last ? row_visible(p, c.seqlen, row_first + r1) : c.vis_max;
  const int n_blocks = (c.vis_max + block_keys - 1) / block_keys;
  c.kb_end = min(pc.block_end, n_blocks);
  c.kb_begin = min(pc.block_begin, c.kb_end);
  c.table = p.block_table + p.shape.table_offset(pc.request, 0);
  return c;
}

/// One bulk tensor copy with the kernel's L2 policy (evict normal when there is no hint).
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int c0, int c1,
                                         std::uint64_t* bar, std::uint64_t policy) {
  ptx::tma_load_2d_hint(dst, map, c0, c1, bar, policy);
}

/// block_row for pages of several blocks: a division by the page size, out of line
/// (AMLA_CUDA_COLD).
__device__ AMLA_CUDA_COLD int block_row_in_page(const std::int32_t* table, int ps, int kb) {
  const int key0 = kb * block_keys;
  return table[key0 / ps] * ps + key0 % ps;
}

/// The cache row of block kb's first key when pages hold whole blocks (page_size >= 64), else 0
/// (load_kv then reads the table per sub-page). Pages of exactly one block (the common layout)
/// need no division by the page size. A refill reads it before it waits for the P V that frees
/// the buffer, so that neither the table read nor its arithmetic lies between that P V's end and
/// the copies.
__device__ __forceinline__ int block_row(const params& p, const piece_rows& pr, int kb) {
  const int ps = p.shape.page_size;
  if (ps == block_keys) return pr.table[kb] * block_keys;
  return ps < block_keys ? 0 : block_row_in_page(pr.table, ps, kb);
}

/// The TMA loads of chunks [c_lo, c_hi) of KV block kb into buffer `buf` (one thread) when pages
/// are smaller than a block: each chunk is filled page by page, and the pages of a block past the
/// sequence's length are loaded from a negative, out-of-bounds row (zeros) so that their
/// block_table entries are never read. Out of line (AMLA_CUDA_COLD); the arguments are values, so
/// that the caller keeps its own in registers.
__device__ AMLA_CUDA_COLD void load_kv_pages(shared_storage& sm, const CUtensorMap* map,
                                             const std::int32_t* table, int seqlen, int ps,
                                             std::uint64_t policy, int buf, int kb, int c_lo,
                                             int c_hi) {
  const int key0 = kb * block_keys;
  const int subs = block_keys / ps;
  for (int c = c_lo; c < c_hi; ++c) {
    ptx::mbar_arrive_expect_tx(&sm.bar_kv[buf][c], chunk_bytes);
    for (int s = 0; s < subs; ++s) {
      const int key = key0 + s * ps;
      const int row = key < seqlen ? table[key / ps] * ps : -ps;
      tma_load(sm.kv[buf] + c * chunk_bytes + s * ps * 128, map, c * 64, row, &sm.bar_kv[buf][c],
               policy);
    }
  }
}

/// Issues the TMA loads of chunks [c_lo, c_hi) of KV block kb into buffer `buf`; `row` is
/// block_row(p, pr, kb), used when pages hold whole blocks. Called by one thread with Warps = 1
/// (`warp` 0), or, for a refill in the block loop, by the first lane of each of a warpgroup's
/// Warps = 4 warps, warp w issuing chunks c_lo + w, c_lo + w + 4, ... (each of them with `row`);
/// pages smaller than a block are then loaded by warp 0 alone (load_kv_pages).
template <int Warps = 1>
__device__ __forceinline__ void load_kv(shared_storage& sm, const CUtensorMap* map, const params& p,
                                        const piece_rows& pr, std::uint64_t policy, int buf, int kb,
                                        int c_lo, int c_hi, int row, int warp = 0) {
  if (p.shape.page_size < block_keys) {
    if (warp == 0) {
      load_kv_pages(sm, map, pr.table, pr.seqlen, p.shape.page_size, policy, buf, kb, c_lo, c_hi);
    }
    return;
  }
  for (int c = c_lo + warp; c < c_hi; c += Warps) {
    ptx::mbar_arrive_expect_tx(&sm.bar_kv[buf][c], chunk_bytes);
    tma_load(sm.kv[buf] + c * chunk_bytes, map, c * 64, row, &sm.bar_kv[buf][c], policy);
  }
}

/// The loads a piece starts with (one thread): its Q row block and its first two KV blocks. A
/// piece with no block for this row block loads nothing.
__device__ __forceinline__ void load_piece(shared_storage& sm, const CUtensorMap* tm_q,
                                           const CUtensorMap* tm_kv, const params& p,
                                           const piece_rows& pr, int row_first,
                                           std::uint64_t policy) {
  if (pr.kb_begin >= pr.kb_end) return;
  ptx::mbar_arrive_expect_tx(&sm.bar_q, tile_bytes);
  const int q_row = pr.request * p.rows + row_first;
  for (int c = 0; c < chunks; ++c) {
    tma_load(sm.q + c * chunk_bytes, tm_q, c * 64, q_row, &sm.bar_q, policy);
  }
  load_kv(sm, tm_kv, p, pr, policy, 0, pr.kb_begin, 0, chunks, block_row(p, pr, pr.kb_begin));
  if (pr.kb_begin + 1 < pr.kb_end) {
    load_kv(sm, tm_kv, p, pr, policy, 1, pr.kb_begin + 1, 0, chunks,
            block_row(p, pr, pr.kb_begin + 1));
  }
}

/// A shared memory matrix descriptor (ptx::smem_desc_sw128, 128-byte swizzle, 1024-byte 8-row
/// groups) kept as its two 32-bit words, built once per buffer and stepped per wgmma: the start
/// address (bytes / 16) is the low word's lowest 14 bits, and every address of the kernel's storage
/// lies below 2^18 bytes, so moving the descriptor by a multiple of 16 bytes is one 32-bit add to
/// the low word with no carry out of the field (building it anew costs about eight
/// uniform-datapath instructions per wgmma).
struct smem_desc {
  std::uint32_t lo, hi;
  __device__ __forceinline__ std::uint64_t at(std::uint32_t bytes) const {
    return static_cast<std::uint64_t>(hi) << 32 | (lo + (bytes >> 4));
  }
};
/// The descriptor of `base` with the given leading byte offset (K-major tiles: unused, 16;
/// V as an MN-major operand: the distance between its 64-column chunks).
__device__ __forceinline__ smem_desc make_desc(const std::uint8_t* base, std::uint32_t lead_bytes) {
  const std::uint64_t d = ptx::smem_desc_sw128(ptx::smem_u32(base), lead_bytes, 1024);
  return smem_desc{static_cast<std::uint32_t>(d), static_cast<std::uint32_t>(d >> 32)};
}
/// Descriptor of a K-major 64-row tile chunk (Q, K or P), k-step kk (16 columns) within it.
__device__ __forceinline__ std::uint64_t desc_kmajor(const std::uint8_t* chunk, int kk) {
  return make_desc(chunk, 16).at(kk * 32);
}
/// Descriptor of V (MN-major B operand): 16 keys from key 16 kk, 256 columns from chunk c0.
__device__ __forceinline__ std::uint64_t desc_v(const std::uint8_t* buf, int c0, int kk) {
  return make_desc(buf, chunk_bytes).at(c0 * chunk_bytes + kk * 2048);
}

/// S = Q K^T for the block in buffer `buf`, consuming chunks in the order given. With `signal`,
/// arrives at bar_qk once every wgmma is issued (before waiting for them).
template <int C0, int C1, int C2, int C3, int C4, int C5, int C6, int C7, int C8>
__device__ __forceinline__ void qk_product(float (&s)[32], shared_storage& sm, int buf,
                                           std::uint32_t parity, bool signal = false,
                                           std::uint32_t* tr = nullptr, int tr_chunk = 0) {
  constexpr int order[chunks] = {C0, C1, C2, C3, C4, C5, C6, C7, C8};
  const smem_desc dq = make_desc(sm.q, 16), dk = make_desc(sm.kv[buf], 16);
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.0f;
  ptx::fence_regs(s);
#pragma unroll
  for (int ci = 0; ci < chunks; ++ci) {
    const int c = order[ci];
    ptx::mbar_wait(&sm.bar_kv[buf][c], parity);
    trace(tr, tr_chunk + ci);
    // A fence after every wait, as CUTLASS's mainloops do: the wait is a loop, and without an
    // explicit fence ptxas inserts its own on that path and serialises all wgmma (C7520).
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const std::uint32_t at = c * chunk_bytes + kk * 32;
      ptx::wgmma_m64n64k16_ss_kmajor(s, dq.at(at), dk.at(at), (ci | kk) != 0 ? 1 : 0);
    }
  }
  ptx::wgmma_commit();
  if (signal) ptx::bar_arrive(bar_qk, 256);
  ptx::wgmma_wait<0>();
  ptx::fence_regs(s);
}

/// Masks the raw scores of keys a row cannot see (-inf). Rows r0 (elements e < 2) and
/// r1 = r0 + 8 (e >= 2); element i holds key 8 (i / 4) + 2 quad + (i & 1) of the block.
__device__ __forceinline__ void mask_scores(float (&s)[32], int key_base, int vis0, int vis1,
                                            int quad) {
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int key = key_base + 8 * (i / 4) + 2 * quad + (i & 1);
    if (key >= ((i & 2) ? vis1 : vis0)) s[i] = neg_inf_f;
  }
}

/// The maximum (NaN-propagating) of this thread's 16 raw scores of row r0 (H = 0: elements i with
/// (i & 2) == 0) or r1 (H = 1) as a tree: four dependent steps instead of sixteen.
template <int H>
__device__ __forceinline__ float tree_max_row(const float (&s)[32]) {
  const auto at = [&](int j) { return s[(j / 2) * 4 + 2 * H + j % 2]; };  // the row's j-th
  const float a0 = max_nan(at(0), at(8)), a1 = max_nan(at(1), at(9)), a2 = max_nan(at(2), at(10)),
              a3 = max_nan(at(3), at(11)), a4 = max_nan(at(4), at(12)), a5 = max_nan(at(5), at(13)),
              a6 = max_nan(at(6), at(14)), a7 = max_nan(at(7), at(15));
  const float b0 = max_nan(a0, a4), b1 = max_nan(a1, a5), b2 = max_nan(a2, a6),
              b3 = max_nan(a3, a7);
  return max_nan(max_nan(b0, b2), max_nan(b1, b3));
}

/// Row maxima of rows r0 (mx0) and r1 (mx1) over the block in base 2, NaN-propagating
/// (rescale.cuh): the maxima of the scaled scores s scale_log2 (each product rounded on its own, as
/// the CPU recurrence scales its scores), taken on the raw scores and multiplied once, which is the
/// same bit for bit (rounding a product by a positive constant is monotonic). Each thread's 16
/// scores of a row are reduced as a tree (the maximum does not depend on the order). The scores
/// themselves stay raw: exponentiate scales them inside its exponent.
__device__ __forceinline__ void row_max(const float (&s)[32], float scale_log2, float& mx0,
                                        float& mx1) {
  mx0 = tree_max_row<0>(s);
  mx1 = tree_max_row<1>(s);
#pragma unroll
  for (int o = 1; o <= 2; o <<= 1) {
    mx0 = max_nan(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));
    mx1 = max_nan(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));
  }
  mx0 = __fmul_rn(mx0, scale_log2);
  mx1 = __fmul_rn(mx1, scale_log2);
}

/// The magnitude of a row's max below which exponentiate rounds s scale_log2 - m once.
inline constexpr float fused_exponent_limit = 4096.0f;

/// s <- exp2(s scale_log2 - m) per row for raw scores s; returns this thread's partial row sums
/// (the quad reduction waits until the end, since l only ever gets per-row scales). Where |m| is
/// below fused_exponent_limit (2^12), the product and the difference are rounded once (one FMA an
/// element, as FlashMLA's softmax computes it): the exponent then differs from the CPU
/// recurrence's (the scaled score rounded first) by at most half an ulp of m, 2^-13, the size of
/// that rounding itself. Elsewhere (a max of 2^12 or more, infinite or NaN) the products are
/// rounded first, as the CPU recurrence rounds them, so that the row's largest scores give exp2(0)
/// = 1 exactly: the fused exponent of a score whose product is 2^40 is off by up to 2^16, which
/// makes P 0 or inf.
__device__ __forceinline__ void exponentiate(float (&s)[32], float scale_log2, float m0, float m1,
                                             float& sum0, float& sum1) {
  const bool fused0 = fabsf(m0) < fused_exponent_limit, fused1 = fabsf(m1) < fused_exponent_limit;
  if (!(fused0 && fused1)) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      if (!((i & 2) ? fused1 : fused0)) s[i] = __fmul_rn(s[i], scale_log2);
    }
  }
  const float c0 = fused0 ? scale_log2 : 1.0f, c1 = fused1 ? scale_log2 : 1.0f;
  const float u0 = usable_max(m0), u1 = usable_max(m1);
  sum0 = 0.0f;
  sum1 = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const float e = fast_exp2(__fmaf_rn(s[i], (i & 2) ? c1 : c0, -((i & 2) ? u1 : u0)));
    s[i] = e;
    if (i & 2) {
      sum1 += e;
    } else {
      sum0 += e;
    }
  }
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

/// The m16k16 A fragments of P for the 4 k-steps of a 64-key block, each row scaled by ps0/ps1.
template <bool Scaled>
__device__ __forceinline__ void make_p_fragments(std::uint32_t (&a)[4][4], const float (&s)[32],
                                                 float ps0, float ps1) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const int i = 8 * kk;
    if constexpr (Scaled) {
      a[kk][0] = pack_bf16(s[i + 0] * ps0, s[i + 1] * ps0);
      a[kk][1] = pack_bf16(s[i + 2] * ps1, s[i + 3] * ps1);
      a[kk][2] = pack_bf16(s[i + 4] * ps0, s[i + 5] * ps0);
      a[kk][3] = pack_bf16(s[i + 6] * ps1, s[i + 7] * ps1);
    } else {
      a[kk][0] = pack_bf16(s[i + 0], s[i + 1]);
      a[kk][1] = pack_bf16(s[i + 2], s[i + 3]);
      a[kk][2] = pack_bf16(s[i + 4], s[i + 5]);
      a[kk][3] = pack_bf16(s[i + 6], s[i + 7]);
    }
  }
}

/// Writes P fragments into a 64 x 64 BF16 tile with the 128-byte swizzle (16-byte unit u of row r
/// lands at unit u ^ (r & 7)); conflict-free: the 8 rows of a warp store hit 8 different units.
__device__ __forceinline__ void store_p_tile(std::uint8_t* tile, const std::uint32_t (&a)[4][4],
                                             int r0, int quad) {
  const int r1 = r0 + 8;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int unit = 2 * kk + h;  // 8-key column group
      *reinterpret_cast<std::uint32_t*>(tile + r0 * 128 + ((unit ^ (r0 & 7)) << 4) + quad * 4) =
          a[kk][2 * h + 0];
      *reinterpret_cast<std::uint32_t*>(tile + r1 * 128 + ((unit ^ (r1 & 7)) << 4) + quad * 4) =
          a[kk][2 * h + 1];
    }
  }
}

/// Prepares V rows [first_key, 64) of chunks [c0, c0 + 4) for the tensor cores, which multiply
/// every row of V by every row's P, 0 included (0 * NaN = NaN): rows from `hidden_key` on (past
/// the CTA's last visible key: anything, NaN included, may be there) become zeros; rows in
/// [first_key, hidden_key) (keys a causal mask shows to some rows of the CTA and hides from
/// others) keep their finite values and have their non-finite ones replaced by 0. Called by one
/// warpgroup (128 threads) that then fences and syncs before its wgmma reads them. Out of line
/// (AMLA_CUDA_COLD): only the last blocks a CTA's rows see take it.
__device__ AMLA_CUDA_COLD void prepare_v_rows(std::uint8_t* buf, int first_key, int hidden_key,
                                              int c0, int tid_wg) {
  // Thread t of the warpgroup owns word t % 32 (two BF16) of chunk c0 + t / 32 in every row: no
  // index arithmetic and few live registers, since the accumulators are live across this.
  std::uint32_t* w =
      reinterpret_cast<std::uint32_t*>(buf + (c0 + tid_wg / 32) * chunk_bytes) + tid_wg % 32;
  for (int row = first_key; row < block_keys; ++row) {
    std::uint32_t x = 0u;
    if (row < hidden_key) {
      x = w[row * 32];  // exponent all ones: Inf or NaN
      if ((x & 0x7F800000u) == 0x7F800000u) x &= 0x0000FFFFu;
      if ((x & 0x00007F80u) == 0x00007F80u) x &= 0xFFFF0000u;
    }
    w[row * 32] = x;
  }
}

template <rescale_mode Mode, bool SafeAdd, int N>
__device__ __forceinline__ void rescale_rows(float (&o)[N], const frame_step& st0,
                                             const frame_step& st1) {
  if constexpr (Mode == rescale_mode::standard) {
    // A factor of exactly 1 leaves O unchanged: skip the multiply when the whole warp agrees.
    if (__all_sync(0xffffffffu, st0.o_scale == 1.0f && st1.o_scale == 1.0f)) return;
#pragma unroll
    for (int i = 0; i < N; ++i) o[i] *= (i & 2) ? st1.o_scale : st0.o_scale;
  } else {
    if (__all_sync(0xffffffffu, st0.o_add == 0 && st1.o_add == 0)) return;
    const std::uint32_t k0 = static_cast<std::uint32_t>(st0.o_add);
    const std::uint32_t k1 = static_cast<std::uint32_t>(st1.o_add);
    if constexpr (SafeAdd) {
      // The safe add (rescale.cuh, amla_add_flush) is the raw add on every element at or above
      // its row's window low end: when the whole warp's elements are, the raw add alone runs (one
      // instruction an element, on the FMA pipe) after a pass of magnitude minima (one on the ALU
      // pipe), where the three-instruction form takes three issue slots an element. A zero, a
      // value below the window or a NaN (the minimum propagates it) sends the warp to that form.
      // Eight independent minima, so that the pass is not one chain of dependent instructions.
      const float lo0 = __uint_as_float(kept_window(st0.o_add).lo),
                  lo1 = __uint_as_float(kept_window(st1.o_add).lo);
      float mins[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) mins[j] = __int_as_float(0x7F800000);  // +inf
#pragma unroll
      for (int i = 0; i < N; ++i) {
        // Row r0's elements (i & 2 == 0) in mins[0..3], row r1's in mins[4..7].
        const int j = (i & 2) * 2 + (i & 1) * 2 + ((i >> 2) & 1);
        mins[j] = min_abs_nan(mins[j], o[i]);
      }
      // The minima are magnitudes already: min_abs_nan merges them, a NaN included.
      const float m0 = min_abs_nan(min_abs_nan(mins[0], mins[1]), min_abs_nan(mins[2], mins[3]));
      const float m1 = min_abs_nan(min_abs_nan(mins[4], mins[5]), min_abs_nan(mins[6], mins[7]));
      if (!__all_sync(0xffffffffu, m0 >= lo0 && m1 >= lo1)) {  // true for a NaN minimum
        // In one pass: a second, fix-up pass over the 128 accumulators makes the kernel spill.
#pragma unroll
        for (int i = 0; i < N; ++i) {
          amla_add_flush(o[i], (i & 2) ? k1 : k0, (i & 2) ? lo1 : lo0);
        }
        return;
      }
    }
    // The hardware form, and the safe form of a warp inside its windows: the raw add.
#pragma unroll
    for (int i = 0; i < N; ++i) ptx::add_to_pattern(o[i], (i & 2) ? k1 : k0);
  }
}

/// Issues O (+)= P V for one warpgroup's half and commits it (the caller waits): P is the block's
/// 64 x 64 tile in chunk 8 of `buf`, V the 256 columns from chunk c0.
__device__ __forceinline__ void pv_issue(float (&o)[128], const std::uint8_t* buf, int c0) {
  const smem_desc dp = make_desc(buf + 8 * chunk_bytes, 16), dv = make_desc(buf, chunk_bytes);
  ptx::fence_regs(o);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    ptx::wgmma_m64n256k16_ss<true>(o, dp.at(kk * 32), dv.at(c0 * chunk_bytes + kk * 2048), 1);
  }
  ptx::wgmma_commit();
}

/// Whether block kb holds keys some row of the CTA does not see (keys from vis_min on).
__device__ __forceinline__ bool hides_keys(const piece_rows& pr, int kb) {
  return (kb + 1) * block_keys > pr.vis_min;
}

/// prepare_v_rows for block kb of the piece, this warpgroup's half of V (chunks c0..c0 + 3).
__device__ __forceinline__ void hide_keys(std::uint8_t* buf, int c0, int kb, const piece_rows& pr,
                                          int tid_wg) {
  const int key0 = kb * block_keys;
  prepare_v_rows(buf, max(pr.vis_min - key0, 0), max(pr.vis_max - key0, 0), c0, tid_wg);
}

/// One warpgroup's P V of block kb in `buf` (its half of V: chunks c0..c0 + 3): O moved to the
/// block's frame (rescale_rows; not with `rescale` false: the caller has moved it), the V rows some
/// row of the CTA does not see prepared (hide_keys), the wgmma issued and committed; the caller
/// waits. own_p: this warpgroup stored the P tile itself, so all its warps must have written it
/// before the wgmma reads it (a tile from the other warpgroup was ordered by the named barrier that
/// published it).
template <rescale_mode Mode, bool SafeAdd>
__device__ __forceinline__ void pv_step(float (&o)[128], const frame_step& st0,
                                        const frame_step& st1, std::uint8_t* buf, int c0, int kb,
                                        const piece_rows& pr, int bar, int tid_wg, bool own_p,
                                        std::uint32_t* tr = nullptr, int tr_rescaled = 0,
                                        bool rescale = true) {
  if (rescale) rescale_rows<Mode, SafeAdd>(o, st0, st1);
  trace(tr, tr_rescaled);
  const bool hide = hides_keys(pr, kb);
  if (hide) hide_keys(buf, c0, kb, pr, tid_wg);
  if (hide || own_p) {
    ptx::fence_proxy_async_smem();
    ptx::bar_sync(bar, 128);  // the P tile and the prepared rows written
  }
  pv_issue(o, buf, c0);
}

static_assert(2 * tile_bytes >= rows_per_cta * d_v * sizeof(float),
              "Q's tile and KV[0] hold the staged FP32 partial rows");

/// The epilogue's staging of the CTA's 64 x 512 output rows in shared memory, row-major from the
/// start of Q's tile (64 KB of BF16, or 128 KB of FP32 partials running on into KV[0]; both free
/// once every warpgroup is past its last wgmma and no TMA load is in flight), so that the global
/// stores are whole 16-byte units, consecutive across a warp. Stored directly from the
/// accumulators, a warp's store covers 8 rows with 16 bytes each (BF16: 64 such stores per
/// thread), and a CTA took about 8 us to issue them (measured in bench/CUDA_RESULTS.md). The
/// 16-byte unit u of row r sits at unit u ^ (r & 7), so that the 8 rows of a warp's staging
/// store fall in different banks and a quarter warp's 16-byte reads in one row do too.
///
/// Padded: the layout bulk copies read instead (bulk_store_rows), row r from r * padded_pitch<T>
/// bytes, unswizzled: d_v values and 8 more, so that every row starts 16-byte aligned and the 8
/// rows of a warp's staging store still fall in different banks (FP32 pairs 8 banks from the row
/// before, BF16 pairs 4).
template <class T>
inline constexpr int padded_pitch = (d_v + 8) * static_cast<int>(sizeof(T));
static_assert(rows_per_cta * padded_pitch<float> <= 2 * tile_bytes,
              "Q's tile and KV[0] hold the padded FP32 rows");

template <class T, bool Padded = false>
__device__ __forceinline__ std::uint8_t* staged_unit(std::uint8_t* stage, int row, int unit) {
  if constexpr (Padded) return stage + row * padded_pitch<T> + (unit << 4);
  return stage + row * (d_v * static_cast<int>(sizeof(T))) + ((unit ^ (row & 7)) << 4);
}

/// Stages the normalised output values a, b of columns col, col + 1 of row `row` (as T).
template <class T, bool Padded = false>
__device__ __forceinline__ void stage_pair(std::uint8_t* stage, int row, int col, float a,
                                           float b) {
  const int byte = col * static_cast<int>(sizeof(T));
  std::uint8_t* at = staged_unit<T, Padded>(stage, row, byte >> 4) + (byte & 15);
  if constexpr (sizeof(T) == 2) {
    *reinterpret_cast<__nv_bfloat162*>(at) = __floats2bfloat162_rn(a, b);
  } else {
    *reinterpret_cast<float2*>(at) = make_float2(a, b);
  }
}

/// Copies the staged rows [0, 64) that are real (row_first + r < rows) to global memory: row r
/// to dst + offset_of(row_first + r) elements. Warp w of the CTA copies rows 8w..8w+7, lane l
/// units l, l + 32, ... of each; 16-byte stores when dst's rows are 16-byte aligned, else
/// 4-byte ones (the driver sends an out that is not 4-byte aligned to the simple kernel).
template <class T, class OffsetOf>
__device__ __forceinline__ void copy_staged_rows(std::uint8_t* stage, T* dst, int row_first,
                                                 int rows, OffsetOf offset_of) {
  constexpr int units = d_v * static_cast<int>(sizeof(T)) / 16;
  const int warp_cta = static_cast<int>(threadIdx.x) / 32,
            lane = static_cast<int>(threadIdx.x) % 32;
  for (int i = 0; i < 8; ++i) {
    const int r = warp_cta * 8 + i;
    if (row_first + r >= rows) break;
    std::uint8_t* row_dst = reinterpret_cast<std::uint8_t*>(dst + offset_of(row_first + r));
    const bool vec = (reinterpret_cast<std::uintptr_t>(row_dst) & 15) == 0;
#pragma unroll
    for (int h = 0; h < units / 32; ++h) {
      const int u = lane + 32 * h;
      const uint4 v = *reinterpret_cast<const uint4*>(staged_unit<T>(stage, r, u));
      if (vec) {
        *reinterpret_cast<uint4*>(row_dst + 16 * u) = v;
      } else {
        std::uint32_t* w = reinterpret_cast<std::uint32_t*>(row_dst + 16 * u);
        w[0] = v.x;
        w[1] = v.y;
        w[2] = v.z;
        w[3] = v.w;
      }
    }
  }
}

/// Issues the bulk copies (ptx::bulk_store) of the rows [0, 64) staged in the padded layout that
/// are real (row_first + r < rows) to global memory, row r to dst + (row_first + r) * d_v, dst
/// 16-byte aligned: one warp, lane l copying rows l and l + 32 as its own bulk group, then waiting
/// only until its copies have read the staged rows: the grid's end, which the combine waits for
/// (griddep_wait, or stream order without programmatic launch), makes their writes visible (0-1%
/// less time at b 16 and b 1 than waiting for the writes; bench/CUDA_RESULTS.md).
template <class T>
__device__ __forceinline__ void bulk_store_rows(std::uint8_t* stage, T* dst, int row_first,
                                                int rows, int lane) {
  for (int r = lane; r < rows_per_cta; r += 32) {
    if (row_first + r < rows) {
      ptx::bulk_store(dst + static_cast<std::int64_t>(row_first + r) * d_v,
                      staged_unit<T, true>(stage, r, 0), d_v * static_cast<int>(sizeof(T)));
    }
  }
  ptx::bulk_commit();
  ptx::bulk_wait_read_all();
}

/// Writes 1 to *flag when the code running it was compiled for sm_90a (the Hopper kernel's real
/// body is there), 0 otherwise. The host asks once per device (driver.cuh, hopper_kernel_built).
/// A template (its argument unused) so that any number of translation units may define it: a
/// plain kernel defined in two of them does not link, with relocatable device code or without.
template <int Unused = 0>
__global__ void sm90a_probe(int* flag) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  *flag = 1;
#else
  *flag = 0;
#endif
}

/// SafeAdd: AMLA's add in the safe form (rescale.cuh); false is the raw hardware add. SizeHere: the
/// CTAs size the split schedule themselves (params::fused_plan_slots) instead of reading the plan
/// a plan kernel wrote. Declared for
/// every architecture; its body exists only in an sm_90a compilation (detail/ptx.cuh), elsewhere
/// it traps with a message (the host never launches it there).
template <rescale_mode Mode, bool SafeAdd, bool SizeHere>
__global__ void __launch_bounds__(threads, 1)
    decode_kernel(const __grid_constant__ CUtensorMap tm_q,
                  const __grid_constant__ CUtensorMap tm_kv, const params p) {
#if defined(__CUDA_ARCH__) && !defined(AMLA_CUDA_SM90A_ENABLED)
  AMLA_CUDA_ARCH_UNSUPPORTED("the Hopper decode kernel (wgmma, TMA)");
#else
  // Dynamic shared memory starts 1024-byte aligned (the kernel has no static shared memory), so
  // the storage is the array itself: every address in it is a constant offset the compiler sees.
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  shared_storage& sm = *reinterpret_cast<shared_storage*>(smem_raw);
  if (ptx::smem_u32(smem_raw) % 1024 != 0) __trap();

  const int row_block = blockIdx.x;
  const int wg = threadIdx.x / 128;
  const int tid_wg = threadIdx.x % 128;
  const int warp = tid_wg / 32, lane = threadIdx.x % 32;
  const int quad = lane % 4;
  const int r0 = warp * 16 + lane / 4, r1 = r0 + 8;  // this thread's two rows within the CTA
  // The row whose AMLA step this thread computes and publishes (step_rows): r0 for quads 0 and 1,
  // r1 for quads 2 and 3.
  const bool upper = quad >= 2;
  const int r_own = upper ? r1 : r0;
  const int row_first = row_block * rows_per_cta;
  const bool leader = tid_wg == 0;
  const bool cta_leader = threadIdx.x == 0;
  // The entry's time is written only once the CTA has a piece (none past the last piece).
  std::uint64_t entry_ns = 0, entry_clk = 0;
  if constexpr (phase_times_built) {
    entry_ns = ptx::globaltimer_ns();
    entry_clk = static_cast<std::uint64_t>(clock64());
  }

  if (threadIdx.x == 0) {
    ptx::mbar_init(&sm.bar_q, 1);
    for (int i = 0; i < 2; ++i)
      for (int c = 0; c < chunks; ++c) ptx::mbar_init(&sm.bar_kv[i][c], 1);
    ptx::fence_mbar_init();
    ptx::prefetch_tensor_map(&tm_q);
    ptx::prefetch_tensor_map(&tm_kv);
  }
  __syncthreads();
  if (cta_leader) mark_phase(p, phase_barriers);
  // Nothing global is read before the kernels this one may overlap (programmatic dependent
  // launch: the plan, or whatever produced the inputs) are complete.
  ptx::griddep_wait();
  if (cta_leader) mark_phase(p, phase_griddep);

  SplitPiece piece;
  if constexpr (SizeHere) {
    // The schedule sized here rather than by a plan kernel before this one, whose run the CTAs
    // would wait for: every warp finds its CTA's piece on its own (split_plan's functions are a
    // warp's); the first warp of CTA (0, 0) also writes the plan.
    const SplitScheduleView v = p.schedule;
    const int t = split_plan::search_piece_blocks(v, p.fused_plan_slots);
    const bool writer = blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x < 32;
    if (!split_plan::scan_plan(v, t, writer ? p.plan_written : split_plan::plan_out{},
                               static_cast<int>(blockIdx.y), piece)) {
      return;  // past the last piece
    }
  } else {
    // A whole request's block table row is known before its length: its first entries are
    // fetched while the length is read (load_kv reads them next; otherwise two dependent misses).
    if (p.whole_requests && threadIdx.x == 0 && static_cast<int>(blockIdx.y) < p.schedule.batch) {
      const int b = static_cast<int>(blockIdx.y);
      ptx::prefetch_l1(p.block_table +
                       p.shape.table_offset(p.order != nullptr ? p.order[b] : b, 0));
    }
    if (!piece_of_cta(p, blockIdx.y, piece)) return;  // past the last piece
  }
  if (cta_leader) mark_phase(p, phase_piece_found);
  const piece_rows pr = rows_of(p, piece, row_first, r0, r1);
  const std::uint64_t policy = ptx::make_l2_policy(p.kv_l2_hint);
  const amla_step_options step = amla_kernel_step(p.skip_unmoved != 0);
  const std::int32_t unmoved_k = amla_unmoved_k(step);
  if (threadIdx.x == 0) load_piece(sm, &tm_q, &tm_kv, p, pr, row_first, policy);
  if constexpr (phase_times_built) {
    if (cta_leader && p.phase_times != nullptr) {
      mark_phase(p, phase_loads_issued);
      std::uint64_t* rec = phase_record(p);
      rec[phase_entry] = entry_ns;
      rec[phase_clock + phase_entry] = entry_clk;
      rec[phase_sm] = ptx::smid();
    }
  }
  {
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    row_frame f0, f1;            // frames of rows r0, r1 (after the last block seen by this WG)
    float l0 = 0.0f, l1 = 0.0f;  // this thread's partial row sums of its own blocks

    if (pr.kb_begin < pr.kb_end) ptx::mbar_wait(&sm.bar_q, 0);
    if (cta_leader) mark_phase(p, phase_q_landed);

    const int tr_first = trace_first((pr.kb_end - pr.kb_begin + 1) / 2);
    for (int j = 0;; ++j) {
      const int kb_a = pr.kb_begin + 2 * j;
      if (kb_a >= pr.kb_end) break;
      const int kb_b = kb_a + 1;
      const bool has_b = kb_b < pr.kb_end;
      const std::uint32_t parity = static_cast<std::uint32_t>(j & 1);
      float s[32];
      std::uint32_t* const tr = trace_of(p, j, tr_first, wg, leader);
      trace(tr, 0);

      if (wg == 0) {
        // ---- WG0: S_A, frame A, P_A (into KV[0] chunk 8, for both warpgroups) ----
        qk_product<0, 1, 2, 3, 4, 5, 6, 7, 8>(s, sm, 0, parity, p.stagger_qk != 0, tr, tr0_chunk);
        trace(tr, tr0_s_done);
        if (cta_leader && j == 0) mark_phase(p, phase_first_s);
        if (hides_keys(pr, kb_a)) mask_scores(s, kb_a * block_keys, pr.vis0, pr.vis1, quad);
        float mx0, mx1;
        row_max(s, p.scale_log2, mx0, mx1);
        // The previous frame's AMLA scalars: frame B of the last pair, published in msg_b (which
        // WG1 rewrites only after this pair's frame A).
        amla_scalars fa;
        frame_step sa0, sa1, sa_own;
        step_rows<Mode>(f0, f1, max_nan(f0.m, mx0), max_nan(f1.m, mx1), upper,
                        scalars_of<Mode>(row_frame{upper ? f1.m : f0.m}, sm.msg_b[r_own]), fa, step,
                        unmoved_k, sa0, sa1, sa_own);
        if ((quad & 1) == 0) {
          sm.msg_a[r_own] = frame_message{sa_own.next, sa_own.o_scale, sa_own.o_add, fa};
        }
        ptx::bar_arrive(bar_frame_a, 256);  // WG1's softmax of block B may start
        trace(tr, tr0_frame);
        float sum0, sum1;
        exponentiate(s, p.scale_log2, sa0.next.m, sa1.next.m, sum0, sum1);
        l0 = l0 * sa0.l_scale + sum0;
        l1 = l1 * sa1.l_scale + sum1;
        {
          std::uint32_t pa[4][4];
          make_p_fragments<Mode == rescale_mode::amla>(pa, s, sa0.p_scale, sa1.p_scale);
          store_p_tile(sm.kv[0] + 8 * chunk_bytes, pa, r0, quad);
        }
        ptx::fence_proxy_async_smem();
        ptx::bar_arrive(bar_p_a, 256);
        trace(tr, tr0_p_published);

        // ---- WG0: O_L = step_A(O_L) + P_A V_A[:, L] (P_A from shared memory: holding its
        // fragments in registers across the rescale would cost 16 registers per thread) ----
        pv_step<Mode, SafeAdd>(o, sa0, sa1, sm.kv[0], 0, kb_a, pr, bar_wg0, tid_wg, true, tr,
                               tr0_pv_a_rescaled);
        trace(tr, tr0_pv_a_issued);
        const bool refill_a = lane == 0 && kb_a + 2 < pr.kb_end;
        const int row_a = refill_a ? block_row(p, pr, kb_a + 2) : 0;
        ptx::wgmma_wait<0>();
        ptx::fence_regs(o);
        ptx::bar_sync(bar_wg0, 128);  // every warp of WG0 is done reading KV[0] chunks 0-3 and 8
        trace_after_barrier(tr, tr0_pv_a_done, &sm.l_part[0][0]);
        ptx::bar_arrive(bar_a_done, 256);
        if (refill_a) load_kv<4>(sm, &tm_kv, p, pr, policy, 0, kb_a + 2, 0, 4, row_a, warp);
        trace(tr, tr0_refill_a);

        // ---- WG0: O_L = step_B(O_L) + P_B V_B[:, L] (P_B from WG1 through KV[1] chunk 8), O_L
        // moved to frame B while WG1 computes P_B ----
        ptx::bar_sync(bar_frame_b, 256);
        const frame_message mb0 = sm.msg_b[r0], mb1 = sm.msg_b[r1];
        const frame_step sb0{mb0.frame, mb0.o_scale, mb0.o_add, 1.0f, 1.0f};
        const frame_step sb1{mb1.frame, mb1.o_scale, mb1.o_add, 1.0f, 1.0f};
        if (has_b) rescale_rows<Mode, SafeAdd>(o, sb0, sb1);
        trace(tr, tr0_pv_b_rescaled);
        ptx::bar_sync(bar_p_b, 256);
        trace_after_barrier(tr, tr0_p_b, &sm.l_part[0][0]);
        if (has_b) {
          pv_step<Mode, SafeAdd>(o, sb0, sb1, sm.kv[1], 0, kb_b, pr, bar_wg0, tid_wg, false,
                                 nullptr, 0, false);
          trace(tr, tr0_pv_b_issued);
          const bool refill_b = lane == 0 && kb_b + 2 < pr.kb_end;
          const int row_b = refill_b ? block_row(p, pr, kb_b + 2) : 0;
          // l_L (blocks A so far) moves from frame A to frame B.
          if (sa0.next.m != neg_inf_f) l0 *= fast_exp2(sa0.next.m - mb0.frame.m);
          if (sa1.next.m != neg_inf_f) l1 *= fast_exp2(sa1.next.m - mb1.frame.m);
          f0 = mb0.frame;
          f1 = mb1.frame;
          ptx::wgmma_wait<0>();
          ptx::fence_regs(o);
          ptx::bar_sync(bar_wg0, 128);
          trace_after_barrier(tr, tr0_pv_b_done, &sm.l_part[0][0]);
          ptx::bar_arrive(bar_b_done, 256);
          if (refill_b) load_kv<4>(sm, &tm_kv, p, pr, policy, 1, kb_b + 2, 0, 4, row_b, warp);
          trace(tr, tr0_refill_b);
        } else {
          f0 = sa0.next;
          f1 = sa1.next;
        }
      } else {
        // ---- WG1: S_B (after S_A on the tensor cores when staggered, so WG0's softmax of block
        // A overlaps it) ----
        if (p.stagger_qk) ptx::bar_sync(bar_qk, 256);
        trace_after_barrier(tr, tr1_stagger, &sm.l_part[0][0]);
        if (has_b) {
          qk_product<0, 1, 2, 3, 4, 5, 6, 7, 8>(s, sm, 1, parity, false, tr, tr1_chunk);
          trace(tr, tr1_s_done);
          if (hides_keys(pr, kb_b)) mask_scores(s, kb_b * block_keys, pr.vis0, pr.vis1, quad);
        } else {
#pragma unroll
          for (int i = 0; i < 32; ++i) s[i] = neg_inf_f;
        }

        // ---- WG1: frame B and the exponentials of S_B, while WG0 finishes block A's softmax ----
        float mx0, mx1;
        row_max(s, p.scale_log2, mx0, mx1);
        ptx::bar_sync(bar_frame_a, 256);
        trace_after_barrier(tr, tr1_frame_a, &sm.l_part[0][0]);
        const frame_message ma0 = sm.msg_a[r0], ma1 = sm.msg_a[r1];
        const amla_scalars fa_own = sm.msg_a[r_own].scalars;
        // An absent block B is the identity step (no add, no scale): frame B = frame A.
        amla_scalars fb = fa_own;
        frame_step sb0{ma0.frame}, sb1{ma1.frame},
            sb_own{row_frame{upper ? ma1.frame.m : ma0.frame.m}};
        if (has_b) {
          step_rows<Mode>(ma0.frame, ma1.frame, max_nan(ma0.frame.m, mx0),
                          max_nan(ma1.frame.m, mx1), upper, fa_own, fb, step, unmoved_k, sb0, sb1,
                          sb_own);
        }
        if ((quad & 1) == 0) {
          sm.msg_b[r_own] = frame_message{sb_own.next, sb_own.o_scale, sb_own.o_add, fb};
        }
        ptx::bar_arrive(bar_frame_b, 256);  // WG0 may move O_L to frame B
        float sum0 = 0.0f, sum1 = 0.0f;
        if (has_b) exponentiate(s, p.scale_log2, sb0.next.m, sb1.next.m, sum0, sum1);
        trace(tr, tr1_exps);

        // ---- WG1: O_R = step_A(O_R) + P_A V_A[:, R] (P_A from WG0 through KV[0] chunk 8) ----
        ptx::bar_sync(bar_p_a, 256);
        trace_after_barrier(tr, tr1_p_a, &sm.l_part[0][0]);
        {
          const frame_step sa0{ma0.frame, ma0.o_scale, ma0.o_add, 1.0f, 1.0f};
          const frame_step sa1{ma1.frame, ma1.o_scale, ma1.o_add, 1.0f, 1.0f};
          pv_step<Mode, SafeAdd>(o, sa0, sa1, sm.kv[0], 4, kb_a, pr, bar_wg1, tid_wg, false, tr,
                                 tr1_pv_a_rescaled);
        }
        trace(tr, tr1_pv_a_issued);
        const bool refill_a = lane == 0 && kb_a + 2 < pr.kb_end;
        const int row_a = refill_a ? block_row(p, pr, kb_a + 2) : 0;

        // ---- WG1: P_B published while P_A V_A runs ----
        if (has_b) {
          std::uint32_t pb[4][4];
          make_p_fragments<Mode == rescale_mode::amla>(pb, s, sb0.p_scale, sb1.p_scale);
          store_p_tile(sm.kv[1] + 8 * chunk_bytes, pb, r0, quad);
          ptx::fence_proxy_async_smem();
        }
        ptx::bar_arrive(bar_p_b, 256);
        trace(tr, tr1_p_published);
        // l_R (blocks B so far) moves from frame f to frame B: exp2(f.m - m_B), 0 when f is empty.
        l0 = (f0.m == neg_inf_f ? 0.0f : l0 * fast_exp2(f0.m - sb0.next.m)) + sum0;
        l1 = (f1.m == neg_inf_f ? 0.0f : l1 * fast_exp2(f1.m - sb1.next.m)) + sum1;
        f0 = sb0.next;
        f1 = sb1.next;
        ptx::wgmma_wait<0>();
        ptx::fence_regs(o);
        ptx::bar_sync(bar_wg1, 128);  // every warp of WG1 is done reading KV[0] chunks 4-8
        trace_after_barrier(tr, tr1_pv_a_done, &sm.l_part[0][0]);
        ptx::bar_sync(bar_a_done, 256);  // and WG0 with chunk 8 (P_A)
        trace_after_barrier(tr, tr1_a_done, &sm.l_part[0][0]);
        if (refill_a) load_kv<4>(sm, &tm_kv, p, pr, policy, 0, kb_a + 2, 4, 9, row_a, warp);
        trace(tr, tr1_refill_a);

        // ---- WG1: O_R = step_B(O_R) + P_B V_B[:, R] (P_B from shared memory; the barrier
        // above ordered all four warps' rows of it) ----
        if (has_b) {
          pv_step<Mode, SafeAdd>(o, sb0, sb1, sm.kv[1], 4, kb_b, pr, bar_wg1, tid_wg, false, tr,
                                 tr1_pv_b_rescaled);
          trace(tr, tr1_pv_b_issued);
          const bool refill_b = lane == 0 && kb_b + 2 < pr.kb_end;
          const int row_b = refill_b ? block_row(p, pr, kb_b + 2) : 0;
          ptx::wgmma_wait<0>();
          ptx::fence_regs(o);
          ptx::bar_sync(bar_wg1, 128);
          trace_after_barrier(tr, tr1_pv_b_done, &sm.l_part[0][0]);
          ptx::bar_sync(bar_b_done, 256);  // WG0 is done with KV[1] chunk 8 (P_B)
          trace_after_barrier(tr, tr1_b_done, &sm.l_part[0][0]);
          if (refill_b) load_kv<4>(sm, &tm_kv, p, pr, policy, 1, kb_b + 2, 4, 9, row_b, warp);
          trace(tr, tr1_refill_b);
        }
      }
    }

    if (cta_leader) mark_phase(p, phase_loop_end_wg0);
    if (threadIdx.x == 128) mark_phase(p, phase_loop_end_wg1);

    // ---- epilogue: l = l_L + l_R (same frame), normalise, write ----
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (quad == 0) {
      sm.l_part[wg][r0] = l0;
      sm.l_part[wg][r1] = l1;
    }
    __syncthreads();
    if (cta_leader) mark_phase(p, phase_epilogue_sync);
    const float lt0 = sm.l_part[0][r0] + sm.l_part[1][r0];
    const float lt1 = sm.l_part[0][r1] + sm.l_part[1][r1];
    // A row with no visible key in this piece gets (0, -inf): its O is exactly 0 (P = 0 and every
    // V row of the piece zeroed), times 0. One whose running max stayed -inf although it saw keys
    // (every score -inf) gets NaN: O / l = 0 / 0, and its lse below.
    const int key_lo = pr.kb_begin * block_keys, key_hi = pr.kb_end * block_keys;
    const bool empty0 = min(pr.vis0, key_hi) <= key_lo, empty1 = min(pr.vis1, key_hi) <= key_lo;
    const float inv0 = empty0 ? 0.0f : 1.0f / output_divisor<Mode>(f0, lt0);
    const float inv1 = empty1 ? 0.0f : 1.0f / output_divisor<Mode>(f1, lt1);
    const int col0 = wg * 256 + 2 * quad;
    const bool write0 = row_first + r0 < p.rows, write1 = row_first + r1 < p.rows;
    const int rr0 = row_first + r0, rr1 = row_first + r1;  // request rows r = t * h_q + h
    const int h_q = p.shape.h_q;
    // Every warpgroup is past its last wgmma (the CTA barrier above): Q's tile and KV[0] take
    // the staged rows (staged_unit).
    std::uint8_t* stage = sm.q;
    if (pr.slot < 0) {
#pragma unroll
      for (int jj = 0; jj < 32; ++jj) {
        const int col = col0 + 8 * jj;
        stage_pair<__nv_bfloat16>(stage, r0, col, o[4 * jj + 0] * inv0, o[4 * jj + 1] * inv0);
        stage_pair<__nv_bfloat16>(stage, r1, col, o[4 * jj + 2] * inv1, o[4 * jj + 3] * inv1);
      }
      __syncthreads();
      copy_staged_rows(stage, p.out, row_first, p.rows,
                       [&](int rr) { return p.shape.out_offset(pr.request, rr / h_q, rr % h_q); });
    } else {
      float* part_out = p.out_part + static_cast<std::int64_t>(pr.slot) * p.rows * d_v;
      // The partial rows leave by bulk copies from one warp: 2-7% less time than every
      // thread's 16-byte stores at b 16, b 1 and b 128 with 2 splits, whether the schedule is
      // sized, fixed or a reused plan (bench/CUDA_RESULTS.md).
#pragma unroll
      for (int jj = 0; jj < 32; ++jj) {
        const int col = col0 + 8 * jj;
        stage_pair<float, true>(stage, r0, col, o[4 * jj + 0] * inv0, o[4 * jj + 1] * inv0);
        stage_pair<float, true>(stage, r1, col, o[4 * jj + 2] * inv1, o[4 * jj + 3] * inv1);
      }
      ptx::fence_proxy_async_smem();  // the staged rows visible to the copies
      __syncthreads();
      if (threadIdx.x / 32 == 4) bulk_store_rows(stage, part_out, row_first, p.rows, lane);
    }
    if (wg == 0 && quad == 0) {
      constexpr float ln2 = 0.693147180559945309f;
      const float nan = __uint_as_float(0x7FC00000u);
      const float lse0 = empty0 ? neg_inf_f : (f0.m == neg_inf_f ? nan : (f0.m + log2f(lt0)) * ln2);
      const float lse1 = empty1 ? neg_inf_f : (f1.m == neg_inf_f ? nan : (f1.m + log2f(lt1)) * ln2);
      if (pr.slot < 0) {
        if (write0) p.lse[p.shape.lse_offset(pr.request, rr0 / h_q, rr0 % h_q)] = lse0;
        if (write1) p.lse[p.shape.lse_offset(pr.request, rr1 / h_q, rr1 % h_q)] = lse1;
      } else {
        float* lp = p.lse_part + static_cast<std::int64_t>(pr.slot) * p.rows;
        if (write0) lp[rr0] = lse0;
        if (write1) lp[rr1] = lse1;
      }
    }
    if constexpr (phase_times_built) {
      if (cta_leader) mark_phase(p, phase_stores_issued);
      __threadfence();
      __syncthreads();
      if (cta_leader) mark_phase(p, phase_stores_done);
    }
  }
  // Only now may the combine start launching: its CTAs must never take an SM that a CTA of this
  // grid still waits for.
  ptx::griddep_launch_dependents();
#endif  // the Hopper body
}

}  // namespace amla::cuda::detail::hopper
