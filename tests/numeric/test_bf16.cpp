// Tests for amla/numeric/bf16.hpp: exact bit patterns, and an exhaustive comparison of both
// conversions against an independent reference over all 2^32 FP32 patterns.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "amla/numeric/bf16.hpp"
#include "common/reduced.hpp"
#include "minifloat_reference.hpp"

namespace {

std::uint16_t rne_bits(std::uint32_t u) {
  return amla::bf16::from_float(amla::as_fp32(u)).bits;
}
std::uint16_t rtz_bits(std::uint32_t u) {
  return amla::bf16::from_float(amla::as_fp32(u), amla::bf16_rounding::toward_zero).bits;
}

// Magnitude of a non-negative BF16 pattern as a double; the pattern one past the largest finite
// value (0x7F80) stands for 2^128, the next step of the binade, so that "round to nearest" on the
// real line reproduces IEEE overflow-to-infinity.
double bf16_magnitude(std::uint32_t mag_bits) {
  if (mag_bits == 0x7F80u) return std::ldexp(1.0, 128);
  return static_cast<double>(amla::as_fp32(mag_bits << 16));
}

// Independent reference for round-to-nearest-even: pick between the two neighbouring BF16 values
// by comparing exact distances computed in double (no integer carry tricks).
std::uint16_t reference_rne(std::uint32_t u) {
  const std::uint32_t sign = u & 0x80000000u;
  const std::uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  const std::uint32_t lo = mag >> 16;
  std::uint32_t pick = lo;
  if ((mag & 0xFFFFu) != 0) {
    const double x = static_cast<double>(amla::as_fp32(mag));
    const double below = x - bf16_magnitude(lo);
    const double above = bf16_magnitude(lo + 1) - x;
    if (above < below || (above == below && (lo & 1u) != 0)) pick = lo + 1;
  }
  return static_cast<std::uint16_t>((sign >> 16) | pick);
}

std::uint16_t reference_rtz(std::uint32_t u) {
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace

TEST_CASE("round to nearest even on named bit patterns", "[bf16]") {
  CHECK(rne_bits(0x3F800000u) == 0x3F80);  // 1.0 exact
  CHECK(rne_bits(0x3F808000u) == 0x3F80);  // tie, kept lsb 0: stays (ties to even)
  CHECK(rne_bits(0x3F818000u) == 0x3F82);  // tie, kept lsb 1: rounds up to even
  CHECK(rne_bits(0x3F808001u) == 0x3F81);  // just above the tie: up
  CHECK(rne_bits(0x3F807FFFu) == 0x3F80);  // just below the tie: down
  CHECK(rne_bits(0x3FFF8000u) == 0x4000);  // mantissa carry bumps the exponent: 1.99.. -> 2
  CHECK(rne_bits(0x7F7FFFFFu) == 0x7F80);  // FLT_MAX overflows to +Inf
  CHECK(rne_bits(0xFF7FFFFFu) == 0xFF80);  // and -FLT_MAX to -Inf
  CHECK(rne_bits(0x7F7F7FFFu) == 0x7F7F);  // largest value that stays finite
  CHECK(rne_bits(0x7F7F8000u) == 0x7F80);  // tie above the largest BF16 (odd): to Inf
  CHECK(rne_bits(0x7F800000u) == 0x7F80);  // +Inf
  CHECK(rne_bits(0xFF800000u) == 0xFF80);  // -Inf
  CHECK(rne_bits(0x00000000u) == 0x0000);  // +0
  CHECK(rne_bits(0x80000000u) == 0x8000);  // -0 keeps its sign
  CHECK(rne_bits(0x00008000u) == 0x0000);  // subnormal tie to even (0)
  CHECK(rne_bits(0x00018000u) == 0x0002);  // subnormal tie to even (2)
  CHECK(rne_bits(0x007FFFFFu) == 0x0080);  // largest subnormal rounds up to the smallest normal
  CHECK(rne_bits(0x7F800001u) == 0x7FC0);  // signalling NaN becomes quiet, not Inf
  CHECK(rne_bits(0x7FFFFFFFu) == 0x7FFF);  // NaN with full payload: no carry into the sign
  CHECK(rne_bits(0xFFC00001u) == 0xFFC0);  // negative quiet NaN keeps its sign
}

TEST_CASE("truncation on named bit patterns", "[bf16]") {
  CHECK(rtz_bits(0x3F80FFFFu) == 0x3F80);
  CHECK(rtz_bits(0xBF81FFFFu) == 0xBF81);
  CHECK(rtz_bits(0x7F7FFFFFu) == 0x7F7F);  // no overflow under truncation
  CHECK(rtz_bits(0x7F800001u) == 0x7FC0);  // a NaN must not truncate to Inf
  CHECK(rtz_bits(0xFF800000u) == 0xFF80);
  CHECK(rtz_bits(0x80000000u) == 0x8000);
}

TEST_CASE("widening is exact for all 65536 BF16 patterns", "[bf16]") {
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const auto h = amla::bf16::from_bits(static_cast<std::uint16_t>(b));
    const float f = h.to_float();
    REQUIRE(amla::as_uint32(f) == (b << 16));
    if (!std::isnan(f)) {
      // Narrowing a BF16 value again is the identity under both roundings.
      REQUIRE(amla::bf16::from_float(f).bits == b);
      REQUIRE(amla::bf16::from_float(f, amla::bf16_rounding::toward_zero).bits == b);
      REQUIRE(amla::is_bf16_exact(f));
    }
  }
}

TEST_CASE("both conversions match the reference on every FP32 pattern", "[bf16][exhaustive]") {
  // All 2^32 (sanitizer builds: a prime stride, ~1M patterns).
  const std::uint64_t stride = amla_test::reduced ? 4099 : 1;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<std::uint64_t> rne_bad{0}, rtz_bad{0}, checked{0};
  std::atomic<std::uint64_t> first_bad{~std::uint64_t{0}};
  std::vector<std::thread> pool;
  const std::uint64_t total = std::uint64_t{1} << 32;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::uint64_t bad_rne = 0, bad_rtz = 0, n = 0;
      for (std::uint64_t i = t * stride; i < total; i += threads * stride) {
        const auto u = static_cast<std::uint32_t>(i);
        const bool ok_rne = rne_bits(u) == reference_rne(u);
        const bool ok_rtz = rtz_bits(u) == reference_rtz(u);
        bad_rne += !ok_rne;
        bad_rtz += !ok_rtz;
        ++n;
        if (!(ok_rne && ok_rtz)) {
          std::uint64_t cur = first_bad.load();
          while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
          }
        }
      }
      rne_bad += bad_rne;
      rtz_bad += bad_rtz;
      checked += n;
    });
  }
  for (auto& th : pool) th.join();
  INFO("first mismatching pattern: " << std::hex << first_bad.load());
  CHECK(checked.load() == (total + stride - 1) / stride);
  CHECK(rne_bad.load() == 0);
  CHECK(rtz_bad.load() == 0);
}

TEST_CASE("round_bf16 is idempotent and monotone", "[bf16]") {
  // The rounding error is at most half a BF16 ulp (2^(e-8) for x in [2^e, 2^(e+1))), so at most
  // 2^-8 relative.
  minifloat_test::check_idempotent_monotone([](float x) { return amla::round_bf16(x); }, -300.0f,
                                            300.0f, 0.173f, -8,
                                            std::numeric_limits<float>::infinity());
}

TEST_CASE("the array and finite-only forms round as the reference does", "[bf16]") {
  // Named patterns: ties to even both ways, the carry into the exponent, FLT_MAX to Inf, a
  // subnormal, -0; the NaN-preserving array form also on NaNs whose add would carry into the sign.
  const std::uint32_t named[] = {0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x3FFFFFFFu, 0x7F7FFFFFu,
                                 0x00008001u, 0x80000000u, 0xC0A08000u, 0x7F800000u};
  for (const std::uint32_t u : named) {
    CAPTURE(u);
    const std::uint32_t want = static_cast<std::uint32_t>(reference_rne(u)) << 16;
    CHECK(amla::as_uint32(amla::round_bf16_finite(amla::as_fp32(u))) == want);
    float x[2] = {amla::as_fp32(u), amla::as_fp32(u)};
    amla::round_bf16_inplace(x, 1);
    amla::round_bf16_finite_inplace(x + 1, 1);
    CHECK(amla::as_uint32(x[0]) == want);
    CHECK(amla::as_uint32(x[1]) == want);
  }
  for (const std::uint32_t nan : {0x7FFFFFFFu, 0xFFFF8000u, 0x7F800001u}) {
    float x = amla::as_fp32(nan);
    amla::round_bf16_inplace(&x, 1);
    CHECK(amla::as_uint32(x) == static_cast<std::uint32_t>(reference_rne(nan)) << 16);
    CHECK(std::isnan(x));
  }
  // A strided sweep over all patterns, through the array forms (runs of 64 elements).
  std::vector<float> a(64), b(64);
  std::uint64_t bad = 0;
  for (std::uint64_t base = 0; base < (std::uint64_t{1} << 32); base += 64 * 65537) {
    for (std::size_t j = 0; j < 64; ++j) {
      a[j] = amla::as_fp32(static_cast<std::uint32_t>(base + j * 1021));
      b[j] = std::isnan(a[j]) ? 0.0f : a[j];
    }
    amla::round_bf16_inplace(a.data(), 64);
    amla::round_bf16_finite_inplace(b.data(), 64);
    for (std::size_t j = 0; j < 64; ++j) {
      const auto u = static_cast<std::uint32_t>(base + j * 1021);
      const std::uint32_t want = static_cast<std::uint32_t>(reference_rne(u)) << 16;
      bad += amla::as_uint32(a[j]) != want;
      if (!std::isnan(amla::as_fp32(u))) bad += amla::as_uint32(b[j]) != want;
    }
  }
  CHECK(bad == 0);
}
