// bench/bm_numeric.cpp: throughput of amla's numeric core.
//  * bf16_round: amla::round_bf16 over an array (elements/s) against a plain float copy loop of the
//    same array (the memory-bound baseline), and Eigen's own bfloat16 conversion for scale.
//  * gemm: the emulated BF16 GEMM (operands rounded, FP32 accumulation) against Eigen's float GEMM
//    on MLA shapes: [128 x 576] x [576 x 8192] (scores) and [128 x 8192] x [8192 x 512] (P V).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <random>
#include <vector>

#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"
#include "ratio_reporter.hpp"

namespace {

std::vector<float> random_floats(std::size_t n) {
  std::mt19937 rng(42);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// out[i] = f(in[i]) over state.range(0) floats, counted in elements/s.
template <class F>
void elementwise(benchmark::State& state, F f) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto in = random_floats(n);
  std::vector<float> out(n);
  for (auto _ : state) {
    for (std::size_t i = 0; i < n; ++i) out[i] = f(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void bf16_round_baseline(benchmark::State& state) {  // copy: same bytes in and out
  elementwise(state, [](float x) { return x; });
}

void bf16_round_amla(benchmark::State& state) {
  elementwise(state, [](float x) { return amla::round_bf16(x); });
}

void bf16_round_eigen(benchmark::State& state) {
  elementwise(state, [](float x) { return static_cast<float>(Eigen::bfloat16(x)); });
}

// Operands of the [m x k] x [k x n] product, with m, k, n = state.range(0), (1), (2).
struct GemmInputs {
  int m, k, n;
  amla::MatrixF a, b;
  explicit GemmInputs(const benchmark::State& state)
      : m(static_cast<int>(state.range(0))),
        k(static_cast<int>(state.range(1))),
        n(static_cast<int>(state.range(2))),
        a(m, k),
        b(k, n) {
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = d(rng);
    for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = d(rng);
  }
};

void set_flops(benchmark::State& state, const GemmInputs& in) {
  const double flops = 2.0 * in.m * in.k * in.n;
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

void gemm_baseline(benchmark::State& state) {  // Eigen float GEMM, no rounding
  GemmInputs in(state);
  amla::MatrixF c(in.m, in.n);
  for (auto _ : state) {
    c.noalias() = in.a * in.b;
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, in);
}

void gemm_bf16_emulated(benchmark::State& state) {  // rounds both operands every call
  GemmInputs in(state);
  for (auto _ : state) {
    amla::MatrixF c = amla::matmul_bf16(in.a, in.b);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, in);
}

void gemm_prerounded(benchmark::State& state) {  // operands rounded once, as recurrences do
  GemmInputs in(state);
  amla::round_bf16_inplace(in.a);
  amla::round_bf16_inplace(in.b);
  for (auto _ : state) {
    amla::MatrixF c = amla::matmul_prerounded(in.a, in.b);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, in);
}

void gemm_shapes(benchmark::internal::Benchmark* b) {
  b->Args({128, 576, 8192})->Args({128, 8192, 512})->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(bf16_round_baseline)->Name("bf16_round/baseline")->Arg(1 << 20);
BENCHMARK(bf16_round_amla)->Name("bf16_round/amla")->Arg(1 << 20);
BENCHMARK(bf16_round_eigen)->Name("bf16_round/eigen_bfloat16")->Arg(1 << 20);
BENCHMARK(gemm_baseline)->Name("gemm/baseline")->Apply(gemm_shapes);
BENCHMARK(gemm_bf16_emulated)->Name("gemm/bf16_emulated")->Apply(gemm_shapes);
BENCHMARK(gemm_prerounded)->Name("gemm/bf16_prerounded")->Apply(gemm_shapes);

AMLA_BENCHMARK_MAIN_WITH_RATIOS()
