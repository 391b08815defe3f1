// bench/cuda/bm_hopper_model.cu: the figures the simulator's Hopper model reads (sim/gpu_chip.hpp,
// sim/hopper_decode.hpp), measured on the GPU together with the kernel times it predicts.
//
//   clock      the SM clock under a light load: clock64() against %globaltimer on every SM
//   wgmma      cycles of the two wgmma batches the Hopper kernel issues per 64-key block: Q K^T
//              (36 x m64n64k16, B K-major) and one half of P V (4 x m64n256k16, B MN-major), each
//              issued and waited for in a loop by one warpgroup alone, by two at once, and the two
//              kinds side by side (one warpgroup each), one CTA per SM
//   vector     cycles of the kernel's own CUDA-core work per 64-key block, run through the kernel's
//              functions (hopper_kernel.cuh): the softmax stage of one warpgroup (scale, row max,
//              frame step, exp2, P to BF16 into shared memory) and the rescale of its 64 x 256 O
//              (standard: an FP32 multiply; AMLA: an integer add), one and two warpgroups at once
//   overlap    Q K^T batches on one warpgroup beside softmax stages on the other: whether the
//              tensor cores and the CUDA cores work side by side undisturbed
//   hbm        read bandwidth of a 4 GB stream, a device-to-device copy, the latency of dependent
//              loads
//   launch     an empty kernel timed alone and back to back, and how fast an SM takes its next
//              CTA when each holds the decode kernel's shared memory
//   tma        the kernel's TMA loads (its tensor map, 64 x 64 boxes, 9 per 64-key block): the
//              latency of one, the stream of one SM and of all SMs, from HBM and from L2, and
//              blocks read by 2 or 4 SMs at once (the row blocks of one request)
//   decode     the Hopper kernel (standard and AMLA) at b 128, s_q {1, 2}, s_k {1024, 4096,
//              16384}, varlen batches (a few long sequences among short ones; mixed lengths),
//              split-KV at small batches, one CTA alone and one wave of CTAs: the median of 15
//              launches with the L2 flushed (as bm_cuda_decode), then a 0.3 s loop of launches
//              whose wall-clock window is printed so that the SM clock sampled meanwhile
//              (scripts/hopper-model.sh runs nvidia-smi) can be matched to it
// Every line of results starts with its section's name; scripts/hopper-model.sh runs this
// program and keeps its output for examples/SIM_RESULTS.md.
#include "amla/backend/cuda/cuda.cuh"
#include "amla/backend/cuda/detail/hopper_kernel.cuh"
#include "bench_cuda.cuh"
#include "decode_kernels.cuh"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace ac = amla::cuda;
namespace hk = amla::cuda::detail::hopper;
namespace ptx = amla::cuda::detail::ptx;

/// Per CTA: [0] cycles, [1] nanoseconds, [2 + wg] cycles of warpgroup wg's own loop.
struct probe_times {
  long long cycles, ns, wg_cycles[2];
};

// ---- clock ----------------------------------------------------------------------------------

__global__ void clock_probe(int iters, const float*, probe_times* out, float* sink) {
  __syncthreads();
  const long long c0 = clock64();
  const std::uint64_t t0 = ptx::globaltimer_ns();
  float x = threadIdx.x * 1e-3f;
  for (int i = 0; i < iters; ++i) x = fmaf(x, 0.999f, 1e-3f);
  __syncthreads();
  if (threadIdx.x == 0) {
    out[blockIdx.x].cycles = clock64() - c0;
    out[blockIdx.x].ns = static_cast<long long>(ptx::globaltimer_ns() - t0);
  }
  if (x == 1.2345f) sink[0] = x;
}

// ---- wgmma ----------------------------------------------------------------------------------

struct wgmma_smem {
  std::uint8_t q[hk::tile_bytes];
  std::uint8_t kv[2][hk::tile_bytes];
};

/// Kind 0: Q K^T of one block (36 x m64n64k16, the kernel's qk_product without its waits);
/// kind 1: one warpgroup's half of P V (4 x m64n256k16 with B MN-major).
template <int Kind>
__device__ __forceinline__ void wgmma_batch(wgmma_smem& sm, int buf, float (&s)[32],
                                            float (&o)[128]) {
  ptx::wgmma_fence();
  if constexpr (Kind == 0) {
#pragma unroll
    for (int c = 0; c < hk::chunks; ++c) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        ptx::wgmma_m64n64k16_ss_kmajor(s, hk::desc_kmajor(sm.q + c * hk::chunk_bytes, kk),
                                       hk::desc_kmajor(sm.kv[buf] + c * hk::chunk_bytes, kk), 1);
      }
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      ptx::wgmma_m64n256k16_ss<true>(o, hk::desc_kmajor(sm.kv[buf] + 8 * hk::chunk_bytes, kk),
                                     hk::desc_v(sm.kv[buf], 4 * buf, kk), 1);
    }
  }
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  ptx::fence_regs(s);
  ptx::fence_regs(o);
}

/// Kinds: 0 Q K^T, 1 P V half; Mixed: warpgroup 0 runs Q K^T while warpgroup 1 runs P V halves.
template <int Kind, bool Mixed>
__global__ void __launch_bounds__(256, 1)
    wgmma_probe(int batches, const float*, probe_times* out, float* sink) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  extern __shared__ std::uint8_t raw[];
  wgmma_smem& sm = *reinterpret_cast<wgmma_smem*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) &
                                                  ~static_cast<std::uintptr_t>(1023));
  for (int i = threadIdx.x; i < static_cast<int>(sizeof(wgmma_smem) / 4); i += blockDim.x) {
    reinterpret_cast<std::uint32_t*>(&sm)[i] = 0x3C003C00u ^ (i * 2654435761u & 0x007F007Fu);
  }
  ptx::fence_proxy_async_smem();
  __syncthreads();
  const int wg = threadIdx.x / 128;
  float s[32] = {};
  float o[128] = {};
  const long long c0 = clock64();
  const std::uint64_t t0 = ptx::globaltimer_ns();
  const int kind = Mixed ? wg : Kind;
  for (int b = 0; b < batches; ++b) {
    if (kind == 0) {
      wgmma_batch<0>(sm, wg, s, o);
    } else {
      wgmma_batch<1>(sm, wg, s, o);
    }
  }
  const long long c_wg = clock64() - c0;
  __syncthreads();
  if (threadIdx.x % 128 == 0) out[blockIdx.x].wg_cycles[wg] = c_wg;
  if (threadIdx.x == 0) {
    out[blockIdx.x].cycles = clock64() - c0;
    out[blockIdx.x].ns = static_cast<long long>(ptx::globaltimer_ns() - t0);
  }
  float acc = 0;
  for (float x : s) acc += x;
  for (float x : o) acc += x;
  if (acc == 1.2345f) sink[threadIdx.x] = acc;
#endif
}

// ---- vector ---------------------------------------------------------------------------------

struct vector_smem {
  std::uint8_t p[2][hk::chunk_bytes + 1024];
  hk::frame_message msg[2][hk::rows_per_cta];
};

/// One block's softmax by one warpgroup, as the kernel's WG0 does it (row max to the published
/// P tile); `f0`, `f1` are kept moving so that every frame step is a real one.
template <ac::rescale_mode Mode>
__device__ __forceinline__ void softmax_stage(const float (&s0)[32], float scale, vector_smem& sm,
                                              int wg, int r0, int r1, int quad,
                                              amla::cuda::row_frame& f0, amla::cuda::row_frame& f1,
                                              float& l0, float& l1) {
  float s[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = s0[i];
  float mx0, mx1;
  hk::row_max(s, scale, mx0, mx1);
  // The old frame's scalars from a message, as the kernel reads them (their values do not match
  // the shifted frames here; the cost is the kernel's, a moved max every block).
  amla::amla_scalars c0, c1;
  const amla::cuda::frame_step a0 =
      amla::cuda::step_frame<Mode>(f0, hk::scalars_of<Mode>(f0, sm.msg[wg][r0]), fmaxf(f0.m, mx0),
                                   c0, amla::cuda::detail::amla_kernel_step(false));
  const amla::cuda::frame_step a1 =
      amla::cuda::step_frame<Mode>(f1, hk::scalars_of<Mode>(f1, sm.msg[wg][r1]), fmaxf(f1.m, mx1),
                                   c1, amla::cuda::detail::amla_kernel_step(false));
  if (quad == 0) {
    sm.msg[wg][r0] = hk::frame_message{a0.next, a0.o_scale, a0.o_add, c0};
    sm.msg[wg][r1] = hk::frame_message{a1.next, a1.o_scale, a1.o_add, c1};
  }
  float sum0, sum1;
  hk::exponentiate(s, scale, a0.next.m, a1.next.m, sum0, sum1);
  l0 = l0 * a0.l_scale + sum0;
  l1 = l1 * a1.l_scale + sum1;
  std::uint32_t pa[4][4];
  hk::make_p_fragments<Mode == ac::rescale_mode::amla>(pa, s, a0.p_scale, a1.p_scale);
  hk::store_p_tile(sm.p[wg], pa, r0, quad);
  ptx::fence_proxy_async_smem();
  ptx::bar_sync(3 + wg, 128);
  f0.m = a0.next.m - 0.5f;
  f1.m = a1.next.m - 0.5f;
}

/// Stage 0: the softmax of one block by one warpgroup (the kernel's WG0 path from the row max to
/// the published P tile); stage 1: the rescale of its O half with a factor that is never 1.
template <ac::rescale_mode Mode, int Stage>
__global__ void __launch_bounds__(256, 1)
    vector_probe(int iters, const float* init, probe_times* out, float* sink) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  __shared__ __align__(1024) vector_smem sm;
  const int wg = threadIdx.x / 128, tid_wg = threadIdx.x % 128;
  const int warp = tid_wg / 32, lane = threadIdx.x % 32, quad = lane % 4;
  const int r0 = warp * 16 + lane / 4, r1 = r0 + 8;
  float s0[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s0[i] = init[(threadIdx.x * 32 + i) % 4096];
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = init[(threadIdx.x + 7 * i) % 4096];
  amla::cuda::row_frame f0, f1;
  float l0 = 0, l1 = 0;
  __syncthreads();
  const long long c0 = clock64();
  const std::uint64_t t0 = ptx::globaltimer_ns();
  for (int it = 0; it < iters; ++it) {
    const float scale = 0.0625f + static_cast<float>(it) * 1e-6f;
    if constexpr (Stage == 0) {
      softmax_stage<Mode>(s0, scale, sm, wg, r0, r1, quad, f0, f1, l0, l1);
    } else {
      amla::cuda::frame_step a0, a1;
      a0.o_scale = 0.99f - scale * 1e-3f;
      a1.o_scale = 0.98f - scale * 1e-3f;
      a0.o_add = -(8 + (it & 7));
      a1.o_add = -(16 + (it & 7));
      hk::rescale_rows<Mode, false>(o, a0, a1);
      ptx::fence_regs(o);
    }
  }
  __syncthreads();
  const long long c_wg = clock64() - c0;
  if (tid_wg == 0) out[blockIdx.x].wg_cycles[wg] = c_wg;
  if (threadIdx.x == 0) {
    out[blockIdx.x].cycles = c_wg;
    out[blockIdx.x].ns = static_cast<long long>(ptx::globaltimer_ns() - t0);
  }
  float acc = l0 + l1;
  for (float x : o) acc += x;
  if (acc == 1.2345f) sink[threadIdx.x] = acc;
#endif
}

/// Warpgroup 0 issues Q K^T batches while warpgroup 1 runs softmax stages, each its own count:
/// whether the tensor cores and the CUDA cores run side by side undisturbed.
__global__ void __launch_bounds__(256, 1)
    overlap_probe(int qk_batches, int softmax_stages, const float* init, probe_times* out,
                  float* sink) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  extern __shared__ std::uint8_t raw[];
  std::uint8_t* base = reinterpret_cast<std::uint8_t*>(
      (reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~static_cast<std::uintptr_t>(1023));
  wgmma_smem& wsm = *reinterpret_cast<wgmma_smem*>(base);  // only q and kv[0] are read
  __shared__ __align__(1024) vector_smem vsm;
  for (int i = threadIdx.x; i < 2 * hk::tile_bytes / 4; i += blockDim.x)
    reinterpret_cast<std::uint32_t*>(base)[i] = 0x3C003C00u ^ (i * 2654435761u & 0x007F007Fu);
  ptx::fence_proxy_async_smem();
  __syncthreads();
  const int wg = threadIdx.x / 128, tid_wg = threadIdx.x % 128;
  const int warp = tid_wg / 32, lane = threadIdx.x % 32, quad = lane % 4;
  const int r0 = warp * 16 + lane / 4, r1 = r0 + 8;
  float acc = 0;
  const long long c0 = clock64();
  if (wg == 0) {
    float s[32] = {};
    float o[128] = {};
    for (int b = 0; b < qk_batches; ++b) wgmma_batch<0>(wsm, 0, s, o);
    for (float x : s) acc += x;
  } else {
    float s0[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s0[i] = init[(threadIdx.x * 32 + i) % 4096];
    amla::cuda::row_frame f0, f1;
    float l0 = 0, l1 = 0;
    for (int it = 0; it < softmax_stages; ++it) {
      softmax_stage<ac::rescale_mode::standard>(s0, 0.0625f + static_cast<float>(it) * 1e-6f, vsm,
                                                wg, r0, r1, quad, f0, f1, l0, l1);
    }
    acc = l0 + l1;
  }
  const long long c_wg = clock64() - c0;
  if (tid_wg == 0) out[blockIdx.x].wg_cycles[wg] = c_wg;
  if (acc == 1.2345f) sink[threadIdx.x] = acc;
#endif
}

// ---- hbm ------------------------------------------------------------------------------------

__global__ void read_stream(const uint4* p, std::size_t n, unsigned* sink) {
  unsigned x = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x12345678u) sink[0] = x;
}

__global__ void chase(const std::uint64_t* next, int hops, long long* cycles, std::uint64_t* sink) {
  std::uint64_t i = 0;
  const long long c0 = clock64();
  for (int h = 0; h < hops; ++h) i = next[i];
  cycles[0] = clock64() - c0;
  sink[0] = i;
}

__global__ void empty_kernel() {}

/// An empty CTA that holds `smem` bytes of dynamic shared memory (one per SM when that is over
/// half an SM's): a grid of many of them times how fast an SM takes its next CTA.
__global__ void empty_cta() {}

// ---- tma --------------------------------------------------------------------------------------

/// TMA loads of KV blocks the way the Hopper kernel issues them (the kernel's tensor map: 64 x 64
/// BF16 boxes, 128-byte swizzle, `chunks` of them per block), one thread issuing into `depth`
/// buffers of 72 KB round robin, each refilled as soon as its previous load is complete. Block b
/// of CTA c is block (c / share) * blocks + b of the cache, modulo `region` blocks: `share` CTAs
/// read the same blocks, and a small region stays in L2.
__global__ void __launch_bounds__(128, 1)
    tma_probe(const __grid_constant__ CUtensorMap tm, int blocks, int depth, int chunks, int share,
              int region, probe_times* out) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  extern __shared__ std::uint8_t raw[];
  std::uint8_t* buf = reinterpret_cast<std::uint8_t*>(
      (reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~static_cast<std::uintptr_t>(1023));
  __shared__ std::uint64_t bar[3];
  if (threadIdx.x == 0) {
    for (int i = 0; i < depth; ++i) ptx::mbar_init(&bar[i], 1);
    ptx::fence_mbar_init();
  }
  __syncthreads();
  const long long c0 = clock64();
  const std::uint64_t t0 = ptx::globaltimer_ns();
  if (threadIdx.x == 0) {
    for (int b = 0; b < blocks; ++b) {
      const int i = b % depth;
      if (b >= depth) ptx::mbar_wait(&bar[i], static_cast<std::uint32_t>((b / depth - 1) & 1));
      const int block = ((static_cast<int>(blockIdx.x) / share) * blocks + b) % region;
      ptx::mbar_arrive_expect_tx(&bar[i], static_cast<std::uint32_t>(chunks * hk::chunk_bytes));
      for (int c = 0; c < chunks; ++c) {
        ptx::tma_load_2d(buf + i * hk::tile_bytes + c * hk::chunk_bytes, &tm, c * 64, block * 64,
                         &bar[i]);
      }
    }
    for (int b = blocks < depth ? 0 : blocks - depth; b < blocks; ++b) {
      ptx::mbar_wait(&bar[b % depth], static_cast<std::uint32_t>((b / depth) & 1));
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    out[blockIdx.x].cycles = clock64() - c0;
    out[blockIdx.x].ns = static_cast<long long>(ptx::globaltimer_ns() - t0);
  }
#endif
}

// ---- host helpers ---------------------------------------------------------------------------

/// Wall-clock time as nvidia-smi's timestamp column writes it (local time, milliseconds).
std::string wall_clock() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const long ms = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d/%02d/%02d %02d:%02d:%02d.%03ld", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

struct Summary {
  double cycles = 0, mhz = 0, wg_cycles[2] = {0, 0};
};

Summary summarize(const std::vector<probe_times>& t) {
  Summary s;
  for (const auto& x : t) {
    s.cycles += static_cast<double>(x.cycles);
    s.mhz += static_cast<double>(x.cycles) / static_cast<double>(x.ns) * 1e3;
    s.wg_cycles[0] += static_cast<double>(x.wg_cycles[0]);
    s.wg_cycles[1] += static_cast<double>(x.wg_cycles[1]);
  }
  const double n = static_cast<double>(t.size());
  s.cycles /= n;
  s.mhz /= n;
  s.wg_cycles[0] /= n;
  s.wg_cycles[1] /= n;
  return s;
}

template <class Kernel>
Summary run_probe(Kernel k, int sms, int threads, int smem, int arg, const float* init,
                  probe_times* dev_times, float* sink) {
  if (smem > 48 * 1024) {
    AMLA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  std::vector<probe_times> host(static_cast<std::size_t>(sms));
  for (int rep = 0; rep < 2; ++rep) {  // the first run warms up
    AMLA_CUDA_CHECK(cudaMemset(dev_times, 0, sizeof(probe_times) * sms));
    k<<<sms, threads, smem>>>(arg, init, dev_times, sink);
    AMLA_CUDA_CHECK_LAUNCH("probe");
    AMLA_CUDA_CHECK(cudaDeviceSynchronize());
  }
  AMLA_CUDA_CHECK(
      cudaMemcpy(host.data(), dev_times, sizeof(probe_times) * sms, cudaMemcpyDeviceToHost));
  return summarize(host);
}

/// A decode configuration: name, s_q, per-sequence lengths, mode, splits (0: the kernel's choice).
struct DecodeConfig {
  std::string name;
  int s_q;
  std::vector<int> seqlens;
  ac::rescale_mode mode;
  int splits = 0;
  int h_q = 128;
};

std::string lengths_text(const std::vector<int>& l) {
  std::string t;
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (i > 0) t += ',';
    t += std::to_string(l[i]);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  if (!amla_bench::device_visible("bm_hopper_model")) return 77;
  try {
    cudaDeviceProp prop{};
    AMLA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0, mem_khz = 0, bus_bits = 0, smem_sm = 0, smem_block = 0, regs_sm = 0;
    AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0));
    AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
    AMLA_CUDA_CHECK(
        cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0));
    AMLA_CUDA_CHECK(
        cudaDeviceGetAttribute(&smem_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&regs_sm, cudaDevAttrMaxRegistersPerMultiprocessor, 0));
    const int sms = prop.multiProcessorCount;
    std::printf("device: %s, %d SMs, L2 %d bytes, smem/SM %d, smem/block %d, regs/SM %d\n",
                prop.name, sms, prop.l2CacheSize, smem_sm, smem_block, regs_sm);
    std::printf("device: max SM clock %.0f MHz, memory clock %.0f MHz, bus %d bits (%.3g B/s)\n",
                clock_khz * 1e-3, mem_khz * 1e-3, bus_bits, 2.0 * mem_khz * 1e3 * bus_bits / 8);
    const bool hopper = prop.major == 9 && prop.minor == 0 && ac::detail::hopper_kernel_built(0);

    probe_times* dev_times = nullptr;
    float* sink = nullptr;
    float* init = nullptr;
    AMLA_CUDA_CHECK(cudaMalloc(&dev_times, sizeof(probe_times) * sms));
    AMLA_CUDA_CHECK(cudaMalloc(&sink, 1024 * sizeof(float)));
    AMLA_CUDA_CHECK(cudaMalloc(&init, 4096 * sizeof(float)));
    {
      std::vector<float> h(4096);
      std::mt19937 g(7);
      std::uniform_real_distribution<float> u(-8.0f, 8.0f);
      for (auto& x : h) x = u(g);
      AMLA_CUDA_CHECK(cudaMemcpy(init, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }

    // ---- clock ----
    {
      const Summary s = run_probe(clock_probe, sms, 128, 0, 2000000, nullptr, dev_times, sink);
      std::printf("clock: light load %.0f MHz (%.0f cycles)\n", s.mhz, s.cycles);
    }

    // ---- wgmma ----
    if (hopper) {
      const int smem = static_cast<int>(sizeof(wgmma_smem)) + 1024;
      const int n = quick ? 200 : 2000;
      struct P {
        const char* name;
        int threads;
        Summary s;
      };
      std::vector<P> ps = {
          {"qk 1wg", 128,
           run_probe(wgmma_probe<0, false>, sms, 128, smem, n, nullptr, dev_times, sink)},
          {"qk 2wg", 256,
           run_probe(wgmma_probe<0, false>, sms, 256, smem, n, nullptr, dev_times, sink)},
          {"pv 1wg", 128,
           run_probe(wgmma_probe<1, false>, sms, 128, smem, n, nullptr, dev_times, sink)},
          {"pv 2wg", 256,
           run_probe(wgmma_probe<1, false>, sms, 256, smem, n, nullptr, dev_times, sink)},
          {"qk+pv", 256,
           run_probe(wgmma_probe<0, true>, sms, 256, smem, n, nullptr, dev_times, sink)},
      };
      for (const P& p : ps) {
        std::printf(
            "wgmma: %-7s batches %d: %.1f cycles per batch per warpgroup (wg0 %.1f, wg1 %.1f), "
            "%.0f MHz\n",
            p.name, n, p.s.cycles / n, p.s.wg_cycles[0] / n,
            p.threads > 128 ? p.s.wg_cycles[1] / n : 0.0, p.s.mhz);
      }
      // Rates per SM cycle: FLOPs of a batch over its cycles, both warpgroups counted.
      const double qk_flop = 2.0 * 64 * 64 * 576, pv_flop = 2.0 * 64 * 256 * 64;
      std::printf("wgmma: flop per SM cycle: qk 1wg %.0f, qk 2wg %.0f, pv 1wg %.0f, pv 2wg %.0f\n",
                  qk_flop / (ps[0].s.cycles / n), 2 * qk_flop / (ps[1].s.cycles / n),
                  pv_flop / (ps[2].s.cycles / n), 2 * pv_flop / (ps[3].s.cycles / n));
    }

    // ---- vector ----
    if (hopper) {
      const int n = quick ? 2000 : 20000;
      auto show = [&](const char* name, const Summary& s1, const Summary& s2) {
        std::printf(
            "vector: %-22s %.1f cycles per block (1 wg), %.1f (2 wg: %.1f, %.1f), %.0f MHz\n", name,
            s1.wg_cycles[0] / n, s2.cycles / n, s2.wg_cycles[0] / n, s2.wg_cycles[1] / n, s2.mhz);
      };
      using M = ac::rescale_mode;
      const std::pair<const char*, decltype(&vector_probe<M::standard, 0>)> probes[] = {
          {"softmax standard", vector_probe<M::standard, 0>},
          {"softmax amla", vector_probe<M::amla, 0>},
          {"rescale standard", vector_probe<M::standard, 1>},
          {"rescale amla", vector_probe<M::amla, 1>}};
      for (const auto& [name, probe] : probes) {
        show(name, run_probe(probe, sms, 128, 0, n, init, dev_times, sink),
             run_probe(probe, sms, 256, 0, n, init, dev_times, sink));
      }
      // Side by side: Q K^T batches on WG0 (about 1240 cycles each alone) and as many softmax
      // stages on WG1 as take about as long alone (780 cycles each).
      {
        const int smem = 2 * hk::tile_bytes + 1024;
        AMLA_CUDA_CHECK(
            cudaFuncSetAttribute(overlap_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        const int qk = quick ? 200 : 2000, sm = qk * 1240 / 780;
        std::vector<probe_times> host(static_cast<std::size_t>(sms));
        for (int rep = 0; rep < 2; ++rep) {
          AMLA_CUDA_CHECK(cudaMemset(dev_times, 0, sizeof(probe_times) * sms));
          overlap_probe<<<sms, 256, smem>>>(qk, sm, init, dev_times, sink);
          AMLA_CUDA_CHECK_LAUNCH("overlap_probe");
          AMLA_CUDA_CHECK(cudaDeviceSynchronize());
        }
        AMLA_CUDA_CHECK(
            cudaMemcpy(host.data(), dev_times, sizeof(probe_times) * sms, cudaMemcpyDeviceToHost));
        double w0 = 0, w1 = 0;
        for (const auto& h : host) {
          w0 += static_cast<double>(h.wg_cycles[0]);
          w1 += static_cast<double>(h.wg_cycles[1]);
        }
        std::printf(
            "overlap: side by side, wg0 %d Q K^T batches %.1f cycles each, wg1 %d softmax stages "
            "(standard) %.1f cycles each\n",
            qk, w0 / sms / qk, sm, w1 / sms / sm);
      }
    }

    // ---- hbm ----
    amla_bench::Events ev;
    {
      const std::size_t bytes = std::size_t{4} << 30;
      void* a = nullptr;
      void* b = nullptr;
      AMLA_CUDA_CHECK(cudaMalloc(&a, bytes));
      AMLA_CUDA_CHECK(cudaMalloc(&b, bytes / 2));
      AMLA_CUDA_CHECK(cudaMemset(a, 1, bytes));
      std::vector<double> rd, cp;
      for (int i = 0; i < 6; ++i) {
        rd.push_back(ev.ms([&] {
          read_stream<<<sms * 8, 512>>>(static_cast<const uint4*>(a), bytes / 16,
                                        reinterpret_cast<unsigned*>(sink));
        }));
        cp.push_back(ev.ms(
            [&] { AMLA_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes / 2, cudaMemcpyDeviceToDevice)); }));
      }
      AMLA_CUDA_CHECK_LAUNCH("read_stream");
      std::printf("hbm: read %.4g B/s (4 GiB stream), copy %.4g B/s (read + write of 2 GiB)\n",
                  bytes / (amla_bench::median(rd) * 1e-3), bytes / (amla_bench::median(cp) * 1e-3));
      // Dependent loads, 4 KiB apart, over 2 GiB in a random cycle.
      const std::size_t slots = (std::size_t{2} << 30) / 4096;
      std::vector<std::uint64_t> order(slots);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(11));
      std::vector<std::uint64_t> next(slots * 512, 0);
      for (std::size_t i = 0; i < slots; ++i) {
        next[order[i] * 512] = order[(i + 1) % slots] * 512;
      }
      AMLA_CUDA_CHECK(cudaMemcpy(a, next.data(), next.size() * 8, cudaMemcpyHostToDevice));
      long long* cyc = nullptr;
      AMLA_CUDA_CHECK(cudaMalloc(&cyc, sizeof(long long)));
      const int hops = 20000;
      const float ms = ev.ms([&] {
        chase<<<1, 1>>>(static_cast<const std::uint64_t*>(a), hops, cyc,
                        reinterpret_cast<std::uint64_t*>(sink));
      });
      AMLA_CUDA_CHECK_LAUNCH("chase");
      long long host_cyc = 0;
      AMLA_CUDA_CHECK(cudaMemcpy(&host_cyc, cyc, sizeof host_cyc, cudaMemcpyDeviceToHost));
      std::printf("hbm: dependent load latency %.0f cycles, %.0f ns (event time / hops)\n",
                  static_cast<double>(host_cyc) / hops, ms * 1e6 / hops);
      AMLA_CUDA_CHECK(cudaFree(cyc));
      AMLA_CUDA_CHECK(cudaFree(a));
      AMLA_CUDA_CHECK(cudaFree(b));
      std::vector<double> e;
      for (int i = 0; i < 200; ++i) e.push_back(ev.ms([&] { empty_kernel<<<sms, 128>>>(); }));
      std::printf("launch: empty kernel %.2f us (event time, median of 200)\n",
                  amla_bench::median(e) * 1e3);
      const float burst = ev.ms([&] {
        for (int i = 0; i < 200; ++i) empty_kernel<<<sms, 128>>>();
      });
      std::printf("launch: empty kernels back to back %.2f us each (200 in one event window)\n",
                  burst * 1e3 / 200);
      // One CTA per SM at a time (the decode kernel's shared memory), 50 waves.
      const int big = static_cast<int>(hk::smem_bytes);
      AMLA_CUDA_CHECK(
          cudaFuncSetAttribute(empty_cta, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
      std::vector<double> one, fifty;
      for (int i = 0; i < 20; ++i) {
        one.push_back(ev.ms([&] { empty_cta<<<sms, 256, big>>>(); }));
        fifty.push_back(ev.ms([&] { empty_cta<<<sms * 50, 256, big>>>(); }));
      }
      AMLA_CUDA_CHECK_LAUNCH("empty_cta");
      std::printf(
          "launch: CTA turnaround %.3f us per wave of %d CTAs with %d bytes of shared memory "
          "(50 waves %.2f us, 1 wave %.2f us)\n",
          (amla_bench::median(fifty) - amla_bench::median(one)) * 1e3 / 49, sms, big,
          amla_bench::median(fifty) * 1e3, amla_bench::median(one) * 1e3);
    }

    // ---- tma ----
    if (hopper) {
      // A KV cache of 2 GiB: 29,127 blocks of 64 keys x 576 BF16, rows 1152 bytes apart.
      const int region_hbm = static_cast<int>((std::size_t{2} << 30) / hk::tile_bytes);
      void* kv = nullptr;
      AMLA_CUDA_CHECK(cudaMalloc(&kv, static_cast<std::size_t>(region_hbm) * hk::tile_bytes));
      amla_cuda_test::fill_random(kv, static_cast<std::size_t>(region_hbm) * hk::tile_bytes / 2, 9,
                                  1.0f);
      const CUtensorMap tm = ac::detail::make_tensor_map(
          kv, hk::d_qk, static_cast<std::uint64_t>(region_hbm) * 64, hk::d_qk * 2, 64, 64);
      void* flush = nullptr;
      AMLA_CUDA_CHECK(cudaMalloc(&flush, 256u << 20));
      const int smem = 3 * hk::tile_bytes + 1024;
      AMLA_CUDA_CHECK(
          cudaFuncSetAttribute(tma_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      struct T {
        const char* name;
        int ctas, blocks, depth, chunks, share, region;
      };
      const T tests[] = {
          {"latency 1 chunk, HBM, 1 SM", 1, 200, 1, 1, 1, region_hbm},
          {"latency 1 chunk, L2, 1 SM", 1, 200, 1, 1, 1, 4},
          {"latency 1 block, HBM, 1 SM", 1, 100, 1, 9, 1, region_hbm},
          {"stream depth 2, HBM, 1 SM", 1, 200, 2, 9, 1, region_hbm},
          {"stream depth 3, HBM, 1 SM", 1, 200, 3, 9, 1, region_hbm},
          {"stream depth 3, L2, 1 SM", 1, 200, 3, 9, 1, 8},
          {"stream depth 2, HBM, all SMs", sms, 100, 2, 9, 1, region_hbm},
          {"stream depth 3, HBM, all SMs", sms, 100, 3, 9, 1, region_hbm},
          {"stream depth 2, L2, all SMs", sms, 100, 2, 9, 1, 16},
          {"stream depth 2, HBM, all SMs, 2 share", sms, 100, 2, 9, 2, region_hbm},
          {"stream depth 2, HBM, all SMs, 4 share", sms, 100, 2, 9, 4, region_hbm},
      };
      std::vector<probe_times> host(static_cast<std::size_t>(sms));
      for (const T& t : tests) {
        double cycles = 0, mhz = 0;
        for (int rep = 0; rep < 2; ++rep) {  // the first run warms L2 up for the L2 cases
          AMLA_CUDA_CHECK(cudaMemsetAsync(flush, rep, 256u << 20));
          AMLA_CUDA_CHECK(cudaMemset(dev_times, 0, sizeof(probe_times) * sms));
          tma_probe<<<t.ctas, 128, smem>>>(tm, t.blocks, t.depth, t.chunks, t.share, t.region,
                                           dev_times);
          AMLA_CUDA_CHECK_LAUNCH("tma_probe");
          AMLA_CUDA_CHECK(cudaDeviceSynchronize());
        }
        host.resize(static_cast<std::size_t>(t.ctas));
        AMLA_CUDA_CHECK(cudaMemcpy(host.data(), dev_times, sizeof(probe_times) * t.ctas,
                                   cudaMemcpyDeviceToHost));
        const Summary sum = summarize(host);
        cycles = sum.cycles;
        mhz = sum.mhz;
        const double bytes = static_cast<double>(t.chunks) * hk::chunk_bytes;
        const double per = cycles / t.blocks;
        std::printf(
            "tma: %-38s %8.1f cycles per load of %6.0f bytes, %6.2f B/cycle per SM, %7.1f GB/s "
            "over the CTAs, %.0f MHz\n",
            t.name, per, bytes, bytes / per, bytes / per * mhz * 1e6 * t.ctas / 1e9, mhz);
      }
      AMLA_CUDA_CHECK(cudaFree(flush));
      AMLA_CUDA_CHECK(cudaFree(kv));
    }

    // ---- decode ----
    if (!hopper) {
      std::printf("decode: no Hopper kernel here (device or build)\n");
      return 0;
    }
    std::vector<DecodeConfig> configs;
    using M = ac::rescale_mode;
    const std::vector<int> sks =
        quick ? std::vector<int>{4096} : std::vector<int>{1024, 4096, 16384};
    for (M mode : {M::standard, M::amla}) {
      for (int s_q : {1, 2}) {
        for (int s_k : sks) {
          configs.push_back({"uniform", s_q, std::vector<int>(128, s_k), mode});
        }
      }
    }
    std::vector<int> imbalanced(128, 512), mixed(128);
    for (int i = 0; i < 128; i += 16) imbalanced[static_cast<std::size_t>(i)] = 16384;
    for (int i = 0; i < 128; ++i) mixed[static_cast<std::size_t>(i)] = 256 + (i * 7919) % 7937;
    for (M mode : {M::standard, M::amla}) {
      for (int s_q : {1, 2}) configs.push_back({"imbalanced", s_q, imbalanced, mode});
      configs.push_back({"mixed", 1, mixed, mode});
    }
    configs.push_back({"uniform", 2, std::vector<int>(16, 4096), M::standard});
    configs.push_back({"uniform", 2, std::vector<int>(1, 16384), M::standard});
    configs.push_back({"uniform", 1, std::vector<int>(1, 64), M::standard});
    configs.push_back({"one-wave", 1, std::vector<int>(66, 16384), M::standard});
    // One CTA alone (h_q 64: one row block), and one CTA on every SM.
    for (M mode : {M::standard, M::amla}) {
      for (int s_k : {1024, 16384}) configs.push_back({"one-cta", 1, {s_k}, mode, 1, 64});
      configs.push_back({"one-wave", 1, std::vector<int>(132, 16384), mode, 1, 64});
    }
    std::printf("decode: imbalanced lengths %s\n", lengths_text(imbalanced).c_str());
    std::printf("decode: mixed lengths %s\n", lengths_text(mixed).c_str());

    const std::size_t flush_bytes = 256u << 20;
    void* flush = nullptr;
    AMLA_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    std::mt19937 rng(12345);
    const int page = 64;
    for (const DecodeConfig& c : configs) {
      const int h_q = c.h_q;
      const amla_bench::DeviceProblem problem(c.s_q, h_q, c.seqlens, page, 3, 4, rng);
      const int batch = problem.shape.batch;
      const ac::DeviceDecodeInputs in = problem.inputs();
      const ac::DeviceDecodeOutputs outs = problem.outputs();
      ac::CudaDecodeOptions opt{
          .mode = c.mode, .kernel = ac::kernel_kind::hopper, .num_splits = c.splits};
      const ac::DecodeLaunch launch = ac::decode(in, outs, opt);
      opt.check_tables = false;
      for (int i = 0; i < 3; ++i) ac::decode(in, outs, opt);
      AMLA_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<double> ms;
      for (int i = 0; i < 15; ++i) {
        AMLA_CUDA_CHECK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes));
        ms.push_back(ev.ms([&] { ac::decode(in, outs, opt); }));
      }
      const double us = amla_bench::median(ms) * 1e3;
      // The clock window: launches back to back for about 0.3 s.
      const std::string w0 = wall_clock();
      const auto t0 = std::chrono::steady_clock::now();
      int loops = 0;
      while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300)) {
        for (int i = 0; i < 10; ++i) ac::decode(in, outs, opt);
        AMLA_CUDA_CHECK(cudaDeviceSynchronize());
        loops += 10;
      }
      const double loop_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          loops;
      const std::string w1 = wall_clock();
      double flop = 0;
      for (const int l : c.seqlens)
        flop += 2.0 * c.s_q * h_q * static_cast<double>(l) * (576 + 512);
      int max_len = *std::max_element(c.seqlens.begin(), c.seqlens.end());
      std::printf(
          "decode: %-10s %-8s b %3d h_q %3d s_q %d s_k %5d splits %2d: %8.1f us %6.1f TFLOPS | "
          "loop "
          "%.1f us | window %s - %s\n",
          c.name.c_str(), c.mode == M::amla ? "amla" : "standard", batch, h_q, c.s_q, max_len,
          launch.num_splits, us, flop / (us * 1e-6) / 1e12, loop_us, w0.c_str(), w1.c_str());
      std::fflush(stdout);
    }
    AMLA_CUDA_CHECK(cudaFree(flush));
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 1;
  }
  return 0;
}
