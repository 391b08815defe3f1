// bench/cuda/bench_cuda.cuh: what the two CUDA benchmark programs (bm_cuda_decode.cu,
// bm_hopper_model.cu) share: a pair of CUDA events that times a launch, the median of a sample,
// the "no device" exit, a mixed batch's lengths, and a paged MLA decode problem in device memory
// (random BF16 inputs from tests/cuda/device_random.cuh, pages handed out in shuffled order).
#pragma once

#include "amla/backend/cuda/cuda.cuh"
// The random inputs the CUDA tests draw on the GPU (a path from here: only bm_cuda_decode has
// tests/cuda on its include path).
#include "../../tests/cuda/device_random.cuh"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

namespace amla_bench {

/// Two CUDA events on the default stream.
struct Events {
  cudaEvent_t a, b;
  Events() {
    AMLA_CUDA_CHECK(cudaEventCreate(&a));
    AMLA_CUDA_CHECK(cudaEventCreate(&b));
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  /// Milliseconds between an event before f() and one after it (f launches on the default stream).
  template <class F>
  float ms(F&& f) {
    AMLA_CUDA_CHECK(cudaEventRecord(a));
    f();
    AMLA_CUDA_CHECK(cudaEventRecord(b));
    AMLA_CUDA_CHECK(cudaEventSynchronize(b));
    float x = 0;
    AMLA_CUDA_CHECK(cudaEventElapsedTime(&x, a, b));
    return x;
  }
};

/// The median of v (the mean of the middle two for an even size).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// A mixed batch's lengths: `batch` values in [1, 2 s_k - 1] (mean about s_k), the same for a given
/// shape and pass (0 or 1) in every program that draws them: a 32-bit linear congruential
/// generator seeded with 7 batch + 3 s_q + pass, each length 1 + (x >> 8) mod (2 s_k - 1).
/// bench/cuda/flashmla.py --varlen computes the same sequence, so that both programs time the
/// same batch.
inline std::vector<int> varlen_lengths(int batch, int s_q, int s_k, int pass) {
  std::uint32_t x = static_cast<std::uint32_t>(7 * batch + 3 * s_q + pass);
  const auto span = static_cast<std::uint32_t>(2 * s_k - 1);
  std::vector<int> lens(static_cast<std::size_t>(batch));
  for (int& l : lens) {
    x = x * 1664525u + 1013904223u;
    l = 1 + static_cast<int>((x >> 8) % span);
  }
  return lens;
}

/// Whether a CUDA device is visible; prints "`program`: no CUDA device visible" when none is.
inline bool device_visible(const char* program) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("%s: no CUDA device visible\n", program);
    return false;
  }
  return true;
}

/// An MLA decode problem (d_qk 576, d_v 512, one KV head, V inside the K cache) in device
/// memory: Q and the cache U[-1, 1) from seeds q_seed and kv_seed, seqlens[b] keys in pages of
/// page_size, the pages of all requests a permutation of [0, num_pages) drawn from rng and handed
/// out request by request (unused table entries 0). Owns its buffers.
struct DeviceProblem {
  amla::DecodeShape shape;
  void* q = nullptr;
  void* kv = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  std::int32_t* table = nullptr;
  std::int32_t* lens = nullptr;

  DeviceProblem(int s_q, int h_q, const std::vector<int>& seqlens, int page_size,
                std::uint64_t q_seed, std::uint64_t kv_seed, std::mt19937& rng) {
    const int batch = static_cast<int>(seqlens.size());
    int max_pages = 1, num_pages = 0;
    for (const int l : seqlens) {
      max_pages = std::max(max_pages, (l + page_size - 1) / page_size);
      num_pages += (l + page_size - 1) / page_size;
    }
    shape = amla::DecodeShape{batch, s_q, h_q, 1, 576, 512, num_pages, page_size, max_pages};
    AMLA_CUDA_CHECK(cudaMalloc(&q, shape.q_elems() * sizeof(amla::bf16)));
    AMLA_CUDA_CHECK(cudaMalloc(&kv, shape.kv_elems() * sizeof(amla::bf16)));
    AMLA_CUDA_CHECK(cudaMalloc(&out, shape.out_elems() * sizeof(amla::bf16)));
    AMLA_CUDA_CHECK(cudaMalloc(&lse, shape.lse_elems() * sizeof(float)));
    AMLA_CUDA_CHECK(cudaMalloc(&table, shape.block_table_elems() * sizeof(std::int32_t)));
    AMLA_CUDA_CHECK(cudaMalloc(&lens, shape.seqlens_elems() * sizeof(std::int32_t)));
    amla_cuda_test::fill_random(q, shape.q_elems(), q_seed, 1.0f);
    amla_cuda_test::fill_random(kv, shape.kv_elems(), kv_seed, 1.0f);
    std::vector<std::int32_t> perm(static_cast<std::size_t>(num_pages));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::int32_t> t(shape.block_table_elems(), 0);
    std::size_t used = 0;
    for (int b = 0; b < batch; ++b) {
      const int pages = (seqlens[static_cast<std::size_t>(b)] + page_size - 1) / page_size;
      for (int j = 0; j < pages; ++j) t[static_cast<std::size_t>(b) * max_pages + j] = perm[used++];
    }
    const std::vector<std::int32_t> l(seqlens.begin(), seqlens.end());
    AMLA_CUDA_CHECK(cudaMemcpy(table, t.data(), t.size() * 4, cudaMemcpyHostToDevice));
    AMLA_CUDA_CHECK(cudaMemcpy(lens, l.data(), l.size() * 4, cudaMemcpyHostToDevice));
  }
  ~DeviceProblem() {
    cudaFree(q);
    cudaFree(kv);
    cudaFree(out);
    cudaFree(lse);
    cudaFree(table);
    cudaFree(lens);
  }
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;

  amla::cuda::DeviceDecodeInputs inputs() const {
    return {.shape = shape,
            .q = static_cast<const amla::bf16*>(q),
            .kv = static_cast<const amla::bf16*>(kv),
            .block_table = table,
            .seqlens = lens};
  }
  amla::cuda::DeviceDecodeOutputs outputs() const { return {static_cast<amla::bf16*>(out), lse}; }
};

}  // namespace amla_bench
