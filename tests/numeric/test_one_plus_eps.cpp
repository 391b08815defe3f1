// Tests for amla/numeric/one_plus_eps.hpp: the (1 + eps) multiply as an integer add (AMLA
// Appendix A), its derived worst-case error bound on a dense sweep, and its rounding modes.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>

#include "amla/numeric/one_plus_eps.hpp"
#include "common/reduced.hpp"

namespace {
struct SweepStats {
  double max_ratio = 0;  // max over the sweep of |rel err| / bound(eps)
  double max_rel_at_m0 = 0;
  long points = 0;
};

// Relative error of the add against the exact product, computed in double (exact for floats).
double rel_error(float f, double eps, amla::eps_rounding mode) {
  const double approx = static_cast<double>(amla::mul_one_plus_eps(f, eps, mode));
  const double exact = static_cast<double>(f) * (1.0 + eps);
  return approx / exact - 1.0;
}

SweepStats sweep(amla::eps_rounding mode, std::uint32_t mantissa_step, int eps_steps) {
  SweepStats s;
  const double eps_max = std::ldexp(1.0, -8);
  for (int i = -eps_steps; i <= eps_steps; ++i) {
    const double eps = eps_max * i / eps_steps;
    const double bound = amla::one_plus_eps_error_bound(eps, mode);
    for (std::uint32_t m = 0; m < (1u << 23); m += mantissa_step) {
      for (std::uint32_t e : {1u, 127u, 200u}) {
        const float f = amla::as_fp32((e << 23) | m);
        const double err = std::fabs(rel_error(f, eps, mode));
        s.max_ratio = std::max(s.max_ratio, err / bound);
        if (m == 0) s.max_rel_at_m0 = std::max(s.max_rel_at_m0, err);
        ++s.points;
      }
    }
  }
  return s;
}
}  // namespace

TEST_CASE("the increment is round(1.5 * 2^23 * eps) in the stated rounding", "[one_plus_eps]") {
  using amla::eps_rounding;
  // eps = j * 2^-23 makes the real increment exactly 1.5 j: a tie for every odd j.
  const double ulp = std::ldexp(1.0, -23);
  CHECK(amla::one_plus_eps_increment(0.0) == 0);
  CHECK(amla::one_plus_eps_increment(1 * ulp) == 2);    // 1.5 -> 2 (even)
  CHECK(amla::one_plus_eps_increment(3 * ulp) == 4);    // 4.5 -> 4 (even)
  CHECK(amla::one_plus_eps_increment(5 * ulp) == 8);    // 7.5 -> 8 (even)
  CHECK(amla::one_plus_eps_increment(-1 * ulp) == -2);  // -1.5 -> -2 (even)
  CHECK(amla::one_plus_eps_increment(3 * ulp, eps_rounding::toward_zero) == 4);
  CHECK(amla::one_plus_eps_increment(5 * ulp, eps_rounding::toward_zero) == 7);
  CHECK(amla::one_plus_eps_increment(-5 * ulp, eps_rounding::toward_zero) == -7);
  CHECK(amla::one_plus_eps_increment(2.4 * ulp) == 4);  // 3.6 -> 4
  CHECK(amla::one_plus_eps_increment(2.4 * ulp, eps_rounding::toward_zero) == 3);
  CHECK(amla::one_plus_eps_increment(std::ldexp(1.0, -8)) == 49152);  // 1.5 * 2^15
}

TEST_CASE("the worst-case relative error stays within the derived bound", "[one_plus_eps]") {
  // ~32k mantissas, including values next to m = 0 and m -> 1, and 257 values of eps in
  // [-2^-8, 2^-8] (sanitizer builds: fewer of both).
  const std::uint32_t step = amla_test::reduced ? 4093 : 257;
  const int eps_steps = amla_test::reduced ? 32 : 128;
  for (auto mode : {amla::eps_rounding::nearest_even, amla::eps_rounding::toward_zero}) {
    const SweepStats s = sweep(mode, step, eps_steps);
    INFO("points " << s.points << ", max err / bound = " << s.max_ratio);
    CHECK(s.max_ratio <= 1.0);
    // The bound is tight: at m = 0 and |eps| = 2^-8 the error reaches |eps| / 2 / (1 + eps).
    CHECK(s.max_ratio >= 0.98);
    CHECK(s.max_rel_at_m0 == Approx(std::ldexp(1.0, -9) / (1 - std::ldexp(1.0, -8))).epsilon(0.01));
  }
  CHECK(amla::one_plus_eps_error_bound(std::ldexp(1.0, -8)) < 1.97e-3);
}

TEST_CASE("the carry and borrow across the exponent stay inside the bound", "[one_plus_eps]") {
  // m close to 1 with eps > 0 carries into the exponent; m close to 0 with eps < 0 borrows.
  const double eps = std::ldexp(1.0, -8);
  const double bound = amla::one_plus_eps_error_bound(eps);
  for (std::uint32_t m = 0x7F0000u; m < 0x800000u; m += 13) {
    const float f = amla::as_fp32((127u << 23) | m);
    CHECK(std::fabs(rel_error(f, eps, amla::eps_rounding::nearest_even)) <= bound);
  }
  for (std::uint32_t m = 0; m < 0x10000u; m += 7) {
    const float f = amla::as_fp32((127u << 23) | m);
    CHECK(std::fabs(rel_error(f, -eps, amla::eps_rounding::nearest_even)) <= bound);
  }
}

TEST_CASE("the error is nearly unbiased over uniformly spread mantissas", "[one_plus_eps]") {
  // Mean of eps (1/2 - m) / ((1 + m)(1 + eps)) over m uniform in [0, 1) is
  // eps (1.5 ln 2 - 1) / (1 + eps): about 4% of eps, much less than the worst case |eps| / 2.
  // The carry region m > 1 - 1.5 eps (measure 1.5 eps) errs by 3/8 eps more on average, adding
  // the second-order term 9/16 eps^2.
  const double eps = std::ldexp(1.0, -9);
  double sum = 0;
  long n = 0;
  for (std::uint32_t m = 0; m < (1u << 23); m += 101) {
    sum += rel_error(amla::as_fp32((127u << 23) | m), eps, amla::eps_rounding::nearest_even);
    ++n;
  }
  const double predicted = eps * (1.5 * std::log(2.0) - 1.0) / (1 + eps) + 0.5625 * eps * eps;
  CHECK(sum / n == Approx(predicted).margin(1e-7));
  CHECK(std::fabs(sum / n) < 0.05 * eps);
}

TEST_CASE("an increment outside the int32 range or of a NaN eps is INT32_MIN, never UB",
          "[one_plus_eps]") {
  // 1.5 * 2^23 * 1000 = 1.26e10 does not fit an int32: the cast has no value, the function gives
  // x86's "integer indefinite" (a plain float-to-int cast would be undefined behaviour).
  constexpr std::int32_t indefinite = std::numeric_limits<std::int32_t>::min();
  for (const auto mode : {amla::eps_rounding::nearest_even, amla::eps_rounding::toward_zero}) {
    CHECK(amla::one_plus_eps_increment(1000.0, mode) == indefinite);
    CHECK(amla::one_plus_eps_increment(-1000.0, mode) == indefinite);
    CHECK(amla::one_plus_eps_increment(std::nan(""), mode) == indefinite);
    CHECK(amla::one_plus_eps_increment(std::numeric_limits<double>::infinity(), mode) ==
          indefinite);
  }
  // The edges: 2^31 - 1 fits, 2^31 does not.
  CHECK(amla::round_to_int32(2147483647.0, amla::eps_rounding::toward_zero) == 2147483647);
  CHECK(amla::round_to_int32(2147483647.9, amla::eps_rounding::toward_zero) == 2147483647);
  CHECK(amla::round_to_int32(2147483648.0, amla::eps_rounding::toward_zero) == indefinite);
  CHECK(amla::round_to_int32(2147483647.6, amla::eps_rounding::nearest_even) == indefinite);
  CHECK(amla::round_to_int32(-2147483649.0, amla::eps_rounding::toward_zero) == indefinite);
  CHECK(amla::round_to_int32(-1e30f, amla::eps_rounding::toward_zero) == indefinite);
  CHECK(amla::round_to_int32(1.5f, amla::eps_rounding::nearest_even) == 2);
  CHECK(amla::round_to_int32(-1.5f, amla::eps_rounding::toward_zero) == -1);
}
