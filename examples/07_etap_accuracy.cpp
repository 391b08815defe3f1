// examples/07_etap_accuracy.cpp: FlashMLA-ETAP's Table 1 (the RMSE of FP16 attention outputs
// against a float64 reference: FlashAttention-3 1.9e-4, FlashMLA-ETAP 1.25e-5) on amla's FP16
// emulation of the standard recurrence (Base, FlashAttention's order) and of ETAP's transposed
// one, on the same inputs, and where the error comes from.
//
//   example_07_etap_accuracy [--samples N] [--seed S] [--max-keys N] [--demo] [--help]
//
// The paper's setting, and what it leaves open (the assumptions made here):
//   - DeepSeek-R1 on one GPU of eight: h_q = 16 query heads, s_q = 1 (one token per pass), head
//     dimension 576 (d_qk = 576, and MLA's d_v = 512 with V the first 512 columns of K), context
//     lengths 512 to 64K. Batch only repeats independent head groups: --samples of them.
//   - The inputs' distribution is not stated. Assumed: Q and K entries i.i.d. N(0, 1) (the
//     FlashAttention papers' accuracy experiments draw from N(0, 1)), rounded to FP16 once; the
//     float64 reference runs on those FP16 values, so only the kernel's arithmetic is measured.
//   - Softmax scale 1/sqrt(576) (FlashMLA's default).
//   - RMSE = sqrt(mean over every output element of (O - O_ref)^2), absolute (not relative).
//   - FP16 arithmetic as the kernels have it (attention/driver.hpp's precision::fp16): Q, K, V
//     and P rounded to FP16 before each product, FP32 accumulation and vector math, and the final
//     FP16 output cast. KV block 64 for both recurrences.
// The second table separates the FP16 casts (P before P V, the output cast) and the accumulation
// order; the third varies the setting: the context length and the inputs' distribution, including
// the outlier mix N(0, 1) + N(0, 100) Bernoulli(0.001) and head dimension 128 that the
// FlashAttention-3 paper's FP16 figure was measured with (as we read that paper; it is not among
// amla's sources), which is where a figure like 1.9e-4 can come from. examples/ETAP_RESULTS.md
// records a run and what it shows.
//
// Inputs come from std::mt19937_64 through a written-out Box-Muller transform, one stream per
// (seed, setting, sample): results are reproducible.
#include <Eigen/Core>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "amla/amla.hpp"
#include "example_cli.hpp"

namespace {

namespace at = amla::attention;
using amla::MatrixD;
using amla::MatrixF;
using at::HeadGroup;
using at::precision;

/// How Q and K entries are drawn (V is part of K, or drawn the same way).
enum class Inputs { normal, outliers };

const char* name_of(Inputs i) {
  return i == Inputs::normal ? "N(0,1)" : "N(0,1)+N(0,100)B(.001)";
}

/// N(0, 1) draws through Box-Muller on 53-bit uniforms (portable across standard libraries).
class Normal {
 public:
  explicit Normal(std::uint64_t seed) : gen_(seed) {}
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * std::numbers::pi * u2);
  }
  /// Uniform in (0, 1].
  double uniform() { return (static_cast<double>(gen_() >> 11) + 1.0) * 0x1.0p-53; }

 private:
  std::mt19937_64 gen_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

/// A [rows, cols] matrix of draws rounded to FP16.
MatrixF draw(int rows, int cols, Inputs kind, Normal& rng) {
  MatrixF m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    double x = rng();
    if (kind == Inputs::outliers) {
      const double big = 10.0 * rng();
      if (rng.uniform() <= 0.001) x += big;
    }
    m.data()[i] = amla::detail::fp16_from_double(x).to_float();
  }
  return m;
}

/// One setting: keys, head dimensions (d_v < d_qk: V is the first d_v columns of K, as in MLA;
/// d_v == d_qk: a separate V), the distribution.
struct Setting {
  int keys;
  int d_qk;
  int d_v;
  Inputs inputs;
  double scale = 0.0;  ///< softmax scale; 0: 1/sqrt(d_qk)
};

/// Sums of squared errors of each method over the samples of a setting.
struct Tally {
  double ref_sq = 0.0;  ///< of the float64 reference itself: its RMS
  std::vector<double> err_sq;
  long long count = 0;
  explicit Tally(std::size_t methods) : err_sq(methods, 0.0) {}
  double rms_ref() const { return std::sqrt(ref_sq / static_cast<double>(count)); }
  double rmse(std::size_t m) const { return std::sqrt(err_sq[m] / static_cast<double>(count)); }
};

constexpr int kBlock = 64;

/// What computes a method's output: one of the emulated recurrences, or the float64 reference.
enum class Recurrence { base, etap, seesaw, golden };

/// A method: a recurrence, the precision of its products (fp16: Q, K, V and P rounded before
/// each), its KV block, whether the output gets the kernel's FP16 cast, and the order ETAP visits
/// its KV blocks in.
struct Method {
  const char* name;
  Recurrence recurrence;
  precision products = precision::fp16;
  int block = kBlock;
  bool out_cast = true;
  at::kv_block_order order = at::kv_block_order::forward;
};

/// A method's output on head group g, whose float64 reference output is ref.
MatrixD output(const Method& m, const HeadGroup& g, const MatrixD& ref) {
  MatrixF o;
  switch (m.recurrence) {
    case Recurrence::base:
      o = at::base_attention(g, {m.products, m.block}).out;
      break;
    case Recurrence::etap:
      o = at::transposed_attention(g, {{m.products, m.block}, m.order}).out;
      break;
    case Recurrence::seesaw:
      o = at::seesaw_attention(g, {m.products, m.block}).out;
      break;
    case Recurrence::golden:
      return ref.unaryExpr([](double x) {
        return static_cast<double>(amla::detail::fp16_from_double(x).to_float());
      });
  }
  if (m.out_cast) amla::round_fp16_inplace(o);  // the kernel's output cast
  return o.cast<double>();
}

const std::vector<Method>& methods() {
  using R = Recurrence;
  static const std::vector<Method> all = {
      {"base fp16", R::base},
      {"etap fp16", R::etap},
      {"seesaw fp16", R::seesaw},
      // The sources, for Base and ETAP: the output cast alone (FP16 inputs, P kept FP32) and
      // the P cast alone (no output cast).
      {.name = "base out-cast only", .recurrence = R::base, .products = precision::float32},
      {.name = "etap out-cast only", .recurrence = R::etap, .products = precision::float32},
      {.name = "base P-cast only", .recurrence = R::base, .out_cast = false},
      {.name = "etap P-cast only", .recurrence = R::etap, .out_cast = false},
      // Accumulation order: ETAP's KV blocks visited last to first, Base with 512-key blocks.
      {.name = "etap fp16 reverse", .recurrence = R::etap, .order = at::kv_block_order::reverse},
      {.name = "base fp16 block 512", .recurrence = R::base, .block = 512},
      // A plain FP32 attention's only rounding: the float64 reference cast to FP16.
      {"fp64 + out-cast", R::golden},
  };
  return all;
}

constexpr int kHeads = 16;

Tally measure(const Setting& s, int samples, std::uint64_t seed) {
  const auto& ms = methods();
  Tally t(ms.size());
  for (int i = 0; i < samples; ++i) {
    Normal rng(seed * 1000003u + static_cast<std::uint64_t>(s.keys) * 131u +
               static_cast<std::uint64_t>(s.d_qk) * 7u + static_cast<std::uint64_t>(s.inputs) +
               static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull);
    const MatrixF q = draw(kHeads, s.d_qk, s.inputs, rng);
    const MatrixF k = draw(s.keys, s.d_qk, s.inputs, rng);
    const MatrixF v_own = s.d_v < s.d_qk ? MatrixF() : draw(s.keys, s.d_v, s.inputs, rng);
    const Eigen::Ref<const MatrixF> v = s.d_v < s.d_qk
                                            ? Eigen::Ref<const MatrixF>(k.leftCols(s.d_v))
                                            : Eigen::Ref<const MatrixF>(v_own);
    const double scale = s.scale > 0.0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(s.d_qk));
    const HeadGroup g{q, k, v, {}, static_cast<float>(scale)};
    const MatrixD ref = at::golden_attention(g).out;
    t.ref_sq += ref.squaredNorm();
    t.count += ref.size();
    for (std::size_t m = 0; m < ms.size(); ++m) {
      t.err_sq[m] += (output(ms[m], g, ref) - ref).squaredNorm();
    }
  }
  return t;
}

void print_usage() {
  std::puts(
      "example_07_etap_accuracy [--samples N] [--seed S] [--max-keys N] [--demo] [--help]\n"
      "  FlashMLA-ETAP Table 1 (RMSE of FP16 outputs against float64) on amla's FP16 Base and\n"
      "  transposed (ETAP) recurrences: h_q 16, d_qk 576, d_v 512, Q and K from N(0, 1).\n"
      "  --samples N    head groups per setting (default 4)\n"
      "  --seed S       input seed (default 1)\n"
      "  --max-keys N   longest context of the sweep (default 65536)\n"
      "  --demo         a quick run: 1 sample, contexts up to 2048");
}

std::string keys_text(int keys) {
  return keys % 1024 == 0 ? std::to_string(keys / 1024) + "K" : std::to_string(keys);
}

}  // namespace

int main(int argc, char** argv) {
  int samples = 4;
  std::uint64_t seed = 1;
  int max_keys = 65536;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--samples") {
      samples = std::atoi(amla_example::option_value(i, argc, argv));
    } else if (a == "--seed") {
      seed = std::strtoull(amla_example::option_value(i, argc, argv), nullptr, 10);
    } else if (a == "--max-keys") {
      max_keys = std::atoi(amla_example::option_value(i, argc, argv));
    } else if (a == "--demo") {
      samples = 1;
      max_keys = 2048;
    } else if (a == "--help" || a == "-h") {
      print_usage();
      return 0;
    } else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      print_usage();
      return 2;
    }
  }
  if (samples < 1 || max_keys < 512) {
    std::fprintf(stderr, "--samples must be >= 1 and --max-keys >= 512\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto& ms = methods();

  std::printf(
      "FlashMLA-ETAP Table 1: RMSE of FP16 outputs against float64 (h_q 16, d_qk 576, "
      "d_v 512 = K[:, :512], Q, K ~ N(0,1) in FP16, KV block 64, %d sample(s))\n",
      samples);
  std::printf("paper: FlashAttention-3 1.9e-4, FlashMLA-ETAP 1.25e-5 (ratio 15.2)\n\n");
  std::printf("%6s  %9s  %10s  %10s  %10s  %9s  %10s  %9s\n", "keys", "RMS(O)", "base fp16",
              "etap fp16", "seesaw", "etap/base", "fp64+cast", "base/RMS");
  std::vector<Setting> sweep;
  for (int keys = 512; keys <= max_keys; keys *= 2)
    sweep.push_back({keys, 576, 512, Inputs::normal});
  std::vector<Tally> tallies;
  for (const Setting& s : sweep) {
    const Tally t = measure(s, samples, seed);
    std::printf("%6s  %9.3e  %10.3e  %10.3e  %10.3e  %9.3f  %10.3e  %9.2e\n",
                keys_text(s.keys).c_str(), t.rms_ref(), t.rmse(0), t.rmse(1), t.rmse(2),
                t.rmse(1) / t.rmse(0), t.rmse(ms.size() - 1), t.rmse(0) / t.rms_ref());
    tallies.push_back(t);
  }

  std::printf("\nWhere the error comes from (RMSE; same inputs as above)\n\n");
  std::printf("%6s  %10s  %10s  %10s  %10s  %10s  %10s\n", "keys", "base out", "etap out", "base P",
              "etap P", "etap rev", "base b512");
  for (std::size_t i = 0; i < sweep.size(); ++i) {
    const Tally& t = tallies[i];
    std::printf("%6s  %10.3e  %10.3e  %10.3e  %10.3e  %10.3e  %10.3e\n",
                keys_text(sweep[i].keys).c_str(), t.rmse(3), t.rmse(4), t.rmse(5), t.rmse(6),
                t.rmse(7), t.rmse(8));
  }

  std::printf("\nThe setting: distribution and head dimension (Base and ETAP in FP16, RMSE)\n\n");
  std::printf("%6s  %4s  %4s  %-24s  %8s  %9s  %10s  %10s  %9s\n", "keys", "d_qk", "d_v", "inputs",
              "scale", "RMS(O)", "base fp16", "etap fp16", "etap/base");
  const int mid = std::min(max_keys, 8192);
  // The last rows: softmax scale 1 (no 1/sqrt(d)): scores of standard deviation sqrt(d_qk), a
  // nearly one-hot softmax, outputs of the size of V itself.
  const std::vector<Setting> settings = {
      {mid, 576, 512, Inputs::normal},     {mid, 576, 512, Inputs::outliers},
      {mid, 128, 128, Inputs::normal},     {mid, 128, 128, Inputs::outliers},
      {512, 128, 128, Inputs::normal},     {mid, 128, 128, Inputs::normal, 1.0},
      {mid, 576, 512, Inputs::normal, 1.0}};
  for (const Setting& s : settings) {
    const Tally t = measure(s, samples, seed + 1);
    const double scale = s.scale > 0.0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(s.d_qk));
    std::printf("%6s  %4d  %4d  %-24s  %8.5f  %9.3e  %10.3e  %10.3e  %9.3f\n",
                keys_text(s.keys).c_str(), s.d_qk, s.d_v, name_of(s.inputs), scale, t.rms_ref(),
                t.rmse(0), t.rmse(1), t.rmse(1) / t.rmse(0));
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n%d sample(s) in %.1f s\n", samples, secs);
  return 0;
}
