// Tests for amla/numeric/fp16.hpp: exact bit patterns, widening of all 65536 codes, and narrowing
// of every FP32 pattern against an independent nearest-value reference.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>

#include "amla/numeric/fp16.hpp"
#include "common/reduced.hpp"
#include "minifloat_reference.hpp"

namespace {

std::uint16_t fp16_of(std::uint32_t u) {
  return amla::fp16::from_float(amla::as_fp32(u)).bits;
}

// FP16 value of a code from its fields (independent of the header).
double fp16_value(std::uint32_t c) {
  const int e = static_cast<int>((c >> 10) & 0x1F);
  const double m = static_cast<double>(c & 0x3FF);
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024.0 + m, e - 25);
  return (c & 0x8000u) != 0u ? -mag : mag;
}

}  // namespace

TEST_CASE("fp16 narrowing on named bit patterns", "[fp16]") {
  CHECK(fp16_of(0x3F800000u) == 0x3C00);  // 1.0
  CHECK(fp16_of(0xC0000000u) == 0xC000);  // -2.0
  CHECK(fp16_of(0x3F801000u) == 0x3C00);  // 1 + 2^-11: a tie, kept lsb 0 stays
  CHECK(fp16_of(0x3F803000u) == 0x3C02);  // 1 + 3 * 2^-11: a tie, kept lsb 1 rounds up to even
  CHECK(fp16_of(0x3F801001u) == 0x3C01);  // just above the tie
  CHECK(fp16_of(0x477FE000u) == 0x7BFF);  // 65504, the largest finite
  CHECK(fp16_of(0x477FEFFFu) == 0x7BFF);  // just below 65520 stays finite
  CHECK(fp16_of(0x477FF000u) == 0x7C00);  // 65520: the tie goes to the even Inf
  CHECK(fp16_of(0x7F7FFFFFu) == 0x7C00);  // FLT_MAX overflows to Inf
  CHECK(fp16_of(0xFF800000u) == 0xFC00);  // -Inf
  CHECK(fp16_of(0x38800000u) == 0x0400);  // 2^-14, the smallest normal
  CHECK(fp16_of(0x33800000u) == 0x0001);  // 2^-24, the smallest subnormal
  CHECK(fp16_of(0x33000000u) == 0x0000);  // 2^-25: a tie with 0, to even
  CHECK(fp16_of(0x33000001u) == 0x0001);  // just above it
  CHECK(fp16_of(0x33C00000u) == 0x0002);  // 1.5 * 2^-24: a tie, to even 2
  CHECK(fp16_of(0x387FE000u) == 0x0400);  // the largest subnormal plus half a step: carry to normal
  CHECK(fp16_of(0x80000000u) == 0x8000);  // -0
  CHECK(fp16_of(0x00000001u) == 0x0000);  // an FP32 subnormal underflows to 0
  CHECK(fp16_of(0x7FC00000u) == 0x7E00);  // quiet NaN
  CHECK(fp16_of(0x7F800001u) == 0x7E00);  // signalling NaN: quiet, not Inf
  CHECK(fp16_of(0xFFFFFFFFu) == 0xFFFF);  // NaN with full payload keeps the sign
}

TEST_CASE("fp16 widening is exact for all 65536 codes", "[fp16]") {
  for (std::uint32_t c = 0; c <= 0xFFFFu; ++c) {
    const float f = amla::fp16::from_bits(static_cast<std::uint16_t>(c)).to_float();
    const std::uint32_t e = (c >> 10) & 0x1F;
    if (e == 0x1F) {
      const std::uint32_t want = ((c & 0x8000u) << 16) | 0x7F800000u | ((c & 0x3FFu) << 13);
      REQUIRE(amla::as_uint32(f) == want);  // Inf, or NaN with its payload
      continue;
    }
    REQUIRE(static_cast<double>(f) == fp16_value(c));
    REQUIRE(std::signbit(f) == ((c & 0x8000u) != 0u));
    REQUIRE(amla::fp16::from_float(f).bits == c);  // and narrowing back is the identity
    REQUIRE(amla::is_fp16_exact(f));
  }
}

TEST_CASE("fp16 narrowing matches the reference on every FP32 pattern", "[fp16][exhaustive]") {
  // All 2^31 magnitudes, each with both signs: all 2^32 patterns (sanitizer builds: a prime
  // stride, ~0.5M magnitudes).
  const std::uint64_t stride = amla_test::reduced ? 4099 : 1;
  const auto pieces =
      minifloat_test::nearest_even_pieces(minifloat_test::code_values(10, 15, 0x7BFF));
  std::atomic<std::uint64_t> visited{0};
  const std::uint64_t bad = minifloat_test::sweep_pieces(
      pieces, stride, visited,
      [](std::uint32_t u0, std::uint32_t count, std::uint32_t step, std::uint32_t code) {
        const std::uint32_t want = code > 0x7BFFu ? 0x7C00u : code;  // overflow: Inf
        std::uint32_t n = 0;
        for (std::uint32_t j = 0; j < count; ++j) {
          const std::uint32_t v = u0 + j * step;
          n += fp16_of(v) != want;
          n += fp16_of(v | 0x80000000u) != (want | 0x8000u);
        }
        return n;
      });
  CHECK(visited.load() == minifloat_test::expected_visits(stride));
  CHECK(bad == 0);
  // The NaN patterns, both signs, every `stride`-th payload: a quiet NaN with the top payload bits.
  std::uint64_t nan_bad = 0;
  for (std::uint64_t m = 1; m <= 0x7FFFFF; m += stride) {
    for (const std::uint32_t s : {0u, 0x80000000u}) {
      const auto u = static_cast<std::uint32_t>(s | 0x7F800000u | m);
      const std::uint32_t want = (s >> 16) | 0x7E00u | static_cast<std::uint32_t>(m >> 13);
      nan_bad += fp16_of(u) != want;
    }
  }
  CHECK(nan_bad == 0);
}

TEST_CASE("round_fp16 is idempotent and within half an ulp", "[fp16]") {
  // Half an ulp of a normal FP16 is at most 2^-11 relative.
  minifloat_test::check_idempotent_monotone([](float x) { return amla::round_fp16(x); }, -70000.0f,
                                            70000.0f, 13.37f, -11, 65504.0f);
  float a[4] = {1.0f + 0x1p-11f, 70000.0f, -0x1p-25f, 3.0f};
  amla::round_fp16_inplace(a, 4);
  CHECK(a[0] == 1.0f);
  CHECK(std::isinf(a[1]));
  CHECK(a[2] == 0.0f);
  CHECK(std::signbit(a[2]));
  CHECK(a[3] == 3.0f);
}
