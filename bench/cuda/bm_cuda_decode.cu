// bench/cuda/bm_cuda_decode.cu: speed of the CUDA decode kernels, as TFLOPS and as a fraction of
// a cuBLAS BF16 GEMM (8192^3) measured in the same run.
//
//   TFLOPS = 2 * b * s_q * h_q * s_k * (576 + 512) / time
// Times are medians over repetitions timed with CUDA events after warm-up, with L2 flushed (a
// 256 MB memset) before every timed launch; inputs are random (never zeros), page order shuffled,
// both the same for every kernel and variant of one shape in one pass. The card's power
// management sets the SM clock from the work before, so each configuration starts after the GPU
// has idled AMLA_CUDA_SETTLE_MS milliseconds (default 300; 0: none), and each line ends with the
// SM clock measured right after its timed launches (sm_clock_mhz).
// A plain program (no Google Benchmark): GPU machines here have only the CUDA toolkit.
//
//   bm_cuda_decode            the benchmark grid: b 128, s_q {1, 2}, s_k {1024, 4096, 16384}, both
//                             modes, the balanced split-KV schedule and no split; tuning knobs at
//                             s_k 4096; the split-KV shapes b 16 and b 1, sized in each call
//                             and with a plan made once (plan_decode) and reused
//   bm_cuda_decode --quick    s_k 4096 only
//   bm_cuda_decode --filter TEXT[,TEXT...]   the configurations whose name holds one of the TEXTs;
//                             a TEXT ending in '$' must be the whole name ("hopper/standard$")
//   bm_cuda_decode --waves [B,B...]   hopper/standard at each batch B (default 128,132,133),
//                             s_q {1, 2}, s_k {4096, 16384}: how the time follows the batch across
//                             whole waves of CTAs (one CTA per row block and request at these
//                             batches: 128 fills 256 and 512 of 264 and 528 slots, 132 all of
//                             them, 133 starts one more wave)
//   bm_cuda_decode --plan     what plan_decode costs: its median time at s_q 2, h_q 128 for mixed
//                             batches (varlen_lengths, s_k 4096) of 16 to 65536 requests (the
//                             plan kernel, and for a batch that fills a wave the order kernel
//                             that lists its requests longest first)
//   bm_cuda_decode --profile [b s_q s_k [splits]]   one configuration, three launches, for ncu
//   bm_cuda_decode --phases [b s_q s_k [splits [mode [picture]]]]
//                             where a Hopper CTA's time goes: medians of its phases
//                             (hopper_kernel.cuh, enum phase) over the CTAs of 15 launches, by
//                             wave; then the block loop's trace (enums trace_wg0, trace_wg1): for
//                             8 pairs from the middle of every CTA's piece, each event of both
//                             warpgroups in cycles after the pair's start (median, p10, p90), the
//                             pair's period, and each KV chunk's time from the refill that issued
//                             it to the Q K^T wait that saw it land; with `picture`, two pairs of
//                             that trace as an SVG Gantt chart and a Chrome trace (picture.svg,
//                             picture.json, written as the simulator's pictures are:
//                             amla/sim/trace.hpp); needs a build with AMLA_CUDA_PHASE_TIMES=1
//                             (e.g. CMAKE_CUDA_FLAGS=-DAMLA_CUDA_PHASE_TIMES=1)
#include "amla/backend/cuda/cuda.cuh"
#include "amla/sim/timeline.hpp"
#include "amla/sim/trace.hpp"
#include "bench_cuda.cuh"
#include "decode_kernels.cuh"

#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
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

/// One CTA per SM: thread 0 spins 20 us on %globaltimer and writes the clock64 cycles and the
/// nanoseconds that passed.
__global__ void sm_clock_probe(unsigned long long* out) {
  namespace ptx = amla::cuda::detail::ptx;
  if (threadIdx.x != 0) return;
  const unsigned long long c0 = clock64();
  const std::uint64_t t0 = ptx::globaltimer_ns();
  std::uint64_t t1;
  do {
    t1 = ptx::globaltimer_ns();
  } while (t1 - t0 < 20000);
  const unsigned long long c1 = clock64();
  out[2 * blockIdx.x] = c1 - c0;
  out[2 * blockIdx.x + 1] = t1 - t0;
}

/// The SMs' mean clock in MHz over 20 us, measured now (after the work queued before).
double sm_clock_mhz(int sms) {
  static unsigned long long* d = nullptr;
  if (d == nullptr) AMLA_CUDA_CHECK(cudaMalloc(&d, 2 * static_cast<std::size_t>(sms) * 8));
  sm_clock_probe<<<sms, 32>>>(d);
  AMLA_CUDA_CHECK_LAUNCH("sm_clock_probe");
  std::vector<unsigned long long> h(2 * static_cast<std::size_t>(sms));
  AMLA_CUDA_CHECK(cudaMemcpy(h.data(), d, h.size() * 8, cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int i = 0; i < sms; ++i)
    sum += static_cast<double>(h[2 * i]) / static_cast<double>(h[2 * i + 1]);
  return sum / sms * 1e3;
}

/// Idles the GPU for AMLA_CUDA_SETTLE_MS milliseconds (default 300), so that every configuration
/// starts from the same state of the card's power management: without it, hopper/amla at b 128,
/// s_q 1, s_k 1024 took 113-117 us at 1.55-1.65 GHz right after the longest configurations, and
/// 98.5-98.9 us after 300 ms of idle (bench/CUDA_RESULTS.md, row 88).
/// The idle's length: AMLA_CUDA_SETTLE_MS, or 300 where it is unset (main reads it first, so that
/// a bad value is refused before anything runs).
long settle_ms() {
  static const long ms = [] {
    const char* e = std::getenv("AMLA_CUDA_SETTLE_MS");
    if (e == nullptr) return 300L;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*e == '\0' || *end != '\0' || v < 0 || v > 60000) {
      throw std::invalid_argument(std::string("AMLA_CUDA_SETTLE_MS = '") + e +
                                  "': must be a whole number of milliseconds in [0, 60000]");
    }
    return v;
  }();
  return ms;
}

void settle() {
  AMLA_CUDA_CHECK(cudaDeviceSynchronize());
  if (settle_ms() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms()));
}

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

/// Medians of named figures over several launches, printed in the order first seen.
struct Figures {
  std::vector<std::string> names;
  std::vector<std::vector<double>> values;
  void add(const std::string& name, double v) {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      names.push_back(name);
      values.push_back({v});
    } else {
      values[static_cast<std::size_t>(it - names.begin())].push_back(v);
    }
  }
};

/// The block loop's trace as a picture: two consecutive pairs at the median times of every event
/// (cycles after the first pair's WG0 loop top; the second pair one median period later), one
/// lane per warpgroup with what its leader was doing between events (in the simulator's names:
/// C1 Q K^T, V1 softmax, C2 P V, MTE2 issuing copies), and one lane per half-refill of a KV
/// buffer from its issue to the Q K^T wait that saw its last chunk land. ev[wg][e] are the
/// samples of event e (trace_wg0 / trace_wg1), land[b][c] those of chunk c of KV[b] from its
/// refill.
amla::sim::Timeline trace_timeline(const std::vector<std::vector<double>> (&ev)[2],
                                   const std::vector<std::vector<double>> (&land)[2], double period,
                                   double clock_ghz, const std::string& title) {
  namespace hk = amla::cuda::detail::hopper;
  namespace sim = amla::sim;
  const auto at = [&](int wg, int e) {
    return ev[wg][e].empty() ? -1.0 : amla_bench::median(ev[wg][e]);
  };
  sim::Timeline t;
  t.title = title;
  t.clock = sim::Hertz{std::round(clock_ghz * 1e3) * 1e6};  // to the MHz
  t.lanes = {{"WG0", {}},
             {"WG1", {}},
             {"KV[0] chunks 0-3", {}},
             {"KV[0] chunks 4-8", {}},
             {"KV[1] chunks 0-3", {}},
             {"KV[1] chunks 4-8", {}}};
  const auto add = [&](int lane, double a, double b, const std::string& name,
                       const std::string& category, double shift) {
    if (a < 0 || b <= a) return;
    t.lanes[lane].intervals.push_back({sim::Cycles{static_cast<std::int64_t>(a + shift)},
                                       sim::Cycles{static_cast<std::int64_t>(b + shift)}, name,
                                       category});
  };
  for (int k = 0; k < 2; ++k) {
    const double d = k * period;
    add(0, at(0, hk::tr0_top), at(0, hk::tr0_chunk), "wait KV", "wait", d);
    add(0, at(0, hk::tr0_chunk), at(0, hk::tr0_s_done), "S_A", "C1", d);
    add(0, at(0, hk::tr0_s_done), at(0, hk::tr0_p_published), "softmax A, P_A", "V1", d);
    add(0, at(0, hk::tr0_p_published), at(0, hk::tr0_pv_a_done), "P_A V_A[:, L]", "C2", d);
    add(0, at(0, hk::tr0_pv_a_done), at(0, hk::tr0_refill_a), "refill", "MTE2", d);
    add(0, at(0, hk::tr0_refill_a), at(0, hk::tr0_pv_b_rescaled), "O_L to frame B", "V1", d);
    add(0, at(0, hk::tr0_pv_b_rescaled), at(0, hk::tr0_p_b), "wait P_B", "wait", d);
    add(0, at(0, hk::tr0_p_b), at(0, hk::tr0_pv_b_done), "P_B V_B[:, L]", "C2", d);
    add(0, at(0, hk::tr0_pv_b_done), at(0, hk::tr0_refill_b), "refill", "MTE2", d);
    add(1, at(1, hk::tr1_top), at(1, hk::tr1_stagger), "wait S_A", "wait", d);
    add(1, at(1, hk::tr1_stagger), at(1, hk::tr1_s_done), "S_B", "C1", d);
    add(1, at(1, hk::tr1_s_done), at(1, hk::tr1_exps), "softmax B", "V1", d);
    add(1, at(1, hk::tr1_p_a), at(1, hk::tr1_pv_a_issued), "P_A V_A[:, R]", "C2", d);
    add(1, at(1, hk::tr1_pv_a_issued), at(1, hk::tr1_p_published), "P_B", "V1", d);
    add(1, at(1, hk::tr1_p_published), at(1, hk::tr1_a_done), "wait", "wait", d);
    add(1, at(1, hk::tr1_a_done), at(1, hk::tr1_refill_a), "refill", "MTE2", d);
    add(1, at(1, hk::tr1_refill_a), at(1, hk::tr1_pv_b_done), "P_B V_B[:, R]", "C2", d);
    add(1, at(1, hk::tr1_pv_b_done), at(1, hk::tr1_b_done), "wait", "wait", d);
    add(1, at(1, hk::tr1_b_done), at(1, hk::tr1_refill_b), "refill", "MTE2", d);
    // A refill's copies, from the issue of the first (its leader's event marks the last) to the
    // wait that saw the last chunk of the group land.
    const auto copies = [&](int lane, int buf, int wg, int e, int last_chunk) {
      const double issued = at(wg, e);
      if (issued < 0 || land[buf][last_chunk].empty()) return;
      add(lane, issued, issued + amla_bench::median(land[buf][last_chunk]), "in flight", "copy", d);
    };
    copies(2, 0, 0, hk::tr0_refill_a, 3);
    copies(3, 0, 1, hk::tr1_refill_a, 8);
    copies(4, 1, 0, hk::tr0_refill_b, 3);
    copies(5, 1, 1, hk::tr1_refill_b, 8);
  }
  for (auto& lane : t.lanes) {
    std::sort(lane.intervals.begin(), lane.intervals.end(),
              [](const sim::Interval& a, const sim::Interval& b) { return a.start < b.start; });
  }
  return t;
}

/// bm_cuda_decode --phases: runs one Hopper configuration `reps` times (the L2 flushed before
/// each launch, as the timed grid) with CudaDecodeOptions::phase_times, and prints per phase the
/// median over the CTAs of each launch (then the median over launches) of the time from the CTA's
/// entry, in ns (clock64 deltas at the CTA's own clock rate, measured against %globaltimer over
/// its whole run), for all CTAs and by wave: the first wave is the SM count's earliest entries.
/// Also the launch's event time, the decode kernel's span (earliest entry to latest stores-done),
/// and on each SM the gap between one CTA's stores-done and the next one's entry.
void phase_report(const ac::CudaDecodeOptions& base, int batch, int s_q, int s_k, int sms,
                  void* flush, std::size_t flush_bytes, const std::string& picture) {
  namespace hk = amla::cuda::detail::hopper;
  const int h_q = 128, page = 64, reps = 15;
  std::mt19937 rng(12345);
  const amla_bench::DeviceProblem problem(s_q, h_q, std::vector<int>(batch, s_k), page, 3, 4, rng);
  const ac::DeviceDecodeInputs in = problem.inputs();
  const ac::DeviceDecodeOutputs outs = problem.outputs();
  ac::CudaDecodeOptions opt = base;
  void* workspace = nullptr;
  opt.workspace_bytes = ac::decode_workspace_bytes(problem.shape, opt);
  if (opt.workspace_bytes > 0) AMLA_CUDA_CHECK(cudaMalloc(&workspace, opt.workspace_bytes));
  opt.workspace = workspace;
  opt.check_tables = true;
  const ac::DecodeLaunch launch = ac::decode(in, outs, opt);
  opt.check_tables = false;
  const int row_blocks = (s_q * h_q + hk::rows_per_cta - 1) / hk::rows_per_cta;
  const std::size_t ctas = static_cast<std::size_t>(row_blocks) * launch.pieces;
  namespace cb = amla::cuda::detail::combine;
  // The decode kernel's per-CTA records, then the combine's span (when a request is cut).
  const std::size_t combine_at = ctas * hk::phase_slots;
  const std::size_t words = combine_at + cb::phase_words;
  std::uint64_t* rec = nullptr;
  AMLA_CUDA_CHECK(cudaMalloc(&rec, words * sizeof(std::uint64_t)));
  opt.phase_times = rec;
  std::vector<std::uint64_t> host(words);
  const char* names[hk::phase_count] = {"entry",         "barriers init", "griddep_wait",
                                        "piece found",   "loads issued",  "Q landed",
                                        "first S_A",     "loop end WG0",  "loop end WG1",
                                        "epilogue sync", "stores issued", "stores done"};
  Figures fig;
  // The block loop's trace (hopper_kernel.cuh, trace_wg0 and trace_wg1): every traced pair's
  // events in cycles after that pair's WG0 loop top; the pair's period; and for each chunk of
  // a Q K^T, the cycles from the refill that loaded it (the pair before) to the wait's return.
  std::vector<std::vector<double>> tr_ev[2];
  tr_ev[0].resize(hk::trace_events);
  tr_ev[1].resize(hk::trace_events);
  std::vector<double> tr_period, clocks;
  std::vector<std::vector<double>> tr_land[2];
  tr_land[0].resize(hk::chunks);
  tr_land[1].resize(hk::chunks);
  amla_bench::Events ev;
  // About a second of launches first, so that the clocks have ramped (as the grid's GEMMs do).
  {
    amla_bench::Events w;
    AMLA_CUDA_CHECK(cudaEventRecord(w.a));
    for (float elapsed = 0; elapsed < 1000.0f;) {
      for (int i = 0; i < 20; ++i) ac::decode(in, outs, opt);
      AMLA_CUDA_CHECK(cudaEventRecord(w.b));
      AMLA_CUDA_CHECK(cudaEventSynchronize(w.b));
      AMLA_CUDA_CHECK(cudaEventElapsedTime(&elapsed, w.a, w.b));
    }
  }
  for (int rep = 0; rep < reps + 2; ++rep) {
    AMLA_CUDA_CHECK(cudaMemset(rec, 0, words * sizeof(std::uint64_t)));
    AMLA_CUDA_CHECK(cudaMemsetAsync(flush, rep & 0xFF, flush_bytes));
    const double event_us = 1e3 * ev.ms([&] { ac::decode(in, outs, opt); });
    AMLA_CUDA_CHECK(
        cudaMemcpy(host.data(), rec, words * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
    if (rep < 2) continue;  // warm-up
    struct Cta {
      const std::uint64_t* r;
      double ghz;
    };
    std::vector<Cta> run;
    for (std::size_t c = 0; c < ctas; ++c) {
      const std::uint64_t* r = host.data() + c * hk::phase_slots;
      if (r[hk::phase_entry] == 0 || r[hk::phase_stores_done] == 0) continue;
      const double ns = static_cast<double>(r[hk::phase_stores_done] - r[hk::phase_entry]);
      const double cyc = static_cast<double>(r[hk::phase_clock + hk::phase_stores_done] -
                                             r[hk::phase_clock + hk::phase_entry]);
      run.push_back({r, ns > 0 ? cyc / ns : 0.0});
    }
    if (run.empty()) continue;
    for (const Cta& c : run) {
      const auto* t = reinterpret_cast<const std::uint32_t*>(c.r + hk::trace_word);
      for (int k = 0; k < hk::trace_pairs; ++k) {
        const std::uint32_t* w0 = t + 2 * k * hk::trace_events;
        const std::uint32_t* w1 = w0 + hk::trace_events;
        if (w0[hk::tr0_top] == 0) continue;
        const auto at = [&](std::uint32_t v) {
          return static_cast<double>(static_cast<std::int32_t>(v - w0[hk::tr0_top]));
        };
        for (int e = 0; e < hk::trace_events; ++e) {
          if (w0[e] != 0) tr_ev[0][e].push_back(at(w0[e]));
          if (w1[e] != 0) tr_ev[1][e].push_back(at(w1[e]));
        }
        if (k + 1 >= hk::trace_pairs) continue;
        const std::uint32_t* n0 = w0 + 2 * hk::trace_events;
        const std::uint32_t* n1 = n0 + hk::trace_events;
        if (n0[hk::tr0_top] == 0) continue;
        tr_period.push_back(at(n0[hk::tr0_top]));
        for (int ci = 0; ci < hk::chunks; ++ci) {
          const std::uint32_t from_a = ci < 4 ? w0[hk::tr0_refill_a] : w1[hk::tr1_refill_a];
          const std::uint32_t from_b = ci < 4 ? w0[hk::tr0_refill_b] : w1[hk::tr1_refill_b];
          if (from_a != 0 && n0[hk::tr0_chunk + ci] != 0)
            tr_land[0][ci].push_back(at(n0[hk::tr0_chunk + ci]) - at(from_a));
          if (from_b != 0 && n1[hk::tr1_chunk + ci] != 0)
            tr_land[1][ci].push_back(at(n1[hk::tr1_chunk + ci]) - at(from_b));
        }
      }
    }
    std::sort(run.begin(), run.end(), [](const Cta& a, const Cta& b) {
      return a.r[hk::phase_entry] < b.r[hk::phase_entry];
    });
    const std::uint64_t t0 = run.front().r[hk::phase_entry];
    std::uint64_t t_end = 0;
    for (const Cta& c : run) t_end = std::max(t_end, c.r[hk::phase_stores_done]);
    std::vector<double> ghz;
    for (const Cta& c : run) ghz.push_back(c.ghz);
    const double clock_ghz = amla_bench::median(ghz);
    clocks.push_back(clock_ghz);
    fig.add("event time of decode() (us)", event_us);
    fig.add("decode kernel span, first entry to last stores done (us)", (t_end - t0) * 1e-3);
    fig.add("SM clock (GHz, clock64 against %globaltimer)", clock_ghz);
    const std::size_t wave = static_cast<std::size_t>(sms);
    for (int w = 0; w < 3; ++w) {
      const std::size_t lo = w == 2 ? wave : 0,
                        hi = w == 0 ? std::min(wave, run.size()) : run.size();
      if (lo >= hi) continue;
      const std::string tag = w == 0 ? "wave 1" : w == 1 ? "all" : "wave 2+";
      std::vector<double> start;
      for (std::size_t i = lo; i < hi; ++i)
        start.push_back((run[i].r[hk::phase_entry] - t0) * 1e-3);
      fig.add(tag + ": CTAs", static_cast<double>(hi - lo));
      fig.add(tag + ": entry after the first CTA's (us)", amla_bench::median(start));
      for (int ph = 1; ph < hk::phase_count; ++ph) {
        std::vector<double> d;
        for (std::size_t i = lo; i < hi; ++i) {
          const std::uint64_t* r = run[i].r;
          if (r[ph] == 0) continue;
          d.push_back(
              static_cast<double>(r[hk::phase_clock + ph] - r[hk::phase_clock + hk::phase_entry]) /
              clock_ghz * 1e-3);
        }
        if (!d.empty())
          fig.add(tag + ": " + names[ph] + " (us after entry)", amla_bench::median(d));
      }
    }
    // On each SM, the gap from a CTA's stores-done to the next CTA's entry (%globaltimer).
    std::vector<double> gaps;
    for (std::size_t i = 0; i < run.size(); ++i) {
      for (std::size_t k = i + 1; k < run.size(); ++k) {
        if (run[k].r[hk::phase_sm] == run[i].r[hk::phase_sm]) {
          gaps.push_back((static_cast<double>(run[k].r[hk::phase_entry]) -
                          static_cast<double>(run[i].r[hk::phase_stores_done])) *
                         1e-3);
          break;
        }
      }
    }
    if (!gaps.empty())
      fig.add("same SM: next CTA's entry after stores done (us)", amla_bench::median(gaps));
    // The combine's span against the decode kernel's last stores (a timing build's combine).
    const std::uint64_t* cr = host.data() + combine_at;
    if (cr[cb::last_end] != 0) {
      const auto after_end = [&](std::uint64_t t) {
        return (static_cast<double>(t) - static_cast<double>(t_end)) * 1e-3;
      };
      fig.add("combine: first CTA entry after the decode kernel's last stores done (us)",
              after_end(~cr[cb::first_entry_complement]));
      fig.add("combine: first griddep_wait return after them (us)",
              after_end(~cr[cb::first_griddep_complement]));
      fig.add("combine: last warp done after them (us)", after_end(cr[cb::last_end]));
      fig.add("first decode entry to last combine warp done (us)",
              (static_cast<double>(cr[cb::last_end]) - static_cast<double>(t0)) * 1e-3);
    }
  }
  std::printf("phases: %s/%s b %d s_q %d s_k %d pieces %d, %zu CTAs, medians over %d launches\n",
              ac::to_string(launch.kernel),
              base.mode == ac::rescale_mode::amla ? "amla" : "standard", batch, s_q, s_k,
              launch.pieces, ctas, reps);
  for (std::size_t i = 0; i < fig.names.size(); ++i) {
    std::printf("  %-64s %9.2f\n", fig.names[i].c_str(), amla_bench::median(fig.values[i]));
  }
  if (!tr_period.empty()) {
    const auto pct = [](std::vector<double> v, double q) {
      std::sort(v.begin(), v.end());
      return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
    };
    const auto line = [&](const std::string& name, const std::vector<double>& v) {
      if (v.empty()) return;
      std::printf("  %-44s %8.0f %8.0f %8.0f %8zu\n", name.c_str(), amla_bench::median(v),
                  pct(v, 0.1), pct(v, 0.9), v.size());
    };
    std::printf(
        "block loop trace, %d pairs from the middle of each CTA's, cycles after the pair's "
        "WG0 loop top (median, p10, p90, samples):\n",
        hk::trace_pairs);
    line("pair period", tr_period);
    std::vector<std::string> n0(hk::tr0_count), n1(hk::tr1_count);
    for (int ci = 0; ci < hk::chunks; ++ci) {
      n0[hk::tr0_chunk + ci] = "WG0 S_A chunk " + std::to_string(ci) + " landed";
      n1[hk::tr1_chunk + ci] = "WG1 S_B chunk " + std::to_string(ci) + " landed";
    }
    n0[hk::tr0_top] = "WG0 top";
    n0[hk::tr0_s_done] = "WG0 S_A done";
    n0[hk::tr0_frame] = "WG0 frame A published";
    n0[hk::tr0_p_published] = "WG0 P_A published";
    n0[hk::tr0_pv_a_rescaled] = "WG0 O_L to frame A";
    n0[hk::tr0_pv_a_issued] = "WG0 P_A V_A[:, L] issued";
    n0[hk::tr0_pv_a_done] = "WG0 P_A V_A[:, L] done";
    n0[hk::tr0_refill_a] = "WG0 KV[0] 0-3 refill issued";
    n0[hk::tr0_p_b] = "WG0 P_B received";
    n0[hk::tr0_pv_b_rescaled] = "WG0 O_L to frame B";
    n0[hk::tr0_pv_b_issued] = "WG0 P_B V_B[:, L] issued";
    n0[hk::tr0_pv_b_done] = "WG0 P_B V_B[:, L] done";
    n0[hk::tr0_refill_b] = "WG0 KV[1] 0-3 refill issued";
    n1[hk::tr1_top] = "WG1 top";
    n1[hk::tr1_stagger] = "WG1 stagger released";
    n1[hk::tr1_s_done] = "WG1 S_B done";
    n1[hk::tr1_frame_a] = "WG1 frame A received";
    n1[hk::tr1_exps] = "WG1 exponentials done";
    n1[hk::tr1_p_a] = "WG1 P_A received";
    n1[hk::tr1_pv_a_rescaled] = "WG1 O_R to frame A";
    n1[hk::tr1_pv_a_issued] = "WG1 P_A V_A[:, R] issued";
    n1[hk::tr1_p_published] = "WG1 P_B published";
    n1[hk::tr1_pv_a_done] = "WG1 P_A V_A[:, R] done";
    n1[hk::tr1_a_done] = "WG1 WG0 done with KV[0] chunk 8";
    n1[hk::tr1_refill_a] = "WG1 KV[0] 4-8 refill issued";
    n1[hk::tr1_pv_b_rescaled] = "WG1 O_R to frame B";
    n1[hk::tr1_pv_b_issued] = "WG1 P_B V_B[:, R] issued";
    n1[hk::tr1_pv_b_done] = "WG1 P_B V_B[:, R] done";
    n1[hk::tr1_b_done] = "WG1 WG0 done with KV[1] chunk 8";
    n1[hk::tr1_refill_b] = "WG1 KV[1] 4-8 refill issued";
    for (int e = 0; e < hk::tr0_count; ++e) line(n0[e], tr_ev[0][e]);
    for (int e = 0; e < hk::tr1_count; ++e) line(n1[e], tr_ev[1][e]);
    for (int b = 0; b < 2; ++b)
      for (int ci = 0; ci < hk::chunks; ++ci)
        line(std::string(b == 0 ? "KV[0]" : "KV[1]") + " chunk " + std::to_string(ci) +
                 ": refill issued to wait return",
             tr_land[b][ci]);
    if (!picture.empty()) {
      namespace sim = amla::sim;
      const double period = amla_bench::median(tr_period);
      char title[160];
      std::snprintf(title, sizeof title, "%s/%s b %d s_q %d s_k %d: two pairs of the block loop",
                    ac::to_string(launch.kernel),
                    base.mode == ac::rescale_mode::amla ? "amla" : "standard", batch, s_q, s_k);
      const sim::Timeline t =
          trace_timeline(tr_ev, tr_land, period, amla_bench::median(clocks), title);
      sim::SvgGanttOptions so;
      so.subtitle =
          "measured (timing build): each event at its median over the traced pairs of "
          "every CTA, cycles after the first pair's start";
      so.markers = {{sim::Cycles{0}, "pair"},
                    {sim::Cycles{static_cast<std::int64_t>(period)}, "next pair"},
                    {sim::Cycles{static_cast<std::int64_t>(2 * period)}, "end"}};
      sim::write_svg_gantt(picture + ".svg", t, so);
      sim::write_chrome_trace(picture + ".json", t);
      std::printf("trace picture: %s.svg, %s.json\n", picture.c_str(), picture.c_str());
    }
  }
  AMLA_CUDA_CHECK(cudaFree(rec));
  if (workspace != nullptr) AMLA_CUDA_CHECK(cudaFree(workspace));
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

/// The comma-separated parts of `text`, empty ones included ("a,,b" gives "a", "", "b").
std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> parts;
  for (std::size_t at = 0; at <= text.size();) {
    std::size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    parts.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return parts;
}

/// bm_cuda_decode --plan: plan_decode's median time over 15 calls (CUDA events, the L2 flushed
/// before each) for mixed batches at s_q 2, h_q 128. plan_decode reads only the lengths, so the
/// inputs' other tensors are a placeholder that no kernel reads (check_tables off).
void plan_report(void* flush, std::size_t flush_bytes) {
  for (const int batch : {16, 128, 512, 4096, 16384, 65536}) {
    const std::vector<int> lens = amla_bench::varlen_lengths(batch, 2, 4096, 0);
    std::int32_t* d_lens = nullptr;
    AMLA_CUDA_CHECK(cudaMalloc(&d_lens, lens.size() * sizeof(std::int32_t)));
    AMLA_CUDA_CHECK(cudaMemcpy(d_lens, lens.data(), lens.size() * sizeof(std::int32_t),
                               cudaMemcpyHostToDevice));
    void* placeholder = nullptr;
    AMLA_CUDA_CHECK(cudaMalloc(&placeholder, 256));
    amla::DecodeShape shape;
    shape.batch = batch;
    shape.s_q = 2;
    shape.max_pages_per_seq = 128;  // 8191 keys at most, pages of 64
    ac::DeviceDecodeInputs in{.shape = shape,
                              .q = static_cast<const amla::bf16*>(placeholder),
                              .kv = static_cast<const amla::bf16*>(placeholder),
                              .block_table = static_cast<const std::int32_t*>(placeholder),
                              .seqlens = d_lens};
    ac::CudaDecodeOptions opt{.kernel = ac::kernel_kind::hopper};
    opt.check_tables = false;
    opt.workspace_bytes = ac::decode_workspace_bytes(shape, opt);
    AMLA_CUDA_CHECK(cudaMalloc(&opt.workspace, opt.workspace_bytes));
    const double ms = time_ms([&] { ac::plan_decode(in, opt); }, flush, flush_bytes, 3, 15);
    std::printf("plan_decode b %5d s_q 2 (lengths in [1, 8191]): %8.1f us\n", batch, ms * 1e3);
    AMLA_CUDA_CHECK(cudaFree(opt.workspace));
    AMLA_CUDA_CHECK(cudaFree(placeholder));
    AMLA_CUDA_CHECK(cudaFree(d_lens));
  }
}

/// One configuration named on the command line, as --profile and --phases take it:
/// [b s_q s_k [splits [mode]]] after the flag, each missing part its default.
struct one_config {
  int batch, s_q, s_k;
  int splits = 0;
  std::string mode = "standard";
  bool mode_known() const { return mode == "standard" || mode == "amla" || mode == "amla-skip"; }
};

one_config one_config_of(int argc, char** argv, bool given, one_config c) {
  if (!given) return c;
  if (argc > 4) {
    c.batch = std::atoi(argv[2]);
    c.s_q = std::atoi(argv[3]);
    c.s_k = std::atoi(argv[4]);
  }
  if (argc > 5) c.splits = std::atoi(argv[5]);
  if (argc > 6) c.mode = argv[6];
  return c;
}

int main(int argc, char** argv) {
  const std::string arg = argc > 1 ? argv[1] : "";
  const bool quick = arg == "--quick";
  // --filter TEXT[,TEXT...]: only the configurations whose name holds one of the TEXTs (e.g.
  // "no-split"), a TEXT ending in '$' only the configurations of exactly that name.
  const std::string filter = arg == "--filter" && argc > 2 ? argv[2] : "";
  // --profile [b s_q s_k [splits [mode]]]: one configuration (default b 128, s_q 2, s_k 4096;
  // hopper/standard, the balanced schedule; mode standard, amla or amla-skip), three launches,
  // for a profiler (the third launch is the one to look at).
  // --waves [B,B...]: hopper/standard at the batches B only (the file comment).
  const bool waves = arg == "--waves";
  std::vector<int> wave_batches;
  if (waves) {
    const std::string list = argc > 2 ? argv[2] : "128,132,133";
    for (const std::string& text : comma_list(list)) {
      char* stop = nullptr;
      const long b = std::strtol(text.c_str(), &stop, 10);
      if (text.empty() || *stop != '\0' || b < 1 || b > 4096) {
        std::fprintf(stderr,
                     "bm_cuda_decode: --waves '%s': each batch must be an integer in [1, 4096], "
                     "got '%s'\n",
                     list.c_str(), text.c_str());
        return 2;
      }
      wave_batches.push_back(static_cast<int>(b));
    }
  }
  const bool profile = arg == "--profile";
  const one_config prof = one_config_of(argc, argv, profile, {128, 2, 4096});
  if (!prof.mode_known()) {
    std::fprintf(stderr, "bm_cuda_decode: --profile mode must be standard, amla or amla-skip\n");
    return 2;
  }
  // --phases [b s_q s_k [splits [mode]]]: the CTA phase breakdown (default b 128, s_q 1, s_k 1024).
  const bool phases = arg == "--phases";
  const one_config ph = one_config_of(argc, argv, phases, {128, 1, 1024});
  if (phases && !amla::cuda::detail::hopper::phase_times_built) {
    std::fprintf(stderr,
                 "bm_cuda_decode: --phases needs a build with AMLA_CUDA_PHASE_TIMES=1 (this one "
                 "records no phases)\n");
    return 2;
  }
  if (!ph.mode_known()) {
    std::fprintf(stderr, "bm_cuda_decode: --phases mode must be standard, amla or amla-skip\n");
    return 2;
  }
  if (!amla_bench::device_visible("bm_cuda_decode")) return 77;
  try {
    settle_ms();
    cudaDeviceProp prop{};
    AMLA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
                prop.l2CacheSize >> 20);
    const std::size_t flush_bytes = 256u << 20;
    void* flush = nullptr;
    AMLA_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    if (arg == "--plan") {
      plan_report(flush, flush_bytes);
      AMLA_CUDA_CHECK(cudaFree(flush));
      return 0;
    }
    if (phases) {
      ac::CudaDecodeOptions o{
          .mode = ph.mode == "standard" ? ac::rescale_mode::standard : ac::rescale_mode::amla,
          .kernel = ac::kernel_kind::hopper,
          .num_splits = ph.splits,
          .rescale = amla::pow2_mode::hardware};
      o.skip_unmoved = ph.mode == "amla-skip";
      phase_report(o, ph.batch, ph.s_q, ph.s_k, prop.multiProcessorCount, flush, flush_bytes,
                   argc > 7 ? argv[7] : "");
      AMLA_CUDA_CHECK(cudaFree(flush));
      return 0;
    }

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
    struct Config {
      int batch, s_q, s_k;
      ac::CudaDecodeOptions opt;
      int reps;
      std::string variant;  ///< appended to the kernel/mode name
      /// The sized schedule made once by plan_decode before the timed launches and reused by
      /// each (CudaDecodeOptions::plan), as FlashMLA's metadata is across a step's layers.
      bool reuse_plan = false;
      /// Lengths drawn uniformly from [1, 2 s_k - 1] (mean about s_k; amla_bench::varlen_lengths,
      /// the same for every variant of the shape and pass, and for flashmla.py --varlen) instead
      /// of s_k each: the balance of a mixed batch.
      bool varlen = false;
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
      ac::CudaDecodeOptions o = prof.mode == "standard"
                                    ? hopper_std
                                    : (prof.mode == "amla" ? hopper_amla : hopper_amla_skip);
      o.num_splits = prof.splits;
      configs.push_back({prof.batch, prof.s_q, prof.s_k, o, 1, ""});
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
    // Mixed lengths, about eight CTAs per SM: the balance of a launch of one CTA per piece, in
    // index order and, with a plan made once (plan_decode), longest first.
    if (!quick) {
      for (int s_q : {1, 2}) {
        const int b = s_q == 1 ? 512 : 256;
        configs.push_back({b, s_q, 4096, hopper_std, 15, "/varlen", false, true});
        configs.push_back({b, s_q, 4096, hopper_std, 15, "/varlen/plan reused", true, true});
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
    // Tuning knobs at s_k 4096: no L2 hint on the Q and KV loads (the default, automatic, is
    // evict-first), no stagger of the two Q K^T, and AMLA's safe add.
    for (int s_q : {1, 2}) {
      ac::CudaDecodeOptions o = hopper_std;
      o.kv_l2_hint = ac::l2_hint::none;
      configs.push_back({128, s_q, 4096, o, 15, "/no-hint"});
      o = hopper_std;
      o.stagger_qk = false;
      configs.push_back({128, s_q, 4096, o, 15, "/no-stagger"});
    }
    {
      ac::CudaDecodeOptions o = hopper_amla;
      o.rescale = amla::pow2_mode::safe;
      configs.push_back({128, 2, 4096, o, 15, "-safe"});
    }
    // Split-KV at small batches: balanced, fixed splits, no programmatic dependent launch, no L2
    // hint.
    for (int b : {16, 1}) {
      const int s_k = b == 16 ? 4096 : 16384;
      configs.push_back({b, 2, s_k, hopper_std, 15, ""});
      configs.push_back({b, 2, s_k, hopper_std, 15, "/plan reused"});
      configs.back().reuse_plan = true;
      configs.push_back({b, 2, s_k, hopper_amla, 15, ""});
      configs.push_back({b, 2, s_k, hopper_amla, 15, "/plan reused"});
      configs.back().reuse_plan = true;
      configs.push_back({b, 2, s_k, hopper_amla_skip, 15, "/skip"});
      ac::CudaDecodeOptions o = hopper_std;
      o.pdl = false;
      configs.push_back({b, 2, s_k, o, 15, "/no-pdl"});
      o = hopper_std;
      o.kv_l2_hint = ac::l2_hint::none;
      configs.push_back({b, 2, s_k, o, 15, "/no-hint"});
      o = hopper_std;
      o.num_splits = b == 16 ? 2 : 32;
      configs.push_back({b, 2, s_k, o, 15, "/splits " + std::to_string(o.num_splits)});
    }
    configs.push_back(
        {128, 1, 1024, options(ac::kernel_kind::simple, ac::rescale_mode::standard), 3, ""});

    if (profile) configs.resize(1);
    if (waves) {
      configs.clear();
      for (const int b : wave_batches) {
        for (int s_q : {1, 2}) {
          for (int s_k : {4096, 16384}) configs.push_back({b, s_q, s_k, hopper_std, 15, "/waves"});
        }
      }
    }
    if (!filter.empty()) {
      std::erase_if(configs, [&](const Config& c) {
        const std::string name = std::string(ac::to_string(c.opt.kernel)) + "/" +
                                 (c.opt.mode == ac::rescale_mode::amla ? "amla" : "standard") +
                                 c.variant;
        for (const std::string& text : comma_list(filter)) {
          const bool whole = !text.empty() && text.back() == '$';
          if (!text.empty() && (whole ? name == text.substr(0, text.size() - 1)
                                      : name.find(text) != std::string::npos)) {
            return false;
          }
        }
        return true;
      });
    }
    if (!hopper) {
      std::erase_if(configs,
                    [](const Config& c) { return c.opt.kernel == ac::kernel_kind::hopper; });
    }
    struct Row {
      std::string name;
      int batch, s_q, s_k, pieces;
      double us[2], tflops[2], mhz[2];
    };
    std::vector<Row> rows(configs.size());
    // Two passes over all configurations: the spread between them is the noise of a number.
    for (int pass = 0; pass < (profile ? 1 : 2); ++pass) {
      for (std::size_t ci = 0; ci < configs.size(); ++ci) {
        const Config& c = configs[ci];
        if (pass == 1 && c.opt.kernel == ac::kernel_kind::simple) {
          rows[ci].us[1] = rows[ci].us[0];
          rows[ci].tflops[1] = rows[ci].tflops[0];
          rows[ci].mhz[1] = rows[ci].mhz[0];
          continue;
        }
        if (profile) {
          rows[ci].us[1] = 0;
          rows[ci].tflops[1] = 0;
          rows[ci].mhz[1] = 0;
        }
        // The inputs and the page order depend on the shape and the pass alone, so that every
        // kernel and variant of one shape reads the same pages wherever it sits in the list (the
        // page order alone can move a kernel's time by 10%).
        std::seed_seq pages_seed{c.batch, c.s_q, c.s_k, pass};
        std::mt19937 pages(pages_seed);
        const std::vector<int> lens =
            c.varlen ? amla_bench::varlen_lengths(c.batch, c.s_q, c.s_k, pass)
                     : std::vector<int>(static_cast<std::size_t>(c.batch), c.s_k);
        double keys = 0;
        for (const int l : lens) keys += l;
        const amla_bench::DeviceProblem problem(c.s_q, h_q, lens, page, 3 + pass, 4 + pass, pages);
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
        ac::DecodePlan plan;
        if (c.reuse_plan) {
          plan = ac::plan_decode(in, opt);
          opt.plan = &plan;
        }
        settle();
        const double ms = time_ms([&] { ac::decode(in, outs, opt); }, flush, flush_bytes,
                                  c.reps > 5 ? 3 : 1, c.reps);
        const double mhz = sm_clock_mhz(prop.multiProcessorCount);
        if (profile) {
          std::printf("profile: decode launched 3 times (table check, warm-up, timed)\n");
        }
        const double flop = 2.0 * keys * c.s_q * h_q * (576 + 512);
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
        r.mhz[pass] = mhz;
        std::printf(
            "pass %d  %-28s b %3d s_q %d s_k %5d pieces %3d: %9.1f us %7.1f TFLOPS  SM %4.0f MHz\n",
            pass + 1, name.c_str(), c.batch, c.s_q, c.s_k, launch.pieces, ms * 1e3, tflops, mhz);
        std::fflush(stdout);
        if (workspace != nullptr) AMLA_CUDA_CHECK(cudaFree(workspace));
      }
    }
    AMLA_CUDA_CHECK(cudaFree(flush));

    std::printf(
        "\n| kernel | b | s_q | s_k | pieces | time (us), 2 passes | TFLOPS, 2 passes "
        "| SM MHz after, 2 passes | / cuBLAS (%.0f) |\n",
        gemm_tflops);
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (const Row& r : rows) {
      std::printf("| %s | %d | %d | %d | %d | %.1f / %.1f | %.1f / %.1f | %.0f / %.0f | %.3f |\n",
                  r.name.c_str(), r.batch, r.s_q, r.s_k, r.pieces, r.us[0], r.us[1], r.tflops[0],
                  r.tflops[1], r.mhz[0], r.mhz[1],
                  std::max(r.tflops[0], r.tflops[1]) / gemm_tflops);
    }
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 1;
  }
  return 0;
}
