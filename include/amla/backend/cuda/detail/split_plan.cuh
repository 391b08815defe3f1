// amla/backend/cuda/detail/split_plan.cuh: the sized split-KV schedule (problem/split_schedule.hpp)
// computed on the GPU from the device's seqlens, so that decode() never copies them to the host:
// one warp finds the longest request, searches the piece length T (a binary search over the
// candidates), then sums the requests' pieces and slots and lists the requests the combine
// merges. Every quantity is split_schedule's host-device arithmetic; only the reductions and
// prefix sums are the GPU's. The search and the sums are device functions of one warp
// (search_piece_blocks, scan_plan) that plan_kernel runs, and so does every warp of the Hopper
// decode kernel's CTAs when they size a small batch themselves (no plan kernel before them to
// wait for, no barrier between a warp's first read of the lengths and its piece).
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/detail/ptx.cuh"

#include <cstdint>
#include <vector>

#include "amla/problem/split_schedule.hpp"

namespace amla::cuda::detail::split_plan {

/// The scalars of a sized schedule, written by plan_kernel.
struct header {
  int piece_blocks;        ///< T
  int num_split_requests;  ///< the cut requests, listed in plan_out::split_pieces
};

/// Piece i of a sized schedule as plan_kernel lists it (the plan's piece list), so that a decode
/// CTA reading a reused plan finds its piece in one 16-byte load instead of split_schedule::
/// piece_at's binary search through piece_prefix, whose log2(batch) loads each wait for the last:
/// the piece is split_schedule::piece_of(request, the request's current blocks, pieces, index,
/// first_slot). An entry past the schedule's last piece has request -1.
struct alignas(16) piece_entry {
  int request;     ///< the piece's request, or -1 past the last piece
  int pieces;      ///< the pieces of that request (k)
  int index;       ///< this piece's index among them
  int first_slot;  ///< the request's first partial slot (slot_prefix[request])
};

/// Where a plan is written (by plan_kernel, or by the first warp of the decode kernel's CTA (0, 0)
/// where its CTAs size the schedule themselves): head nullptr writes nothing. The prefixes have
/// batch + 1 entries; split_pieces holds, for the i-th split request, its first piece (so that
/// the combine finds the request and its slots in one load), request -1 past the last; pieces
/// (nullptr: not written) is the piece list. Both lists hold at most `entries` entries (the split
/// requests' also at most batch + 1).
struct plan_out {
  header* head = nullptr;
  std::int32_t* piece_prefix = nullptr;
  std::int32_t* slot_prefix = nullptr;
  piece_entry* split_pieces = nullptr;
  piece_entry* pieces = nullptr;
  int entries = 0;
};

/// Every function below is one warp's: the 32 lanes of the calling warp call it together and get
/// the same result, with no shared memory and no CTA barrier, so that each warp of a decode CTA
/// sizes the schedule on its own. Lane i handles requests i, i + 32, ...
inline constexpr unsigned full_warp = 0xffffffffu;

/// Inclusive prefix sum of v over the warp's lanes.
__device__ __forceinline__ int warp_inclusive_scan(int v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int t = __shfl_up_sync(full_warp, v, o);
    if (lane >= o) v += t;
  }
  return v;
}

/// The KV blocks of request b: split_schedule::blocks_of in 32-bit unsigned arithmetic, the same
/// for every valid length (0 <= seqlen < 2^31) and a short division instead of a 64-bit one.
__device__ __forceinline__ int blocks_at(const SplitScheduleView& v, int b) {
  const unsigned len = static_cast<unsigned>(v.seqlens[b]);
  const unsigned bk = static_cast<unsigned>(v.block_keys);
  const unsigned q = len / bk;
  return static_cast<int>(q + (len - q * bk != 0u ? 1u : 0u));
}

/// T, the sized schedule's piece length for v's lengths and one wave of `slots` pieces
/// (split_schedule.hpp, sized_piece_blocks). The host tries the candidates k = 1, 2, ... until
/// their pieces overflow the wave; since a candidate's piece length never grows with k and a
/// request's piece count never shrinks as its pieces get shorter, the candidates that fit are
/// k = 1..K. The warp finds K by trying 32 candidates at once, one a lane, spread over the range
/// left (one round for a wave of up to 33 pieces, two up to 1057).
__device__ __forceinline__ int search_piece_blocks(const SplitScheduleView& v, int slots) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  // Lane i keeps request i's count: the candidates read the first 32 requests' by shuffles.
  const int n_own = lane < v.batch ? blocks_at(v, lane) : 0;
  int n_max = n_own;
  for (int b = lane + 32; b < v.batch; b += 32) n_max = max(n_max, blocks_at(v, b));
  n_max = __reduce_max_sync(full_warp, n_max);
  if (v.batch >= slots) return max(1, n_max);
  const int first = min(v.batch, 32);
  // k = 1 fits (one piece per request, batch < slots); k = slots + 1 stands for "none beyond".
  int lo = 1, hi = slots + 1;
  while (hi - lo > 1) {
    const int step = (hi - lo - 1 + 31) / 32;  // lane i tries lo + 1 + i * step, if below hi
    const int k = lo + 1 + lane * step;
    // Every lane runs the shuffles, so a lane past hi counts a candidate it then ignores.
    const int t = split_schedule::candidate_blocks(n_max, min(k, hi - 1));
    int pieces = 0;
    for (int b = 0; b < first; ++b) {
      pieces += split_schedule::pieces_for(__shfl_sync(full_warp, n_own, b), t);
    }
    // Past 32 requests the count stops once it overflows the wave (an int holds 32 counts of at
    // most 2^25 pieces each, and the wave's slots more).
    for (int b = 32; b < v.batch && pieces <= slots; ++b) {
      pieces += split_schedule::pieces_for(blocks_at(v, b), t);
    }
    // The lanes that fit are a prefix: lanes 0..j-1.
    const int j = __popc(__ballot_sync(full_warp, k < hi && pieces <= slots));
    const int base = lo;
    if (j > 0) lo = base + 1 + (j - 1) * step;
    hi = min(hi, base + 1 + j * step);
  }
  return split_schedule::candidate_blocks(n_max, lo);
}

/// The prefix sums of the schedule with piece length t. With out.head (the plan's arrays, written
/// by this warp alone, plan_out): piece_prefix[batch + 1], slot_prefix[batch + 1], the first
/// pieces of the requests with slots in split_pieces, the header, and with
/// out.pieces the entries [0, out.entries) of the piece list (pieces past them are not listed).
/// With index >= 0: piece `index` of the schedule, as split_schedule::piece_at reads it from those
/// arrays, into `piece`; returns false past the last piece.
__device__ __forceinline__ bool scan_plan(const SplitScheduleView& v, int t, const plan_out& out,
                                          int index, SplitPiece& piece) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const bool write = out.head != nullptr;
  if (write && lane == 0) {
    out.piece_prefix[0] = 0;
    out.slot_prefix[0] = 0;
  }
  int piece_carry = 0, list_carry = 0;
  bool found = false;
  for (int base = 0; base < v.batch; base += 32) {
    const int b = base + lane;
    const bool in = b < v.batch;
    const int n = in ? blocks_at(v, b) : 0;
    const int k = in ? split_schedule::pieces_for(n, t) : 0;
    const int cut = k > 1 ? 1 : 0;
    const int piece_incl = piece_carry + warp_inclusive_scan(k, lane);
    const int list_incl = list_carry + warp_inclusive_scan(cut, lane);
    // Every request has a piece or more and only the cut ones have slots (one per piece), so the
    // slots so far are the pieces so far less one per uncut request.
    const int slot_incl = piece_incl - ((b + 1) - list_incl);
    const int first_piece = piece_incl - k;
    if (write && in) {
      out.piece_prefix[b + 1] = piece_incl;
      out.slot_prefix[b + 1] = slot_incl;
      const int first_slot = slot_incl - split_schedule::slots_for(k);
      if (cut && list_incl - 1 < out.entries) {
        out.split_pieces[list_incl - 1] = piece_entry{b, k, 0, first_slot};
      }
      if (out.pieces != nullptr) {
        for (int j = 0; j < k && first_piece + j < out.entries; ++j) {
          out.pieces[first_piece + j] = piece_entry{b, k, j, first_slot};
        }
      }
    }
    const unsigned hit = __ballot_sync(full_warp, in && index >= first_piece && index < piece_incl);
    if (hit != 0) {
      const int src = __ffs(hit) - 1;
      const int hb = __shfl_sync(full_warp, b, src);
      const int hn = __shfl_sync(full_warp, n, src);
      const int hk = __shfl_sync(full_warp, k, src);
      const int hfirst = __shfl_sync(full_warp, first_piece, src);
      const int hslot = __shfl_sync(full_warp, slot_incl - split_schedule::slots_for(k), src);
      piece = split_schedule::piece_of(hb, hn, hk, index - hfirst, hslot);
      found = true;
    }
    piece_carry = __shfl_sync(full_warp, piece_incl, 31);
    list_carry = __shfl_sync(full_warp, list_incl, 31);
    if (found && !write) break;  // warp-uniform: the ballot is
  }
  if (write) {
    if (lane == 0) *out.head = header{t, list_carry};
    const int split_entries = min(v.batch + 1, out.entries);
    for (int i = list_carry + lane; i < split_entries; i += 32) {
      out.split_pieces[i] = piece_entry{-1, 0, 0, 0};
    }
    for (int i = piece_carry + lane; out.pieces != nullptr && i < out.entries; i += 32) {
      out.pieces[i] = piece_entry{-1, 0, 0, 0};
    }
  }
  return found;
}

/// One warp. v: a sized schedule's batch, block keys and device seqlens; slots: the pieces of one
/// wave (split_schedule_bounds). Writes the plan to `out` (plan_out; out.entries = slots holds
/// every piece of a schedule that cuts a request, and its split requests).
/// A template (its argument unused), as hopper::sm90a_probe says why.
template <int Unused = 0>
__global__ void __launch_bounds__(32) plan_kernel(SplitScheduleView v, int slots, plan_out out) {
  ptx::griddep_wait();
  const int t = search_piece_blocks(v, slots);
  SplitPiece unused;
  scan_plan(v, t, out, -1, unused);
}

/// The largest batch whose requests order_kernel sorts (each thread compares its request with
/// every other: batch^2 comparisons; with them plan_decode took 10 us at b 128, 111 at 4096 and
/// 2.2 ms at 65536 on an H200, `bm_cuda_decode --plan`); a larger one is left in index order.
inline constexpr int longest_first_max_batch = 65536;

/// order[i] = the request of rank i, rank(b) = #{j : n_j > n_b} + #{j < b : n_j == n_b} for the
/// block counts n (blocks_at): the requests longest first, ties in index order (a permutation of
/// 0..batch-1 whatever the lengths). Past longest_first_max_batch, order[b] = b. Grid: one thread
/// per request, order_threads a CTA.
/// A decode kernel that takes whole requests in this order hands the longest to the first CTAs,
/// so that a mixed batch's last wave holds short requests (bench/CUDA_RESULTS.md measures it).
inline constexpr int order_threads = 256;
template <int Unused = 0>
__global__ void __launch_bounds__(order_threads)
    order_kernel(SplitScheduleView v, std::int32_t* order) {
  __shared__ int tile[order_threads];
  const int b = static_cast<int>(blockIdx.x) * order_threads + static_cast<int>(threadIdx.x);
  if (v.batch > longest_first_max_batch) {
    if (b < v.batch) order[b] = b;
    return;
  }
  const int n = b < v.batch ? blocks_at(v, b) : 0;
  int rank = 0;
  for (int base = 0; base < v.batch; base += order_threads) {
    const int j = base + static_cast<int>(threadIdx.x);
    tile[threadIdx.x] = j < v.batch ? blocks_at(v, j) : 0;
    __syncthreads();
    const int m = min(order_threads, v.batch - base);
    for (int t = 0; t < m; ++t) {
      const int nj = tile[t];
      rank += (nj > n || (nj == n && base + t < b)) ? 1 : 0;
    }
    __syncthreads();
  }
  if (b < v.batch) order[rank] = b;
}

/// The sized schedule of `batch` device seqlens as plan_kernel computes it, copied back into a
/// host SplitSchedule (for tests and reports; decode() keeps its plan on the device).
inline SplitSchedule plan_to_host(const std::int32_t* seqlens, int batch, int row_blocks,
                                  const SplitScheduleOptions& options, cudaStream_t stream) {
  SplitScheduleOptions o = options;
  o.num_splits = 0;
  const SplitScheduleBounds bounds = split_schedule_bounds(batch, row_blocks, o);
  const std::size_t n1 = static_cast<std::size_t>(batch) + 1;
  header* h = nullptr;
  std::int32_t* pieces = nullptr;
  std::int32_t* slots = nullptr;
  piece_entry* split_pieces = nullptr;
  AMLA_CUDA_CHECK(cudaMallocAsync(&h, sizeof(header), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&pieces, n1 * sizeof(std::int32_t), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&slots, n1 * sizeof(std::int32_t), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&split_pieces, n1 * sizeof(piece_entry), stream));
  SplitScheduleView v;
  v.batch = batch;
  v.block_keys = o.block_keys;
  v.seqlens = seqlens;
  const plan_out out{.head = h,
                     .piece_prefix = pieces,
                     .slot_prefix = slots,
                     .split_pieces = split_pieces,
                     .entries = batch + 1};
  plan_kernel<><<<1, 32, 0, stream>>>(v, bounds.slots, out);
  AMLA_CUDA_CHECK_LAUNCH("amla::cuda::detail::split_plan::plan_kernel");
  SplitSchedule s;
  header hh{};
  s.seqlens.resize(static_cast<std::size_t>(batch));
  s.piece_prefix.resize(n1);
  s.slot_prefix.resize(n1);
  AMLA_CUDA_CHECK(cudaMemcpyAsync(&hh, h, sizeof(header), cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(s.seqlens.data(), seqlens,
                                  s.seqlens.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost,
                                  stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(s.piece_prefix.data(), pieces, n1 * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(s.slot_prefix.data(), slots, n1 * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (void* ptr : {static_cast<void*>(h), static_cast<void*>(pieces), static_cast<void*>(slots),
                    static_cast<void*>(split_pieces)}) {
    AMLA_CUDA_CHECK(cudaFreeAsync(ptr, stream));
  }
  s.scalars.batch = batch;
  s.scalars.num_splits = 0;
  s.scalars.block_keys = o.block_keys;
  s.scalars.piece_blocks = hh.piece_blocks;
  s.num_slots = s.slot_prefix.back();
  return s;
}

}  // namespace amla::cuda::detail::split_plan
