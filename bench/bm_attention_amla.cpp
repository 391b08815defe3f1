// bench/bm_attention_amla.cpp: speed of the AMLA recurrence (attention/amla.hpp) on DeepSeek
// decode shapes, against plain float GEMMs of the same shapes and Base, in the same run.
//
// Workload: h_q 128, h_kv 1, s_q 1, d_qk 576, d_v 512 (V = first 512 columns of the K cache),
// 8192 keys per sequence in 64-key pages, BF16 cache; batch 1 (one head group) and batch 8.
// Work per head group: 2 * 128 * 8192 * (576 + 512) = 2.28 GFLOP.
//
// Family attn_amla (the ratio table divides each variant's time by the baseline's, same run):
//   baseline/B    plain Eigen float GEMMs S = Q K^T and O = P V on dense float operands, with the
//                 driver's decomposition (groups, then 64-row chunks) on every thread: no gather,
//                 no softmax, no rounding
//   amla/B        amla_decode, BF16 emulation, hardware add (the paper's kernel)
//   amla_safe/B   the same with the safe add (violation tracking and repair; no violation occurs
//                 on these inputs, so this measures the cost of the check alone)
//   amla_f32/B    amla_decode in float32 mode
//   base/B        base_decode, BF16 emulation (for comparison)
// Each benchmark reports FLOP/s (2.28 GFLOP per head group) and the thread count: hardware
// concurrency, or the environment variable AMLA_BENCH_THREADS.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "amla/attention/amla.hpp"
#include "amla/attention/decode_problem.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/problem_builder.hpp"
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
  o.rows_per_task = kRowsPerTask;
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

void set_counters(benchmark::State& state, const att::DecodeShape& s) {
  const double flop = 2.0 * s.batch * s.h_q * s.s_q * static_cast<double>(kKeys) * (s.d_qk + s.d_v);
  state.counters["FLOP/s"] = benchmark::Counter(flop * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
  state.counters["threads"] = static_cast<double>(amla::detail::resolve_threads(bench_threads()));
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

void run_base(const Problem& p, Result& r) {
  att::base_decode(p.inputs(), options(), r.view());
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

/// The same two products on dense float operands, with the driver's task decomposition.
void gemm_only(benchmark::State& state) {
  using M = amla::MatrixF;
  const Problem& p = problem(static_cast<int>(state.range(0)));
  const att::DecodeShape& s = p.shape;
  const int rows = s.rows_per_group();
  const int chunks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  struct Group {
    M q, k, pm, o;
  };
  std::vector<Group> groups(static_cast<std::size_t>(s.batch));
  for (auto& g : groups) {
    g.q = M::Random(rows, s.d_qk);
    g.k = M::Random(kKeys, s.d_qk);  // V = its first d_v columns, as in MLA
    g.pm = M::Random(rows, kKeys);
    g.o = M::Zero(rows, s.d_v);
  }
  const unsigned threads = amla::detail::resolve_threads(bench_threads());
  std::vector<M> scores(static_cast<std::size_t>(s.batch * chunks), M(kRowsPerTask, kKeys));
  for (auto _ : state) {
    amla::detail::parallel_for(
        static_cast<std::size_t>(s.batch * chunks), threads, [&](std::size_t task) {
          auto& g = groups[task / static_cast<std::size_t>(chunks)];
          const int r0 = static_cast<int>(task % static_cast<std::size_t>(chunks)) * kRowsPerTask;
          const int n = std::min(kRowsPerTask, rows - r0);
          scores[task].topRows(n).noalias() = g.q.middleRows(r0, n) * g.k.transpose();
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

BENCHMARK(gemm_only)->Name("attn_amla/baseline")->Apply(batches);
BENCHMARK_CAPTURE(paged, amla, run_amla)->Name("attn_amla/amla")->Apply(batches);
BENCHMARK_CAPTURE(paged, amla_safe, run_amla_safe)->Name("attn_amla/amla_safe")->Apply(batches);
BENCHMARK_CAPTURE(paged, amla_f32, run_amla_f32)->Name("attn_amla/amla_f32")->Apply(batches);
BENCHMARK_CAPTURE(paged, base, run_base)->Name("attn_amla/base")->Apply(batches);

AMLA_BENCHMARK_MAIN_WITH_RATIOS()
