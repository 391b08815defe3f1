// Tests for amla/numeric/pow2.hpp: AMLA Lemma 3.1 bit for bit inside its preconditions, the
// checked form's report outside them, the safe form's ldexp semantics, and the known failures.
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "amla/numeric/pow2.hpp"

namespace {
float make(std::uint32_t sign, std::uint32_t e, std::uint32_t m) {
  return amla::as_fp32((sign << 31) | (e << 23) | m);
}
bool same_bits_or_both_nan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return amla::as_uint32(a) == amla::as_uint32(b);
}
}  // namespace

TEST_CASE("the integer add equals f * 2^n for every exponent and every n in range", "[pow2]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> mant(0, 0x7FFFFF);
  long cases = 0;
  for (std::uint32_t e = 1; e <= 254; ++e) {
    const std::uint32_t mantissas[] = {0u, 1u, 0x400000u, 0x7FFFFFu, mant(rng), mant(rng)};
    for (int n = 1 - static_cast<int>(e); n <= 254 - static_cast<int>(e); ++n) {
      for (std::uint32_t m : mantissas) {
        for (std::uint32_t s : {0u, 1u}) {
          const float f = make(s, e, m);
          const float exact = std::ldexp(f, n);  // exact: the result is a normal number
          const auto r = amla::mul_pow2_checked(f, n);
          REQUIRE(r.exact);
          REQUIRE(amla::as_uint32(r.value) == amla::as_uint32(exact));
          REQUIRE(amla::as_uint32(amla::mul_pow2_safe(f, n)) == amla::as_uint32(exact));
          ++cases;
        }
      }
    }
  }
  // sum over E of (254 - E + 1 - E ... ) ranges: every (E, n) pair with 0 < E + n < 255.
  CHECK(cases == 254L * 254L * 6 * 2);
}

TEST_CASE("outside the preconditions checked reports and safe multiplies exactly", "[pow2]") {
  const float denorm = std::numeric_limits<float>::denorm_min();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    float f;
    std::int32_t n;
  };
  const Case cases[] = {{0.0f, -2},
                        {-0.0f, -2},
                        {0.0f, 3},
                        {denorm, 5},
                        {1e-39f, -1},
                        {inf, -1},
                        {-inf, 2},
                        {nan, 1},
                        {FLT_MAX, 1},
                        {1.0f, 128},
                        {1.0f, -127},
                        {1.0f, -150},
                        {FLT_MIN, -1},
                        {-FLT_MIN, -3},
                        {3.0f, 1000},
                        {2.0f, -100000},
                        {1.0f, std::numeric_limits<std::int32_t>::min()}};
  for (const auto& c : cases) {
    CAPTURE(c.f, c.n);
    const auto r = amla::mul_pow2_checked(c.f, c.n);
    CHECK_FALSE(r.exact);
    CHECK_FALSE(amla::pow2_add_is_exact(c.f, c.n));
    CHECK(amla::as_uint32(r.value) == amla::as_uint32(amla::mul_pow2_hardware(c.f, c.n)));
    CHECK(same_bits_or_both_nan(amla::mul_pow2_safe(c.f, c.n), std::ldexp(c.f, c.n)));
  }
  // The boundaries themselves: E + n == 1 is fine, E + n == 0 is not; E + n == 254 is fine,
  // E + n == 255 is not.
  CHECK(amla::pow2_add_is_exact(1.0f, -126));
  CHECK_FALSE(amla::pow2_add_is_exact(1.0f, -127));
  CHECK(amla::pow2_add_is_exact(1.0f, 127));
  CHECK_FALSE(amla::pow2_add_is_exact(1.0f, 128));
}

TEST_CASE("the known hardware failures are pinned bit for bit", "[pow2]") {
  // 0.0f with n = -2: the add borrows through the sign bit: 0 - 2 * 2^23 = 0xFF000000, which is
  // -2^127 * 1.0 = -1.7014118e38, a huge negative number instead of 0.
  CHECK(amla::as_uint32(amla::mul_pow2_hardware(0.0f, -2)) == 0xFF000000u);
  CHECK(amla::mul_pow2_hardware(0.0f, -2) == -std::ldexp(1.0f, 127));
  CHECK(amla::mul_pow2_safe(0.0f, -2) == 0.0f);
  // -0.0f with n = -2 flips to a huge positive number (0x80000000 - 0x01000000).
  CHECK(amla::as_uint32(amla::mul_pow2_hardware(-0.0f, -2)) == 0x7F000000u);
  // A tiny subnormal O element (E = 0) shifted down: the mantissa is untouched, the exponent
  // field wraps to 254 with the sign flipped.
  CHECK(amla::as_uint32(amla::mul_pow2_hardware(amla::as_fp32(0x00000005u), -2)) == 0xFF000005u);
  // FLT_MAX doubled: the exponent field becomes 255 with a non-zero mantissa: a NaN, not Inf.
  CHECK(amla::as_uint32(amla::mul_pow2_hardware(FLT_MAX, 1)) == 0x7FFFFFFFu);
  CHECK(std::isnan(amla::mul_pow2_hardware(FLT_MAX, 1)));
  CHECK(amla::mul_pow2_safe(FLT_MAX, 1) == std::numeric_limits<float>::infinity());
  // Underflow past the smallest normal: FLT_MIN / 2 under the add lands on E = 0 with the same
  // mantissa, i.e. +0 instead of the subnormal 2^-127; safe gives the subnormal.
  CHECK(amla::as_uint32(amla::mul_pow2_hardware(FLT_MIN, -1)) == 0x00000000u);
  CHECK(amla::mul_pow2_safe(FLT_MIN, -1) == std::ldexp(FLT_MIN, -1));
  CHECK(amla::mul_pow2_safe(FLT_MIN, -1) > 0.0f);
}

TEST_CASE("mul_pow2 dispatches on the mode", "[pow2]") {
  CHECK(amla::as_uint32(amla::mul_pow2(0.0f, -2, amla::pow2_mode::hardware)) == 0xFF000000u);
  CHECK(amla::as_uint32(amla::mul_pow2(0.0f, -2, amla::pow2_mode::checked)) == 0xFF000000u);
  CHECK(amla::mul_pow2(0.0f, -2, amla::pow2_mode::safe) == 0.0f);
  CHECK(amla::mul_pow2(0.75f, 3, amla::pow2_mode::hardware) == 6.0f);
  STATIC_REQUIRE(amla::mul_pow2_hardware(0.5f, 3) == 4.0f);  // usable in constant expressions
}
