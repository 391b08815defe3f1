// amla/backend/cuda/detail/dense_reads.cuh: a dense decode problem's BF16 inputs as the reference
// kernels (simple_kernel.cuh, golden.cuh) read them, the page lookup with problem/shape.hpp's
// offsets.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "amla/problem/shape.hpp"

namespace amla::cuda::detail {

/// Device pointers of a problem in the FlashMLA layout (driver.cuh's DeviceDecodeInputs, V
/// resolved) and the rows of it that a kernel reads.
struct dense_reads {
  const __nv_bfloat16* q;
  const __nv_bfloat16* kv;
  const __nv_bfloat16* v;  ///< values: kv itself (first d_v columns) or a separate cache
  int v_row;  ///< elements between consecutive (page, slot, head) rows of v: d_qk or d_v
  const std::int32_t* block_table;
  const std::int32_t* seqlens;

  /// q[b, t, h, :].
  __device__ __forceinline__ const __nv_bfloat16* query_row(const DecodeShape& sh, int b, int t,
                                                            int h) const {
    return q + sh.q_offset(b, t, h);
  }
  /// The cache row (page, slot, head g) of key `key` of sequence b: the page from the block table.
  __device__ __forceinline__ std::size_t cache_row(const DecodeShape& sh, int b, int key,
                                                   int g) const {
    const int page = block_table[sh.table_offset(b, key / sh.page_size)];
    return sh.slot_index(page, key % sh.page_size, g);
  }
  /// K of key `key` of sequence b at KV head g: d_qk elements.
  __device__ __forceinline__ const __nv_bfloat16* key_row(const DecodeShape& sh, int b, int key,
                                                          int g) const {
    return kv + cache_row(sh, b, key, g) * sh.d_qk;
  }
  /// V of key `key` of sequence b at KV head g: d_v elements.
  __device__ __forceinline__ const __nv_bfloat16* value_row(const DecodeShape& sh, int b, int key,
                                                            int g) const {
    return v + cache_row(sh, b, key, g) * v_row;
  }
};

}  // namespace amla::cuda::detail
