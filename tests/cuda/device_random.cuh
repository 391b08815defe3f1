// tests/cuda/device_random.cuh: random BF16 tensors generated on the GPU, for the CUDA tests and
// the CUDA benchmark (bench/cuda/bm_cuda_decode.cu) at sizes the CPU would take seconds to draw.
// Values are uniform in [-a, a) from a counter-based hash (splitmix64 of seed + index), so the
// same seed gives the same tensor on any GPU; never zeros.
#pragma once

#include "amla/backend/cuda/detail/check.cuh"

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

namespace amla_cuda_test {

__global__ void fill_random_kernel(__nv_bfloat16* p, std::size_t n, std::uint64_t seed, float a) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * 0x1p-24f;  // [0, 1)
    p[i] = __float2bfloat16_rn((2.0f * u - 1.0f) * a);
  }
}

/// Fills n BF16 values at p (device memory) with U[-a, a) on `stream`.
inline void fill_random(void* p, std::size_t n, std::uint64_t seed, float a,
                        cudaStream_t stream = nullptr) {
  fill_random_kernel<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(p), n, seed, a);
  AMLA_CUDA_CHECK_LAUNCH("fill_random_kernel");
}

}  // namespace amla_cuda_test
