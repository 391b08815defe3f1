// examples/02_accuracy.cpp: AMLA's accuracy experiment (AMLA paper, Section 5.1, Tables 3 and 4)
// reproduced on the CPU references, with the paper's figures printed beside ours.
//
//   example_02_accuracy [--samples N] [--seed S] [--threads T] [--context N] [--block N]
//                       [--skip-unmoved] [--layout L] [--demo] [--help]
//
// One decode head group of DeepSeek's MLA shape: h_q = 128 query heads, s_q = 1, d_qk = 576,
// d_v = 512, 8192 keys, KV block 512, softmax scale 1/sqrt(576). Q, K and V are drawn from
// N(0, s^2) for s in {1, 2, 3, 4, 5, 10} (Table 3) and from U(-a, a) for a in {1, 3, 5, 10, 20,
// 60} (Table 4) and rounded to BF16. The error of a result A is ||A - B||_F / (||B||_F + 1e-10)
// against the float64 golden B, averaged over the samples.
//
// V layout. In MLA the values are the first 512 columns of the keys (the latent part of the
// cache); a general attention kernel has its own V. Both are run on the same Q and K.
//
// Methods: Base (attention/online_softmax.hpp, BF16, KV block 512) and AMLA
// (attention/amla.hpp, hardware integer-add rescale) in each compensation reading: Appendix A's
// (the default), Algorithm 2 line 11 as printed, and none; each with the BF16 output cast. A
// second table shows where the error comes from: Base without the output cast, Base in float32
// mode, FlashMLA's seesaw and ETAP's transposed recurrence, and a plain FP32 attention against the
// float64 golden (was the paper's FP32 "Golden" good enough?). examples/ACCURACY_RESULTS.md
// records a 100-sample run and what it shows.
//
// Inputs are drawn from std::mt19937_64 through written-out Box-Muller and uniform transforms
// (the std:: distributions are implementation-defined), one stream per (seed, distribution,
// sample): results are reproducible and do not depend on --threads.
#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "amla/amla.hpp"
#include "example_cli.hpp"

namespace {

using amla::MatrixD;
using amla::MatrixF;
using amla::attention::HeadGroup;

// ---- the experiment's distributions and the paper's figures ------------------------------------

struct Distribution {
  bool normal;   ///< N(0, s^2) or U(-a, a)
  double param;  ///< s or a
  double paper_base;
  double paper_amla;
  std::string short_name() const {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%c%g", normal ? 'N' : 'U', param);
    return buf;
  }
  std::string name() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, normal ? "N(0, %g^2)" : "U(-%g, %g)", param, param);
    return buf;
  }
};

// AMLA paper, Table 3 (Gaussian) and Table 4 (uniform): E(., Golden), 100 samples, context 8K.
constexpr Distribution kDistributions[] = {
    {true, 1, 1.77e-3, 1.81e-3},   {true, 2, 1.74e-3, 1.75e-3},   {true, 3, 1.65e-3, 1.66e-3},
    {true, 4, 1.51e-3, 1.51e-3},   {true, 5, 1.33e-3, 1.35e-3},   {true, 10, 7.82e-4, 7.86e-4},
    {false, 1, 1.97e-3, 2.01e-3},  {false, 3, 1.77e-3, 1.78e-3},  {false, 5, 1.69e-3, 1.69e-3},
    {false, 10, 1.24e-3, 1.24e-3}, {false, 20, 7.04e-4, 7.04e-4}, {false, 60, 2.26e-4, 2.26e-4}};
constexpr int kNumDistributions = static_cast<int>(std::size(kDistributions));

// ---- reproducible inputs -----------------------------------------------------------------------

/// splitmix64: decorrelates (seed, distribution, sample) into one generator seed.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Compiler-independent draws: the problem builder's value stream (std::mt19937_64, whose sequence
/// the standard fixes, through amla's own Box-Muller and 53-bit uniform transforms).
class Stream {
 public:
  explicit Stream(std::uint64_t seed) : values_(seed) {}
  float draw_bf16(const Distribution& d) {
    const double x =
        d.normal ? d.param * values_.normal() : d.param * (2.0 * values_.uniform01() - 1.0);
    return amla::round_bf16(static_cast<float>(x));
  }

 private:
  amla::attention::detail::ValueStream values_;
};

struct Shape {
  int rows = 128, d_qk = 576, d_v = 512, context = 8192, block = 512;
  bool skip_unmoved = false;  ///< every AMLA run with AmlaOptions::skip_unmoved
};

struct Sample {
  MatrixF q, k, v_independent;
};

/// Draws Q, K and (when wanted) the independent V; Q and K do not depend on whether V is drawn.
Sample draw_sample(const Shape& s, const Distribution& d, std::uint64_t seed, bool want_v) {
  Stream st(seed);
  const auto fill = [&](int r, int c) {
    MatrixF m(r, c);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = st.draw_bf16(d);
    return m;
  };
  Sample out;
  out.q = fill(s.rows, s.d_qk);  // drawn in this order: Q, K, then the independent V
  out.k = fill(s.context, s.d_qk);
  if (want_v) out.v_independent = fill(s.context, s.d_v);
  return out;
}

// ---- the methods compared ----------------------------------------------------------------------

/// ||a - b||_F / (||b||_F + 1e-10), the paper's E(A, B).
double paper_error(const MatrixF& a, const MatrixD& b) {
  return (a.cast<double>() - b).norm() / (b.norm() + 1e-10);
}

/// Plain float32 softmax attention, no blocking and no BF16 cast: a candidate for the paper's
/// "Golden: high-precision FP32 attention computation implemented on CPU".
MatrixF golden_f32(const HeadGroup& g) {
  MatrixF s = (g.q * g.k.transpose()) * g.scale;
  const Eigen::VectorXf mx = s.rowwise().maxCoeff();
  MatrixF p = (s.colwise() - mx).array().exp().matrix();
  const Eigen::VectorXf l = p.rowwise().sum();
  MatrixF o = p * g.v;
  return o.array().colwise() / l.array();
}

enum Method : int {
  kBase,         ///< Base (Algorithm 1): BF16, KV block 512, BF16 output
  kAmla,         ///< AMLA (Algorithm 2), the default reading: c = S16 / S32 (Appendix A)
  kAmlaPrinted,  ///< AMLA with line 11 as printed: c = S32 / S16 (safe add)
  kAmlaNone,     ///< AMLA without the (1 + eps) compensation (safe add)
  kAmlaSafe,     ///< the default reading with the safe rescale (the intended value where the add
                 ///< breaks Lemma 3.1)
  kBaseNoCast,   ///< the same without the final BF16 cast of the output
  kBaseF32,      ///< Base in float32 mode (no BF16 anywhere), FP32 output
  kSeesaw,       ///< FlashMLA's seesaw schedule: BF16, block 64, BF16 output
  kTransposed,   ///< FlashMLA-ETAP transposed: BF16, block 64, BF16 output
  kGoldenF32,    ///< plain FP32 attention
  kNumMethods
};

constexpr int kNumReadings = 3;  // kAmla, kAmlaPrinted, kAmlaNone
constexpr amla::attention::amla_compensation kReadings[kNumReadings] = {
    amla::attention::amla_compensation::appendix_a, amla::attention::amla_compensation::as_printed,
    amla::attention::amla_compensation::none};

struct LayoutErrors {
  double error[kNumMethods] = {};
  std::size_t violations[kNumReadings] = {};  ///< Lemma 3.1 violations of each AMLA reading
  std::size_t rescaled = 0;                   ///< integer adds per reading (same for all three)
};

enum Layout : int { kMla, kIndependent, kNumLayouts };
constexpr const char* kLayoutTitles[kNumLayouts] = {
    "V = the first 512 columns of K (MLA: K and V share the latent cache)",
    "V drawn independently of K (general attention)"};

struct SampleResult {
  LayoutErrors layout[kNumLayouts];
  /// With --locate: every add that broke Lemma 3.1, per layout and reading.
  std::vector<amla::attention::AmlaViolation> located[kNumLayouts][kNumReadings];
};

SampleResult run_sample(const Shape& s, const Distribution& d, std::uint64_t seed,
                        const bool (&layouts)[kNumLayouts], bool diagnostics, bool locate) {
  namespace at = amla::attention;
  const Sample in = draw_sample(s, d, seed, layouts[kIndependent]);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.d_qk)));
  SampleResult r;
  for (int lay = 0; lay < kNumLayouts; ++lay) {
    if (!layouts[lay]) continue;
    const auto v = lay == kMla ? Eigen::Ref<const MatrixF>(in.k.leftCols(s.d_v))
                               : Eigen::Ref<const MatrixF>(in.v_independent);
    const HeadGroup g{in.q, in.k, v, {}, scale};
    const at::GoldenResult gold = at::golden_attention(g);
    double* e = r.layout[lay].error;
    at::BaseResult base = at::base_attention(g, {at::precision::bf16, s.block});
    e[kBaseNoCast] = paper_error(base.out, gold.out);
    amla::round_bf16_inplace(base.out);
    e[kBase] = paper_error(base.out, gold.out);
    // AMLA: the default reading with the NPU's raw integer add (the paper's column) and with the
    // safe add; the other two readings with the safe add, so that a broken add (see the
    // violations) does not hide the difference the compensation makes. Every mode counts the
    // violations of its own run.
    // With --locate the raw add runs in checked mode: the same values as the hardware add, and
    // every broken add located.
    const auto run_amla = [&](int reading, amla::pow2_mode mode, int method) {
      at::AmlaOptions o;
      o.block_size = s.block;
      o.compensation = kReadings[reading];
      o.rescale = mode;
      o.skip_unmoved = s.skip_unmoved;
      at::AmlaResult a = at::amla_attention(g, o);
      amla::round_bf16_inplace(a.out);
      e[method] = paper_error(a.out, gold.out);
      r.layout[lay].rescaled = a.report.rescaled_elements;
      if (locate && method != kAmlaSafe) r.located[lay][reading] = std::move(a.report.located);
      return a.report.violations;
    };
    const amla::pow2_mode raw = locate ? amla::pow2_mode::checked : amla::pow2_mode::hardware;
    r.layout[lay].violations[0] = run_amla(0, raw, kAmla);
    run_amla(0, amla::pow2_mode::safe, kAmlaSafe);
    r.layout[lay].violations[1] = run_amla(1, amla::pow2_mode::safe, kAmlaPrinted);
    r.layout[lay].violations[2] = run_amla(2, amla::pow2_mode::safe, kAmlaNone);
    if (!diagnostics) continue;
    e[kBaseF32] =
        paper_error(at::base_attention(g, {at::precision::float32, s.block}).out, gold.out);
    at::SeesawResult seesaw = at::seesaw_attention(g, {.block_size = 64});
    amla::round_bf16_inplace(seesaw.out);
    e[kSeesaw] = paper_error(seesaw.out, gold.out);
    at::TransposedResult etap = at::transposed_attention(g, {{.block_size = 64}});
    amla::round_bf16_inplace(etap.out);
    e[kTransposed] = paper_error(etap.out, gold.out);
    e[kGoldenF32] = paper_error(golden_f32(g), gold.out);
  }
  return r;
}

// ---- command line ------------------------------------------------------------------------------

struct Config {
  int samples = 20;
  std::uint64_t seed = 20250807;
  int threads = 0;
  Shape shape;
  bool layouts[kNumLayouts] = {true, true};
  std::vector<int> distributions;  // indices into kDistributions
  bool demo = false;
  bool diagnostics = true;
  bool locate = false;
};

void print_help() {
  std::printf(
      "example_02_accuracy: AMLA's accuracy experiment (Tables 3 and 4) on amla's CPU references.\n"
      "\n"
      "  --samples N    samples per distribution (default 20; the paper uses 100)\n"
      "  --seed S       base seed (default 20250807); sample i of distribution d uses its own\n"
      "                 stream, so results do not depend on --threads\n"
      "  --threads T    worker threads over samples (default: all hardware threads)\n"
      "  --context N    keys per head group (default 8192, as in the paper)\n"
      "  --block N      KV block of Base and AMLA (default 512, as in the paper)\n"
      "  --skip-unmoved AMLA's identity steps add k = 0, not the nudge "
      "(AmlaOptions::skip_unmoved)\n"
      "  --layout L     mla | independent | both (default both): where V comes from\n"
      "  --dist LIST    comma-separated subset of N1,N2,N3,N4,N5,N10,U1,U3,U5,U10,U20,U60\n"
      "  --no-diagnostics  only the main table (Base and AMLA): about half the time\n"
      "  --locate       list every add that broke Lemma 3.1 (sample, block, row, column, the\n"
      "                 add, the value before, the raw result and the intended value)\n"
      "  --demo         a quick run: 2 samples, 3 distributions, context 2048\n"
      "  --help         this text\n"
      "\n"
      "Shape: h_q = 128, s_q = 1, d_qk = 576, d_v = 512, KV block 512, scale 1/sqrt(576).\n"
      "Error: ||A - B||_F / (||B||_F + 1e-10) against the float64 golden, averaged over "
      "samples.\n");
}

bool parse(int argc, char** argv, Config& c) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "example_02_accuracy: %s needs a value (see --help)\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    const auto positive = [&](const char* what) {
      const char* v = value(what);
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end != '\0' || n < 1 || n > 1'000'000) {
        std::fprintf(stderr, "example_02_accuracy: %s must be an integer in [1, 1e6], got '%s'\n",
                     what, v);
        std::exit(2);
      }
      return static_cast<int>(n);
    };
    if (a == "--help" || a == "-h") {
      print_help();
      return false;
    } else if (amla_example::set_switch(a, {{"--no-diagnostics", &c.diagnostics, false},
                                            {"--locate", &c.locate, true},
                                            {"--demo", &c.demo, true},
                                            {"--skip-unmoved", &c.shape.skip_unmoved, true}})) {
      // a switch, now set
    } else if (a == "--samples") {
      c.samples = positive("--samples");
    } else if (a == "--threads") {
      c.threads = positive("--threads");
    } else if (a == "--context") {
      c.shape.context = positive("--context");
    } else if (a == "--block") {
      c.shape.block = positive("--block");
    } else if (a == "--seed") {
      const char* v = value("--seed");
      char* end = nullptr;
      c.seed = std::strtoull(v, &end, 10);
      if (*end != '\0') {
        std::fprintf(stderr, "example_02_accuracy: --seed must be an integer, got '%s'\n", v);
        std::exit(2);
      }
    } else if (a == "--dist") {
      const std::string v = value("--dist");
      std::size_t pos = 0;
      while (pos <= v.size()) {
        const std::size_t comma = std::min(v.find(',', pos), v.size());
        const std::string tok = v.substr(pos, comma - pos);
        int found = -1;
        for (int d = 0; d < kNumDistributions; ++d) {
          if (kDistributions[d].short_name() == tok) found = d;
        }
        if (found < 0) {
          std::fprintf(stderr, "example_02_accuracy: unknown distribution '%s' (see --help)\n",
                       tok.c_str());
          std::exit(2);
        }
        c.distributions.push_back(found);
        pos = comma + 1;
      }
    } else if (a == "--layout") {
      const std::string v = value("--layout");
      if (v == "mla") {
        c.layouts[kIndependent] = false;
      } else if (v == "independent") {
        c.layouts[kMla] = false;
      } else if (v != "both") {
        std::fprintf(stderr, "example_02_accuracy: --layout must be mla, independent or both\n");
        std::exit(2);
      }
    } else {
      std::fprintf(stderr, "example_02_accuracy: unknown argument '%s' (see --help)\n", a.c_str());
      std::exit(2);
    }
  }
  if (c.demo) {
    c.samples = std::min(c.samples, 2);
    c.shape.context = std::min(c.shape.context, 2048);
    if (c.distributions.empty()) c.distributions = {0, 5, 6};
  } else if (c.distributions.empty()) {
    for (int d = 0; d < kNumDistributions; ++d) c.distributions.push_back(d);
  }
  return true;
}

// ---- the run -----------------------------------------------------------------------------------

/// Mean and standard error of the mean of one method over a distribution's samples.
struct Stat {
  double mean = 0, sem = 0;
};

/// Of error[method] - error[minus] when minus >= 0 (a paired difference), else of error[method].
Stat stat(const std::vector<SampleResult>& samples, int lay, int method, int minus = -1) {
  const auto n = static_cast<double>(samples.size());
  double sum = 0, sum2 = 0;
  for (const SampleResult& s : samples) {
    const double x = s.layout[lay].error[method] - (minus >= 0 ? s.layout[lay].error[minus] : 0.0);
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / n;
  const double var = n > 1 ? std::max(0.0, (sum2 - n * mean * mean) / (n - 1)) : 0.0;
  return {mean, std::sqrt(var / n)};
}

void print_located(const Config& c, const std::vector<std::vector<SampleResult>>& results,
                   int lay) {
  constexpr const char* kReadingNames[kNumReadings] = {"default", "printed", "no comp"};
  std::printf(
      "\nAdds that broke Lemma 3.1, located (default reading: the raw add; printed and no comp:\n"
      "the safe add, which keeps the intended value). add = the integer added to the FP32\n"
      "pattern; after = the raw result AS_FP32(AS_INT32(before) + add).\n");
  std::printf("%-13s %-8s %6s %5s %4s %6s %11s %11s %12s %12s\n", "distribution", "reading",
              "sample", "block", "row", "column", "add", "before", "after", "intended");
  std::size_t listed = 0;
  for (std::size_t di = 0; di < c.distributions.size(); ++di) {
    const Distribution& d = kDistributions[c.distributions[di]];
    for (int rd = 0; rd < kNumReadings; ++rd) {
      for (std::size_t si = 0; si < results[di].size(); ++si) {
        for (const auto& v : results[di][si].located[lay][rd]) {
          const std::uint32_t after_bits = amla::as_uint32(v.after);
          char after[32];
          if (std::isnan(v.after)) {
            std::snprintf(after, sizeof after, "NaN %08X", after_bits);
          } else {
            std::snprintf(after, sizeof after, "%.3g", static_cast<double>(v.after));
          }
          std::printf("%-13s %-8s %6zu %5ld %4ld %6ld %11d %11.3g %12s %12.3g\n", d.name().c_str(),
                      kReadingNames[rd], si, static_cast<long>(v.block), static_cast<long>(v.row),
                      static_cast<long>(v.col), v.add, static_cast<double>(v.before), after,
                      static_cast<double>(v.intended));
          ++listed;
        }
      }
    }
  }
  if (listed == 0) std::printf("(none)\n");
}

void print_layout(const Config& c, const std::vector<std::vector<SampleResult>>& results, int lay) {
  std::printf("\n== %s\n", kLayoutTitles[lay]);
  std::printf(
      "Mean E(., float64 golden) over %d sample(s), BF16 output; paper = AMLA Tables 3 and 4.\n"
      "AMLA = Appendix A's compensation (c = S16/S32, amla's default) with the NPU's raw\n"
      "integer add; safe = the same where the add is exact and the intended value where it\n"
      "breaks Lemma 3.1; printed = Algorithm 2 line 11 as printed (c = S32/S16) and no comp =\n"
      "eps = 0, both with the safe add. sem = standard error of the mean; safe-Base = paired\n"
      "difference on the same inputs. viol = adds that broke Lemma 3.1 (default/printed/none)\n"
      "out of all adds; wrecked = samples whose raw-add output they changed (error > 1.01 safe).\n",
      c.samples);
  std::printf("%-13s %10s %8s %10s | %10s %10s %10s %16s | %12s %12s | %s\n", "distribution",
              "Base", "+-sem", "paper Base", "AMLA", "paper AMLA", "AMLA safe", "safe-Base +-sem",
              "AMLA printed", "AMLA no comp", "viol d/p/n of adds, wrecked");
  for (std::size_t di = 0; di < c.distributions.size(); ++di) {
    const Distribution& d = kDistributions[c.distributions[di]];
    const Stat base = stat(results[di], lay, kBase);
    const Stat amla = stat(results[di], lay, kAmla);
    const Stat diff = stat(results[di], lay, kAmlaSafe, kBase);  // paired: same inputs
    std::size_t viol[kNumReadings] = {}, adds = 0, wrecked = 0;
    for (const SampleResult& sr : results[di]) {
      for (int i = 0; i < kNumReadings; ++i) viol[i] += sr.layout[lay].violations[i];
      adds += sr.layout[lay].rescaled;
      const double* e = sr.layout[lay].error;
      if (!(e[kAmla] <= 1.01 * e[kAmlaSafe])) ++wrecked;
    }
    std::printf(
        "%-13s %10.3e %8.1e %10.2e | %10.3e %10.2e %10.3e %+8.1e %7.1e | %12.3e %12.3e | "
        "%zu/%zu/%zu of %zu, %zu\n",
        d.name().c_str(), base.mean, base.sem, d.paper_base, amla.mean, d.paper_amla,
        stat(results[di], lay, kAmlaSafe).mean, diff.mean, diff.sem,
        stat(results[di], lay, kAmlaPrinted).mean, stat(results[di], lay, kAmlaNone).mean, viol[0],
        viol[1], viol[2], adds, wrecked);
  }
  if (c.locate) print_located(c, results, lay);
  if (!c.diagnostics) return;
  std::printf(
      "\nWhere the error comes from (same samples): Base without its output cast, Base in float32\n"
      "mode, FlashMLA's seesaw and ETAP's transposed recurrence (BF16, block 64, BF16 output), "
      "and\n"
      "a plain FP32 attention (a candidate for the paper's \"FP32 golden\").\n");
  std::printf("%-13s %12s %12s %12s %12s %12s\n", "distribution", "Base no cast", "Base fp32",
              "seesaw", "ETAP", "FP32 attn");
  for (std::size_t di = 0; di < c.distributions.size(); ++di) {
    const Distribution& d = kDistributions[c.distributions[di]];
    std::printf("%-13s", d.name().c_str());
    for (int m : {kBaseNoCast, kBaseF32, kSeesaw, kTransposed, kGoldenF32}) {
      std::printf(" %12.3e", stat(results[di], lay, m).mean);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (!parse(argc, argv, c)) return 0;
  const unsigned threads = c.threads > 0 ? static_cast<unsigned>(c.threads)
                                         : std::max(1u, std::thread::hardware_concurrency());

  std::printf("AMLA accuracy experiment (AMLA paper Section 5.1, Tables 3 and 4)\n");
  std::printf(
      "h_q = %d, s_q = 1, d_qk = %d, d_v = %d, context %d, KV block %d, %d sample(s) per "
      "distribution, seed %llu, %u thread(s)\n",
      c.shape.rows, c.shape.d_qk, c.shape.d_v, c.shape.context, c.shape.block, c.samples,
      static_cast<unsigned long long>(c.seed), threads);
  if (c.shape.skip_unmoved) {
    std::printf("AMLA with skip_unmoved: a step with dn = eps = 0 adds 0, not the nudge\n");
  }
  if (c.demo) {
    std::printf(
        "DEMO RUN: %d samples, %zu distributions, context %d (the paper: 100 samples, 12 "
        "distributions, context 8192); the figures are indicative only\n",
        c.samples, c.distributions.size(), c.shape.context);
  }

  const std::size_t n_dist = c.distributions.size();
  std::vector<std::vector<SampleResult>> results(
      n_dist, std::vector<SampleResult>(static_cast<std::size_t>(c.samples)));
  const std::size_t tasks = n_dist * static_cast<std::size_t>(c.samples);
  std::atomic<std::size_t> next{0};
  const auto t0 = std::chrono::steady_clock::now();
  const auto worker = [&] {
    for (std::size_t t = next++; t < tasks; t = next++) {
      const std::size_t di = t / static_cast<std::size_t>(c.samples);
      const std::size_t si = t % static_cast<std::size_t>(c.samples);
      const int d = c.distributions[di];
      const std::uint64_t seed = mix(mix(c.seed ^ mix(static_cast<std::uint64_t>(d))) + si);
      results[di][si] =
          run_sample(c.shape, kDistributions[d], seed, c.layouts, c.diagnostics, c.locate);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < std::min<std::size_t>(threads, tasks); ++i) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  for (int lay = 0; lay < kNumLayouts; ++lay) {
    if (c.layouts[lay]) print_layout(c, results, lay);
  }
  std::printf("\n%zu sample(s) in %.1f s (%.2f s per sample per thread)\n", tasks, seconds,
              seconds * threads / static_cast<double>(tasks));
  return 0;
}
