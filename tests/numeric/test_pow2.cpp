// Tests for amla/numeric/pow2.hpp: AMLA Lemma 3.1 bit for bit inside its preconditions, the
// checked form's report outside them, the safe form's ldexp semantics, and the known failures.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "amla/numeric/pow2.hpp"
#include "common/reduced.hpp"

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

// ---- the combined add of any k (AMLA's rescale k = Cast(N * 2^23)) -----------------------------

namespace {
/// The value the pattern add is meant to have, from float64: write |f| as (2^23 + M) 2^(E - 150)
/// (a subnormal normalised to E <= 0), take (E', M') = floor-divmod(E 2^23 + M + k, 2^23) with
/// integer division, and convert (2^23 + M') 2^(E' - 150) from double, which holds it exactly, to
/// float: one rounding, by the compiler's conversion instead of the header's integer rounding.
float intended_f64(float f, std::int64_t k) {
  if (f == 0.0f || !std::isfinite(f)) return f;
  const std::uint32_t u = amla::as_uint32(f);
  std::int64_t e = (u >> 23) & 0xFFu;
  std::int64_t m = u & 0x7FFFFFu;
  if (e == 0) {  // subnormal m 2^-149
    e = 1;
    while (m < 8388608) {
      m *= 2;
      --e;
    }
    m -= 8388608;
  }
  const std::int64_t r = e * 8388608 + m + k;
  const std::int64_t e2 = r >= 0 ? r / 8388608 : -((-r + 8388607) / 8388608);
  const std::int64_t m2 = r - e2 * 8388608;
  // Exponents past +-400 are as good as infinite (the value overflows or rounds to 0 either way).
  const auto e2c = static_cast<int>(std::clamp<std::int64_t>(e2, -400, 400));
  const double v = std::ldexp(8388608.0 + static_cast<double>(m2), e2c - 150);
  const float out = static_cast<float>(v);
  return (u >> 31) != 0u ? -out : out;
}
}  // namespace

TEST_CASE("the combined add: window, raw add and intended value", "[pow2][pattern_add]") {
  // The window of k = -2^24 (n = -2): sources with exponent field >= 3.
  const auto w = amla::pattern_add_window_of(-(1 << 24));
  CHECK(w.lo == 0x01800000u);
  CHECK(w.span == 0x7F800000u - 0x01800000u);
  CHECK_FALSE(amla::pattern_add_is_exact(amla::as_fp32(0x017FFFFFu), -(1 << 24)));
  CHECK(amla::pattern_add_is_exact(amla::as_fp32(0x01800000u), -(1 << 24)));
  // A positive k closes the top: FLT_MAX plus one unit is the Inf pattern, not exact.
  CHECK(amla::pattern_add_is_exact(amla::as_fp32(0x7F7FFFFEu), 1));
  CHECK_FALSE(amla::pattern_add_is_exact(amla::as_fp32(0x7F7FFFFFu), 1));
  CHECK(amla::pattern_add_window_of(std::numeric_limits<std::int32_t>::min()).span == 0u);
  // k = 0 is exact exactly for normal sources (zeros and subnormals are reported).
  CHECK_FALSE(amla::pattern_add_is_exact(0.0f, 0));
  CHECK_FALSE(amla::pattern_add_is_exact(std::numeric_limits<float>::denorm_min(), 0));
  CHECK(amla::pattern_add_is_exact(FLT_MIN, 0));
  // AMLA's typical garbage: +0 with k = -2^24 + 8 (a step of -2 and the nudge's 8).
  CHECK(amla::as_uint32(amla::pattern_add_hardware(0.0f, -(1 << 24) + 8)) == 0xFF000008u);
  CHECK(amla::as_uint32(amla::pattern_add_intended(0.0f, -(1 << 24) + 8)) == 0u);
  CHECK(amla::as_uint32(amla::pattern_add_intended(-0.0f, -(1 << 24) + 8)) == 0x80000000u);
  // FLT_MIN with k = -2^23 is 2^-127, the subnormal 0x00400000; with k = -2^23 + 1 it is
  // (2^23 + 1) 2^-150, which rounds to even: 0x00400000 as well; + 3 rounds up to 0x00400002.
  CHECK(amla::as_uint32(amla::pattern_add_intended(FLT_MIN, -(1 << 23))) == 0x00400000u);
  CHECK(amla::as_uint32(amla::pattern_add_intended(FLT_MIN, -(1 << 23) + 1)) == 0x00400000u);
  CHECK(amla::as_uint32(amla::pattern_add_intended(FLT_MIN, -(1 << 23) + 3)) == 0x00400002u);
  // A subnormal source moves as the value it is: 2^-149 times 2^3 is 2^-146 (pattern 8).
  CHECK(amla::as_uint32(amla::pattern_add_intended(amla::as_fp32(1u), 3 << 23)) == 8u);
  // Overflow is Inf, Inf and NaN pass through.
  CHECK(amla::pattern_add_intended(FLT_MAX, 1 << 23) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(amla::pattern_add_intended(std::numeric_limits<float>::quiet_NaN(), 5)));
  CHECK(amla::pattern_add(0.0f, -(1 << 24), amla::pow2_mode::safe) == 0.0f);
  CHECK(amla::as_uint32(amla::pattern_add(0.0f, -(1 << 24), amla::pow2_mode::hardware)) ==
        0xFF000000u);
  STATIC_REQUIRE(amla::pattern_add_intended(0.75f, 3 << 23) == 6.0f);
}

TEST_CASE(
    "the combined add over random patterns: k = n * 2^23 is the pow2 form, any k is the "
    "float64 truth",
    "[pow2][pattern_add]") {
  std::mt19937 gen(31);
  std::uniform_int_distribution<std::uint32_t> pattern(0u, 0xFFFFFFFFu);
  std::uniform_int_distribution<int> shift(-40, 5);
  std::uniform_int_distribution<int> small(-60000, 60000);
  const int trials = amla_test::reduced ? 20000 : 200000;
  for (int i = 0; i < trials; ++i) {
    float f = amla::as_fp32(pattern(gen));
    if (std::isnan(f)) continue;
    if (i % 4 == 0) f = amla::as_fp32(pattern(gen) & 0x80FFFFFFu);  // zeros, subnormals, tiny
    const int n = shift(gen);
    const std::int32_t k_pow2 = n * (1 << 23);
    CAPTURE(amla::as_uint32(f), n);
    // The array form adds and reports exactly as the scalar forms.
    float o = f;
    const bool flagged = amla::pattern_add_inplace(&o, 1, k_pow2);
    REQUIRE(amla::as_uint32(o) == amla::as_uint32(amla::mul_pow2_hardware(f, n)));
    REQUIRE(flagged == !amla::pow2_add_is_exact(f, n));
    REQUIRE(flagged == !amla::pattern_add_is_exact(f, k_pow2));
    // The intended value of a power-of-two add is the exact multiply, rounded once.
    REQUIRE(amla::as_uint32(amla::pattern_add_intended(f, k_pow2)) ==
            amla::as_uint32(static_cast<float>(std::ldexp(static_cast<double>(f), n))));
    // Any k: the intended value is the float64 truth, and where the add is exact it is the raw
    // add itself; the exactness test is "source and result normal".
    const std::int32_t k = k_pow2 + small(gen);
    const float raw = amla::pattern_add_hardware(f, k);
    REQUIRE(amla::as_uint32(amla::pattern_add_intended(f, k)) ==
            amla::as_uint32(intended_f64(f, k)));
    const auto mag = [](float x) { return amla::as_uint32(x) & 0x7FFFFFFFu; };
    const std::int64_t sum = static_cast<std::int64_t>(mag(f)) + k;
    const bool normal_src = std::isnormal(f);
    const bool normal_res = sum >= 0x00800000 && sum < 0x7F800000;
    REQUIRE(amla::pattern_add_is_exact(f, k) == (normal_src && normal_res));
    if (amla::pattern_add_is_exact(f, k)) {
      REQUIRE(amla::as_uint32(amla::pattern_add_intended(f, k)) == amla::as_uint32(raw));
    }
  }
}

TEST_CASE("the intended value of an add beyond the int32 range", "[pow2][pattern_add]") {
  // An exponent step below -255 (AMLA's safe rescale of an unclamped step): k = n * 2^23 with
  // n = -289 is below INT32_MIN. FLT_MAX * 2^-289 = 2^-161 rounds to 0; 2^127 * 2^-276 = 2^-149 is
  // the smallest subnormal; signs and non-finite values are kept.
  const std::int64_t k289 = -289 * (std::int64_t{1} << 23);
  CHECK(amla::as_uint32(amla::pattern_add_intended(FLT_MAX, k289)) == 0u);
  CHECK(amla::as_uint32(amla::pattern_add_intended(-FLT_MAX, k289)) == 0x80000000u);
  CHECK(amla::as_uint32(amla::pattern_add_intended(0x1p127f, -276 * (std::int64_t{1} << 23))) ==
        1u);
  CHECK(std::isnan(amla::pattern_add_intended(std::numeric_limits<float>::quiet_NaN(), k289)));
  CHECK(amla::pattern_add_intended(-std::numeric_limits<float>::infinity(), k289) ==
        -std::numeric_limits<float>::infinity());
  // Far past the range both ways: 0 and Inf.
  CHECK(amla::pattern_add_intended(3.0f, -(std::int64_t{1} << 62)) == 0.0f);
  CHECK(amla::pattern_add_intended(3.0f, std::int64_t{1} << 40) ==
        std::numeric_limits<float>::infinity());
  // Random sources and k between 2^31 and 2^34 in size against the float64 truth.
  std::mt19937 gen(32);
  std::uniform_int_distribution<std::uint32_t> pattern(0u, 0xFFFFFFFFu);
  std::uniform_int_distribution<std::int64_t> big(std::int64_t{1} << 31, std::int64_t{1} << 34);
  for (int i = 0; i < 20000; ++i) {
    const float f = amla::as_fp32(pattern(gen));
    if (std::isnan(f)) continue;
    const std::int64_t k = (i % 2 == 0 ? -1 : 1) * big(gen);
    CAPTURE(amla::as_uint32(f), k);
    REQUIRE(amla::as_uint32(amla::pattern_add_intended(f, k)) ==
            amla::as_uint32(intended_f64(f, k)));
  }
}
