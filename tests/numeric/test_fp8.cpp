// Tests for amla/numeric/fp8.hpp: exact bit patterns, widening of all 256 codes of each format,
// and narrowing of every FP32 pattern (each rounding and saturation mode) against an independent
// nearest-value reference.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "amla/numeric/fp8.hpp"
#include "common/reduced.hpp"
#include "minifloat_reference.hpp"

namespace {

using amla::e8m0_rounding;
using amla::saturation;

std::uint8_t e4m3_of(std::uint32_t u, saturation s = saturation::none) {
  return amla::fp8_e4m3::from_float(amla::as_fp32(u), s).bits;
}
std::uint8_t e5m2_of(std::uint32_t u, saturation s = saturation::none) {
  return amla::fp8_e5m2::from_float(amla::as_fp32(u), s).bits;
}
std::uint8_t e8m0_of(float f, e8m0_rounding r = e8m0_rounding::nearest,
                     saturation s = saturation::none) {
  return amla::e8m0::from_float(f, r, s).bits;
}

// Value of an FP8 code from its fields (independent of the header); NaN for the NaN codes.
double fp8_value(std::uint32_t c, int mantissa_bits, int bias, bool fn) {
  const int ebits = 7 - mantissa_bits;
  const int e = static_cast<int>((c >> mantissa_bits) & ((1u << ebits) - 1u));
  const std::uint32_t mmask = (1u << mantissa_bits) - 1u;
  const double m = static_cast<double>(c & mmask);
  const bool top = e == (1 << ebits) - 1;
  double mag = 0.0;
  if (fn && top && (c & mmask) == mmask) {
    mag = std::nan("");
  } else if (!fn && top) {
    mag = (c & mmask) == 0 ? INFINITY : std::nan("");
  } else {
    mag = e == 0 ? std::ldexp(m, 1 - bias - mantissa_bits)
                 : std::ldexp(std::ldexp(1.0, mantissa_bits) + m, e - bias - mantissa_bits);
  }
  return (c & 0x80u) != 0u ? -mag : mag;
}

// The pieces of e8m0 narrowing over the positive magnitudes (minifloat_reference.hpp), over the
// powers 2^-127 .. 2^127 and the overflow sentinel 2^128 (code 255): +0 has no value (code 256);
// below the first boundary everything gives code 0; code i + 1 starts at the midpoint 1.5 * 2^k
// of 2^k = powers[i] and 2^(k+1) (nearest, the midpoint going up), just after 2^k (up), or at
// 2^(k+1) (down; the sentinel's start is then +Inf).
std::vector<minifloat_test::Piece> e8m0_pieces(e8m0_rounding mode) {
  std::vector<minifloat_test::Piece> p{{0u, 256u}, {1u, 0u}};
  for (int i = 0; i <= 254; ++i) {
    const double lo = std::ldexp(1.0, i - 127);
    std::uint32_t start = 0;
    if (mode == e8m0_rounding::nearest) start = minifloat_test::exact_pattern(1.5 * lo);
    if (mode == e8m0_rounding::up) start = minifloat_test::exact_pattern(lo) + 1u;
    if (mode == e8m0_rounding::down) {
      start = i == 254 ? 0x7F800000u : minifloat_test::exact_pattern(2.0 * lo);
    }
    p.push_back({start, static_cast<std::uint32_t>(i + 1)});
  }
  return p;
}

// One FP8 format's exhaustive sweep in one mode: every pattern of a piece and its negation narrow
// to the piece's code, and a code above max_code (the largest finite one) is the overflow:
// max_code saturated, overflow_code (Inf or NaN) otherwise. The mode and the conversion are
// template arguments so that the loop under test is as tight as a kernel's.
template <saturation Sat, class Narrow>
void sweep_fp8_format(std::uint64_t stride, const std::vector<minifloat_test::Piece>& pieces,
                      std::uint32_t max_code, std::uint32_t overflow_code, Narrow narrow) {
  constexpr bool fin = Sat == saturation::finite;
  CAPTURE(fin, max_code, overflow_code);
  std::atomic<std::uint64_t> visited{0};
  const std::uint64_t bad = minifloat_test::sweep_pieces(
      pieces, stride, visited,
      [=](std::uint32_t u0, std::uint32_t count, std::uint32_t step, std::uint32_t code) {
        const std::uint32_t want = code > max_code ? (fin ? max_code : overflow_code) : code;
        std::uint32_t n = 0;
        for (std::uint32_t j = 0; j < count; ++j) {
          const std::uint32_t v = u0 + j * step;
          n += narrow(v, Sat) != want;
          n += narrow(v | 0x80000000u, Sat) != (want | 0x80u);
        }
        return n;
      });
  CHECK(visited.load() == minifloat_test::expected_visits(stride));
  CHECK(bad == 0);
}

// The exhaustive sweeps of both formats in one mode.
template <saturation Sat>
void sweep_fp8_values(std::uint64_t stride, const std::vector<minifloat_test::Piece>& p4,
                      const std::vector<minifloat_test::Piece>& p5) {
  // e4m3: an overflow is NaN (0x7F), or 448 (0x7E) saturated.
  sweep_fp8_format<Sat>(stride, p4, 0x7Eu, 0x7Fu,
                        [](std::uint32_t u, saturation s) { return e4m3_of(u, s); });
  // e5m2: an overflow is Inf (0x7C), or 57344 (0x7B) saturated.
  sweep_fp8_format<Sat>(stride, p5, 0x7Bu, 0x7Cu,
                        [](std::uint32_t u, saturation s) { return e5m2_of(u, s); });
}

// e8m0 in one rounding: +0 and every negative pattern are NaN (255); an overflow is NaN, or 2^127
// (254) saturated.
template <saturation Sat, e8m0_rounding Mode>
void sweep_e8m0(std::uint64_t stride) {
  constexpr bool fin = Sat == saturation::finite;
  CAPTURE(fin, static_cast<int>(Mode));
  std::atomic<std::uint64_t> visited{0};
  const std::uint64_t bad = minifloat_test::sweep_pieces(
      e8m0_pieces(Mode), stride, visited,
      [](std::uint32_t u0, std::uint32_t count, std::uint32_t step, std::uint32_t code) {
        const std::uint32_t want = code == 256u ? 255u : (code > 254u ? (fin ? 254u : 255u) : code);
        std::uint32_t n = 0;
        for (std::uint32_t j = 0; j < count; ++j) {
          const std::uint32_t v = u0 + j * step;
          n += e8m0_of(amla::as_fp32(v), Mode, Sat) != want;
          n += e8m0_of(amla::as_fp32(v | 0x80000000u), Mode, Sat) != 255u;
        }
        return n;
      });
  CHECK(visited.load() == minifloat_test::expected_visits(stride));
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("e4m3 narrowing on named bit patterns", "[fp8]") {
  CHECK(e4m3_of(0x3F800000u) == 0x38);  // 1.0
  CHECK(e4m3_of(0x43E00000u) == 0x7E);  // 448, the largest
  CHECK(e4m3_of(0x43E7FFFFu) == 0x7E);  // just below 464 rounds down
  CHECK(e4m3_of(0x43E80000u) == 0x7E);  // 464: a tie between 448 (even) and 480 (the NaN code)
  CHECK(e4m3_of(0x43E80001u) == 0x7F);  // above it: overflow to NaN without saturation
  CHECK(e4m3_of(0x43E80001u, saturation::finite) == 0x7E);  // ... and 448 with it
  CHECK(e4m3_of(0xC4000000u) == 0xFF);                      // -512: -NaN
  CHECK(e4m3_of(0xC4000000u, saturation::finite) == 0xFE);  // -448
  CHECK(e4m3_of(0x7F800000u) == 0x7F);                      // +Inf: NaN (no Inf in e4m3)
  CHECK(e4m3_of(0x7F800000u, saturation::finite) == 0x7E);  // saturates
  CHECK(e4m3_of(0x7FC00000u, saturation::finite) == 0x7F);  // NaN stays NaN
  CHECK(e4m3_of(0xFFC00000u) == 0xFF);
  CHECK(e4m3_of(0x3C800000u) == 0x08);  // 2^-6, the smallest normal
  CHECK(e4m3_of(0x3B000000u) == 0x01);  // 2^-9, the smallest subnormal
  CHECK(e4m3_of(0x3A800000u) == 0x00);  // 2^-10: tie with 0, to even
  CHECK(e4m3_of(0x3AC00000u) == 0x01);  // 1.5 * 2^-10 rounds up
  CHECK(e4m3_of(0x3B400000u) == 0x02);  // 1.5 * 2^-9: tie 1 | 2, to even 2
  CHECK(e4m3_of(0x3F880000u) == 0x38);  // 1.0625: tie 1 | 1.125, to even 1
  CHECK(e4m3_of(0x3F980000u) == 0x3A);  // 1.1875: tie 1.125 | 1.25, to even 1.25
  CHECK(e4m3_of(0x80000000u) == 0x80);  // -0
}

TEST_CASE("e5m2 narrowing on named bit patterns", "[fp8]") {
  CHECK(e5m2_of(0x3F800000u) == 0x3C);  // 1.0
  CHECK(e5m2_of(0x47600000u) == 0x7B);  // 57344, the largest
  CHECK(e5m2_of(0x476FFFFFu) == 0x7B);  // just below 61440
  CHECK(e5m2_of(0x47700000u) == 0x7C);  // 61440: the tie goes to the even Inf
  CHECK(e5m2_of(0x47700000u, saturation::finite) == 0x7B);
  CHECK(e5m2_of(0xFF800000u) == 0xFC);                      // -Inf
  CHECK(e5m2_of(0xFF800000u, saturation::finite) == 0xFB);  // -57344
  CHECK(e5m2_of(0x7FC00000u) == 0x7E);                      // quiet NaN
  CHECK(e5m2_of(0x7F800001u) == 0x7E);                      // signalling NaN: quiet, not Inf
  CHECK(e5m2_of(0x7FE00000u) == 0x7F);                      // payload's top bit kept
  CHECK(e5m2_of(0x37800000u) == 0x01);                      // 2^-16, the smallest subnormal
  CHECK(e5m2_of(0x37000000u) == 0x00);                      // 2^-17: tie with 0, to even
  CHECK(e5m2_of(0x3F900000u) == 0x3C);                      // 1.125: tie 1 | 1.25, to even 1
}

TEST_CASE("e8m0 narrowing on named values, every mode", "[fp8][e8m0]") {
  CHECK(e8m0_of(1.0f) == 127);
  CHECK(e8m0_of(1.0f, e8m0_rounding::up) == 127);  // exact powers stay in every mode
  CHECK(e8m0_of(1.0f, e8m0_rounding::down) == 127);
  CHECK(e8m0_of(1.4999999f) == 127);
  CHECK(e8m0_of(1.5f) == 128);  // the midpoint goes up
  CHECK(e8m0_of(3.0f) == 129);  // ... even to an odd code (no mantissa bit to make even)
  CHECK(e8m0_of(1.0000001f, e8m0_rounding::up) == 128);
  CHECK(e8m0_of(1.9999999f, e8m0_rounding::down) == 127);
  CHECK(e8m0_of(0x1p-127f) == 0);    // the smallest value, an FP32 subnormal
  CHECK(e8m0_of(0x1.8p-127f) == 1);  // 1.5 * 2^-127: the midpoint goes up
  CHECK(e8m0_of(0x1p-149f) == 0);    // below the smallest: the smallest, in every mode
  CHECK(e8m0_of(0x1p-149f, e8m0_rounding::down) == 0);
  CHECK(e8m0_of(0x1p-140f, e8m0_rounding::up) == 0);
  CHECK(e8m0_of(0x1.000004p-127f, e8m0_rounding::up) == 1);
  CHECK(e8m0_of(0x1p127f) == 254);
  CHECK(e8m0_of(0x1.8p127f) == 255);  // rounds past 2^127: NaN
  CHECK(e8m0_of(0x1.8p127f, e8m0_rounding::nearest, saturation::finite) == 254);
  CHECK(e8m0_of(0x1.8p127f, e8m0_rounding::down) == 254);
  CHECK(e8m0_of(0x1.000002p127f, e8m0_rounding::up) == 255);
  CHECK(e8m0_of(INFINITY) == 255);
  CHECK(e8m0_of(INFINITY, e8m0_rounding::down, saturation::finite) == 254);
  for (const e8m0_rounding r : {e8m0_rounding::nearest, e8m0_rounding::up, e8m0_rounding::down}) {
    for (const saturation s : {saturation::none, saturation::finite}) {
      CHECK(e8m0_of(0.0f, r, s) == 255);  // no zero
      CHECK(e8m0_of(-0.0f, r, s) == 255);
      CHECK(e8m0_of(-1.0f, r, s) == 255);  // no sign
      CHECK(e8m0_of(NAN, r, s) == 255);
    }
  }
  CHECK(amla::e8m0::from_exponent(-3).to_float() == 0.125f);
  CHECK(amla::e8m0::from_bits(200).exponent() == 73);
  CHECK(amla::e8m0{}.to_float() == 1.0f);
}

TEST_CASE("FP8 widening is exact for all 256 codes of each format", "[fp8]") {
  for (std::uint32_t c = 0; c < 256; ++c) {
    CAPTURE(c);
    const auto b = static_cast<std::uint8_t>(c);
    const float f4 = amla::fp8_e4m3::from_bits(b).to_float();
    const float f5 = amla::fp8_e5m2::from_bits(b).to_float();
    const double want4 = fp8_value(c, 3, 7, true);
    const double want5 = fp8_value(c, 2, 15, false);
    if (std::isnan(want4)) {
      REQUIRE(amla::as_uint32(f4) == (((c & 0x80u) << 24) | 0x7FC00000u));
    } else {
      REQUIRE(static_cast<double>(f4) == want4);
      REQUIRE(std::signbit(f4) == ((c & 0x80u) != 0u));
      REQUIRE(amla::fp8_e4m3::from_float(f4).bits == c);
      REQUIRE(amla::fp8_e4m3::from_float(f4, saturation::finite).bits == c);
    }
    if (std::isnan(want5)) {
      REQUIRE(amla::as_uint32(f5) == (((c & 0x80u) << 24) | 0x7F800000u | ((c & 3u) << 21)));
      REQUIRE(amla::fp8_e5m2::from_float(f5).bits == (c | 2u));  // narrowing back sets quiet bit
    } else {
      REQUIRE(static_cast<double>(f5) == want5);
      REQUIRE(std::signbit(f5) == ((c & 0x80u) != 0u));
      REQUIRE(amla::fp8_e5m2::from_float(f5).bits == c);
    }
    const float f8 = amla::e8m0::from_bits(b).to_float();
    if (c == 255) {
      REQUIRE(std::isnan(f8));
    } else {
      REQUIRE(static_cast<double>(f8) == std::ldexp(1.0, static_cast<int>(c) - 127));
      for (const e8m0_rounding r :
           {e8m0_rounding::nearest, e8m0_rounding::up, e8m0_rounding::down}) {
        REQUIRE(amla::e8m0::from_float(f8, r).bits == c);
      }
    }
    REQUIRE(amla::as_uint32(amla::fp8_to_float(amla::fp8_kind::e4m3, b)) == amla::as_uint32(f4));
    REQUIRE(amla::as_uint32(amla::fp8_to_float(amla::fp8_kind::e5m2, b)) == amla::as_uint32(f5));
  }
  CHECK(amla::fp8_max_finite(amla::fp8_kind::e4m3) == 448.0f);
  CHECK(amla::fp8_max_finite(amla::fp8_kind::e5m2) == 57344.0f);
}

TEST_CASE("FP8 narrowing matches the reference on every FP32 pattern, every mode",
          "[fp8][exhaustive]") {
  // All 2^31 magnitudes, each with both signs (sanitizer builds: a prime stride).
  const std::uint64_t stride = amla_test::reduced ? 4099 : 1;
  const auto p4 = minifloat_test::nearest_even_pieces(minifloat_test::code_values(3, 7, 0x7E));
  const auto p5 = minifloat_test::nearest_even_pieces(minifloat_test::code_values(2, 15, 0x7B));
  sweep_fp8_values<saturation::none>(stride, p4, p5);
  sweep_fp8_values<saturation::finite>(stride, p4, p5);
  sweep_e8m0<saturation::none, e8m0_rounding::nearest>(stride);
  sweep_e8m0<saturation::none, e8m0_rounding::up>(stride);
  sweep_e8m0<saturation::none, e8m0_rounding::down>(stride);
  sweep_e8m0<saturation::finite, e8m0_rounding::nearest>(stride);
  sweep_e8m0<saturation::finite, e8m0_rounding::up>(stride);
  sweep_e8m0<saturation::finite, e8m0_rounding::down>(stride);
  // NaN patterns, both signs, every `stride`-th payload, in every mode: NaN codes (e5m2 keeps the
  // top payload bits with the quiet bit set).
  std::uint64_t nan_bad = 0;
  for (std::uint64_t m = 1; m <= 0x7FFFFF; m += stride) {
    for (const std::uint32_t s : {0u, 0x80000000u}) {
      const auto u = static_cast<std::uint32_t>(s | 0x7F800000u | m);
      const std::uint32_t sign8 = s >> 24;
      const std::uint32_t want5 = sign8 | 0x7Eu | static_cast<std::uint32_t>(m >> 21);
      for (const saturation sat : {saturation::none, saturation::finite}) {
        nan_bad += e4m3_of(u, sat) != (sign8 | 0x7Fu);
        nan_bad += e5m2_of(u, sat) != want5;
        nan_bad += e8m0_of(amla::as_fp32(u), e8m0_rounding::up, sat) != 255;
      }
    }
  }
  CHECK(nan_bad == 0);
}
