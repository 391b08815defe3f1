// bench/bm_attention.cpp: speed of the attention recurrences on DeepSeek decode shapes.
//
// Workload: h_q 128, h_kv 1, s_q 1, d_qk 576, d_v 512 (V = first 512 columns of the K cache),
// 8192 keys per sequence in 64-key pages (shuffled), BF16 cache; batch 1 (one head group) and
// batch 8. Work per head group: 2 * 128 * 8192 * (576 + 512) = 2.28 GFLOP.
//
// Families (the ratio table divides each variant's time by its family's baseline, same run):
//   attn_f32/baseline/B   plain Eigen float GEMMs of the same shapes, S = Q K^T and O = P V, on
//                         every thread (the driver's decomposition: groups, then 64-row chunks);
//                         operands already dense and in float: no gather, no softmax
//   attn_f32/base/B       base_decode, BF16 emulation (paged entry point: gather + Base + scatter)
//   attn_f32/base_f32/B   base_decode, float32 mode
//   attn_f32/split_kv/B   split_kv_decode, 4 splits of 64-key blocks, BF16 emulation
//   attn_f32/amla/B       amla_decode, BF16 emulation, hardware integer add (the AMLA kernel)
//   attn_f32/amla_safe/B  amla_decode with the safe add: Lemma 3.1 checks and repair (no violation
//                         occurs on these inputs, so this is the cost of the check alone)
//   attn_f32/amla_f32/B   amla_decode, float32 mode
//   attn_f32/driver/B     the paged driver with a core that does nothing: gather + scatter cost
//   attn_f64/baseline/B   the same GEMMs in float64 (golden's arithmetic)
//   attn_f64/golden/B     golden_decode
// Every benchmark reports FLOP/s (2.28 GFLOP per head group, whatever the variant computes) and
// the thread count: hardware concurrency, or the environment variable AMLA_BENCH_THREADS (for
// runs pinned with taskset, which std::thread::hardware_concurrency does not see).
// Adding a recurrence: write a `void run_x(const Problem&, Result&)` and register it with
// AMLA_ATTENTION_BENCH(attn_f32, x, run_x) below.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "amla/attention/amla.hpp"
#include "amla/attention/driver.hpp"
#include "amla/attention/golden.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/problem_builder.hpp"
#include "amla/attention/split_kv.hpp"
#include "ratio_reporter.hpp"

namespace {

namespace att = amla::attention;
using Problem = att::DecodeProblem<amla::bf16>;
using Result = att::DecodeResult<float, float>;

constexpr int kKeys = 8192;
constexpr int kRowsPerTask = 64;  // DecodeOptions' default

int bench_threads() {
  static const int n = [] {
    const char* env = std::getenv("AMLA_BENCH_THREADS");
    return env ? std::atoi(env) : 0;
  }();
  return n;
}

att::DecodeOptions options() {
  att::DecodeOptions o;
  o.threads = bench_threads();
  return o;
}

/// One DeepSeek problem per batch size, built once per process.
const Problem& problem(int batch) {
  static std::map<int, std::unique_ptr<Problem>> cache;
  static std::mutex mu;
  const std::lock_guard<std::mutex> lock(mu);
  auto& p = cache[batch];
  if (!p) {
    p = std::make_unique<Problem>(
        att::ProblemBuilder::deepseek_mla(batch, kKeys).seed(2025).build<amla::bf16>());
  }
  return *p;
}

double flops(const att::DecodeShape& s) {
  return 2.0 * s.batch * s.h_q * s.s_q * static_cast<double>(kKeys) * (s.d_qk + s.d_v);
}

void set_counters(benchmark::State& state, const att::DecodeShape& s) {
  state.counters["FLOP/s"] = benchmark::Counter(flops(s) * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
  state.counters["threads"] = static_cast<double>(amla::detail::resolve_threads(bench_threads()));
}

// ---- recurrences over the paged problem ----

void run_base(const Problem& p, Result& r) {
  att::base_decode(p.inputs(), options(), r.view());
}
void run_base_f32(const Problem& p, Result& r) {
  att::base_decode(p.inputs(), options(), r.view(), att::BaseOptions{att::precision::float32, 512});
}
void run_split_kv(const Problem& p, Result& r) {
  att::SplitKvOptions o;
  o.num_splits = 4;
  o.split = att::BaseOptions{att::precision::bf16, 64};
  att::split_kv_decode(p.inputs(), options(), r.view(), o);
}
void run_amla(const Problem& p, Result& r) {
  att::amla_decode(p.inputs(), options(), r.view());
}
void run_amla_safe(const Problem& p, Result& r) {
  att::AmlaOptions o;
  o.rescale = amla::pow2_mode::safe;
  const auto report = att::amla_decode(p.inputs(), options(), r.view(), o);
  benchmark::DoNotOptimize(report.violations);
}
void run_amla_f32(const Problem& p, Result& r) {
  att::AmlaOptions o;
  o.mode = att::precision::float32;
  att::amla_decode(p.inputs(), options(), r.view(), o);
}
void run_driver_only(const Problem& p, Result& r) {
  att::run_decode<float>("driver", p.inputs(), options(), r.view(), att::operand_gather::as_stored,
                         [](const att::HeadGroup& g, const att::GroupLocation&,
                            Eigen::Ref<amla::MatrixF> out, std::span<float> lse) {
                           out.setZero();
                           for (auto& l : lse) l = 0.0f;
                           benchmark::DoNotOptimize(g.k.data());
                         });
}

template <class Run>
void paged(benchmark::State& state, Run run) {
  const Problem& p = problem(static_cast<int>(state.range(0)));
  Result r(p.shape);
  for (auto _ : state) {
    run(p, r);
    benchmark::DoNotOptimize(r.out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, p.shape);
}

void run_golden(benchmark::State& state) {
  const Problem& p = problem(static_cast<int>(state.range(0)));
  att::DecodeResult<double, double> r(p.shape);
  for (auto _ : state) {
    att::golden_decode(p.inputs(), options(), r.view());
    benchmark::DoNotOptimize(r.out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, p.shape);
}

// ---- GEMM-only baselines: the same products on dense operands, same thread decomposition ----

template <class Scalar>
void gemm_only(benchmark::State& state) {
  using M = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Problem& p = problem(static_cast<int>(state.range(0)));
  const att::DecodeShape& s = p.shape;
  const int rows = s.rows_per_group();
  const int chunks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  struct Group {
    M q, k, pm, o;
  };
  std::vector<Group> groups(static_cast<std::size_t>(s.batch));
  for (int b = 0; b < s.batch; ++b) {
    auto& g = groups[static_cast<std::size_t>(b)];
    g.q = M::Random(rows, s.d_qk);
    g.k = M::Random(kKeys, s.d_qk);  // V = its first d_v columns, as in MLA
    g.pm = M::Random(rows, kKeys);
    g.o = M::Zero(rows, s.d_v);
  }
  const unsigned threads = amla::detail::resolve_threads(bench_threads());
  std::vector<M> scores(static_cast<std::size_t>(s.batch * chunks));
  for (auto& m : scores) m.resize(kRowsPerTask, kKeys);
  for (auto _ : state) {
    amla::detail::parallel_for(
        static_cast<std::size_t>(s.batch * chunks), threads, [&](std::size_t task) {
          auto& g = groups[task / static_cast<std::size_t>(chunks)];
          const int r0 = static_cast<int>(task % chunks) * kRowsPerTask;
          const int n = std::min(kRowsPerTask, rows - r0);
          auto& sc = scores[task];
          sc.topRows(n).noalias() = g.q.middleRows(r0, n) * g.k.transpose();
          g.o.middleRows(r0, n).noalias() = g.pm.middleRows(r0, n) * g.k.leftCols(s.d_v);
        });
    benchmark::DoNotOptimize(groups.front().o.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, s);
}

void batches(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

#define AMLA_ATTENTION_BENCH(family, variant, fn) \
  BENCHMARK_CAPTURE(paged, variant, fn)->Name(#family "/" #variant)->Apply(batches)

BENCHMARK_TEMPLATE(gemm_only, float)->Name("attn_f32/baseline")->Apply(batches);
AMLA_ATTENTION_BENCH(attn_f32, base, run_base);
AMLA_ATTENTION_BENCH(attn_f32, base_f32, run_base_f32);
AMLA_ATTENTION_BENCH(attn_f32, split_kv, run_split_kv);
AMLA_ATTENTION_BENCH(attn_f32, amla, run_amla);
AMLA_ATTENTION_BENCH(attn_f32, amla_safe, run_amla_safe);
AMLA_ATTENTION_BENCH(attn_f32, amla_f32, run_amla_f32);
AMLA_ATTENTION_BENCH(attn_f32, driver, run_driver_only);
BENCHMARK_TEMPLATE(gemm_only, double)->Name("attn_f64/baseline")->Apply(batches);
BENCHMARK(run_golden)->Name("attn_f64/golden")->Apply(batches);

AMLA_BENCHMARK_MAIN_WITH_RATIOS()
