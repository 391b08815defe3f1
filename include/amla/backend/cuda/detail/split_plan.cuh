// amla/backend/cuda/detail/split_plan.cuh: the sized split-KV schedule (problem/split_schedule.hpp)
// computed on the GPU from the device's seqlens, so that decode() never copies them to the host:
// one CTA finds the longest request, searches the piece length T (each thread a few candidates),
// then sums the requests' pieces and slots and lists the requests the combine merges. Every
// quantity is split_schedule's host-device arithmetic; only the reductions and prefix sums are
// the GPU's. The search and the sums are device functions of one CTA (search_piece_blocks,
// scan_plan) that plan_kernel runs, and so does each CTA of the Hopper decode kernel when it sizes
// a small batch itself (no plan kernel before it to wait for).
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/detail/ptx.cuh"

#include <cstdint>
#include <vector>

#include "amla/problem/split_schedule.hpp"

namespace amla::cuda::detail::split_plan {

inline constexpr int threads = 256;

/// The scalars of a sized schedule, written by plan_kernel.
struct header {
  int piece_blocks;        ///< T
  int num_split_requests;  ///< entries of split_list
};

/// Inclusive prefix sum of v over the CTA (`threads` threads); `total` gets the CTA's sum.
/// scratch: threads / 32 elements of shared memory.
__device__ __forceinline__ int block_inclusive_scan(int v, int* scratch, int& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int warps = threads / 32;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int t = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += t;
  }
  if (lane == 31) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? scratch[lane] : 0;
#pragma unroll
    for (int o = 1; o < warps; o <<= 1) {
      const int t = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += t;
    }
    if (lane < warps) scratch[lane] = w;
  }
  __syncthreads();
  const int offset = warp > 0 ? scratch[warp - 1] : 0;
  total = scratch[warps - 1];
  __syncthreads();  // scratch is reused by the next scan
  return v + offset;
}

/// min (max = false) or max of v over the CTA.
__device__ __forceinline__ int block_extreme(int v, int* scratch, bool max) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const int t = __shfl_xor_sync(0xffffffffu, v, o);
    v = max ? (t > v ? t : v) : (t < v ? t : v);
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < threads / 32; ++w)
    v = max ? (scratch[w] > v ? scratch[w] : v) : (scratch[w] < v ? scratch[w] : v);
  __syncthreads();
  return v;
}

/// Shared memory the plan's device functions take: the reductions' scratch, then the piece found.
inline constexpr int scratch_ints = threads / 32 + 4;

/// T, the sized schedule's piece length for v's lengths and one wave of `slots` pieces
/// (split_schedule.hpp): every thread of a CTA of `threads` threads calls it and gets T.
__device__ __forceinline__ int search_piece_blocks(const SplitScheduleView& v, int slots,
                                                   int* scratch) {
  const int tid = threadIdx.x;
  const auto blocks = [&](int b) { return split_schedule::blocks_of(v.seqlens[b], v.block_keys); };
  int n_max = 0;
  for (int b = tid; b < v.batch; b += threads) n_max = max(n_max, blocks(b));
  n_max = block_extreme(n_max, scratch, true);
  // T: the shortest candidate whose pieces fit the wave (k = 1 always does when batch < slots).
  int t = max(1, n_max);
  if (v.batch < slots) {
    int best = split_schedule::candidate_blocks(n_max, 1);
    for (int k = 1 + tid; k <= slots; k += threads) {
      const int tk = split_schedule::candidate_blocks(n_max, k);
      int pieces = 0;
      for (int b = 0; b < v.batch && pieces <= slots; ++b) {
        pieces += split_schedule::pieces_for(blocks(b), tk);
      }
      if (pieces <= slots) best = min(best, tk);
    }
    t = block_extreme(best, scratch, false);
  }
  return t;
}

/// The prefix sums of the schedule with piece length t (every thread of the CTA calls it). With
/// `out` (the plan's arrays, written by this CTA alone): piece_prefix[batch + 1],
/// slot_prefix[batch + 1], the requests with slots in split_list and the header. With index >= 0:
/// piece `index` of the schedule, as split_schedule::piece_at reads it from those arrays, into
/// `piece`; returns false past the last piece.
__device__ __forceinline__ bool scan_plan(const SplitScheduleView& v, int t, int* scratch,
                                          header* out, std::int32_t* piece_prefix,
                                          std::int32_t* slot_prefix, std::int32_t* split_list,
                                          int index, SplitPiece& piece) {
  const int tid = threadIdx.x;
  int* found = scratch + threads / 32;  // request, piece within it, its pieces, its first slot
  if (tid == 0) found[0] = -1;
  int piece_carry = 0, slot_carry = 0, list_carry = 0;
  if (out != nullptr && tid == 0) {
    piece_prefix[0] = 0;
    slot_prefix[0] = 0;
  }
  for (int base = 0; base < v.batch; base += threads) {
    const int b = base + tid;
    const int n = b < v.batch ? split_schedule::blocks_of(v.seqlens[b], v.block_keys) : 0;
    const int k = b < v.batch ? split_schedule::pieces_for(n, t) : 0;
    int piece_total, slot_total, list_total;
    const int piece_incl = block_inclusive_scan(k, scratch, piece_total);
    const int slot_incl = block_inclusive_scan(split_schedule::slots_for(k), scratch, slot_total);
    const int list_incl = block_inclusive_scan(k > 1 ? 1 : 0, scratch, list_total);
    if (b < v.batch) {
      const int first_piece = piece_carry + piece_incl - k;
      if (index >= first_piece && index < first_piece + k) {
        found[0] = b;
        found[1] = index - first_piece;
        found[2] = k;
        found[3] = slot_carry + slot_incl - split_schedule::slots_for(k);
      }
      if (out != nullptr) {
        piece_prefix[b + 1] = piece_carry + piece_incl;
        slot_prefix[b + 1] = slot_carry + slot_incl;
        if (k > 1) split_list[list_carry + list_incl - 1] = b;
      }
    }
    piece_carry += piece_total;
    slot_carry += slot_total;
    list_carry += list_total;
  }
  if (out != nullptr && tid == 0) *out = header{t, list_carry};
  __syncthreads();
  const int b = found[0];
  if (b < 0) return false;
  piece = split_schedule::piece_of(b, split_schedule::blocks_of(v.seqlens[b], v.block_keys),
                                   found[2], found[1], found[3]);
  return true;
}

/// One CTA of `threads` threads. v: a sized schedule's batch, block keys and device seqlens;
/// slots: the pieces of one wave (split_schedule_bounds). Writes piece_prefix[batch + 1],
/// slot_prefix[batch + 1], the requests with slots in split_list, and the header.
/// A template (its argument unused), as hopper::sm90a_probe says why.
template <int Unused = 0>
__global__ void __launch_bounds__(threads)
    plan_kernel(SplitScheduleView v, int slots, header* out, std::int32_t* piece_prefix,
                std::int32_t* slot_prefix, std::int32_t* split_list) {
  __shared__ int scratch[scratch_ints];
  ptx::griddep_wait();
  const int t = search_piece_blocks(v, slots, scratch);
  SplitPiece unused;
  scan_plan(v, t, scratch, out, piece_prefix, slot_prefix, split_list, -1, unused);
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
  std::int32_t* list = nullptr;
  AMLA_CUDA_CHECK(cudaMallocAsync(&h, sizeof(header), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&pieces, n1 * sizeof(std::int32_t), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&slots, n1 * sizeof(std::int32_t), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&list, n1 * sizeof(std::int32_t), stream));
  SplitScheduleView v;
  v.batch = batch;
  v.block_keys = o.block_keys;
  v.seqlens = seqlens;
  plan_kernel<><<<1, threads, 0, stream>>>(v, bounds.slots, h, pieces, slots, list);
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
                    static_cast<void*>(list)}) {
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
