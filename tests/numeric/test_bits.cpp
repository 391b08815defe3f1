// Tests for amla/numeric/bits.hpp: bit casts and field accessors on exact bit patterns.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>

#include "amla/numeric/bits.hpp"

TEST_CASE("as_int32 reads the FP32 pattern as AMLA eq. 6 describes", "[bits]") {
  // AMLA Figure 3: 0.5f is 0 01111110 000..0, i.e. 126 * 2^23 as an integer.
  STATIC_REQUIRE(amla::as_int32(0.5f) == 126 * (1 << 23));
  STATIC_REQUIRE(amla::as_uint32(1.0f) == 0x3F800000u);
  STATIC_REQUIRE(amla::as_uint32(-2.0f) == 0xC0000000u);
  STATIC_REQUIRE(amla::as_int32(-2.0f) == -(1 << 30));  // -2^31 S + 2^23 E + M = -2^31 + 2^30
  STATIC_REQUIRE(amla::as_uint32(-0.0f) == 0x80000000u);
  STATIC_REQUIRE(amla::as_fp32(std::int32_t{0x40490FDB}) == 3.14159274f);
}

TEST_CASE("as_fp32 inverts as_int32 and as_uint32 for every pattern class", "[bits]") {
  const std::uint32_t patterns[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x007FFFFFu,
                                    0x00800000u, 0x3F800000u, 0x7F7FFFFFu, 0x7F800000u,
                                    0xFF800000u, 0x7FC00000u, 0xFFFFFFFFu, 0x12345678u};
  for (std::uint32_t u : patterns) {
    CAPTURE(u);
    CHECK(amla::as_uint32(amla::as_fp32(u)) == u);
    CHECK(amla::as_int32(amla::as_fp32(static_cast<std::int32_t>(u))) ==
          static_cast<std::int32_t>(u));
  }
}

TEST_CASE("field accessors split sign, exponent and mantissa", "[bits]") {
  using namespace amla::fp32;
  STATIC_REQUIRE(biased_exponent(1.0f) == 127);
  STATIC_REQUIRE(biased_exponent(0.5f) == 126);
  STATIC_REQUIRE(biased_exponent(0.0f) == 0);
  STATIC_REQUIRE(biased_exponent(std::numeric_limits<float>::denorm_min()) == 0);
  STATIC_REQUIRE(biased_exponent(std::numeric_limits<float>::infinity()) == 255);
  STATIC_REQUIRE(mantissa(1.5f) == 0x400000u);
  STATIC_REQUIRE(sign(-1.0f) == 1);
  STATIC_REQUIRE(sign(-0.0f) == 1);
  STATIC_REQUIRE(sign(0.0f) == 0);
  CHECK(is_nan(std::numeric_limits<float>::quiet_NaN()));
  CHECK(is_nan(amla::as_fp32(0xFF800001u)));
  CHECK_FALSE(is_nan(std::numeric_limits<float>::infinity()));
  CHECK(is_inf(-std::numeric_limits<float>::infinity()));
  CHECK_FALSE(is_inf(std::numeric_limits<float>::max()));
  // The bit tests agree with the library's classification on a spread of values.
  for (float f : {0.0f, -1.0f, 3.0e38f, 1e-40f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    CHECK(is_nan(f) == std::isnan(f));
    CHECK(is_inf(f) == std::isinf(f));
  }
}
