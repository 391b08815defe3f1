// amla/backend/cuda/detail/combine.cuh: the split-KV combine (Flash-Decoding; the CPU mirror is
// attention/split_kv.hpp). Each piece s of a request cut by the schedule wrote its normalised
// partial output O_s (FP32) and its lse_s (natural log; -inf where the piece saw no key of the
// row, NaN where the row's result is NaN) to a slot. The row's result is
//   lse = log(sum_s exp(lse_s)),   out = sum_s exp(lse_s - lse) O_s,
// computed around the largest lse_s so that no exponential overflows. A row every piece saw
// empty gets out = 0 and lse = -inf, as unsplit kernels write; a NaN lse_s makes the row NaN; and
// every O_s enters the sum, even at weight 0, so that a NaN column of a piece (a NaN in a visible
// V column) stays NaN (problem/conventions.hpp).
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/detail/ptx.cuh"
#include "amla/backend/cuda/detail/split_plan.cuh"
#include "amla/backend/cuda/rescale.cuh"

#include <cuda_bf16.h>

#include <cstdint>

#include "amla/problem/shape.hpp"
#include "amla/problem/split_schedule.hpp"

namespace amla::cuda::detail::combine {

/// Output columns: d_v = 512, the Hopper kernel's (its partial rows are 512 FP32 wide).
inline constexpr int d_v = 512;
/// Warps per CTA; each merges one part of a row (Parts parts per row, below).
inline constexpr int warps = 4;
inline constexpr int threads = 32 * warps;
/// CTAs an SM must hold at once (the launch bound): 8, so that b 16's 1024 CTAs (64 rows' CTAs
/// for each of 16 split requests) fit in one wave of 132 SMs, within 64 registers a thread (at
/// 72, 7 CTAs an SM left 100 CTAs for a second round: 1.0-1.2 us more at b 16,
/// bench/CUDA_RESULTS.md).
inline constexpr int min_ctas_per_sm = 8;
/// Partial values a lane holds in flight (the loads of slots_in_flight slots): the warp's loads
/// of all those slots are issued together, before any of them is used.
inline constexpr int values_in_flight = 32;

/// The combine's layout for Parts warps per row: each lane merges columns_per_lane columns of
/// its warp's d_v / Parts, in units of `width` consecutive floats (16- or 8-byte loads) that are
/// consecutive across the warp.
template <int Parts>
struct layout {
  static_assert(Parts == 1 || Parts == 2 || Parts == 4 || Parts == 8,
                "a lane merges 2, 4, 8 or 16 columns");
  static constexpr int columns_per_warp = d_v / Parts;
  static constexpr int columns_per_lane = columns_per_warp / 32;
  static constexpr int width = columns_per_lane < 4 ? columns_per_lane : 4;
  static constexpr int units = columns_per_lane / width;
  static constexpr int slots_in_flight = values_in_flight / columns_per_lane;
  static_assert(32 % slots_in_flight == 0, "a batch of slots never straddles a group of 32");
};

/// Parts per row the host picks: whole rows when a split request has few slots (one warp then
/// has all of a row's slots in flight and the grid enough warps), eighths of rows when it has
/// many (b 1: 32 slots per row), so that a warp keeps more of a row's slots in flight.
inline constexpr int parts_for_few_slots = 1;
inline constexpr int parts_for_many_slots = 8;
inline constexpr int few_slots = layout<parts_for_few_slots>::slots_in_flight;

/// A timing build (AMLA_CUDA_PHASE_TIMES, ptx.cuh) records the combine's span in `phase_words`
/// words after the Hopper kernel's per-CTA records: the complement of the earliest entry of a
/// CTA (so that an atomic max over a zeroed record takes the minimum), the complement of the
/// earliest return from griddep_wait, and the latest end of a warp's stores (%globaltimer, ns).
inline constexpr bool phase_times_built = AMLA_CUDA_PHASE_TIMES != 0;
enum phase_word : int {
  first_entry_complement = 0,
  first_griddep_complement,
  last_end,
  phase_words  ///< the record's length
};

struct params {
  DecodeShape shape;
  int rows;  ///< s_q * h_q
  /// The schedule: fixed (num_splits k > 1: request b owns slots [b k, b k + k)) or balanced
  /// (slot_prefix, and the split requests listed by the plan).
  SplitScheduleView schedule;
  /// A balanced schedule's split requests, the i-th's first piece at i (split_plan::plan_out):
  /// the request, its slot count and first slot in one load; request -1 past the last.
  const split_plan::piece_entry* split_pieces;
  const float* out_part;       ///< [slots, rows, d_v], 16-byte aligned
  const float* lse_part;       ///< [slots, rows]
  __nv_bfloat16* out;          ///< [batch, s_q, h_q, d_v]
  float* lse;                  ///< [batch, h_q, s_q]
  std::uint64_t* phase_times;  ///< a timing build's record (phase_word), or nullptr
};

/// Loads `width` consecutive floats (16- or 8-byte aligned).
template <int Width>
__device__ __forceinline__ void load_unit(const float* at, float (&v)[Width]) {
  if constexpr (Width == 4) {
    const float4 x = *reinterpret_cast<const float4*>(at);
    v[0] = x.x;
    v[1] = x.y;
    v[2] = x.z;
    v[3] = x.w;
  } else {
    static_assert(Width == 2, "units of 4 or 2 floats");
    const float2 x = *reinterpret_cast<const float2*>(at);
    v[0] = x.x;
    v[1] = x.y;
  }
}

/// Stores `width` values as BF16 at `at` (4-byte aligned): one 8-byte store where `at` allows.
template <int Width>
__device__ __forceinline__ void store_unit(__nv_bfloat16* at, const float (&v)[Width]) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
  if constexpr (Width == 4) {
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
    if ((reinterpret_cast<std::uintptr_t>(at) & 7) == 0) {
      uint2 x;
      x.x = *reinterpret_cast<const std::uint32_t*>(&lo);
      x.y = *reinterpret_cast<const std::uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(at) = x;
    } else {
      *reinterpret_cast<__nv_bfloat162*>(at) = lo;
      *reinterpret_cast<__nv_bfloat162*>(at + 2) = hi;
    }
  } else {
    *reinterpret_cast<__nv_bfloat162*>(at) = lo;
  }
}

/// Grid (ceil(rows * Parts / warps), split requests the launch allows for): warp w of CTA (x, i)
/// merges part q of row r (x warps + w = r Parts + q) of the i-th split request. The warp issues
/// the loads of its first slots' partial values before it reduces the slots' lse (max, then the
/// sum around it, in the order a single warp always takes: each lane's slots lane, lane + 32,
/// ..., then the butterfly), so that both come from L2 in one round trip; each lane then
/// accumulates its columns over the slots in slot order, the weights passed along the warp by
/// shuffles. The plan's entries a CTA needs are read together where they do not depend on each
/// other.
template <int Parts>
__global__ void __launch_bounds__(threads, min_ctas_per_sm) combine_kernel(const params p) {
  using L = layout<Parts>;
  std::uint64_t entry_ns = 0;
  if constexpr (phase_times_built) entry_ns = ptx::globaltimer_ns();
  ptx::griddep_wait();  // the partials of the decode kernel before this one
  if constexpr (phase_times_built) {
    if (p.phase_times != nullptr && threadIdx.x == 0) {
      atomicMax(reinterpret_cast<unsigned long long*>(p.phase_times + first_entry_complement),
                static_cast<unsigned long long>(~entry_ns));
      atomicMax(reinterpret_cast<unsigned long long*>(p.phase_times + first_griddep_complement),
                static_cast<unsigned long long>(~ptx::globaltimer_ns()));
    }
  }
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int part_index = static_cast<int>(blockIdx.x) * warps + warp;
  const int r = part_index / Parts, q = part_index % Parts;
  if (r >= p.rows) return;
  const int i = blockIdx.y;
  int b, first, count;
  if (p.schedule.num_splits > 0) {
    b = i;
    count = p.schedule.num_splits;
    first = b * count;
  } else {
    const split_plan::piece_entry e = p.split_pieces[i];
    if (e.request < 0) return;
    b = e.request;
    first = e.first_slot;
    count = e.pieces;
  }
  const std::int64_t slot_stride = static_cast<std::int64_t>(p.rows) * d_v;
  const int col = q * L::columns_per_warp + L::width * lane;
  const float* part = p.out_part + (static_cast<std::int64_t>(first) * p.rows + r) * d_v + col;
  float v[L::slots_in_flight][L::units][L::width];
  const auto load_slots = [&](int s0) {
#pragma unroll
    for (int k = 0; k < L::slots_in_flight; ++k) {
      if (s0 + k < count) {
#pragma unroll
        for (int u = 0; u < L::units; ++u) {
          load_unit<L::width>(part + (s0 + k) * slot_stride + 32 * L::width * u, v[k][u]);
        }
      }
    }
  };
  load_slots(0);

  const float* lse_s = p.lse_part + static_cast<std::int64_t>(first) * p.rows + r;
  const auto lse_of = [&](int s) { return lse_s[static_cast<std::int64_t>(s) * p.rows]; };
  const float lse_lane = lane < count ? lse_of(lane) : neg_inf_f;  // slot `lane`
  float mx = lse_lane;
  for (int s = lane + 32; s < count; s += 32) mx = max_nan(mx, lse_of(s));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = max_nan(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.0f;
  if (mx != neg_inf_f) {
    if (lane < count) sum += expf(lse_lane - mx);
    for (int s = lane + 32; s < count; s += 32) sum += expf(lse_of(s) - mx);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  // The butterflies leave every lane with the same max and sum, bit for bit (each step adds two
  // equal partial results in either order).
  const bool empty = mx == neg_inf_f;
  const float inv = empty ? 0.0f : 1.0f / sum;  // NaN stays NaN
  const auto weight_of = [&](float lse_value) { return empty ? 0.0f : expf(lse_value - mx) * inv; };
  // Lane l holds the weight of slot 32 g + l of the current group g of 32 slots.
  float w_lane = lane < count ? weight_of(lse_lane) : 0.0f;
  float acc[L::units][L::width] = {};
  for (int s0 = 0; s0 < count; s0 += L::slots_in_flight) {
    if (s0 > 0) {
      if (s0 % 32 == 0) {
        const int s = s0 + lane;
        w_lane = s < count ? weight_of(lse_of(s)) : 0.0f;
      }
      load_slots(s0);
    }
#pragma unroll
    for (int k = 0; k < L::slots_in_flight; ++k) {
      const float w = __shfl_sync(0xffffffffu, w_lane, (s0 + k) % 32);
      if (s0 + k < count) {
#pragma unroll
        for (int u = 0; u < L::units; ++u) {
#pragma unroll
          for (int e = 0; e < L::width; ++e) acc[u][e] = fmaf(w, v[k][u][e], acc[u][e]);
        }
      }
    }
  }
  const int t = r / p.shape.h_q, h = r % p.shape.h_q;
  __nv_bfloat16* out_row = p.out + p.shape.out_offset(b, t, h);
#pragma unroll
  for (int u = 0; u < L::units; ++u)
    store_unit<L::width>(out_row + col + 32 * L::width * u, acc[u]);
  if (q == 0 && lane == 0) {
    p.lse[p.shape.lse_offset(b, t, h)] = empty ? neg_inf_f : mx + logf(sum);
  }
  if constexpr (phase_times_built) {
    if (p.phase_times != nullptr && lane == 0) {
      atomicMax(reinterpret_cast<unsigned long long*>(p.phase_times + last_end),
                static_cast<unsigned long long>(ptx::globaltimer_ns()));
    }
  }
}

}  // namespace amla::cuda::detail::combine
