// tests/cuda/test_decode.cu: tests of the CUDA backend (amla/backend/cuda/*.cuh).
//
//   cuda_decode validate                 host-side argument validation; needs no GPU (CI runs it)
//   cuda_decode gpu                      every kernel and mode against the library's float64
//                                        golden (golden_decode) and the CPU recurrence it mirrors
//                                        (base_decode, amla_decode) on fresh random problems from
//                                        the library's ProblemBuilder; hostile inputs (NaN, Inf,
//                                        overflow, keys a causal mask hides) against the semantics
//                                        of problem/conventions.hpp; the GPU float64 golden
//                                        (golden.cuh) against the CPU one, and the Hopper kernel
//                                        against it at the benchmark's sizes; the split-KV plan
//                                        the GPU computes against the CPU schedule, and decode
//                                        with a plan made once (plan_decode) bit for bit decode
//                                        without one; the Hopper kernel's safe AMLA add on every
//                                        FP32 pattern, and its rescale of a warp's accumulators
//                                        (either path) against that add; exits 77 (ctest:
//                                        skipped) when no GPU is visible
//   cuda_decode gpu-quick                the same on the small cases only
//   cuda_decode gpu --simple-only        every case on the simple kernel only (the fallback off
//   cuda_decode gpu-quick --simple-only  Hopper), as does AMLA_CUDA_SIMPLE_ONLY=1 in the
//                                        environment; AMLA_CUDA_TEST_SEED=N replays the random
//                                        problems of the run that printed "seed N"
//
// A plain program (no Catch2): the GPU machines that run it have only the CUDA toolkit. The CPU
// side (cpu_reference.cpp) is compiled by the host compiler, so Eigen stays away from nvcc.
#include "amla/backend/cuda/cuda.cuh"
#include "cpu_reference.hpp"
#include "decode_kernels.cuh"
#include "device_random.cuh"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace ac = amla::cuda;
namespace ct = amla_cuda_test;

int g_failures = 0;
int g_checks = 0;
bool g_simple_only = false;  // --simple-only or AMLA_CUDA_SIMPLE_ONLY=1: kernel_kind::simple only
std::size_t g_lemma_garbage = 0;  // elements where the hardware AMLA add broke Lemma 3.1
// Relative distance of the Hopper kernel's output to the CPU recurrence it mirrors, per case.
std::vector<double> g_vs_cpu_std, g_vs_cpu_amla;

#define EXPECT(cond, ...)                                           \
  do {                                                              \
    ++g_checks;                                                     \
    if (!(cond)) {                                                  \
      ++g_failures;                                                 \
      std::printf("  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                     \
      std::printf("\n");                                            \
      std::fflush(stdout);                                          \
    }                                                               \
  } while (0)

/// Runs f and checks that it throws E with `needle` in its message.
template <class E>
void expect_throw(const char* what, const std::string& needle, const std::function<void()>& f) {
  ++g_checks;
  try {
    f();
  } catch (const E& e) {
    if (std::string(e.what()).find(needle) == std::string::npos) {
      ++g_failures;
      std::printf("  FAIL %s: message lacks '%s': %s\n", what, needle.c_str(), e.what());
    } else {
      std::printf("  ok   %s: %s\n", what, e.what());
    }
    return;
  } catch (const std::exception& e) {
    ++g_failures;
    std::printf("  FAIL %s: wrong exception type: %s\n", what, e.what());
    return;
  }
  ++g_failures;
  std::printf("  FAIL %s: no exception\n", what);
}

// ---------------------------------------------------------------------------------------------
// validate: host-side checks, no CUDA call happens before they throw.

int run_validate() {
  std::printf("== host validation (no GPU needed)\n");
  // Fake, never dereferenced device addresses (validation throws before any CUDA call).
  auto* fake_bf16 = reinterpret_cast<amla::bf16*>(std::uintptr_t{0x10000});
  auto* fake_i32 = reinterpret_cast<std::int32_t*>(std::uintptr_t{0x20000});
  auto* fake_f32 = reinterpret_cast<float*>(std::uintptr_t{0x30000});
  auto good = [&] {
    return ac::DeviceDecodeInputs{.shape = amla::DecodeShape{},
                                  .q = fake_bf16,
                                  .kv = fake_bf16,
                                  .block_table = fake_i32,
                                  .seqlens = fake_i32};
  };
  const ac::DeviceDecodeOutputs out{fake_bf16, fake_f32};
  using inv = amla::invalid_argument;
  auto run = [&](ac::DeviceDecodeInputs in, ac::DeviceDecodeOutputs o, ac::CudaDecodeOptions opt) {
    return [in, o, opt] { ac::decode(in, o, opt); };
  };
  {
    auto in = good();
    in.shape.batch = 0;
    expect_throw<inv>("batch 0", "shape.batch", run(in, out, {}));
  }
  {
    auto in = good();
    in.shape.h_q = 6;
    in.shape.h_kv = 4;
    expect_throw<inv>("h_kv not dividing h_q", "shape.h_kv", run(in, out, {}));
  }
  {
    auto in = good();
    in.shape.d_v = 600;
    expect_throw<inv>("d_v > d_qk with V in kv", "shape.d_v", run(in, out, {}));
  }
  {
    auto in = good();
    in.shape.page_size = -3;
    expect_throw<inv>("negative page size", "shape.page_size", run(in, out, {}));
  }
  {
    auto in = good();
    in.q = nullptr;
    expect_throw<inv>("null q", "'q'", run(in, out, {}));
  }
  {
    auto in = good();
    in.seqlens = nullptr;
    expect_throw<inv>("null seqlens", "seqlens", run(in, out, {}));
  }
  expect_throw<inv>("null lse", "'lse'", run(good(), {fake_bf16, nullptr}, {}));
  {
    ac::CudaDecodeOptions opt;
    opt.softmax_scale = std::numeric_limits<float>::quiet_NaN();
    expect_throw<inv>("NaN scale", "softmax_scale", run(good(), out, opt));
    opt.softmax_scale = -1.0f;
    expect_throw<inv>("negative scale", "softmax_scale", run(good(), out, opt));
  }
  {
    ac::CudaDecodeOptions opt;
    opt.num_splits = 65;
    expect_throw<inv>("65 splits", "num_splits", run(good(), out, opt));
  }
  {
    ac::CudaDecodeOptions opt;
    opt.kernel = ac::kernel_kind::hopper;
    auto in = good();
    in.shape.d_qk = 128;
    in.shape.d_v = 128;
    expect_throw<inv>("hopper kernel on d_qk 128", "Hopper kernel needs d_qk = 576",
                      run(in, out, opt));
    in = good();
    in.shape.page_size = 48;
    expect_throw<inv>("hopper kernel on page size 48", "page_size", run(in, out, opt));
    in = good();
    in.v = fake_bf16;
    expect_throw<inv>("hopper kernel with a separate V", "V inside the kv cache",
                      run(in, out, opt));
  }
  {
    ac::CudaDecodeOptions opt;
    opt.mode = static_cast<ac::rescale_mode>(7);
    expect_throw<inv>("bad mode", "options.mode", run(good(), out, opt));
  }
  {
    ac::CudaDecodeOptions opt;
    opt.kv_l2_hint = static_cast<ac::l2_hint>(9);
    expect_throw<inv>("bad L2 hint", "options.kv_l2_hint", run(good(), out, opt));
  }
  {
    ac::CudaDecodeOptions opt;
    opt.mode = ac::rescale_mode::amla;
    opt.rescale = amla::pow2_mode::checked;
    expect_throw<inv>("checked AMLA add", "options.rescale", run(good(), out, opt));
  }
  {
    ac::CudaDecodeOptions opt;
    opt.workspace = reinterpret_cast<void*>(std::uintptr_t{0x50010});
    opt.workspace_bytes = 1 << 20;
    expect_throw<inv>("misaligned workspace", "options.workspace", run(good(), out, opt));
  }
  {
    // A reused plan of another shape is refused before any CUDA call.
    ac::DecodePlan plan;
    plan.batch = 2;
    plan.s_q = 1;
    plan.h_q = 128;
    plan.block_keys = 64;
    plan.slots = 132;
    plan.memory = reinterpret_cast<void*>(std::uintptr_t{0x60000});
    ac::CudaDecodeOptions opt;
    opt.plan = &plan;
    expect_throw<inv>("plan of batch 2 for batch 1", "options.plan", run(good(), out, opt));
    expect_throw<inv>("plan of batch 2 for batch 1 names the batches", "batch 2",
                      run(good(), out, opt));
    plan.batch = 1;
    plan.s_q = 2;
    expect_throw<inv>("plan of s_q 2 for s_q 1", "options.plan", run(good(), out, opt));
    plan.s_q = 1;
    plan.h_q = 64;
    expect_throw<inv>("plan of h_q 64 for h_q 128", "options.plan", run(good(), out, opt));
    plan.h_q = 128;
    plan.block_keys = 32;
    expect_throw<inv>("plan of 32-key blocks", "options.plan", run(good(), out, opt));
    plan.block_keys = 64;
    opt.num_splits = 2;
    expect_throw<inv>("plan with num_splits 2", "options.plan", run(good(), out, opt));
    opt.num_splits = 0;
    plan.memory = nullptr;
    expect_throw<inv>("plan without memory", "options.plan", run(good(), out, opt));
    expect_throw<inv>("plan_decode without a workspace", "options.workspace",
                      [in = good()] { ac::plan_decode(in, {}); });
    ac::CudaDecodeOptions fixed;
    fixed.num_splits = 4;
    expect_throw<inv>("plan_decode of a fixed split", "options.num_splits",
                      [in = good(), fixed] { ac::plan_decode(in, fixed); });
  }
  {
    auto* fake_f64 = reinterpret_cast<double*>(std::uintptr_t{0x40000});
    auto golden = [&](ac::DeviceDecodeInputs in, ac::DeviceGoldenOutputs o,
                      ac::CudaGoldenOptions opt) {
      return [in, o, opt] { ac::golden_decode(in, o, opt); };
    };
    expect_throw<inv>("golden: null out", "'out'", golden(good(), {nullptr, fake_f64}, {}));
    expect_throw<inv>("golden: null lse", "'lse'", golden(good(), {fake_f64, nullptr}, {}));
    auto in = good();
    in.kv = nullptr;
    expect_throw<inv>("golden: null kv", "'kv'", golden(in, {fake_f64, fake_f64}, {}));
    ac::CudaGoldenOptions opt;
    opt.softmax_scale = 0.0f;
    expect_throw<inv>("golden: zero scale", "softmax_scale",
                      golden(good(), {fake_f64, fake_f64}, opt));
    in = good();
    in.shape.h_kv = 3;
    expect_throw<inv>("golden: h_kv not dividing h_q", "shape.h_kv",
                      golden(in, {fake_f64, fake_f64}, {}));
  }
  std::printf("validate: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// gpu: correctness against the float64 golden.

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit DeviceBuffer(std::size_t count) : n(count) {
    AMLA_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(1, n) * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr); }
  void upload(std::span<const T> v) {
    AMLA_CUDA_CHECK(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    AMLA_CUDA_CHECK(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

/// Device inputs over the buffers (V is the first d_v columns of kv).
ac::DeviceDecodeInputs device_inputs(const amla::DecodeShape& shape,
                                     const DeviceBuffer<amla::bf16>& q,
                                     const DeviceBuffer<amla::bf16>& kv,
                                     const DeviceBuffer<std::int32_t>& table,
                                     const DeviceBuffer<std::int32_t>& lens) {
  return ac::DeviceDecodeInputs{
      .shape = shape, .q = q.ptr, .kv = kv.ptr, .block_table = table.ptr, .seqlens = lens.ptr};
}

/// A problem's inputs in device memory (V separate when the problem has its own V cache).
struct DeviceProblem {
  DeviceBuffer<amla::bf16> q, kv, v;
  DeviceBuffer<std::int32_t> table, lens;
  ac::DeviceDecodeInputs in;
  explicit DeviceProblem(const ct::Problem& p)
      : q(p.inputs().q.size()),
        kv(p.inputs().kv.size()),
        v(p.inputs().v.size()),
        table(p.inputs().block_table.size()),
        lens(p.inputs().seqlens.size()) {
    const amla::DecodeInputs<amla::bf16>& host = p.inputs();
    q.upload(host.q);
    kv.upload(host.kv);
    if (!host.v.empty()) v.upload(host.v);
    table.upload(host.block_table);
    lens.upload(host.seqlens);
    in = device_inputs(p.shape(), q, kv, table, lens);
    if (!host.v.empty()) in.v = v.ptr;
  }
};

/// Waits for the stream, but gives up (and exits: a hung kernel cannot be recovered) after
/// `seconds`, naming what hung.
void sync_or_die(cudaStream_t stream, double seconds, const std::string& what) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      std::printf("  FATAL %s: %s (%s)\n", what.c_str(), cudaGetErrorName(e),
                  cudaGetErrorString(e));
      std::fflush(stdout);
      std::exit(2);
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dt > seconds) {
      std::printf("  FATAL %s: still running after %.0f s (hang)\n", what.c_str(), seconds);
      std::fflush(stdout);
      std::exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

float bf16_value(amla::bf16 b) {
  return b.to_float();
}

struct Metrics {
  double rel_fro = 0;           // ||out - golden||_F / ||golden||_F
  double rel_fro_left = 0;      // columns [0, 256)
  double rel_fro_right = 0;     // columns [256, d_v)
  double lse_max_err = 0;       // max |lse - golden| over non-empty rows
  std::size_t unwritten = 0;    // NaN left in out or lse
  std::size_t empty_wrong = 0;  // empty rows not exactly (0, -inf)
  std::size_t bad_rows = 0;     // rows with relative error > 2e-2
  std::string first_bad;
};

/// Distance of a kernel's output to the float64 golden, and the conventions every kernel must
/// keep (all outputs written, empty rows exactly (0, -inf)). Offsets and visible counts are the
/// problem layer's.
Metrics measure(const ct::Problem& p, bool causal, const std::vector<amla::bf16>& out,
                const std::vector<float>& lse, const amla::DecodeResult<double, double>& golden) {
  Metrics m;
  const amla::DecodeShape& s = p.shape();
  double num = 0, den = 0, nl = 0, dl = 0, nr = 0, dr = 0;
  const int half = 256;
  for (int b = 0; b < s.batch; ++b) {
    const int seqlen = p.inputs().seqlens[static_cast<std::size_t>(b)];
    for (int t = 0; t < s.s_q; ++t) {
      const int visible = amla::visible_keys(seqlen, s.s_q, t, causal);
      const bool empty = visible == 0;
      for (int h = 0; h < s.h_q; ++h) {
        const std::size_t row = s.out_offset(b, t, h);
        const std::size_t li = s.lse_offset(b, t, h);
        double rn = 0, rd = 0;
        bool row_written = true;
        for (int d = 0; d < s.d_v; ++d) {
          const float a = bf16_value(out[row + d]);
          const double g = golden.out[row + d];
          if (std::isnan(a)) {
            row_written = false;
            continue;
          }
          const double e = (static_cast<double>(a) - g) * (static_cast<double>(a) - g);
          num += e;
          den += g * g;
          rn += e;
          rd += g * g;
          if (d < half) {
            nl += e;
            dl += g * g;
          } else {
            nr += e;
            dr += g * g;
          }
          if (empty && a != 0.0f) ++m.empty_wrong;
        }
        if (!row_written) ++m.unwritten;
        const float l = lse[li];
        if (std::isnan(l)) {
          ++m.unwritten;
        } else if (empty) {
          if (!(std::isinf(l) && l < 0)) ++m.empty_wrong;
        } else {
          m.lse_max_err =
              std::max(m.lse_max_err, std::abs(static_cast<double>(l) - golden.lse[li]));
        }
        if (!empty && (std::sqrt(rn) / (std::sqrt(rd) + 1e-10) > 2e-2 || !row_written)) {
          if (m.bad_rows == 0) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "b %d t %d h %d (visible %d): row error %.3g", b, t, h,
                          visible, std::sqrt(rn) / (std::sqrt(rd) + 1e-10));
            m.first_bad = buf;
          }
          ++m.bad_rows;
        }
      }
    }
  }
  m.rel_fro = std::sqrt(num) / (std::sqrt(den) + 1e-10);
  m.rel_fro_left = std::sqrt(nl) / (std::sqrt(dl) + 1e-10);
  m.rel_fro_right = std::sqrt(nr) / (std::sqrt(dr) + 1e-10);
  return m;
}

double rel_diff(const std::vector<amla::bf16>& a, const std::vector<amla::bf16>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = bf16_value(a[i]), y = bf16_value(b[i]);
    if (std::isnan(x) || std::isnan(y)) continue;
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::sqrt(num) / (std::sqrt(den) + 1e-10);
}

struct Case {
  std::string name;
  int batch, s_q, h_q;
  std::vector<int> lens;
  int page_size;
  bool causal;
  float spread;
  /// Builds the Lemma 3.1 trap: V column `trap_col` is 0 over the first block (so that column of
  /// O is exactly 0 after it) and the second block's keys are 4x larger (the max jumps, so the
  /// AMLA add is a large negative exponent step). -1: no trap.
  int trap_col = -1;
  int h_kv = 1, d_qk = 576, d_v = 512;  ///< other shapes run on the simple kernel only
  bool separate_v = false;
};

struct Variant {
  const char* name;
  ac::kernel_kind kernel;
  ac::rescale_mode mode;
  int splits;                                       // 0 automatic
  amla::pow2_mode rescale = amla::pow2_mode::safe;  ///< CudaDecodeOptions::rescale
  /// For a hardware-add variant: the safe variant it must equal bit for bit except where Lemma
  /// 3.1 broke (those elements are garbage). nullptr: compared with the golden.
  const char* twin = nullptr;
  ac::l2_hint hint = ac::l2_hint::automatic;
  bool stagger = true;
  bool skip_unmoved = false;  ///< CudaDecodeOptions::skip_unmoved (AMLA's identity steps add 0)
};

/// The decode options of a variant.
ac::CudaDecodeOptions options_for(const Variant& v, bool causal) {
  return ac::CudaDecodeOptions{.causal = causal,
                               .mode = v.mode,
                               .kernel = v.kernel,
                               .num_splits = v.splits,
                               .kv_l2_hint = v.hint,
                               .stagger_qk = v.stagger,
                               .rescale = v.rescale,
                               .skip_unmoved = v.skip_unmoved};
}

constexpr double tol_out = 3e-3;
constexpr double tol_lse = 1e-3;
constexpr double tol_simple_vs_cpu_amla = 5e-4;

std::vector<int> mixed_lengths(int batch, std::mt19937_64& rng, int long_len) {
  const int specials[] = {0, 1, 63, 64, 65, long_len};
  std::vector<int> lens(static_cast<std::size_t>(batch));
  std::uniform_int_distribution<int> pick(0, 9), any(1, 2048);
  for (int b = 0; b < batch; ++b) {
    const int k = pick(rng);
    lens[static_cast<std::size_t>(b)] = k < 6 ? specials[k] : any(rng);
  }
  // Every special length at least once when the batch has room.
  for (int i = 0; i < 6 && i < batch; ++i) lens[static_cast<std::size_t>(i)] = specials[i];
  return lens;
}

/// The SMs of the current device.
int device_sms() {
  int sms = 0, dev = 0;
  AMLA_CUDA_CHECK(cudaGetDevice(&dev));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

/// The plan region at the start of a sized Hopper run's workspace, filled with plan_poison before
/// the run, so that check_workspace_plan sees what the run wrote there and what it left alone.
constexpr unsigned char plan_poison = 0xA5;
std::size_t plan_region_bytes(const amla::DecodeShape& shape, const ac::CudaDecodeOptions& opt) {
  return ac::detail::workspace_layout_of(shape, opt, device_sms()).plan_bytes;
}

/// The split requests' first pieces of a plan in `a` (split_plan::plan_out's split_pieces, which
/// the combine reads) against the CPU schedule `cpu` of `batch` requests: entry i names the i-th
/// cut request, its piece count and first slot; the entries after the last, up to the smaller of
/// batch + 1 and `slots`, name request -1. Returns the entries that differ.
int split_pieces_wrong(const ac::detail::plan_arrays& a, int batch, int slots,
                       const amla::SplitSchedule& cpu, cudaStream_t stream) {
  const int n = std::min(batch + 1, slots);
  std::vector<ac::detail::split_plan::piece_entry> got(static_cast<std::size_t>(n));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(got.data(), a.split_pieces, got.size() * sizeof(got[0]),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  int wrong = 0, i = 0;
  for (int b = 0; b < batch; ++b) {
    const auto bb = static_cast<std::size_t>(b);
    const int k = cpu.piece_prefix[bb + 1] - cpu.piece_prefix[bb];
    if (k < 2) continue;
    if (i < n) {
      const auto& e = got[static_cast<std::size_t>(i)];
      wrong +=
          e.request != b || e.pieces != k || e.index != 0 || e.first_slot != cpu.slot_prefix[bb]
              ? 1
              : 0;
    }
    ++i;
  }
  for (; i < n; ++i) wrong += got[static_cast<std::size_t>(i)].request != -1 ? 1 : 0;
  return wrong;
}

/// The sized plan a Hopper run left in its workspace (poisoned before the run) against the CPU
/// schedule of the same lengths. A batch the schedule may cut (fewer requests than a wave's
/// pieces): the plan the decode kernel's CTA (0, 0) wrote, T, the piece and slot prefixes, the
/// split requests the combine merges. A batch that fills a wave (the driver's own bounds say no
/// request is cut) made no plan: the region holds the poison still.
void check_workspace_plan(const char* what, const DeviceBuffer<std::uint8_t>& workspace,
                          const amla::DecodeShape& shape, const ac::CudaDecodeOptions& opt,
                          const std::vector<int>& lens, cudaStream_t stream) {
  const int sms = device_sms();
  amla::SplitScheduleOptions o;
  o.sms = sms;
  o.block_keys = ac::detail::hopper::block_keys;
  const int row_blocks = (shape.rows_per_group() + ac::detail::hopper::rows_per_cta - 1) /
                         ac::detail::hopper::rows_per_cta;
  if (ac::detail::split_bounds(shape, opt, sms).partials == 0) {
    std::vector<unsigned char> region(plan_region_bytes(shape, opt));
    AMLA_CUDA_CHECK(cudaMemcpyAsync(region.data(), workspace.ptr, region.size(),
                                    cudaMemcpyDeviceToHost, stream));
    AMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto written = static_cast<std::size_t>(std::count_if(
        region.begin(), region.end(), [](unsigned char x) { return x != plan_poison; }));
    EXPECT(written == 0,
           "%s: a batch of %d requests fills a wave, yet %zu of the %zu bytes of the workspace's "
           "plan region were written",
           what, shape.batch, written, region.size());
    return;
  }
  const std::vector<std::int32_t> lens32(lens.begin(), lens.end());
  const amla::SplitSchedule cpu = amla::make_split_schedule(lens32, row_blocks, o);
  const ac::detail::plan_arrays a = ac::detail::plan_arrays_in(workspace.ptr, shape.batch);
  const std::size_t n1 = static_cast<std::size_t>(shape.batch) + 1;
  ac::detail::split_plan::header h{};
  std::vector<std::int32_t> pieces(n1), slots(n1);
  AMLA_CUDA_CHECK(cudaMemcpyAsync(&h, a.header, sizeof(h), cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(pieces.data(), a.piece_prefix, n1 * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(slots.data(), a.slot_prefix, n1 * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  int cpu_split = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(shape.batch); ++i) {
    cpu_split += cpu.piece_prefix[i + 1] - cpu.piece_prefix[i] > 1 ? 1 : 0;
  }
  // The split requests themselves: split_pieces (split_pieces_wrong).
  const int entries_wrong = split_pieces_wrong(
      a, shape.batch, ac::detail::split_bounds(shape, opt, sms).slots, cpu, stream);
  const bool same = h.piece_blocks == cpu.scalars.piece_blocks && pieces == cpu.piece_prefix &&
                    slots == cpu.slot_prefix && h.num_split_requests == cpu_split &&
                    entries_wrong == 0;
  EXPECT(same,
         "%s: the plan in the workspace (T %d, %d split requests, %d wrong first pieces) differs "
         "from the CPU schedule (T %d, %d split requests)",
         what, h.piece_blocks, h.num_split_requests, entries_wrong, cpu.scalars.piece_blocks,
         cpu_split);
}

void run_case(const Case& c, std::uint64_t seed, cudaStream_t stream) {
  const auto t0 = std::chrono::steady_clock::now();
  ct::ProblemSpec spec{c.s_q, c.h_q, c.lens, c.page_size, c.spread, seed};
  spec.h_kv = c.h_kv;
  spec.d_qk = c.d_qk;
  spec.d_v = c.d_v;
  spec.separate_v = c.separate_v;
  ct::Problem hp(spec);
  if (c.trap_col >= 0) hp.set_trap(c.trap_col);
  amla::DecodeOptions problem;
  problem.causal = c.causal;
  const amla::DecodeResult<double, double> gold = ct::golden(hp, problem);
  // The CPU recurrences the kernels mirror (Base for standard, AMLA with the safe add, with the
  // printed step and with skip_unmoved).
  const std::vector<amla::bf16> cpu_out[3] = {ct::cpu_base(hp, problem).out,
                                              ct::cpu_amla(hp, problem, false).out,
                                              ct::cpu_amla(hp, problem, true).out};
  const double cpu_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const amla::DecodeShape& shape = hp.shape();
  const DeviceProblem dev(hp);
  const ac::DeviceDecodeInputs& in = dev.in;
  DeviceBuffer<amla::bf16> out(shape.out_elems());
  DeviceBuffer<float> lse(shape.lse_elems());
  const ac::DeviceDecodeOutputs outs{out.ptr, lse.ptr};

  std::printf("-- %s: b %d s_q %d h_q %d page %d %s spread %g, %zu pages (golden %.1f s)\n",
              c.name.c_str(), shape.batch, c.s_q, c.h_q, c.page_size, c.causal ? "causal" : "full",
              c.spread, static_cast<std::size_t>(shape.num_pages), cpu_s);
  using ac::kernel_kind;
  using ac::rescale_mode;
  constexpr auto hw = amla::pow2_mode::hardware;
  const Variant variants[] = {
      {"simple/standard", kernel_kind::simple, rescale_mode::standard, 0},
      {"simple/amla", kernel_kind::simple, rescale_mode::amla, 0},
      {"simple/amla-hw", kernel_kind::simple, rescale_mode::amla, 0, hw, "simple/amla"},
      {"hopper/standard", kernel_kind::hopper, rescale_mode::standard, 0},
      {"hopper/amla", kernel_kind::hopper, rescale_mode::amla, 0},
      {"hopper/amla-hw", kernel_kind::hopper, rescale_mode::amla, 0, hw, "hopper/amla"},
      {"hopper/standard/3 splits", kernel_kind::hopper, rescale_mode::standard, 3},
      {"hopper/standard/no split", kernel_kind::hopper, rescale_mode::standard, 1},
      {"hopper/amla/3 splits", kernel_kind::hopper, rescale_mode::amla, 3},
      {"hopper/standard/no-hint", kernel_kind::hopper, rescale_mode::standard, 0,
       amla::pow2_mode::safe, nullptr, ac::l2_hint::none},
      {"hopper/amla-hw/no stagger", kernel_kind::hopper, rescale_mode::amla, 0, hw, "hopper/amla",
       ac::l2_hint::automatic, false},
      {"simple/amla/skip", kernel_kind::simple, rescale_mode::amla, 0, amla::pow2_mode::safe,
       nullptr, ac::l2_hint::automatic, true, true},
      {"hopper/amla/skip", kernel_kind::hopper, rescale_mode::amla, 0, amla::pow2_mode::safe,
       nullptr, ac::l2_hint::automatic, true, true},
      {"hopper/amla-hw/skip", kernel_kind::hopper, rescale_mode::amla, 0, hw, "hopper/amla/skip",
       ac::l2_hint::automatic, true, true},
      {"hopper/amla/skip/3 splits", kernel_kind::hopper, rescale_mode::amla, 3,
       amla::pow2_mode::safe, nullptr, ac::l2_hint::automatic, true, true},
  };
  std::map<std::string, std::vector<amla::bf16>> outputs;
  std::vector<amla::bf16> simple_out[3];
  // The Hopper variants run on a workspace of ours (the hostile cases let decode() allocate).
  std::size_t ws_bytes = 0;
  for (int splits : {0, 3}) {
    ac::CudaDecodeOptions o;
    o.num_splits = splits;
    ws_bytes = std::max(ws_bytes, ac::decode_workspace_bytes(shape, o));
  }
  DeviceBuffer<std::uint8_t> workspace(ws_bytes);
  for (const Variant& v : variants) {
    if (g_simple_only && v.kernel != kernel_kind::simple) continue;
    ac::CudaDecodeOptions opt = options_for(v, c.causal);
    // The trap needs the recurrence across blocks within one CTA: the sized schedule may cut
    // the requests (the combine then rescales, not the integer add).
    if (c.trap_col >= 0 && v.splits == 0) opt.num_splits = 1;
    opt.workspace = workspace.ptr;
    opt.workspace_bytes = workspace.n;
    AMLA_CUDA_CHECK(cudaMemsetAsync(out.ptr, 0xFF, out.n * sizeof(amla::bf16), stream));  // NaN
    AMLA_CUDA_CHECK(cudaMemsetAsync(lse.ptr, 0xFF, lse.n * sizeof(float), stream));       // NaN
    const bool sized_hopper = v.kernel == kernel_kind::hopper && opt.num_splits == 0;
    if (sized_hopper) {
      AMLA_CUDA_CHECK(
          cudaMemsetAsync(workspace.ptr, plan_poison, plan_region_bytes(shape, opt), stream));
    }
    ac::DecodeLaunch launch;
    try {
      launch = ac::decode(in, outs, opt, stream);
    } catch (const amla::invalid_argument& e) {
      std::printf("  %-28s n/a: %s\n", v.name, e.what());
      continue;
    }
    sync_or_die(stream, 60.0, std::string(c.name) + " " + v.name);
    if (sized_hopper) {
      check_workspace_plan((std::string(c.name) + " " + v.name).c_str(), workspace, shape, opt,
                           c.lens, stream);
    }
    const std::vector<amla::bf16> o = out.download();
    const std::vector<float> l = lse.download();
    outputs[v.name] = o;
    if (v.twin != nullptr) {
      // Hardware add: identical to the safe form except where Lemma 3.1 broke.
      const std::vector<amla::bf16>& safe = outputs.at(v.twin);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < o.size(); ++i) differ += o[i].bits != safe[i].bits ? 1 : 0;
      if (c.trap_col < 0) g_lemma_garbage += differ;
      std::printf("  %-28s pieces %3d  differs from %s in %zu elements (Lemma 3.1 violations)\n",
                  v.name, launch.pieces, v.twin, differ);
      std::fflush(stdout);
      if (c.trap_col >= 0) {
        EXPECT(differ > 0, "%s %s: the Lemma 3.1 trap produced no garbage", c.name.c_str(), v.name);
      } else {
        EXPECT(differ <= 64, "%s %s: %zu elements differ from the safe form", c.name.c_str(),
               v.name, differ);
      }
      continue;
    }
    const Metrics m = measure(hp, c.causal, o, l, gold);
    // 0: standard, 1: AMLA, 2: AMLA with skip_unmoved (each against its own CPU recurrence).
    const int mi = v.mode == ac::rescale_mode::amla ? (v.skip_unmoved ? 2 : 1) : 0;
    double vs_simple = -1;
    if (v.kernel == ac::kernel_kind::simple) {
      simple_out[mi] = o;
    } else if (!simple_out[mi].empty()) {
      vs_simple = rel_diff(o, simple_out[mi]);
    }
    const double vs_cpu = rel_diff(o, cpu_out[mi]);
    if (v.kernel == ac::kernel_kind::hopper && v.splits == 0 && v.stagger &&
        v.hint == ac::l2_hint::automatic) {
      (mi == 0 ? g_vs_cpu_std : g_vs_cpu_amla).push_back(vs_cpu);
    }
    std::printf(
        "  %-28s pieces %3d  err %.3e (L %.3e R %.3e)  lse %.2e  vs simple %.3e  vs CPU %s "
        "%.3e  unwritten %zu empty-wrong %zu bad-rows %zu %s\n",
        v.name, launch.pieces, m.rel_fro, m.rel_fro_left, m.rel_fro_right, m.lse_max_err, vs_simple,
        mi == 0 ? "Base" : (mi == 1 ? "AMLA" : "AMLA/skip"), vs_cpu, m.unwritten, m.empty_wrong,
        m.bad_rows, m.first_bad.c_str());
    std::fflush(stdout);
    EXPECT(m.unwritten == 0, "%s %s: %zu outputs left unwritten", c.name.c_str(), v.name,
           m.unwritten);
    EXPECT(m.empty_wrong == 0, "%s %s: %zu empty-row outputs not (0, -inf)", c.name.c_str(), v.name,
           m.empty_wrong);
    EXPECT(m.rel_fro < tol_out, "%s %s: relative error %.3e >= %.1e", c.name.c_str(), v.name,
           m.rel_fro, tol_out);
    EXPECT(m.lse_max_err < tol_lse, "%s %s: lse error %.3e >= %.1e", c.name.c_str(), v.name,
           m.lse_max_err, tol_lse);
    if (v.kernel == ac::kernel_kind::simple && v.mode == ac::rescale_mode::amla) {
      // The simple kernel runs the CPU AMLA recurrence block for block (64 keys, the same
      // numeric/ step and add, P rounded to BF16): it stays within last-bit differences of P's
      // exp and of the summation order (up to 2e-4 seen on an H100 on large problems), ten times
      // closer than either is to the golden. A last-bit difference of an exp can also round its P
      // to the other BF16 neighbour, which moves that row by 2^-8 of the key's V: in a problem of
      // R rows about 2^-8 / sqrt(R) of the output's norm (6.4e-4 seen at R = 48, 2.2e-3 from the
      // golden). The bound allows two such roundings where that exceeds 5e-4.
      const double rows = static_cast<double>(o.size()) / c.d_v;
      const double tol = std::max(tol_simple_vs_cpu_amla, 0x1p-7 / std::sqrt(rows));
      EXPECT(vs_cpu < tol, "%s %s: %.3e from the CPU AMLA recurrence (>= %.1e)", c.name.c_str(),
             v.name, vs_cpu, tol);
    }
  }
}

void table_validation(cudaStream_t stream) {
  std::printf("== table validation and CUDA errors\n");
  const ct::Problem hp(ct::ProblemSpec{1, 16, {5, 70}, 64, 1.0, 1});
  const amla::DecodeShape& shape = hp.shape();
  const std::vector<std::int32_t> host_table(hp.inputs().block_table.begin(),
                                             hp.inputs().block_table.end());
  DeviceBuffer<amla::bf16> q(shape.q_elems()), kv(shape.kv_elems()), out(shape.out_elems());
  DeviceBuffer<std::int32_t> table(host_table.size()), lens(shape.seqlens_elems());
  DeviceBuffer<float> lse(shape.lse_elems());
  table.upload(host_table);
  ac::DeviceDecodeInputs in = device_inputs(shape, q, kv, table, lens);
  const ac::DeviceDecodeOutputs outs{out.ptr, lse.ptr};
  using inv = amla::invalid_argument;
  auto run = [&] { ac::decode(in, outs, {}, stream); };
  const auto upload_lens = [&](std::vector<std::int32_t> v) { lens.upload(v); };
  upload_lens({5, static_cast<int>(in.shape.max_seqlen()) + 1});
  expect_throw<inv>("seqlen past the table", "seqlens[1]", run);
  upload_lens({-1, 3});
  expect_throw<inv>("negative seqlen", "seqlens[0]", run);
  upload_lens({5, 70});
  std::vector<std::int32_t> bad = host_table;
  bad[shape.table_offset(1, 1)] = shape.num_pages;  // sequence 1, second page
  table.upload(bad);
  expect_throw<inv>("page outside the cache", "block_table[1][1]", run);
  table.upload(host_table);
  in.seqlens = reinterpret_cast<const std::int32_t*>(std::uintptr_t{16});  // not device memory
  expect_throw<ac::cuda_error>("bad seqlens pointer", "cudaMemcpyAsync", run);
  cudaGetLastError();  // clear the (non-sticky) error

  // kernel_kind::automatic: the Hopper kernel on a compute capability 9.0 device running an
  // sm_90a build, else the simple kernel with the reason (the fallback off Hopper).
  in.seqlens = lens.ptr;
  ac::CudaDecodeOptions automatic;
  const ac::DecodeLaunch launch = ac::decode(in, outs, automatic, stream);
  AMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  int dev = 0, major = 0, minor = 0;
  AMLA_CUDA_CHECK(cudaGetDevice(&dev));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  const bool hopper = major == 9 && minor == 0 && ac::detail::hopper_kernel_built(dev);
  std::printf("  automatic kernel: %s%s%s\n", ac::to_string(launch.kernel),
              launch.fallback_reason.empty() ? "" : ", because ", launch.fallback_reason.c_str());
  EXPECT(launch.kernel == (hopper ? ac::kernel_kind::hopper : ac::kernel_kind::simple),
         "automatic chose %s", ac::to_string(launch.kernel));
  EXPECT(hopper == launch.fallback_reason.empty(), "fallback reason '%s'",
         launch.fallback_reason.c_str());
}

/// Where out's rows are 16-byte aligned the Hopper epilogue stores whole 16-byte units, else
/// 4-byte ones; an out that is not 4-byte aligned (a valid BF16 pointer) is not the Hopper
/// kernel's: automatic runs the simple kernel and says why, kernel hopper is refused. Whole
/// requests, so that the decode kernel writes out, not the combine. At each offset every output
/// lands in its place, bit for bit the aligned run's, and nothing around it is written.
void output_alignment(cudaStream_t stream) {
  std::printf("== output alignment\n");
  // Two requests of b 2, h_q 128 (two row blocks each): 300 keys, and 64 keys.
  const ct::Problem hp(ct::ProblemSpec{1, 128, {300, 64}, 64, 1.0, 17});
  const amla::DecodeShape& shape = hp.shape();
  const DeviceProblem dev(hp);
  const std::size_t n = shape.out_elems();
  constexpr std::size_t slack = 16;  // elements past the largest offset, which must stay unwritten
  DeviceBuffer<amla::bf16> out(n + slack);
  DeviceBuffer<float> lse(shape.lse_elems());
  const std::uint16_t canary = 0x7FA5;  // a NaN no kernel writes
  const std::vector<amla::bf16> fill(n + slack, amla::bf16::from_bits(canary));
  int device = 0, major = 0, minor = 0;
  AMLA_CUDA_CHECK(cudaGetDevice(&device));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const bool hopper =
      !g_simple_only && major == 9 && minor == 0 && ac::detail::hopper_kernel_built(device);
  for (const ac::rescale_mode mode : {ac::rescale_mode::standard, ac::rescale_mode::amla}) {
    const char* mode_name = mode == ac::rescale_mode::standard ? "standard" : "amla";
    std::vector<amla::bf16> aligned;
    // 0: 16-byte aligned (cudaMalloc), 2: 4-byte aligned only, 1: 2-byte aligned only.
    for (const std::size_t offset : {std::size_t{0}, std::size_t{2}, std::size_t{1}}) {
      out.upload(fill);
      ac::CudaDecodeOptions opt;
      opt.mode = mode;
      opt.kernel = g_simple_only ? ac::kernel_kind::simple : ac::kernel_kind::automatic;
      opt.num_splits = 1;
      const ac::DecodeLaunch launch = ac::decode(dev.in, {out.ptr + offset, lse.ptr}, opt, stream);
      sync_or_die(stream, 60.0, "output alignment");
      const std::vector<amla::bf16> all = out.download();
      const bool to_hopper = hopper && offset != 1;
      std::printf("  %s, out at +%zu bytes: %s%s%s\n", mode_name, 2 * offset,
                  ac::to_string(launch.kernel), launch.fallback_reason.empty() ? "" : ", because ",
                  launch.fallback_reason.c_str());
      if (!g_simple_only) {
        EXPECT(launch.kernel == (to_hopper ? ac::kernel_kind::hopper : ac::kernel_kind::simple),
               "%s at +%zu bytes: automatic chose %s", mode_name, 2 * offset,
               ac::to_string(launch.kernel));
      }
      if (hopper && offset == 1) {
        EXPECT(launch.fallback_reason.find("out 4-byte aligned") != std::string::npos,
               "%s at +2 bytes: fallback reason '%s'", mode_name, launch.fallback_reason.c_str());
      }
      std::size_t outside = 0, unwritten = 0;
      for (std::size_t i = 0; i < all.size(); ++i) {
        const bool inside = i >= offset && i < offset + n;
        const bool untouched = all[i].bits == canary;
        outside += !inside && !untouched ? 1 : 0;
        unwritten += inside && untouched ? 1 : 0;
      }
      EXPECT(outside == 0 && unwritten == 0, "%s at +%zu bytes: %zu written outside, %zu unwritten",
             mode_name, 2 * offset, outside, unwritten);
      const std::vector<amla::bf16> mine(all.begin() + static_cast<std::ptrdiff_t>(offset),
                                         all.begin() + static_cast<std::ptrdiff_t>(offset + n));
      if (offset == 0) {
        aligned = mine;
      } else if (to_hopper == hopper) {
        // The kernel of the aligned run: the same values, bit for bit.
        std::size_t differ = 0;
        for (std::size_t i = 0; i < n; ++i) differ += mine[i].bits != aligned[i].bits ? 1 : 0;
        EXPECT(differ == 0, "%s at +%zu bytes: %zu elements differ from the aligned run", mode_name,
               2 * offset, differ);
      } else {
        // The simple kernel against the aligned run's Hopper kernel: BF16 roundings apart.
        const double d = rel_diff(mine, aligned);
        EXPECT(d < 1e-2, "%s at +%zu bytes: %.3e from the aligned Hopper run", mode_name,
               2 * offset, d);
      }
    }
  }
  if (hopper) {
    ac::CudaDecodeOptions opt;
    opt.kernel = ac::kernel_kind::hopper;
    expect_throw<amla::invalid_argument>("kernel hopper with out 2-byte aligned",
                                         "out 4-byte aligned", [&] {
                                           ac::decode(dev.in, {out.ptr + 1, lse.ptr}, opt, stream);
                                         });
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile inputs: the semantics of problem/conventions.hpp on every kernel and the GPU golden.

/// What an output element must be: the reference value (NaN or +-Inf where the reference is),
/// NaN, +Inf, or anything (the row is not checked).
enum class Want : std::uint8_t { reference, nan, pos_inf, any };

struct Hostile {
  std::string name;
  ct::ProblemSpec spec;
  bool causal = false;
  std::function<void(ct::Problem&)> poison;
  /// Per element (b, t, h, column); rows whose every column is NaN must have a NaN lse.
  std::function<Want(int, int, int, int)> want;
  /// Compare with the golden of the problem without the poison (the poison reaches only the
  /// elements `want` names), rather than with the golden of the poisoned problem.
  bool clean_reference = true;
};

/// Checks one kernel's (or the GPU golden's) outputs against the wanted semantics: reference
/// elements within `tol` (row-relative, and lse absolutely), NaN / +Inf where wanted (unless
/// `columns_free`: the hardware AMLA add turns a non-finite O element into garbage), empty rows
/// exactly (0, -inf), rows of NaN with a NaN lse.
template <class O, class L>
void check_hostile(const Hostile& c, const char* variant, const ct::Problem& hp,
                   const std::vector<O>& out, const std::vector<L>& lse,
                   const amla::DecodeResult<double, double>& ref, double tol, bool columns_free) {
  const amla::DecodeShape& s = hp.shape();
  std::size_t bad = 0;
  std::string first;
  auto fail = [&](const std::string& what) {
    if (bad++ == 0) first = what;
  };
  for (int b = 0; b < s.batch; ++b) {
    const int seqlen = hp.inputs().seqlens[static_cast<std::size_t>(b)];
    for (int t = 0; t < s.s_q; ++t) {
      const bool empty = amla::visible_keys(seqlen, s.s_q, t, c.causal) == 0;
      for (int h = 0; h < s.h_q; ++h) {
        const std::size_t row = s.out_offset(b, t, h);
        double num = 0, den = 0;
        bool all_nan = true, all_any = true;
        char where[96];
        std::snprintf(where, sizeof where, "b %d t %d h %d", b, t, h);
        for (int d = 0; d < s.d_v; ++d) {
          const double x = static_cast<double>(out[row + d]);
          const double g = ref.out[row + d];
          Want w = c.want(b, t, h, d);
          if (w == Want::reference && std::isnan(g)) w = Want::nan;
          if (w == Want::reference && std::isinf(g)) w = g > 0 ? Want::pos_inf : Want::any;
          all_nan = all_nan && w == Want::nan;
          all_any = all_any && w == Want::any;
          if (w == Want::reference) {
            if (!std::isfinite(x)) {
              fail(std::string(where) + " col " + std::to_string(d) + " not finite");
              continue;
            }
            num += (x - g) * (x - g);
            den += g * g;
            if (empty && x != 0.0) fail(std::string(where) + ": empty row not 0");
          } else if (!columns_free) {
            if (w == Want::nan && !std::isnan(x)) {
              fail(std::string(where) + " col " + std::to_string(d) + " = " + std::to_string(x) +
                   ", not NaN");
            }
            if (w == Want::pos_inf && !(std::isinf(x) && x > 0)) {
              fail(std::string(where) + " col " + std::to_string(d) + " = " + std::to_string(x) +
                   ", not +Inf");
            }
          }
        }
        if (all_any) continue;
        if (den > 0 && std::sqrt(num / den) > tol) {
          fail(std::string(where) + ": row error " + std::to_string(std::sqrt(num / den)));
        }
        const double l = static_cast<double>(lse[s.lse_offset(b, t, h)]);
        const double gl = ref.lse[s.lse_offset(b, t, h)];
        if (all_nan || std::isnan(gl)) {
          if (!std::isnan(l)) fail(std::string(where) + ": lse " + std::to_string(l) + ", not NaN");
        } else if (empty) {
          if (!(std::isinf(l) && l < 0)) fail(std::string(where) + ": empty row lse not -inf");
        } else if (!(std::abs(l - gl) <= tol * std::max(1.0, std::abs(gl)))) {
          fail(std::string(where) + ": lse " + std::to_string(l) + " vs " + std::to_string(gl));
        }
      }
    }
  }
  std::printf("  %-28s %zu bad elements %s\n", variant, bad, first.c_str());
  EXPECT(bad == 0, "%s %s: %zu elements break the semantics (first: %s)", c.name.c_str(), variant,
         bad, first.c_str());
}

void run_hostile(const Hostile& c, cudaStream_t stream) {
  ct::Problem hp(c.spec);
  c.poison(hp);
  amla::DecodeOptions problem;
  problem.causal = c.causal;
  const amla::DecodeResult<double, double> ref =
      c.clean_reference ? ct::golden(ct::Problem(c.spec), problem) : ct::golden(hp, problem);
  const amla::DecodeShape& shape = hp.shape();
  std::printf("-- hostile: %s (b %d s_q %d h_q %d %s)\n", c.name.c_str(), shape.batch, shape.s_q,
              shape.h_q, c.causal ? "causal" : "full");
  const DeviceProblem dev(hp);
  DeviceBuffer<amla::bf16> out(shape.out_elems());
  DeviceBuffer<float> lse(shape.lse_elems());
  using ac::kernel_kind;
  using ac::rescale_mode;
  constexpr auto hw = amla::pow2_mode::hardware;
  constexpr auto safe = amla::pow2_mode::safe;
  const Variant variants[] = {
      {"simple/standard", kernel_kind::simple, rescale_mode::standard, 0, safe},
      {"simple/amla", kernel_kind::simple, rescale_mode::amla, 0, safe},
      {"hopper/standard", kernel_kind::hopper, rescale_mode::standard, 0, safe},
      {"hopper/standard/no split", kernel_kind::hopper, rescale_mode::standard, 1, safe},
      {"hopper/standard/3 splits", kernel_kind::hopper, rescale_mode::standard, 3, safe},
      {"hopper/amla", kernel_kind::hopper, rescale_mode::amla, 0, safe},
      {"hopper/amla/3 splits", kernel_kind::hopper, rescale_mode::amla, 3, safe},
      {"hopper/amla-hw", kernel_kind::hopper, rescale_mode::amla, 0, hw},
      {"hopper/amla/skip", kernel_kind::hopper, rescale_mode::amla, 0, safe, nullptr,
       ac::l2_hint::automatic, true, true},
      {"simple/amla/skip", kernel_kind::simple, rescale_mode::amla, 0, safe, nullptr,
       ac::l2_hint::automatic, true, true},
  };
  for (const Variant& v : variants) {
    if (g_simple_only && v.kernel != kernel_kind::simple) continue;
    const ac::CudaDecodeOptions opt = options_for(v, c.causal);
    AMLA_CUDA_CHECK(cudaMemsetAsync(out.ptr, 0xFF, out.n * sizeof(amla::bf16), stream));
    AMLA_CUDA_CHECK(cudaMemsetAsync(lse.ptr, 0xFF, lse.n * sizeof(float), stream));
    try {
      ac::decode(dev.in, {out.ptr, lse.ptr}, opt, stream);
    } catch (const amla::invalid_argument& e) {
      std::printf("  %-28s n/a: %s\n", v.name, e.what());
      continue;
    }
    sync_or_die(stream, 60.0, c.name + " " + v.name);
    const std::vector<amla::bf16> o = out.download();
    std::vector<float> of(o.size());
    for (std::size_t i = 0; i < o.size(); ++i) of[i] = o[i].to_float();
    check_hostile(c, v.name, hp, of, lse.download(), ref, 2e-2, v.rescale == hw);
  }
  // The GPU golden follows the same semantics, to float64 rounding. Where the poison is a score
  // past FP32 (no clean reference), float64 represents it: the golden then equals the CPU
  // golden of the poisoned problem everywhere.
  Hostile g = c;
  if (!c.clean_reference) g.want = [](int, int, int, int) { return Want::reference; };
  DeviceBuffer<double> gout(shape.out_elems()), glse(shape.lse_elems());
  ac::CudaGoldenOptions gopt;
  gopt.causal = c.causal;
  ac::golden_decode(dev.in, {gout.ptr, glse.ptr}, gopt, stream);
  sync_or_die(stream, 60.0, c.name + " golden");
  check_hostile(g, "gpu golden", hp, gout.download(), glse.download(), ref, 1e-12, false);
}

void hostile_checks(cudaStream_t stream) {
  std::printf("== hostile inputs (problem/conventions.hpp)\n");
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr float inf = std::numeric_limits<float>::infinity();
  const std::vector<int> lens{130, 200, 70};
  auto spec = [&](int s_q, int h_q, std::vector<int> l) {
    ct::ProblemSpec p;
    p.s_q = s_q;
    p.h_q = h_q;
    p.seqlens = std::move(l);
    p.seed = 77;
    return p;
  };
  using T = ct::Tensor;
  std::vector<Hostile> cases;
  // The Hopper kernel's layout: V is the first 512 columns of K, so a non-finite V value is a
  // non-finite K value too, and reaches the row through its score first.
  cases.push_back({"NaN in one Q row", spec(2, 16, lens), false,
                   [](ct::Problem& p) { p.set(T::q, 1, 1, 5, 10, nan); },
                   [](int b, int t, int h, int) {
                     return b == 1 && t == 1 && h == 5 ? Want::nan : Want::reference;
                   }});
  cases.push_back({"NaN in a visible K row (RoPE column)", spec(2, 16, lens), false,
                   [](ct::Problem& p) { p.set(T::k, 0, 5, 0, 530, nan); },
                   [](int b, int, int, int) { return b == 0 ? Want::nan : Want::reference; }});
  cases.push_back({"NaN in a visible K and V column", spec(2, 16, lens), false,
                   [](ct::Problem& p) { p.set(T::v, 2, 17, 0, 300, nan); },
                   [](int b, int, int, int) { return b == 2 ? Want::nan : Want::reference; }});
  // +Inf in a RoPE column: a score of +inf (q > 0 there: the row is NaN, inf - inf) or -inf (the
  // key weighs 0), as the float64 golden of the poisoned problem computes.
  Hostile rope_inf{"+Inf in a visible K RoPE column", spec(1, 64, lens), false,
                   [](ct::Problem& p) { p.set(T::k, 2, 40, 0, 520, inf); },
                   [](int, int, int, int) { return Want::reference; }};
  rope_inf.clean_reference = false;
  cases.push_back(rope_inf);
  // Causal, s_q 2: the last key of each sequence is seen by token 1 only. With h_q 16 and 48 a
  // CTA of 64 rows holds both tokens (the keys are ragged: added on the CUDA cores for token 1,
  // zeroed for the tensor cores); with 128 each token has its own CTAs.
  for (int h_q : {16, 48, 128}) {
    cases.push_back(
        {"causal: NaN in K and V of a key only token 1 sees, h_q " + std::to_string(h_q),
         spec(2, h_q, lens), true,
         [lens](ct::Problem& p) {
           for (int b = 0; b < 3; ++b) p.set(T::v, b, lens[b] - 1, 0, 100, nan);
         },
         [](int, int t, int, int) { return t == 1 ? Want::nan : Want::reference; }});
  }
  cases.push_back({"causal: +Inf in K of a key only token 1 sees", spec(2, 16, lens), true,
                   [lens](ct::Problem& p) {
                     for (int b = 0; b < 3; ++b) p.set(T::k, b, lens[b] - 1, 0, 550, inf);
                   },
                   [](int, int t, int, int) { return t == 1 ? Want::any : Want::reference; }});
  // Scores past FP32: one key of 1e20 and one query row of 1e20 (q . k = 576e40 = +inf in FP32,
  // finite in the float64 golden): that row is NaN; the others see a huge but finite score.
  Hostile overflow{
      "a score overflowing FP32 to +inf", spec(1, 16, {70, 64}), false,
      [](ct::Problem& p) {
        for (int d = 0; d < 576; ++d) {
          p.set(T::k, 0, 3, 0, d, 1e20f);
          p.set(T::q, 0, 0, 1, d, 1e20f);
        }
      },
      [](int b, int, int h, int) { return b == 0 && h == 1 ? Want::nan : Want::reference; }};
  overflow.clean_reference = false;
  cases.push_back(overflow);
  // Every visible score -inf: the row saw keys, so it is NaN, not the empty-row result.
  Hostile all_neg{
      "every visible score -inf", spec(1, 16, {3, 64}), false,
      [](ct::Problem& p) {
        for (int d = 0; d < 576; ++d) {
          for (int key = 0; key < 3; ++key) p.set(T::k, 0, key, 0, d, 1e20f);
          p.set(T::q, 0, 0, 2, d, -1e20f);
        }
      },
      [](int b, int, int h, int) { return b == 0 && h == 2 ? Want::nan : Want::reference; }};
  all_neg.clean_reference = false;
  cases.push_back(all_neg);
  // Base-2 row maxima either side of the Hopper kernel's fused-exponent limit (2^12): keys 3 and 4
  // of batch 0 score 3999.15 and 3999.04 in query row h 1 (one rounding of s scale - m) and
  // 4206.90 and 4206.78 in row h 2 (the product rounded first), so each row mixes two values of V.
  Hostile near_limit{"row maxima about 2^12 in base 2", spec(1, 16, {70, 64}), false,
                     [](ct::Problem& p) {
                       for (int d = 0; d < 576; ++d) {
                         for (int key : {3, 4})
                           p.set(T::k, 0, key, 0, d, key == 4 && d < 4 ? 1.9921875f : 2.0f);
                         p.set(T::q, 0, 0, 1, d, 57.75f);
                         p.set(T::q, 0, 0, 2, d, 60.75f);
                       }
                     },
                     [](int, int, int, int) { return Want::reference; }};
  near_limit.clean_reference = false;
  cases.push_back(near_limit);
  // A long request the schedules cut into pieces, causal: the last key (NaN) reaches token 1's
  // rows through one piece and the combine, never token 0's.
  cases.push_back({"split-KV, causal: NaN in the key only token 1 sees", spec(2, 128, {4133}), true,
                   [](ct::Problem& p) { p.set(T::v, 0, 4132, 0, 9, nan); },
                   [](int, int t, int, int) { return t == 1 ? Want::nan : Want::reference; }});
  // A separate V cache (the simple kernel's layouts; the Hopper kernel reports n/a): a non-finite
  // V value reaches only its column.
  auto spec_v = [&](int s_q, std::vector<int> l) {
    ct::ProblemSpec p = spec(s_q, 8, std::move(l));
    p.h_kv = 2;
    p.d_qk = 128;
    p.d_v = 64;
    p.separate_v = true;
    return p;
  };
  cases.push_back({"separate V: NaN in a visible V column", spec_v(2, lens), false,
                   [](ct::Problem& p) { p.set(T::v, 2, 17, 1, 30, nan); },
                   [](int b, int, int h, int d) {
                     return b == 2 && h >= 4 && d == 30 ? Want::nan : Want::reference;
                   }});
  cases.push_back({"separate V: +Inf in a visible V column", spec_v(1, lens), false,
                   [](ct::Problem& p) { p.set(T::v, 2, 40, 0, 7, inf); },
                   [](int b, int, int h, int d) {
                     return b == 2 && h < 4 && d == 7 ? Want::pos_inf : Want::reference;
                   }});
  cases.push_back({"separate V, causal: NaN in V of a key only token 1 sees", spec_v(2, lens), true,
                   [lens](ct::Problem& p) {
                     for (int b = 0; b < 3; ++b) p.set(T::v, b, lens[b] - 1, 0, 11, nan);
                   },
                   [](int, int t, int h, int d) {
                     return t == 1 && h < 4 && d == 11 ? Want::nan : Want::reference;
                   }});
  for (const Hostile& c : cases) run_hostile(c, stream);
}

// ---------------------------------------------------------------------------------------------
// The GPU float64 golden against the CPU one, its time, and the Hopper kernel against it at the
// benchmark's sizes.

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// GPU golden vs CPU golden on one problem: relative Frobenius distance of out, and the largest
/// lse difference relative to max(1, |lse|); empty rows exactly (0, -inf).
void golden_case(const std::string& name, const ct::ProblemSpec& spec, bool causal,
                 cudaStream_t stream) {
  ct::Problem hp(spec);
  amla::DecodeOptions problem;
  problem.causal = causal;
  auto t0 = std::chrono::steady_clock::now();
  const amla::DecodeResult<double, double> cpu = ct::golden(hp, problem);
  const double cpu_s = seconds_since(t0);
  const amla::DecodeShape& s = hp.shape();
  const DeviceProblem dev(hp);
  DeviceBuffer<double> out(s.out_elems()), lse(s.lse_elems());
  AMLA_CUDA_CHECK(cudaMemsetAsync(out.ptr, 0xFF, out.n * sizeof(double), stream));
  AMLA_CUDA_CHECK(cudaMemsetAsync(lse.ptr, 0xFF, lse.n * sizeof(double), stream));
  ac::CudaGoldenOptions opt;
  opt.causal = causal;
  ac::golden_decode(dev.in, {out.ptr, lse.ptr}, opt, stream);  // checks the tables
  cudaEvent_t e0, e1;
  AMLA_CUDA_CHECK(cudaEventCreate(&e0));
  AMLA_CUDA_CHECK(cudaEventCreate(&e1));
  opt.check_tables = false;
  AMLA_CUDA_CHECK(cudaEventRecord(e0, stream));
  ac::golden_decode(dev.in, {out.ptr, lse.ptr}, opt, stream);
  AMLA_CUDA_CHECK(cudaEventRecord(e1, stream));
  sync_or_die(stream, 120.0, name + " gpu golden");
  float ms = 0;
  AMLA_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  const std::vector<double> o = out.download(), l = lse.download();
  double num = 0, den = 0, lse_err = 0;
  std::size_t nonfinite = 0;
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (!std::isfinite(o[i])) ++nonfinite;
    num += (o[i] - cpu.out[i]) * (o[i] - cpu.out[i]);
    den += cpu.out[i] * cpu.out[i];
  }
  std::size_t empty_wrong = 0;
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (std::isinf(cpu.lse[i])) {
      empty_wrong += l[i] == cpu.lse[i] ? 0 : 1;
    } else {
      lse_err =
          std::max(lse_err, std::abs(l[i] - cpu.lse[i]) / std::max(1.0, std::abs(cpu.lse[i])));
    }
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  std::printf("  golden %-40s out %.2e lse %.2e  CPU %.3f s, GPU %.3f ms\n", name.c_str(), rel,
              lse_err, cpu_s, ms);
  EXPECT(nonfinite == 0, "%s: %zu non-finite outputs", name.c_str(), nonfinite);
  EXPECT(rel <= 1e-12, "%s: GPU golden %.3e from the CPU golden (> 1e-12)", name.c_str(), rel);
  EXPECT(lse_err <= 1e-12, "%s: GPU golden lse %.3e from the CPU golden", name.c_str(), lse_err);
  EXPECT(empty_wrong == 0, "%s: %zu empty rows differ", name.c_str(), empty_wrong);
}

void golden_checks(bool quick, std::mt19937_64& rng, cudaStream_t stream) {
  std::printf("== GPU golden (golden.cuh) against the CPU golden\n");
  ct::ProblemSpec ds;
  ds.s_q = 2;
  ds.h_q = 128;
  ds.seqlens = mixed_lengths(8, rng, 4133);
  ds.seed = rng();
  golden_case("DeepSeek varlen, causal", ds, true, stream);
  golden_case("DeepSeek varlen, full", ds, false, stream);
  // ProblemSpec's fields in order: s_q, h_q, seqlens, page_size, spread, seed, h_kv, d_qk, d_v,
  // separate_v.
  const ct::ProblemSpec gqa{3, 12, {0, 17, 300, 1000}, 16, 1.0, rng(), 3, 80, 72, true};
  golden_case("GQA 12/3, d 80/72, separate V, page 16", gqa, true, stream);
  const ct::ProblemSpec mha{1, 4, {5, 33}, 1, 1.0, rng(), 4, 64, 64, false};
  golden_case("MHA 4/4, d 64, page 1", mha, false, stream);
  if (!quick) {
    ct::ProblemSpec big;
    big.h_q = 128;
    big.seqlens = std::vector<int>(16, 16384);
    big.seed = rng();
    golden_case("b 16, s_q 1, s_k 16384 (time)", big, false, stream);
  }
}

/// The Hopper kernel against the GPU golden at the benchmark's sizes (b 128, s_k 16384), inputs
/// drawn on the GPU: sizes the CPU golden would take minutes for.
void large_sweep(cudaStream_t stream) {
  std::printf("== Hopper kernel against the GPU golden at b 128, s_k 16384\n");
  int dev = 0, major = 0;
  AMLA_CUDA_CHECK(cudaGetDevice(&dev));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9 || !ac::detail::hopper_kernel_built(dev)) {
    std::printf("  skipped: no Hopper kernel on this device or build\n");
    return;
  }
  for (int s_q : {1, 2}) {
    const int b = 128, h_q = 128, s_k = 16384, page = 64;
    const int pages = b * s_k / page;
    const amla::DecodeShape shape{b, s_q, h_q, 1, 576, 512, pages, page, s_k / page};
    DeviceBuffer<amla::bf16> q(shape.q_elems()), kv(shape.kv_elems()), out(shape.out_elems());
    DeviceBuffer<float> lse(shape.lse_elems());
    DeviceBuffer<std::int32_t> table(shape.block_table_elems()), lens(shape.seqlens_elems());
    DeviceBuffer<double> gout(shape.out_elems()), glse(shape.lse_elems());
    const std::uint64_t seed = std::random_device{}();
    ct::fill_random(q.ptr, q.n, seed, 1.0f, stream);
    ct::fill_random(kv.ptr, kv.n, seed + 1, 1.0f, stream);
    std::vector<std::int32_t> t(static_cast<std::size_t>(pages));
    std::iota(t.begin(), t.end(), 0);
    std::shuffle(t.begin(), t.end(), std::mt19937(static_cast<unsigned>(seed)));
    table.upload(t);
    lens.upload(std::vector<std::int32_t>(static_cast<std::size_t>(b), s_k));
    const ac::DeviceDecodeInputs in = device_inputs(shape, q, kv, table, lens);
    ac::CudaGoldenOptions gopt;
    gopt.check_tables = false;
    cudaEvent_t e0, e1;
    AMLA_CUDA_CHECK(cudaEventCreate(&e0));
    AMLA_CUDA_CHECK(cudaEventCreate(&e1));
    AMLA_CUDA_CHECK(cudaEventRecord(e0, stream));
    ac::golden_decode(in, {gout.ptr, glse.ptr}, gopt, stream);
    AMLA_CUDA_CHECK(cudaEventRecord(e1, stream));
    sync_or_die(stream, 300.0, "large golden");
    float ms = 0;
    AMLA_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    const double tflop = 2.0 * b * s_q * h_q * static_cast<double>(s_k) * (576 + 512) / 1e12;
    std::printf("  gpu golden b %d s_q %d s_k %d: %.1f ms (%.2f TFLOP in float64, %.1f TFLOPS)\n",
                b, s_q, s_k, ms, tflop, tflop / (ms * 1e-3));
    const std::vector<double> g = gout.download(), gl = glse.download();
    // The safe forms against the GPU golden; each hardware form against its safe twin, bit for
    // bit except where Lemma 3.1 broke (the raw add's garbage on an O element that is 0 or tiny
    // when a negative step reaches it, amla.cuh: seen at about one element in 10^7-10^8 here,
    // where the long sequences give every element 256 adds).
    struct Sweep {
      const char* name;
      ac::rescale_mode mode;
      amla::pow2_mode rescale;
      bool skip_unmoved;
      int twin;  // index of the safe variant a hardware one must equal, -1: against the golden
    };
    constexpr auto safe = amla::pow2_mode::safe, hw = amla::pow2_mode::hardware;
    const Sweep sweeps[] = {
        {"hopper/standard", ac::rescale_mode::standard, hw, false, -1},
        {"hopper/amla", ac::rescale_mode::amla, safe, false, -1},
        {"hopper/amla-hw", ac::rescale_mode::amla, hw, false, 1},
        {"hopper/amla/skip", ac::rescale_mode::amla, safe, true, -1},
        {"hopper/amla-hw/skip", ac::rescale_mode::amla, hw, true, 3},
    };
    std::vector<amla::bf16> outs[std::size(sweeps)];
    for (std::size_t vi = 0; vi < std::size(sweeps); ++vi) {
      const Sweep& v = sweeps[vi];
      ac::CudaDecodeOptions opt{.mode = v.mode,
                                .kernel = ac::kernel_kind::hopper,
                                .check_tables = false,
                                .rescale = v.rescale,
                                .skip_unmoved = v.skip_unmoved};
      AMLA_CUDA_CHECK(cudaMemsetAsync(out.ptr, 0xFF, out.n * sizeof(amla::bf16), stream));
      AMLA_CUDA_CHECK(cudaMemsetAsync(lse.ptr, 0xFF, lse.n * sizeof(float), stream));
      const ac::DecodeLaunch launch = ac::decode(in, {out.ptr, lse.ptr}, opt, stream);
      sync_or_die(stream, 60.0, "large sweep");
      const std::vector<amla::bf16> o = out.download();
      const std::vector<float> l = lse.download();
      const char* name = v.name;
      if (v.twin >= 0) {
        const std::vector<amla::bf16>& twin = outs[v.twin];
        std::size_t differ = 0;
        for (std::size_t i = 0; i < o.size(); ++i) differ += o[i].bits != twin[i].bits ? 1 : 0;
        g_lemma_garbage += differ;
        std::printf("  %-20s pieces %3d  differs from %s in %zu elements (Lemma 3.1 violations)\n",
                    name, launch.pieces, sweeps[v.twin].name, differ);
        EXPECT(differ <= 64, "large sweep %s s_q %d: %zu elements differ from the safe form", name,
               s_q, differ);
        continue;
      }
      outs[vi] = o;
      double num = 0, den = 0, lse_err = 0;
      std::size_t unwritten = 0;
      for (std::size_t i = 0; i < o.size(); ++i) {
        const double x = o[i].to_float();
        if (std::isnan(x)) ++unwritten;
        num += (x - g[i]) * (x - g[i]);
        den += g[i] * g[i];
      }
      for (std::size_t i = 0; i < l.size(); ++i) {
        if (std::isnan(l[i])) ++unwritten;
        lse_err = std::max(lse_err, std::abs(static_cast<double>(l[i]) - gl[i]));
      }
      const double rel = std::sqrt(num / den);
      std::printf("  %-20s pieces %3d  err %.3e  lse %.2e  unwritten %zu\n", name, launch.pieces,
                  rel, lse_err, unwritten);
      EXPECT(unwritten == 0, "large sweep %s s_q %d: %zu outputs unwritten", name, s_q, unwritten);
      EXPECT(rel < tol_out, "large sweep %s s_q %d: error %.3e", name, s_q, rel);
      EXPECT(lse_err < tol_lse, "large sweep %s s_q %d: lse error %.3e", name, s_q, lse_err);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The split-KV schedule: the plan the GPU computes equals the CPU's, and its balance.

/// What the Hopper kernel's safe AMLA add (rescale.cuh, amla_add_flush) makes of every FP32 pattern
/// u for step k, against its documented semantics: counts[0] elements from the window's low end up
/// (infinities included) whose result is not the raw add; counts[1] finite elements below it whose
/// result is not the signed zero; counts[2] elements of the exact window where the raw add is not
/// numeric/pow2.hpp's pattern_add_intended (Lemma 3.1); counts[3] NaN elements whose result is not
/// NaN. first[c]: a pattern counted in c.
__global__ void safe_add_patterns_kernel(std::int32_t k, unsigned long long* counts,
                                         std::uint32_t* first) {
  const amla::pattern_add_window w = amla::cuda::detail::kept_window(k);
  const float lo_f = __uint_as_float(w.lo);
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i <= 0xFFFFFFFFull; i += stride) {
    const std::uint32_t u = static_cast<std::uint32_t>(i), mag = u & 0x7FFFFFFFu;
    float o = __uint_as_float(u);
    amla::cuda::detail::amla_add_flush(o, static_cast<std::uint32_t>(k), lo_f);
    const std::uint32_t r = __float_as_uint(o), raw = u + static_cast<std::uint32_t>(k);
    int c = -1;
    if (mag > 0x7F800000u) {
      if ((r & 0x7FFFFFFFu) <= 0x7F800000u) c = 3;
    } else if (mag >= w.lo) {
      if (r != raw) {
        c = 0;
      } else if (mag < 0x7F800000u && w.contains(mag) &&
                 r != __float_as_uint(amla::pattern_add_intended(__uint_as_float(u), k))) {
        c = 2;
      }
    } else if (r != (u & 0x80000000u)) {
      c = 1;
    }
    if (c >= 0) {
      atomicAdd(&counts[c], 1ull);
      first[c] = u;
    }
  }
}

/// The safe add on all 2^32 patterns for steps of both signs: the unmoved step with the paper's
/// nudge (8), exponent steps up and down, the clamp's range, and steps with mantissa parts.
void safe_add_patterns(cudaStream_t stream) {
  std::printf("== the safe AMLA add on every FP32 pattern\n");
  const std::int32_t steps[] = {
      0, 8, -8, 1 << 23, -(1 << 23), 3 * (1 << 23) - 7, -(30 << 23) + 5, -9876543, 123456};
  const char* what[4] = {
      "from the window's low end up, not the raw add", "below the window, not the signed zero",
      "in the exact window, the raw add not pattern_add_intended", "NaN, not NaN"};
  DeviceBuffer<unsigned long long> counts(4);
  DeviceBuffer<std::uint32_t> first(4);
  for (const std::int32_t k : steps) {
    AMLA_CUDA_CHECK(cudaMemsetAsync(counts.ptr, 0, 4 * sizeof(unsigned long long), stream));
    safe_add_patterns_kernel<<<1024, 256, 0, stream>>>(k, counts.ptr, first.ptr);
    AMLA_CUDA_CHECK_LAUNCH("safe_add_patterns_kernel");
    sync_or_die(stream, 60, "safe_add_patterns_kernel");
    const std::vector<unsigned long long> n = counts.download();
    const std::vector<std::uint32_t> f = first.download();
    for (int c = 0; c < 4; ++c) {
      EXPECT(n[static_cast<std::size_t>(c)] == 0, "k %d: %llu patterns %s (e.g. 0x%08x)", k,
             n[static_cast<std::size_t>(c)], what[c], f[static_cast<std::size_t>(c)]);
    }
  }
}

/// numeric/amla_step.hpp's device divisions and BF16 rounding of the AMLA scalars against div.rn
/// (__fdiv_rn) and round_bf16_finite on every operand their callers pass: div_rn_rounding on
/// (0) S16 / S32, (1) S32 / S16 and (2) S32 / S32 (float32 mode) for every FP32 S32 in [0.5, 2),
/// S16 its BF16 rounding; div_rn_unit on (3) a / b for every pair of FP32 values within 2^-8 of 1
/// (the c of two frames); a NaN operand on either side of both (NaN); (4) s16_of against
/// round_bf16_finite on every FP32 pattern (a NaN must stay NaN). counts[c]: results whose bits
/// differ; first[2c], first[2c + 1]: the operands' patterns of one.
__global__ void div_rn_unit_kernel(unsigned long long* counts, std::uint32_t* first) {
  namespace ad = amla::detail;
  const auto miss = [&](float x, float y, int c) {
    atomicAdd(&counts[c], 1ull);
    first[2 * c] = __float_as_uint(x);
    first[2 * c + 1] = __float_as_uint(y);
  };
  const auto differ = [&](float got, float want, float x, float y, int c) {
    if (__float_as_uint(got) != __float_as_uint(want)) miss(x, y, c);
  };
  if (blockIdx.x == 0 && threadIdx.x == 0) {  // a NaN operand gives NaN
    const float nan = __uint_as_float(0x7FC00000u);
    if (!isnan(ad::div_rn_rounding(nan, 1.0f)) || !isnan(ad::div_rn_rounding(1.0f, nan))) {
      atomicAdd(&counts[0], 1ull);
    }
    if (!isnan(ad::div_rn_unit(nan, 1.0f)) || !isnan(ad::div_rn_unit(1.0f, nan))) {
      atomicAdd(&counts[3], 1ull);
    }
  }
  const std::uint32_t half = __float_as_uint(0.5f), unit = 1u << 24;  // [0.5, 2): two binades
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < unit; i += stride) {
    const float s32 = __uint_as_float(half + i), s16 = amla::round_bf16_finite(s32);
    differ(ad::div_rn_rounding(s16, s32), __fdiv_rn(s16, s32), s16, s32, 0);
    differ(ad::div_rn_rounding(s32, s16), __fdiv_rn(s32, s16), s32, s16, 1);
    differ(ad::div_rn_rounding(s32, s32), 1.0f, s32, s32, 2);
  }
  const std::uint32_t lo = __float_as_uint(1.0f - 0x1p-8f), hi = __float_as_uint(1.0f + 0x1p-8f);
  for (std::uint32_t a = lo + blockIdx.x; a <= hi; a += gridDim.x) {
    for (std::uint32_t b = lo + threadIdx.x; b <= hi; b += blockDim.x) {
      const float x = __uint_as_float(a), y = __uint_as_float(b);
      differ(ad::div_rn_unit(x, y), __fdiv_rn(x, y), x, y, 3);
    }
  }
  for (std::uint64_t u = blockIdx.x * blockDim.x + threadIdx.x; u < (1ull << 32); u += stride) {
    const float x = __uint_as_float(static_cast<std::uint32_t>(u));
    const float got = ad::s16_of(x), want = amla::round_bf16_finite(x);
    if (isnan(x) ? !isnan(got) : __float_as_uint(got) != __float_as_uint(want)) miss(x, x, 4);
  }
}

/// The AMLA scalars' divisions and BF16 rounding on every operand they take, bit for bit against
/// div.rn and round_bf16_finite.
void div_rn_unit_operands(cudaStream_t stream) {
  std::printf("== AMLA's compensation divisions against div.rn, S16's rounding\n");
  constexpr int sets = 5;
  const char* what[sets] = {"div_rn_rounding S16 / S32", "div_rn_rounding S32 / S16",
                            "div_rn_rounding S32 / S32", "div_rn_unit c / c'",
                            "s16_of against round_bf16_finite"};
  DeviceBuffer<unsigned long long> counts(sets);
  DeviceBuffer<std::uint32_t> first(2 * sets);
  AMLA_CUDA_CHECK(cudaMemsetAsync(counts.ptr, 0, sets * sizeof(unsigned long long), stream));
  div_rn_unit_kernel<<<4096, 256, 0, stream>>>(counts.ptr, first.ptr);
  AMLA_CUDA_CHECK_LAUNCH("div_rn_unit_kernel");
  sync_or_die(stream, 120, "div_rn_unit_kernel");
  const std::vector<unsigned long long> n = counts.download();
  const std::vector<std::uint32_t> f = first.download();
  for (int c = 0; c < sets; ++c) {
    const auto cu = static_cast<std::size_t>(c);
    EXPECT(n[cu] == 0, "%s: %llu results differ (e.g. operands 0x%08x, 0x%08x)", what[c], n[cu],
           f[2 * cu], f[2 * cu + 1]);
  }
}

/// The AMLA scalars' exp2 (rescale.cuh's fast_exp2, ex2.approx.ftz) against exp2f on every argument
/// amla_scalars_log2 passes it: every FP32 x with |x| <= 0.5, and a NaN. counts[0]: results whose
/// bits differ (a NaN must stay NaN); first[0]: the argument's pattern of one.
__global__ void s32_exp2_kernel(unsigned long long* counts, std::uint32_t* first) {
  namespace acd = amla::cuda::detail;
  if (blockIdx.x == 0 && threadIdx.x == 0 && !isnan(acd::fast_exp2(__uint_as_float(0x7FC00000u)))) {
    atomicAdd(&counts[0], 1ull);
    first[0] = 0x7FC00000u;
  }
  const std::uint32_t top = __float_as_uint(0.5f);  // patterns 0 ..= top, each with either sign
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i <= top;
       i += gridDim.x * blockDim.x) {
    for (const std::uint32_t u : {i, i | 0x80000000u}) {
      const float x = __uint_as_float(u);
      if (__float_as_uint(acd::fast_exp2(x)) != __float_as_uint(exp2f(x))) {
        atomicAdd(&counts[0], 1ull);
        first[0] = u;
      }
    }
  }
}

/// The exp2 of AMLA's S32 on every argument it takes, bit for bit against exp2f.
void s32_exp2_operands(cudaStream_t stream) {
  std::printf("== the exp2 of AMLA's S32 against exp2f\n");
  DeviceBuffer<unsigned long long> counts(1);
  DeviceBuffer<std::uint32_t> first(1);
  AMLA_CUDA_CHECK(cudaMemsetAsync(counts.ptr, 0, sizeof(unsigned long long), stream));
  s32_exp2_kernel<<<4096, 256, 0, stream>>>(counts.ptr, first.ptr);
  AMLA_CUDA_CHECK_LAUNCH("s32_exp2_kernel");
  sync_or_die(stream, 120, "s32_exp2_kernel");
  const unsigned long long n = counts.download()[0];
  EXPECT(n == 0, "fast_exp2: %llu results differ from exp2f over |x| <= 0.5 (e.g. x = 0x%08x)", n,
         first.download()[0]);
}

/// The Hopper kernel's safe rescale of a warp's accumulators (hopper::rescale_rows, safe form):
/// a warp whose every element lies at or above its row's window low end takes the raw add, any
/// other warp the three-instruction form. Against amla_add_flush on each element, bit for bit:
/// each case plants one pattern (a zero, a subnormal, a value just below or exactly at the low end,
/// an infinity, a NaN) in one thread and element of a warp of normal values, for steps of both
/// signs on the two rows. mismatches[0]: elements whose bits differ (a NaN must stay NaN);
/// first[0..2]: the case, thread and element of one.
__global__ void rescale_rows_kernel(const std::int32_t* steps, int n_steps,
                                    unsigned long long* mismatches, int* first) {
  namespace acd = amla::cuda::detail;
  const int c = static_cast<int>(blockIdx.x), lane = static_cast<int>(threadIdx.x);
  const int kind = c % 8;
  const std::int32_t k0 = steps[(c / 8) % n_steps], k1 = steps[(c / 8 / n_steps) % n_steps];
  const int plant_lane = (c * 7) % 32, plant_i = (c * 37) % 128;
  amla::cuda::frame_step st0, st1;
  st0.o_add = k0;
  st1.o_add = k1;
  float o[128], want[128];
  std::uint32_t h = 0x9E3779B9u * static_cast<std::uint32_t>(c * 32 + lane + 1);
  for (int i = 0; i < 128; ++i) {
    h ^= h << 13;
    h ^= h >> 17;
    h ^= h << 5;
    // Normal values of either sign with exponents 2^-20 to 2^11: inside every window here.
    float x = __uint_as_float((h & 0x807FFFFFu) | ((107u + (h >> 23) % 32u) << 23));
    if (lane == plant_lane && i == plant_i) {
      const std::int32_t k = (i & 2) ? k1 : k0;
      const float lo = __uint_as_float(acd::kept_window(k).lo);
      switch (kind) {
        case 1:
          x = 0.0f;
          break;
        case 2:
          x = -0.0f;
          break;
        case 3:  // a subnormal
          x = __uint_as_float(0x00012345u);
          break;
        case 4:  // just below the low end
          x = -__uint_as_float(__float_as_uint(lo) - 1u);
          break;
        case 5:  // the low end itself
          x = lo;
          break;
        case 6:
          x = -__int_as_float(0x7F800000);
          break;
        case 7:
          x = __uint_as_float(0x7FC00001u);
          break;
        default:  // kind 0: nothing planted
          break;
      }
    }
    o[i] = want[i] = x;
    const std::int32_t k = (i & 2) ? k1 : k0;
    acd::amla_add_flush(want[i], static_cast<std::uint32_t>(k),
                        __uint_as_float(acd::kept_window(k).lo));
  }
  acd::hopper::rescale_rows<amla::cuda::rescale_mode::amla, true>(o, st0, st1);
  for (int i = 0; i < 128; ++i) {
    // A NaN stays NaN (its payload is not part of the semantics: with both steps 0 the rescale
    // returns at once and keeps it); every other element bit for bit.
    const bool same =
        want[i] != want[i] ? o[i] != o[i] : __float_as_uint(o[i]) == __float_as_uint(want[i]);
    if (!same) {
      atomicAdd(mismatches, 1ull);
      first[0] = c;
      first[1] = lane;
      first[2] = i;
    }
  }
}

void safe_rescale_rows(cudaStream_t stream) {
  std::printf("== the Hopper kernel's safe rescale of a warp's accumulators\n");
  const std::vector<std::int32_t> steps = {0,       8,       -8, -(1 << 23), -(30 << 23) + 5,
                                           1 << 23, -9876543};
  const int n = static_cast<int>(steps.size());
  DeviceBuffer<std::int32_t> d_steps(steps.size());
  d_steps.upload(steps);
  DeviceBuffer<unsigned long long> mismatches(1);
  DeviceBuffer<int> first(3);
  AMLA_CUDA_CHECK(cudaMemsetAsync(mismatches.ptr, 0, sizeof(unsigned long long), stream));
  const int cases = 8 * n * n;
  rescale_rows_kernel<<<cases, 32, 0, stream>>>(d_steps.ptr, n, mismatches.ptr, first.ptr);
  AMLA_CUDA_CHECK_LAUNCH("rescale_rows_kernel");
  sync_or_die(stream, 60, "rescale_rows_kernel");
  const unsigned long long bad = mismatches.download()[0];
  const std::vector<int> f = first.download();
  std::printf(
      "  %d warps (8 planted patterns x %d x %d steps): %llu elements differ from "
      "amla_add_flush\n",
      cases, n, n, bad);
  EXPECT(bad == 0, "%llu elements differ from amla_add_flush (e.g. case %d, lane %d, element %d)",
         bad, f[0], f[1], f[2]);
}

void schedule_checks(std::mt19937_64& rng, cudaStream_t stream) {
  std::printf(
      "== split-KV plan on the GPU against the CPU schedule (problem/split_schedule.hpp)\n");
  int sms = 0, dev = 0;
  AMLA_CUDA_CHECK(cudaGetDevice(&dev));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  int mismatches = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int batch = std::uniform_int_distribution<int>(1, trial < 50 ? 300 : 3000)(rng);
    const int row_blocks = std::uniform_int_distribution<int>(1, 8)(rng);
    std::vector<std::int32_t> lens(static_cast<std::size_t>(batch));
    for (auto& l : lens) {
      const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
      l = kind == 0 ? 0 : std::uniform_int_distribution<int>(1, kind == 3 ? 100000 : 2000)(rng);
    }
    amla::SplitScheduleOptions o;
    // Every third trial as if on a GPU of up to 8192 SMs: a wave of up to 8192 pieces, so that
    // batches of thousands are cut and the search has thousands of candidates.
    o.sms = trial % 3 == 2 ? std::uniform_int_distribution<int>(1, 8192)(rng) : sms;
    DeviceBuffer<std::int32_t> d_lens(lens.size());
    d_lens.upload(lens);
    const amla::SplitSchedule gpu =
        ac::detail::split_plan::plan_to_host(d_lens.ptr, batch, row_blocks, o, stream);
    const amla::SplitSchedule cpu = amla::make_split_schedule(lens, row_blocks, o);
    const bool same = gpu.slot_prefix == cpu.slot_prefix && gpu.piece_prefix == cpu.piece_prefix &&
                      gpu.scalars.piece_blocks == cpu.scalars.piece_blocks &&
                      gpu.num_slots == cpu.num_slots;
    mismatches += same ? 0 : 1;
  }
  std::printf(
      "  60 random batches (up to 3000 requests, a third of them on up to 8192 SMs): %d plans "
      "differ from the CPU's\n",
      mismatches);
  EXPECT(mismatches == 0, "%d GPU plans differ from the CPU schedule", mismatches);
  // The balance of the benchmark's shapes on this GPU (row blocks: s_q * 128 / 64).
  struct Shape {
    int batch, s_q, s_k;
  };
  for (const Shape& sh :
       {Shape{128, 1, 1024}, Shape{128, 2, 16384}, Shape{16, 2, 4096}, Shape{1, 2, 16384}}) {
    amla::SplitScheduleOptions o;
    o.sms = sms;
    const std::vector<std::int32_t> lens(static_cast<std::size_t>(sh.batch), sh.s_k);
    const amla::SplitScheduleReplay r = amla::replay_split_schedule(
        amla::make_split_schedule(lens, 2 * sh.s_q, o).view(), 2 * sh.s_q, sms);
    std::printf(
        "  b %3d s_q %d s_k %5d: %d pieces, makespan %lld blocks, imbalance %.3f, %d split "
        "requests\n",
        sh.batch, sh.s_q, sh.s_k, r.pieces, static_cast<long long>(r.makespan), r.imbalance,
        r.split_requests);
  }
}

/// The piece list plan_decode wrote for a batch the schedule cuts (s_q 2, h_q 128: four row blocks
/// a request) against the CPU schedule of the same lengths: entry i gives piece i as
/// split_schedule::piece_at finds it, and every entry past the last piece has request -1.
void check_piece_list(int batch, const std::vector<int>& lens, const ac::DecodePlan& plan,
                      const char* mode_name, cudaStream_t stream) {
  amla::SplitScheduleOptions o;
  o.sms = device_sms();
  o.block_keys = ac::detail::hopper::block_keys;
  const std::vector<std::int32_t> lens32(lens.begin(), lens.end());
  const amla::SplitSchedule cpu = amla::make_split_schedule(lens32, 4, o);
  const ac::detail::plan_arrays a =
      ac::detail::plan_arrays_in(const_cast<void*>(plan.memory), batch);
  std::vector<ac::detail::split_plan::piece_entry> list(static_cast<std::size_t>(plan.slots));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(list.data(), a.pieces, list.size() * sizeof(list[0]),
                                  cudaMemcpyDeviceToHost, stream));
  sync_or_die(stream, 60.0, "the plan's piece list");
  const int pieces = amla::split_schedule::piece_count(cpu.view());
  int wrong = 0;
  for (int i = 0; i < plan.slots; ++i) {
    const auto& e = list[static_cast<std::size_t>(i)];
    amla::SplitPiece want;
    if (!amla::split_schedule::piece_at(cpu.view(), i, want)) {
      wrong += e.request != -1 ? 1 : 0;
      continue;
    }
    if (e.request < 0 || e.request >= batch) {
      ++wrong;
      continue;
    }
    const amla::SplitPiece got = amla::split_schedule::piece_of(
        e.request, amla::split_schedule::blocks_of(lens32[static_cast<std::size_t>(e.request)], 64),
        e.pieces, e.index, e.first_slot);
    wrong += got.request != want.request || got.block_begin != want.block_begin ||
                     got.block_end != want.block_end || got.slot != want.slot
                 ? 1
                 : 0;
  }
  const int split_wrong = split_pieces_wrong(a, batch, plan.slots, cpu, stream);
  std::printf(
      "  b %2d %-8s: the plan lists %d pieces in %d entries, %d unlike the CPU schedule's; "
      "%d of its split requests' first pieces unlike\n",
      batch, mode_name, pieces, plan.slots, wrong, split_wrong);
  EXPECT(wrong == 0 && pieces <= plan.slots && split_wrong == 0,
         "b %d %s: %d of the plan's %d piece entries and %d split requests' first pieces differ "
         "from the CPU schedule (%d pieces)",
         batch, mode_name, wrong, plan.slots, split_wrong, pieces);
}

/// Plan once, decode many: at the split-KV shapes (b 16, s_q 2, s_k 4096 and b 1, s_q 2,
/// s_k 16384, as the benchmark's), decode() with a plan made by plan_decode equals decode()
/// sizing the schedule itself bit for bit, in both modes and on a second reuse; a plan of another
/// batch or of a GPU of another size is refused on the host naming options.plan.
void plan_reuse(cudaStream_t stream) {
  std::printf("== a reused split-KV plan (plan_decode)\n");
  int device = 0, major = 0, minor = 0;
  AMLA_CUDA_CHECK(cudaGetDevice(&device));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (g_simple_only || !(major == 9 && minor == 0 && ac::detail::hopper_kernel_built(device))) {
    std::printf("  skipped: the Hopper kernel does not run here\n");
    return;
  }
  struct Shape {
    int batch, s_k;
    /// Lengths s_k, s_k - 250, s_k - 500, ...: requests cut into different counts; with a batch
    /// that fills a wave (33 requests at s_q 2, h_q 128 on 132 SMs) 1 + (997 i mod s_k), which the
    /// plan lists longest first.
    bool mixed;
  };
  std::optional<ac::DecodePlan> b16_plan;
  int sms = 0;
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int wave = sms / 4;  // requests of one wave at s_q 2, h_q 128: four row blocks each
  for (const Shape sh : {Shape{16, 4096, false}, Shape{16, 4096, true}, Shape{1, 16384, false},
                         Shape{wave + 7, 4096, true}}) {
    const bool fills_wave = sh.batch >= wave;
    std::vector<int> lens(static_cast<std::size_t>(sh.batch), sh.s_k);
    for (std::size_t i = 0; sh.mixed && i < lens.size(); ++i) {
      const int ii = static_cast<int>(i);
      lens[i] = fills_wave ? 1 + (997 * ii) % sh.s_k : sh.s_k - 250 * ii;
    }
    const ct::Problem hp(ct::ProblemSpec{2, 128, lens, 64, 1.0, 29});
    const amla::DecodeShape& shape = hp.shape();
    DeviceProblem dev(hp);  // not const: the stale-plan check rewrites its lengths
    DeviceBuffer<amla::bf16> out(shape.out_elems());
    DeviceBuffer<float> lse(shape.lse_elems());
    ac::CudaDecodeOptions opt;
    opt.kernel = ac::kernel_kind::hopper;
    DeviceBuffer<std::uint8_t> workspace(ac::decode_workspace_bytes(shape, opt));
    opt.workspace = workspace.ptr;
    opt.workspace_bytes = workspace.n;
    for (const ac::rescale_mode mode : {ac::rescale_mode::standard, ac::rescale_mode::amla}) {
      const char* mode_name = mode == ac::rescale_mode::standard ? "standard" : "amla";
      opt.mode = mode;
      opt.plan = nullptr;
      const ac::DecodeLaunch sized = ac::decode(dev.in, {out.ptr, lse.ptr}, opt, stream);
      sync_or_die(stream, 60.0, "decode, sized in the call");
      const std::vector<amla::bf16> out_sized = out.download();
      const std::vector<float> lse_sized = lse.download();
      const ac::DecodePlan plan = ac::plan_decode(dev.in, opt, stream);
      if (sh.batch == 16) b16_plan = plan;
      if (!fills_wave) check_piece_list(sh.batch, lens, plan, mode_name, stream);
      if (fills_wave) {
        // The plan lists the requests longest first (block counts not increasing, ties in index
        // order): a permutation of the batch.
        const ac::detail::plan_arrays a =
            ac::detail::plan_arrays_in(const_cast<void*>(plan.memory), sh.batch);
        std::vector<std::int32_t> order(static_cast<std::size_t>(sh.batch));
        AMLA_CUDA_CHECK(cudaMemcpyAsync(order.data(), a.order, order.size() * sizeof(std::int32_t),
                                        cudaMemcpyDeviceToHost, stream));
        sync_or_die(stream, 60.0, "the plan's order");
        const auto blocks = [&](std::int32_t b) {
          return (lens[static_cast<std::size_t>(b)] + 63) / 64;
        };
        std::vector<bool> seen(order.size(), false);
        bool ok = true;
        for (std::size_t i = 0; i < order.size(); ++i) {
          const std::int32_t b = order[i];
          if (b < 0 || b >= sh.batch || seen[static_cast<std::size_t>(b)]) {
            ok = false;
            break;
          }
          seen[static_cast<std::size_t>(b)] = true;
          if (i > 0) {
            const std::int32_t a0 = order[i - 1];
            ok = ok && (blocks(a0) > blocks(b) || (blocks(a0) == blocks(b) && a0 < b));
          }
        }
        std::printf(
            "  b %2d (mixed, a wave or more) %-8s: the plan lists the requests longest "
            "first: %s\n",
            sh.batch, mode_name, ok ? "yes" : "no");
        EXPECT(ok, "b %d %s: the plan's order is not the requests longest first", sh.batch,
               mode_name);
      }
      opt.plan = &plan;
      for (int use = 1; use <= 2; ++use) {
        const std::vector<amla::bf16> poison(out.n, amla::bf16::from_bits(0x7FA5));
        out.upload(poison);
        lse.upload(std::vector<float>(lse.n, std::numeric_limits<float>::quiet_NaN()));
        const ac::DecodeLaunch reused = ac::decode(dev.in, {out.ptr, lse.ptr}, opt, stream);
        sync_or_die(stream, 60.0, "decode with a reused plan");
        const std::vector<amla::bf16> out_reused = out.download();
        const std::vector<float> lse_reused = lse.download();
        std::size_t differ = 0;
        for (std::size_t i = 0; i < out_reused.size(); ++i) {
          differ += out_reused[i].bits != out_sized[i].bits ? 1 : 0;
        }
        const bool lse_same =
            std::memcmp(lse_reused.data(), lse_sized.data(), lse_sized.size() * sizeof(float)) == 0;
        std::printf(
            "  b %2d s_k %5d%s %-8s: %d pieces, use %d of the plan: %zu of %zu outputs "
            "differ from the sized call, lse %s\n",
            sh.batch, sh.s_k, sh.mixed ? " (mixed)" : "", mode_name, reused.pieces, use, differ,
            out_reused.size(), lse_same ? "identical" : "differs");
        EXPECT(reused.pieces == sized.pieces, "b %d %s: %d pieces with the plan, %d without",
               sh.batch, mode_name, reused.pieces, sized.pieces);
        EXPECT(differ == 0 && lse_same, "b %d %s, use %d: %zu outputs differ, lse %s", sh.batch,
               mode_name, use, differ, lse_same ? "identical" : "differs");
      }
      if (fills_wave) {
        // That the CTAs take request order[i] as piece i, and not request i: an order naming the
        // last request at every place (not a permutation: no plan_decode writes one) makes every
        // CTA compute that request, so it alone is written and the others keep the poison.
        const ac::detail::plan_arrays a =
            ac::detail::plan_arrays_in(const_cast<void*>(plan.memory), sh.batch);
        const std::vector<std::int32_t> last(static_cast<std::size_t>(sh.batch), sh.batch - 1);
        AMLA_CUDA_CHECK(cudaMemcpyAsync(a.order, last.data(), last.size() * sizeof(std::int32_t),
                                        cudaMemcpyHostToDevice, stream));
        out.upload(std::vector<amla::bf16>(out.n, amla::bf16::from_bits(0x7FA5)));
        ac::decode(dev.in, {out.ptr, lse.ptr}, opt, stream);
        sync_or_die(stream, 60.0, "decode with an order naming one request");
        const std::vector<amla::bf16> got = out.download();
        const std::size_t per_request = got.size() / static_cast<std::size_t>(sh.batch);
        std::size_t written = 0, last_same = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          const bool is_last = i / per_request == static_cast<std::size_t>(sh.batch - 1);
          if (!is_last) written += got[i].bits != 0x7FA5 ? 1 : 0;
          if (is_last) last_same += got[i].bits == out_sized[i].bits ? 1 : 0;
        }
        std::printf(
            "  b %2d (mixed) %-8s: an order naming request %d everywhere: %zu outputs of "
            "the others written, %zu of %zu of its own as without a plan\n",
            sh.batch, mode_name, sh.batch - 1, written, last_same, per_request);
        EXPECT(written == 0 && last_same == per_request,
               "b %d %s: the CTAs do not take the plan's order (%zu other outputs written, %zu of "
               "%zu of request %d right)",
               sh.batch, mode_name, written, last_same, per_request, sh.batch - 1);
      }
      if (sh.batch == 16 && !sh.mixed) {
        // That the CTAs take piece i from the piece list, and not by piece_at's search: with
        // entry 0 a copy of entry 1, no CTA computes piece 0, so request 0's first slot keeps
        // the NaN its partials were poisoned with and only request 0's outputs change.
        const ac::detail::plan_arrays a =
            ac::detail::plan_arrays_in(const_cast<void*>(plan.memory), sh.batch);
        ac::detail::split_plan::piece_entry saved{};
        AMLA_CUDA_CHECK(
            cudaMemcpyAsync(&saved, a.pieces, sizeof(saved), cudaMemcpyDeviceToHost, stream));
        AMLA_CUDA_CHECK(cudaMemcpyAsync(a.pieces, a.pieces + 1, sizeof(saved),
                                        cudaMemcpyDeviceToDevice, stream));
        const std::size_t plan_bytes = plan_region_bytes(shape, opt);
        AMLA_CUDA_CHECK(
            cudaMemsetAsync(workspace.ptr + plan_bytes, 0xFF, workspace.n - plan_bytes, stream));
        ac::decode(dev.in, {out.ptr, lse.ptr}, opt, stream);
        sync_or_die(stream, 60.0, "decode with piece 0 listed as piece 1");
        const std::vector<amla::bf16> got = out.download();
        AMLA_CUDA_CHECK(
            cudaMemcpyAsync(a.pieces, &saved, sizeof(saved), cudaMemcpyHostToDevice, stream));
        sync_or_die(stream, 60.0, "the piece list restored");
        const std::size_t per_request = got.size() / static_cast<std::size_t>(sh.batch);
        std::size_t first_differ = 0, others_differ = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          const bool differ = got[i].bits != out_sized[i].bits;
          (i < per_request ? first_differ : others_differ) += differ ? 1 : 0;
        }
        std::printf(
            "  b %2d %-8s: piece 0 listed as piece 1: %zu of request 0's %zu outputs and %zu of "
            "the others' differ from the sized call\n",
            sh.batch, mode_name, first_differ, per_request, others_differ);
        EXPECT(first_differ > 0 && others_differ == 0,
               "b %d %s: the CTAs do not take their pieces from the piece list (%zu of request "
               "0's outputs and %zu of the others' changed)",
               sh.batch, mode_name, first_differ, others_differ);
      }
      if (sh.mixed && !fills_wave) {
        // The lengths change under the plan: request 0 (the longest, cut into pieces) now holds one
        // key and needs one piece. Checking its tables, decode() refuses the plan on the host.
        std::vector<std::int32_t> shorter(lens.begin(), lens.end());
        shorter[0] = 1;
        dev.lens.upload(shorter);
        expect_throw<amla::invalid_argument>("a plan older than the lengths", "seqlens[0] = 1",
                                             [&] {
                                               ac::decode(dev.in, {out.ptr, lse.ptr}, opt, stream);
                                             });
        dev.lens.upload(std::vector<std::int32_t>(lens.begin(), lens.end()));
      }
    }
    if (sh.batch == 1 && b16_plan) {
      opt.plan = &*b16_plan;
      expect_throw<amla::invalid_argument>("b 16's plan for b 1", "options.plan", [&] {
        ac::decode(dev.in, {out.ptr, lse.ptr}, opt, stream);
      });
      ac::DecodePlan other = *b16_plan;
      other.batch = 1;
      other.slots += 1;
      opt.plan = &other;
      expect_throw<amla::invalid_argument>("a plan of another GPU's slots", "options.plan", [&] {
        ac::decode(dev.in, {out.ptr, lse.ptr}, opt, stream);
      });
    }
  }
}

/// split_plan::order_kernel past longest_first_max_batch: the requests stay in index order
/// (lengths growing with the index, which longest first would reverse).
void order_beyond_limit(cudaStream_t stream) {
  std::printf("== the longest-first order past its batch limit\n");
  namespace sp = ac::detail::split_plan;
  const int batch = sp::longest_first_max_batch + 1;
  std::vector<std::int32_t> lens(static_cast<std::size_t>(batch));
  for (int b = 0; b < batch; ++b) lens[static_cast<std::size_t>(b)] = 1 + b;
  DeviceBuffer<std::int32_t> d_lens(lens.size()), order(lens.size());
  d_lens.upload(lens);
  amla::SplitScheduleView v;
  v.batch = batch;
  v.block_keys = ac::detail::hopper::block_keys;
  v.seqlens = d_lens.ptr;
  sp::order_kernel<>
      <<<(batch + sp::order_threads - 1) / sp::order_threads, sp::order_threads, 0, stream>>>(
          v, order.ptr);
  AMLA_CUDA_CHECK_LAUNCH("order_kernel");
  sync_or_die(stream, 60.0, "order_kernel");
  const std::vector<std::int32_t> got = order.download();
  std::size_t moved = 0;
  for (std::size_t b = 0; b < got.size(); ++b) moved += got[b] != static_cast<std::int32_t>(b);
  std::printf("  b %d: %zu requests out of index order\n", batch, moved);
  EXPECT(moved == 0, "order_kernel past its limit moved %zu of %d requests", moved, batch);
}

int run_gpu(bool quick) {
  // AMLA_CUDA_TEST_SEED replays a run's problems (its printed seed): two builds of the kernels
  // run on the same inputs print the same distances when their outputs are the same.
  std::random_device rd;
  std::uint64_t seed0 = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  if (const char* seed_env = std::getenv("AMLA_CUDA_TEST_SEED")) {
    char* end = nullptr;
    errno = 0;
    seed0 = std::strtoull(seed_env, &end, 10);
    if (*seed_env == '\0' || *end != '\0' || errno != 0 || *seed_env == '-') {
      std::fprintf(stderr,
                   "cuda_decode: AMLA_CUDA_TEST_SEED = '%s' violates: must be a decimal unsigned "
                   "64-bit integer (the seed a run printed)\n",
                   seed_env);
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    std::printf("gpu: no CUDA device visible: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  AMLA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("gpu: %s, compute capability %d.%d, %d SMs%s\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, g_simple_only ? " (simple kernel only)" : "");
  cudaStream_t stream;
  AMLA_CUDA_CHECK(cudaStreamCreate(&stream));
  table_validation(stream);
  output_alignment(stream);
  plan_reuse(stream);
  order_beyond_limit(stream);

  std::printf("== seed %llu\n", static_cast<unsigned long long>(seed0));
  std::mt19937_64 rng(seed0);
  schedule_checks(rng, stream);
  safe_add_patterns(stream);
  div_rn_unit_operands(stream);
  s32_exp2_operands(stream);
  safe_rescale_rows(stream);
  hostile_checks(stream);
  golden_checks(quick, rng, stream);
  if (!quick && !g_simple_only) large_sweep(stream);
  std::printf("== correctness\n");
  std::vector<Case> cases = {
      {"one key", 1, 1, 16, {1}, 64, false, 1.0f},
      {"one block", 1, 1, 64, {64}, 64, false, 1.0f},
      {"two blocks", 1, 1, 128, {128}, 64, false, 1.0f},
      {"tails", 3, 2, 16, {0, 63, 65}, 64, true, 1.0f},
      {"three blocks", 3, 1, 64, {130, 191, 150}, 64, false, 2.0f},
      {"long", 3, 2, 128, {4133, 1, 64}, 64, true, 1.0f},
      {"long, b 1 (split-KV)", 1, 2, 128, {4133}, 64, false, 1.0f},
      {"page 16", 3, 2, 128, {100, 4133, 17}, 16, true, 1.0f},
      {"page 128", 3, 1, 64, {129, 500, 0}, 128, false, 1.0f},
      {"page 1 (simple only)", 2, 1, 16, {5, 33}, 1, true, 1.0f},
      {"peaky scores", 3, 1, 128, {1000, 2000, 700}, 64, false, 4.0f},
      {"Lemma 3.1 trap (V column 5 zero, then a jump of the max)",
       2,
       1,
       64,
       {128, 200},
       64,
       false,
       1.0f,
       5},
  };
  {
    Case gqa{"GQA 8/2, d 128/64, separate V (simple only)", 3, 2, 8, {0, 70, 300}, 16, true, 1.0f};
    gqa.h_kv = 2;
    gqa.d_qk = 128;
    gqa.d_v = 64;
    gqa.separate_v = true;
    cases.push_back(gqa);
    std::vector<int> skewed(64, 1);
    skewed[17] = 4133;
    cases.push_back({"imbalanced: one long request among 63 one-key ones", 64, 1, 128, skewed, 64,
                     false, 1.0f});
    // More requests than a wave's pieces (h_q 128, s_q 2: 33 on 132 SMs): the sized schedule
    // cuts no request, and no plan is made or read (whole_requests).
    std::vector<int> many(80);
    std::uniform_int_distribution<int> short_len(0, 300);
    for (int& l : many) l = short_len(rng);
    cases.push_back(
        {"a batch past a wave: 80 requests of 0-300 keys", 80, 2, 128, many, 64, true, 1.0f});
  }
  if (!quick) {
    // The full grid: b x s_q x causal x h_q with mixed lengths (0, 1, 63, 64, 65, 4133, random).
    for (int b : {1, 3, 64, 128}) {
      for (int s_q : {1, 2}) {
        for (bool causal : {false, true}) {
          for (int h_q : {16, 64, 128}) {
            Case c{"grid", b, s_q, h_q, mixed_lengths(b, rng, 4133), 64, causal, 1.0f};
            if (b == 1) c.lens = {4133};
            c.name = "grid b" + std::to_string(b) + " s" + std::to_string(s_q) +
                     (causal ? " causal" : " full") + " h" + std::to_string(h_q);
            cases.push_back(c);
          }
        }
      }
    }
  }
  for (std::size_t i = 0; i < cases.size(); ++i) run_case(cases[i], seed0 + 1000003 * i, stream);
  AMLA_CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("gpu: hardware-form AMLA garbage outside the trap case: %zu elements\n",
              g_lemma_garbage);
  // AMLA mode must agree with the CPU AMLA recurrence as closely as standard mode agrees with
  // the CPU Base recurrence: compare the mean distances over all cases.
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  };
  const double d_std = mean(g_vs_cpu_std), d_amla = mean(g_vs_cpu_amla);
  if (!g_simple_only) {
    std::printf(
        "gpu: mean distance hopper/standard to CPU Base %.3e, hopper/amla to CPU AMLA %.3e\n",
        d_std, d_amla);
    // On a compute capability 9.0 device the Hopper kernel must have run (an sm_90a build).
    const bool hopper_device = prop.major == 9 && prop.minor == 0;
    EXPECT(!hopper_device || !g_vs_cpu_amla.empty(),
           "no hopper/amla case ran on a 9.0 device (AMLA_CUDA_ARCHITECTURES lacks 90a?)");
    EXPECT(d_amla <= 1.5 * d_std + 1e-4,
           "hopper/amla is further from CPU AMLA (%.3e) than hopper/standard from CPU Base (%.3e)",
           d_amla, d_std);
  }
  std::printf("gpu: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "gpu";
  int modes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--simple-only") {
      g_simple_only = true;
    } else {
      mode = a;
      ++modes;
    }
  }
  if (const char* env = std::getenv("AMLA_CUDA_SIMPLE_ONLY"); env != nullptr && env[0] == '1') {
    g_simple_only = true;
  }
  try {
    if (modes <= 1 && mode == "validate") return run_validate();
    if (modes <= 1 && mode == "gpu") return run_gpu(false);
    if (modes <= 1 && mode == "gpu-quick") return run_gpu(true);
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 1;
  }
  std::printf("usage: %s validate|gpu|gpu-quick [--simple-only]\n", argv[0]);
  return 2;
}
