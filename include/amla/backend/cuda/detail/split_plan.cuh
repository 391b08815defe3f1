// amla/backend/cuda/detail/split_plan.cuh: the balanced split-KV schedule
// (problem/split_schedule.hpp) computed on the GPU from the device's seqlens, so that decode()
// never copies them to the host: one CTA sums the requests' costs (C_b), derives W and the parts
// that hold work, then sums the slots of the requests that span several parts and lists those
// requests for the combine. Every quantity is split_schedule's host-device arithmetic; only the
// prefix sums are the GPU's.
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/detail/ptx.cuh"

#include <cstdint>
#include <vector>

#include "amla/problem/split_schedule.hpp"

namespace amla::cuda::detail::split_plan {

inline constexpr int threads = 256;

/// The scalars of a balanced schedule, written by plan_kernel.
struct header {
  std::int64_t part_cost;
  int num_parts;
  int num_split_requests;  ///< entries of split_list
};

/// Inclusive prefix sum of v over the CTA (`threads` threads); `total` gets the CTA's sum.
/// scratch: threads / 32 elements of shared memory.
template <class T>
__device__ __forceinline__ T block_inclusive_scan(T v, T* scratch, T& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int warps = threads / 32;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T t = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += t;
  }
  if (lane == 31) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? scratch[lane] : T{0};
#pragma unroll
    for (int o = 1; o < warps; o <<= 1) {
      const T t = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += t;
    }
    if (lane < warps) scratch[lane] = w;
  }
  __syncthreads();
  const T offset = warp > 0 ? scratch[warp - 1] : T{0};
  total = scratch[warps - 1];
  __syncthreads();  // scratch is reused by the next scan
  return v + offset;
}

/// One CTA of `threads` threads. v: a balanced schedule's batch, overhead, block keys and device
/// seqlens; max_parts: the schedule's part bound (split_schedule_bounds). Writes
/// cost_prefix[batch + 1], slot_prefix[batch + 1], piece_prefix[batch + 1], the requests with
/// slots in split_list, and the header.
__global__ void __launch_bounds__(threads)
    plan_kernel(SplitScheduleView v, int max_parts, header* out, std::int64_t* cost_prefix,
                std::int32_t* slot_prefix, std::int32_t* piece_prefix, std::int32_t* split_list) {
  __shared__ std::int64_t scratch64[threads / 32];
  __shared__ std::int32_t scratch32[threads / 32];
  ptx::griddep_wait();
  const int tid = threadIdx.x;
  std::int64_t carry = 0;
  if (tid == 0) cost_prefix[0] = 0;
  for (int base = 0; base < v.batch; base += threads) {
    const int b = base + tid;
    const std::int64_t c =
        b < v.batch ? v.overhead_blocks + split_schedule::blocks_of(v.seqlens[b], v.block_keys) : 0;
    std::int64_t total;
    const std::int64_t incl = block_inclusive_scan(c, scratch64, total);
    if (b < v.batch) cost_prefix[b + 1] = carry + incl;
    carry += total;
  }
  __syncthreads();  // cost_prefix is read across threads below
  std::int64_t w;
  int parts;
  balance_parts(carry, max_parts, w, parts);
  std::int32_t slot_carry = 0, list_carry = 0, piece_carry = 0;
  if (tid == 0) {
    slot_prefix[0] = 0;
    piece_prefix[0] = 0;
  }
  for (int base = 0; base < v.batch; base += threads) {
    const int b = base + tid;
    const std::int64_t c0 = b < v.batch ? cost_prefix[b] : 0;
    const std::int64_t c1 = b < v.batch ? cost_prefix[b + 1] : 0;
    const int slots = b < v.batch ? split_schedule::slots_of(c0, c1, v.overhead_blocks, w) : 0;
    const int pieces = b < v.batch ? split_schedule::pieces_of(c0, c1, v.overhead_blocks, w) : 0;
    std::int32_t slot_total, list_total, piece_total;
    const std::int32_t slot_incl = block_inclusive_scan(slots, scratch32, slot_total);
    const std::int32_t list_incl = block_inclusive_scan(slots > 0 ? 1 : 0, scratch32, list_total);
    const std::int32_t piece_incl = block_inclusive_scan(pieces, scratch32, piece_total);
    if (b < v.batch) {
      slot_prefix[b + 1] = slot_carry + slot_incl;
      piece_prefix[b + 1] = piece_carry + piece_incl;
      if (slots > 0) split_list[list_carry + list_incl - 1] = b;
    }
    slot_carry += slot_total;
    list_carry += list_total;
    piece_carry += piece_total;
  }
  if (tid == 0) *out = header{w, parts, list_carry};
}

/// The balanced schedule of `batch` device seqlens as plan_kernel computes it, copied back into a
/// host SplitSchedule (for tests and reports; decode() keeps its plan on the device).
inline SplitSchedule plan_to_host(const std::int32_t* seqlens, int batch, int row_blocks,
                                  const SplitScheduleOptions& options, cudaStream_t stream) {
  SplitScheduleOptions o = options;
  o.num_splits = 0;
  const SplitScheduleBounds bounds = split_schedule_bounds(batch, row_blocks, o);
  const std::size_t n1 = static_cast<std::size_t>(batch) + 1;
  header* h = nullptr;
  std::int64_t* cost = nullptr;
  std::int32_t* slots = nullptr;
  std::int32_t* pieces = nullptr;
  std::int32_t* list = nullptr;
  AMLA_CUDA_CHECK(cudaMallocAsync(&h, sizeof(header), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&cost, n1 * sizeof(std::int64_t), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&slots, n1 * sizeof(std::int32_t), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&pieces, n1 * sizeof(std::int32_t), stream));
  AMLA_CUDA_CHECK(cudaMallocAsync(&list, n1 * sizeof(std::int32_t), stream));
  SplitScheduleView v;
  v.batch = batch;
  v.overhead_blocks = o.overhead_blocks;
  v.block_keys = o.block_keys;
  v.seqlens = seqlens;
  plan_kernel<<<1, threads, 0, stream>>>(v, bounds.parts, h, cost, slots, pieces, list);
  AMLA_CUDA_CHECK_LAUNCH("amla::cuda::detail::split_plan::plan_kernel");
  SplitSchedule s;
  header hh{};
  s.seqlens.resize(static_cast<std::size_t>(batch));
  s.cost_prefix.resize(n1);
  s.slot_prefix.resize(n1);
  s.piece_prefix.resize(n1);
  AMLA_CUDA_CHECK(cudaMemcpyAsync(&hh, h, sizeof(header), cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(s.seqlens.data(), seqlens,
                                  s.seqlens.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost,
                                  stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(s.cost_prefix.data(), cost, n1 * sizeof(std::int64_t),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(s.slot_prefix.data(), slots, n1 * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(s.piece_prefix.data(), pieces, n1 * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (void* ptr : {static_cast<void*>(h), static_cast<void*>(cost), static_cast<void*>(slots),
                    static_cast<void*>(pieces), static_cast<void*>(list)}) {
    AMLA_CUDA_CHECK(cudaFreeAsync(ptr, stream));
  }
  s.scalars.batch = batch;
  s.scalars.num_parts = hh.num_parts;
  s.scalars.num_splits = 0;
  s.scalars.overhead_blocks = o.overhead_blocks;
  s.scalars.block_keys = o.block_keys;
  s.scalars.part_cost = hh.part_cost;
  s.num_slots = s.slot_prefix.back();
  return s;
}

}  // namespace amla::cuda::detail::split_plan
