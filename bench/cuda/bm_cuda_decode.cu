// bench/cuda/bm_cuda_decode.cu: speed of the CUDA decode kernels, as TFLOPS and as a fraction of
// a cuBLAS BF16 GEMM (8192^3) measured in the same run.
//
//   TFLOPS = 2 * b * s_q * h_q * s_k * (576 + 512) / time
// Times are medians over repetitions timed with CUDA events after warm-up, with L2 flushed (a
// 256 MB memset) before every timed launch; inputs are random (never zeros), page order shuffled.
// A plain program (no Google Benchmark): GPU machines here have only the CUDA toolkit.
//
//   bm_cuda_decode            the benchmark grid: b 128, s_q {1, 2}, s_k {1024, 4096, 16384}, both
//                             modes, the balanced split-KV schedule and no split; tuning knobs at
//                             s_k 4096; the split-KV shapes b 16 and b 1
//   bm_cuda_decode --quick    s_k 4096 only
//   bm_cuda_decode --filter TEXT          the configurations whose name holds TEXT
//   bm_cuda_decode --profile [b s_q s_k [splits]]   one configuration, three launches, for ncu
#include "amla/backend/cuda/cuda.cuh"
#include "bench_cuda.cuh"

#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

namespace ac = amla::cuda;

#define BM_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                        \
    const cublasStatus_t st_ = (call);                                                        \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                       \
      std::fprintf(stderr, "%s failed with cublasStatus %d\n", #call, static_cast<int>(st_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

/// Tensor-core rate of the two wgmma shapes the Hopper kernel issues, from shared memory tiles
/// (1024-byte aligned, 128-byte swizzle, contents as left by fill_smem), two warpgroups per CTA
/// each issuing `groups` batches of 16 wgmma before waiting. Shape 0: m64n64k16, A and B K-major
/// (Q K^T). Shape 1: m64n256k16, B MN-major (P V). Shape 2: m64n256k16, B K-major (a GEMM's).
template <int Shape>
__global__ void __launch_bounds__(256, 1) wgmma_rate(int groups, float* sink) {
  namespace ptx = amla::cuda::detail::ptx;
  extern __shared__ std::uint8_t raw[];
  std::uint8_t* base = reinterpret_cast<std::uint8_t*>(
      (reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~static_cast<std::uintptr_t>(1023));
  // A: 64 x 64 (8 KB) per warpgroup; B: 256 x 64 (32 KB) per warpgroup.
  for (int i = threadIdx.x; i < 2 * (8192 + 32768) / 4; i += blockDim.x) {
    reinterpret_cast<std::uint32_t*>(base)[i] = 0x3C003C00u ^ (i * 2654435761u & 0x00FF00FFu);
  }
  ptx::fence_proxy_async_smem();
  __syncthreads();
  const int wg = threadIdx.x / 128;
  std::uint8_t* a = base + wg * (8192 + 32768);
  std::uint8_t* b = a + 8192;
  // One group: 16 wgmma into one accumulator (32 floats for n64, 128 for n256).
  float d[Shape == 0 ? 32 : 128] = {};
  for (int g = 0; g < groups; ++g) {
    ptx::wgmma_fence();
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const std::uint64_t da = ptx::smem_desc_sw128(ptx::smem_u32(a) + kk * 32, 16, 1024);
        if constexpr (Shape == 0) {
          ptx::wgmma_m64n64k16_ss_kmajor(
              d, da, ptx::smem_desc_sw128(ptx::smem_u32(b) + kk * 32, 16, 1024), 1);
        } else if constexpr (Shape == 1) {
          ptx::wgmma_m64n256k16_ss<true>(
              d, da, ptx::smem_desc_sw128(ptx::smem_u32(b) + kk * 2048, 8192, 1024), 1);
        } else {
          ptx::wgmma_m64n256k16_ss<false>(
              d, da, ptx::smem_desc_sw128(ptx::smem_u32(b) + kk * 32, 16, 1024), 1);
        }
      }
    }
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::fence_regs(d);
  }
  float acc = 0;
  for (float x : d) acc += x;
  if (acc == 1.2345f) sink[threadIdx.x] = acc;
}

/// Median time (ms) of `launch`, each repetition after an L2 flush.
template <class F>
double time_ms(F&& launch, void* flush, std::size_t flush_bytes, int warmup, int reps) {
  amla_bench::Events ev;
  for (int i = 0; i < warmup; ++i) launch();
  AMLA_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    AMLA_CUDA_CHECK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes));
    ms.push_back(ev.ms(launch));
  }
  return amla_bench::median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string arg = argc > 1 ? argv[1] : "";
  const bool quick = arg == "--quick";
  // --filter TEXT: only the configurations whose name holds TEXT (e.g. "no-split").
  const std::string filter = arg == "--filter" && argc > 2 ? argv[2] : "";
  // --profile [b s_q s_k [splits [mode]]]: one configuration (default b 128, s_q 2, s_k 4096;
  // hopper/standard, the balanced schedule; mode standard, amla or amla-skip), three launches,
  // for a profiler (the third launch is the one to look at).
  const bool profile = arg == "--profile";
  const int profile_b = profile && argc > 4 ? std::atoi(argv[2]) : 128;
  const int profile_sq = profile && argc > 4 ? std::atoi(argv[3]) : 2;
  const int profile_sk = profile && argc > 4 ? std::atoi(argv[4]) : 4096;
  const int profile_splits = profile && argc > 5 ? std::atoi(argv[5]) : 0;
  const std::string profile_mode = profile && argc > 6 ? argv[6] : "standard";
  if (profile_mode != "standard" && profile_mode != "amla" && profile_mode != "amla-skip") {
    std::fprintf(stderr, "bm_cuda_decode: --profile mode must be standard, amla or amla-skip\n");
    return 2;
  }
  if (!amla_bench::device_visible("bm_cuda_decode")) return 77;
  try {
    cudaDeviceProp prop{};
    AMLA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
                prop.l2CacheSize >> 20);
    const std::size_t flush_bytes = 256u << 20;
    void* flush = nullptr;
    AMLA_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));

    // ---- cuBLAS BF16 GEMM ceiling ----
    const int n = 8192;
    void *ga, *gb, *gc;
    AMLA_CUDA_CHECK(cudaMalloc(&ga, sizeof(__nv_bfloat16) * n * n));
    AMLA_CUDA_CHECK(cudaMalloc(&gb, sizeof(__nv_bfloat16) * n * n));
    AMLA_CUDA_CHECK(cudaMalloc(&gc, sizeof(__nv_bfloat16) * n * n));
    amla_cuda_test::fill_random(ga, static_cast<std::size_t>(n) * n, 1, 1.0f);
    amla_cuda_test::fill_random(gb, static_cast<std::size_t>(n) * n, 2, 1.0f);
    cublasHandle_t handle;
    BM_CUBLAS_CHECK(cublasCreate(&handle));
    const float alpha = 1.0f, beta = 0.0f;
    auto gemm = [&] {
      BM_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, ga,
                                   CUDA_R_16BF, n, gb, CUDA_R_16BF, n, &beta, gc, CUDA_R_16BF, n,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    // Warm-up: about two seconds of GEMMs, so that clocks have ramped up before anything is timed
    // (the first configurations of a cold run measured up to 20% slow).
    if (!profile) {
      amla_bench::Events w;
      AMLA_CUDA_CHECK(cudaEventRecord(w.a));
      for (float elapsed = 0; elapsed < 2000.0f;) {
        for (int i = 0; i < 50; ++i) gemm();
        AMLA_CUDA_CHECK(cudaEventRecord(w.b));
        AMLA_CUDA_CHECK(cudaEventSynchronize(w.b));
        AMLA_CUDA_CHECK(cudaEventElapsedTime(&elapsed, w.a, w.b));
      }
    }
    const double gemm_ms = time_ms(gemm, flush, flush_bytes, 5, profile ? 1 : 20);
    const double gemm_tflops = 2.0 * n * n * static_cast<double>(n) / (gemm_ms * 1e-3) / 1e12;
    std::printf("cuBLAS BF16 GEMM 8192^3: %.3f ms, %.1f TFLOPS\n", gemm_ms, gemm_tflops);
    BM_CUBLAS_CHECK(cublasDestroy(handle));
    AMLA_CUDA_CHECK(cudaFree(ga));
    AMLA_CUDA_CHECK(cudaFree(gb));
    AMLA_CUDA_CHECK(cudaFree(gc));

    // The Hopper kernel (and the wgmma rates) need an sm_90a build on a compute capability 9.0
    // device; elsewhere only the simple kernel's configurations run.
    const bool hopper =
        prop.major == 9 && prop.minor == 0 && amla::cuda::detail::hopper_kernel_built(0);
    if (!hopper) std::printf("no Hopper kernel here (device or build): simple kernel only\n");

    // ---- wgmma rates (one CTA per SM, nothing but the tensor cores and shared memory) ----
    if (!profile && hopper) {
      float* sink = nullptr;
      AMLA_CUDA_CHECK(cudaMalloc(&sink, 256 * sizeof(float)));
      const int smem = 2 * (8192 + 32768) + 1024;
      const char* names[3] = {"m64n64k16 SS, K-major B (Q K^T)", "m64n256k16 SS, MN-major B (P V)",
                              "m64n256k16 SS, K-major B (GEMM)"};
      for (int shape = 0; shape < 3; ++shape) {
        auto k = shape == 0 ? wgmma_rate<0> : shape == 1 ? wgmma_rate<1> : wgmma_rate<2>;
        AMLA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        const int groups = 2000;
        auto run = [&] {
          k<<<prop.multiProcessorCount, 256, smem>>>(groups, sink);
          AMLA_CUDA_CHECK_LAUNCH("wgmma_rate");
        };
        const double ms = time_ms(run, flush, flush_bytes, 2, 5);
        const double n = shape == 0 ? 64 : 256;
        const double flop = 2.0 * prop.multiProcessorCount * 2 * groups * 16 * 64 * n * 16;
        std::printf("wgmma %-34s %7.1f TFLOPS (%.2f of cuBLAS)\n", names[shape],
                    flop / (ms * 1e-3) / 1e12, flop / (ms * 1e-3) / 1e12 / gemm_tflops);
      }
      AMLA_CUDA_CHECK(cudaFree(sink));
    }

    // ---- decode ----
    const int h_q = 128, page = 64;
    std::mt19937 rng(12345);
    struct Config {
      int batch, s_q, s_k;
      ac::CudaDecodeOptions opt;
      int reps;
      std::string variant;  ///< appended to the kernel/mode name
    };
    auto options = [](ac::kernel_kind kernel, ac::rescale_mode mode) {
      return ac::CudaDecodeOptions{
          .mode = mode, .kernel = kernel, .rescale = amla::pow2_mode::hardware};
    };
    const ac::CudaDecodeOptions hopper_std =
        options(ac::kernel_kind::hopper, ac::rescale_mode::standard);
    const ac::CudaDecodeOptions hopper_amla =
        options(ac::kernel_kind::hopper, ac::rescale_mode::amla);
    ac::CudaDecodeOptions hopper_amla_skip = hopper_amla;
    hopper_amla_skip.skip_unmoved = true;
    std::vector<Config> configs;
    if (profile) {
      ac::CudaDecodeOptions o = profile_mode == "standard"
                                    ? hopper_std
                                    : (profile_mode == "amla" ? hopper_amla : hopper_amla_skip);
      o.num_splits = profile_splits;
      configs.push_back({profile_b, profile_sq, profile_sk, o, 1, ""});
    }
    const std::vector<int> sks =
        quick ? std::vector<int>{4096} : std::vector<int>{1024, 4096, 16384};
    // FlashMLA's benchmark grid, both modes (AMLA also with skip_unmoved), the balanced schedule
    // (automatic).
    for (const ac::CudaDecodeOptions& o : {hopper_std, hopper_amla, hopper_amla_skip}) {
      for (int s_q : {1, 2}) {
        for (int s_k : sks) {
          configs.push_back({128, s_q, s_k, o, 15, o.skip_unmoved ? "/skip" : ""});
        }
      }
    }
    // The same without split-KV (one piece per request: a grid of 2 waves).
    for (int s_q : {1, 2}) {
      for (int s_k : sks) {
        ac::CudaDecodeOptions o = hopper_std;
        o.num_splits = 1;
        configs.push_back({128, s_q, s_k, o, 15, "/no-split"});
      }
    }
    // Two pieces per request at s_k 1024, where each CTA's fixed costs (its Q and first KV loads,
    // the epilogue) weigh most: twice the CTAs, half the blocks each, and a combine.
    if (!quick) {
      for (int s_q : {1, 2}) {
        ac::CudaDecodeOptions o = hopper_std;
        o.num_splits = 2;
        configs.push_back({128, s_q, 1024, o, 15, "/splits 2"});
      }
    }
    // Tuning knobs at s_k 4096: evict-first L2 hint on the Q and KV loads, no stagger of the two
    // Q K^T, and AMLA's safe add.
    for (int s_q : {1, 2}) {
      ac::CudaDecodeOptions o = hopper_std;
      o.kv_l2_hint = ac::l2_hint::evict_first;
      configs.push_back({128, s_q, 4096, o, 15, "/evict-first"});
      o = hopper_std;
      o.stagger_qk = false;
      configs.push_back({128, s_q, 4096, o, 15, "/no-stagger"});
    }
    {
      ac::CudaDecodeOptions o = hopper_amla;
      o.rescale = amla::pow2_mode::safe;
      configs.push_back({128, 2, 4096, o, 15, "-safe"});
    }
    // Split-KV at small batches: balanced, fixed splits, no programmatic dependent launch.
    for (int b : {16, 1}) {
      const int s_k = b == 16 ? 4096 : 16384;
      configs.push_back({b, 2, s_k, hopper_std, 15, ""});
      configs.push_back({b, 2, s_k, hopper_amla, 15, ""});
      configs.push_back({b, 2, s_k, hopper_amla_skip, 15, "/skip"});
      ac::CudaDecodeOptions o = hopper_std;
      o.pdl = false;
      configs.push_back({b, 2, s_k, o, 15, "/no-pdl"});
      o = hopper_std;
      o.num_splits = b == 16 ? 2 : 32;
      configs.push_back({b, 2, s_k, o, 15, "/splits " + std::to_string(o.num_splits)});
    }
    configs.push_back(
        {128, 1, 1024, options(ac::kernel_kind::simple, ac::rescale_mode::standard), 3, ""});

    if (profile) configs.resize(1);
    if (!filter.empty()) {
      std::erase_if(configs, [&](const Config& c) {
        const std::string name = std::string(ac::to_string(c.opt.kernel)) + "/" +
                                 (c.opt.mode == ac::rescale_mode::amla ? "amla" : "standard") +
                                 c.variant;
        return name.find(filter) == std::string::npos;
      });
    }
    if (!hopper) {
      std::erase_if(configs,
                    [](const Config& c) { return c.opt.kernel == ac::kernel_kind::hopper; });
    }
    struct Row {
      std::string name;
      int batch, s_q, s_k, pieces;
      double us[2], tflops[2];
    };
    std::vector<Row> rows(configs.size());
    // Two passes over all configurations: the spread between them is the noise of a number.
    for (int pass = 0; pass < (profile ? 1 : 2); ++pass) {
      for (std::size_t ci = 0; ci < configs.size(); ++ci) {
        const Config& c = configs[ci];
        if (pass == 1 && c.opt.kernel == ac::kernel_kind::simple) {
          rows[ci].us[1] = rows[ci].us[0];
          rows[ci].tflops[1] = rows[ci].tflops[0];
          continue;
        }
        if (profile) {
          rows[ci].us[1] = 0;
          rows[ci].tflops[1] = 0;
        }
        const amla_bench::DeviceProblem problem(
            c.s_q, h_q, std::vector<int>(static_cast<std::size_t>(c.batch), c.s_k), page, 3 + pass,
            4 + pass, rng);
        const amla::DecodeShape& shape = problem.shape;
        const ac::DeviceDecodeInputs in = problem.inputs();
        const ac::DeviceDecodeOutputs outs = problem.outputs();
        ac::CudaDecodeOptions opt = c.opt;
        // A workspace of ours, as a caching allocator would hand out: decode() would otherwise
        // allocate one per call.
        void* workspace = nullptr;
        opt.workspace_bytes = ac::decode_workspace_bytes(shape, opt);
        if (opt.workspace_bytes > 0) AMLA_CUDA_CHECK(cudaMalloc(&workspace, opt.workspace_bytes));
        opt.workspace = workspace;
        opt.check_tables = true;
        const ac::DecodeLaunch launch = ac::decode(in, outs, opt);  // validates the tables once
        opt.check_tables = false;
        const double ms = time_ms([&] { ac::decode(in, outs, opt); }, flush, flush_bytes,
                                  c.reps > 5 ? 3 : 1, c.reps);
        if (profile) {
          std::printf("profile: decode launched 3 times (table check, warm-up, timed)\n");
        }
        const double flop = 2.0 * c.batch * c.s_q * h_q * static_cast<double>(c.s_k) * (576 + 512);
        const double tflops = flop / (ms * 1e-3) / 1e12;
        const std::string name = std::string(ac::to_string(launch.kernel)) + "/" +
                                 (c.opt.mode == ac::rescale_mode::amla ? "amla" : "standard") +
                                 c.variant;
        Row& r = rows[ci];
        r.name = name;
        r.batch = c.batch;
        r.s_q = c.s_q;
        r.s_k = c.s_k;
        r.pieces = launch.pieces;
        r.us[pass] = ms * 1e3;
        r.tflops[pass] = tflops;
        std::printf("pass %d  %-28s b %3d s_q %d s_k %5d pieces %3d: %9.1f us %7.1f TFLOPS\n",
                    pass + 1, name.c_str(), c.batch, c.s_q, c.s_k, launch.pieces, ms * 1e3, tflops);
        std::fflush(stdout);
        if (workspace != nullptr) AMLA_CUDA_CHECK(cudaFree(workspace));
      }
    }
    AMLA_CUDA_CHECK(cudaFree(flush));

    std::printf(
        "\n| kernel | b | s_q | s_k | pieces | time (us), 2 passes | TFLOPS, 2 passes | / cuBLAS "
        "(%.0f) |\n",
        gemm_tflops);
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (const Row& r : rows) {
      std::printf("| %s | %d | %d | %d | %d | %.1f / %.1f | %.1f / %.1f | %.3f |\n", r.name.c_str(),
                  r.batch, r.s_q, r.s_k, r.pieces, r.us[0], r.us[1], r.tflops[0], r.tflops[1],
                  std::max(r.tflops[0], r.tflops[1]) / gemm_tflops);
    }
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 1;
  }
  return 0;
}
