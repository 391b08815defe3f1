// examples/01_bit_tricks.cpp: FP32 / INT32 / BF16 bit patterns, AMLA's Lemma 3.1 (multiply by 2^n
// as an integer add) at work and where it breaks, and the (1 + eps) mantissa add.
//
//   example_01_bit_tricks [--demo] [--help] [VALUE N ...]
//
// With pairs VALUE N on the command line, it shows Lemma 3.1 applied to each pair.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "amla/amla.hpp"

namespace {

std::string binary(std::uint32_t u) {
  std::string s;
  for (int i = 31; i >= 0; --i) {
    s += ((u >> i) & 1u) ? '1' : '0';
    if (i == 31 || i == 23) s += ' ';
  }
  return s;
}

void show_patterns() {
  std::printf("FP32 values as bit patterns (sign | exponent | mantissa), as INT32, and as BF16\n");
  std::printf("%-14s %-36s %12s %8s %8s %14s\n", "value", "bits", "as_int32", "bf16 rne",
              "bf16 rtz", "bf16 value");
  const float values[] = {0.5f,     1.0f,          1.00390625f, 1.01171875f, -2.5f, 3.14159265f,
                          65504.0f, 3.3895314e38f, 1e-40f,      0.0f,        -0.0f, INFINITY,
                          NAN};
  for (float f : values) {
    const auto u = amla::as_uint32(f);
    const auto rne = amla::bf16::from_float(f);
    const auto rtz = amla::bf16::from_float(f, amla::bf16_rounding::toward_zero);
    std::printf("%-14.8g %-36s %12d   0x%04X   0x%04X %14.8g\n", static_cast<double>(f),
                binary(u).c_str(), amla::as_int32(f), rne.bits, rtz.bits,
                static_cast<double>(rne.to_float()));
  }
  std::printf("\nAMLA Figure 3: 0.5f has the pattern %s = %d = 126 << 23 (%s)\n\n",
              binary(amla::as_uint32(0.5f)).c_str(), amla::as_int32(0.5f),
              amla::as_int32(0.5f) == (126 << 23) ? "yes" : "NO");
}

void show_lemma(const std::vector<std::pair<float, int>>& cases) {
  std::printf(
      "Lemma 3.1: F * 2^n == AS_FP32(AS_INT32(F) + n << 23) when 0 < E < 255 and "
      "0 < E + n < 255\n");
  std::printf("%-14s %5s %4s %-7s %-16s %-16s %-16s %s\n", "F", "n", "E", "holds", "integer add",
              "exact F*2^n", "safe form", "add bits");
  for (const auto& [f, n] : cases) {
    const auto r = amla::mul_pow2_checked(f, n);
    std::printf("%-14.8g %5d %4d %-7s %-16.8g %-16.8g %-16.8g 0x%08X%s\n", static_cast<double>(f),
                n, amla::fp32::biased_exponent(f), r.exact ? "yes" : "NO",
                static_cast<double>(r.value), static_cast<double>(std::ldexp(f, n)),
                static_cast<double>(amla::mul_pow2_safe(f, n)), amla::as_uint32(r.value),
                r.exact ? "" : "   <- the add is not a multiply here");
  }
  std::printf("\n");
}

void show_one_plus_eps() {
  std::printf("(1 + eps) as an integer add of round(1.5 * 2^23 * eps) (AMLA Appendix A)\n");
  std::printf("%-12s %-12s %10s %16s %16s %12s %12s\n", "F", "eps", "increment", "add result",
              "exact", "rel error", "bound");
  const float fs[] = {1.0f, 1.5f, 1.999f};
  const double epss[] = {std::ldexp(1.0, -8), -std::ldexp(1.0, -8), 1e-3, std::ldexp(1.0, -12)};
  for (float f : fs) {
    for (double eps : epss) {
      const float r = amla::mul_one_plus_eps(f, eps);
      const double exact = static_cast<double>(f) * (1 + eps);
      std::printf("%-12.6g %-12.4e %10d %16.9g %16.9g %12.3e %12.3e\n", static_cast<double>(f), eps,
                  amla::one_plus_eps_increment(eps), static_cast<double>(r), exact,
                  static_cast<double>(r) / exact - 1, amla::one_plus_eps_error_bound(eps));
    }
  }
  std::printf(
      "The error depends on the mantissa: largest at m = 0 (|eps| / 2), near zero at "
      "m = 1/2.\n");
}

void usage() {
  std::printf(
      "usage: example_01_bit_tricks [--demo] [--help] [VALUE N ...]\n"
      "  Prints FP32 values as FP32 / INT32 / BF16 bit patterns, AMLA's Lemma 3.1 (multiply by\n"
      "  2^n as an integer add on the FP32 pattern) where it holds and where it breaks, and the\n"
      "  (1 + eps) mantissa add with its error bound.\n"
      "  VALUE N   pairs to run through the Lemma 3.1 table instead of the built-in cases\n"
      "  --demo    the built-in tour (also the default with no arguments)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<float, int>> cases;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage();
      return 0;
    }
    if (!std::strcmp(argv[i], "--demo")) continue;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "error: VALUE '%s' has no N after it (pairs VALUE N expected)\n",
                   argv[i]);
      return 2;
    }
    char* end1 = nullptr;
    char* end2 = nullptr;
    const float f = std::strtof(argv[i], &end1);
    const long n = std::strtol(argv[i + 1], &end2, 10);
    if (*end1 != '\0' || *end2 != '\0' || n < -100000 || n > 100000) {
      std::fprintf(stderr,
                   "error: '%s %s' is not a pair VALUE (a float) N (an integer in "
                   "[-100000, 100000])\n",
                   argv[i], argv[i + 1]);
      return 2;
    }
    cases.emplace_back(f, static_cast<int>(n));
    ++i;
  }
  if (cases.empty()) {
    cases = {{0.5f, 3},    {0.75f, -5},    {1.0f, 126},  {1.0f, 128},
             {0.0f, -2},   {-0.0f, -2},    {1e-40f, -2}, {1.17549435e-38f, -1},
             {3.4e38f, 1}, {INFINITY, -1}, {-6.5f, -20}};
  }
  show_patterns();
  show_lemma(cases);
  show_one_plus_eps();
  return 0;
}
