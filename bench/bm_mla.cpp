// bench/bm_mla.cpp: what a golden check of one MLA decode step costs on the CPU.
//
// One DeepSeek-V3 decode step (H = 128, D_n = 128, D_r = 64, D_v = 128, D_l = 512) with B = 8
// requests of s_q = 1, a shared prefix of L_s = 4096 tokens and L_n = 512 own tokens per request,
// random BF16 weights and inputs. Each formulation runs in its float64 mode (the truth) and its
// BF16-emulating mode (what a kernel computes):
//   naive    decompresses the whole latent cache per head (the prefix once, each suffix per
//            request) and runs MHA with d_qk 192, d_v 128;
//   absorb   projects the queries with W_KVb1, attends the latent cache (d_qk 576, d_v 512),
//            projects the outputs with W_KVb2;
//   typhoon  TyphoonMLA's mixed plan on a prefix decompressed beforehand (not timed here);
//   decompress_prefix  that one-time decompression of the prefix, for completeness.
// Counters: attention GFLOP of the step by the cost model (Table 1 of the TyphoonMLA paper, 2 FLOP
// per MAC; the projections and decompression are extra work not counted there) and the rate.
// Times are wall-clock with every hardware thread in use.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>

#include "amla/mla/absorb.hpp"
#include "amla/mla/cost.hpp"
#include "amla/mla/decompress.hpp"
#include "amla/mla/naive.hpp"
#include "amla/mla/problem_builder.hpp"
#include "amla/mla/typhoon.hpp"

namespace {

namespace mla = amla::mla;

constexpr int batch = 8;
constexpr int prefix_len = 4096;
constexpr int suffix_len = 512;

const mla::MlaProblem<amla::bf16>& problem() {
  static const auto p = mla::MlaProblemBuilder(mla::presets::deepseek_v3)
                            .batch(batch)
                            .s_q(1)
                            .prefix_len(prefix_len)
                            .suffix_lens({suffix_len})
                            .page_size(64)
                            .seed(7)
                            .build<amla::bf16>();
  return p;
}

mla::MlaOptions options(bool f64) {
  mla::MlaOptions o;
  o.mode = f64 ? mla::numerics::float64 : mla::numerics::bf16;
  return o;
}

void set_counters(benchmark::State& state, mla::formulation f) {
  // B 8, S_q 1, L_s 4096, L_n 512: the step of the problem the benchmark decodes.
  const mla::DecodeStep step = mla::decode_step(mla::presets::deepseek_v3, problem().inputs());
  const double flops =
      mla::formulation_cost(f, mla::presets::deepseek_v3, step).attention().flops();
  state.counters["attn_GFLOP"] = flops / 1e9;
  state.counters["attn_FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// One decode of the problem per iteration: decode(model, inputs, options) in formulation f.
template <class Decode>
void decode_with(benchmark::State& state, mla::formulation f, Decode decode) {
  const auto& p = problem();
  const auto o = options(state.range(0) == 64);
  for (auto _ : state) {
    auto r = decode(p.model(), p.inputs(), o);
    benchmark::DoNotOptimize(r.out.data());
  }
  set_counters(state, f);
}

void naive(benchmark::State& state) {
  decode_with(state, mla::formulation::naive,
              [](const auto&... args) { return mla::naive_decode(args...); });
}

void absorb(benchmark::State& state) {
  decode_with(state, mla::formulation::absorb,
              [](const auto&... args) { return mla::absorb_decode(args...); });
}

template <class P>
void typhoon_with(benchmark::State& state, const mla::PrefixKV<P>& prefix) {
  mla::TyphoonOptions t;
  t.plan = mla::typhoon_plan::mixed;
  decode_with(state, mla::formulation::typhoon,
              [&](const auto& model, const auto& inputs, const auto& o) {
                return mla::typhoon_decode(model, inputs, prefix, o, t);
              });
}

void typhoon(benchmark::State& state) {
  const auto& p = problem();
  if (state.range(0) == 64) {
    const auto prefix = mla::decompress_prefix<double>(p.model(), p.inputs());
    typhoon_with(state, prefix);
  } else {
    const auto prefix = mla::decompress_prefix<amla::bf16>(p.model(), p.inputs());
    typhoon_with(state, prefix);
  }
}

void decompress_prefix(benchmark::State& state) {
  const auto& p = problem();
  for (auto _ : state) {
    if (state.range(0) == 64) {
      auto k = mla::decompress_prefix<double>(p.model(), p.inputs());
      benchmark::DoNotOptimize(k.k.data());
    } else {
      auto k = mla::decompress_prefix<amla::bf16>(p.model(), p.inputs());
      benchmark::DoNotOptimize(k.k.data());
    }
  }
}

// Argument: 64 = float64 mode, 16 = bf16 mode.
#define AMLA_MLA_BENCH(fn) \
  BENCHMARK(fn)->ArgName("bits")->Arg(64)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime()

AMLA_MLA_BENCH(naive);
AMLA_MLA_BENCH(absorb);
AMLA_MLA_BENCH(typhoon);
AMLA_MLA_BENCH(decompress_prefix);

}  // namespace

BENCHMARK_MAIN();
