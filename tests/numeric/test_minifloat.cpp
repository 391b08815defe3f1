// Tests for amla/numeric/minifloat.hpp: the derived constants of the format descriptions, and the
// generic narrowing and widening on small formats that no named type uses (the named ones, FP16
// and FP8, are swept exhaustively in test_fp16.cpp and test_fp8.cpp).
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "amla/numeric/fp16.hpp"
#include "amla/numeric/fp8.hpp"
#include "amla/numeric/minifloat.hpp"
#include "minifloat_reference.hpp"

using amla::saturation;
using amla::detail::minifloat_spec;

TEST_CASE("minifloat specs derive the OCP and IEEE constants", "[minifloat]") {
  constexpr minifloat_spec h = amla::detail::fp16_spec;
  constexpr minifloat_spec e4 = amla::detail::e4m3_spec;
  constexpr minifloat_spec e5 = amla::detail::e5m2_spec;
  STATIC_REQUIRE(h.max_finite() == 0x7BFFu);
  STATIC_REQUIRE(h.overflow_code() == 0x7C00u);
  STATIC_REQUIRE(h.emin() == -14);
  STATIC_REQUIRE(h.sign_bit() == 0x8000u);
  STATIC_REQUIRE(e4.max_finite() == 0x7Eu);
  STATIC_REQUIRE(e4.overflow_code() == 0x7Fu);  // NaN: e4m3fn has no Inf
  STATIC_REQUIRE(e4.nan_code(0x123456u) == 0x7Fu);
  STATIC_REQUIRE(e4.emin() == -6);
  STATIC_REQUIRE(e5.max_finite() == 0x7Bu);
  STATIC_REQUIRE(e5.overflow_code() == 0x7Cu);
  STATIC_REQUIRE(e5.nan_code(0) == 0x7Eu);          // quiet bit set
  STATIC_REQUIRE(e5.nan_code(0x200000u) == 0x7Fu);  // and the top payload bit kept
  // The largest finite values, through the widening.
  CHECK(amla::as_fp32(amla::detail::minifloat_to_fp32(h, h.max_finite())) == 65504.0f);
  CHECK(amla::as_fp32(amla::detail::minifloat_to_fp32(e4, e4.max_finite())) == 448.0f);
  CHECK(amla::as_fp32(amla::detail::minifloat_to_fp32(e5, e5.max_finite())) == 57344.0f);
  CHECK(amla::fp16::max_finite == 65504.0f);
  CHECK(amla::fp8_e4m3::max_finite == 448.0f);
  CHECK(amla::fp8_e5m2::max_finite == 57344.0f);
  // The conversions are constant expressions.
  STATIC_REQUIRE(amla::fp16::from_float(1.0f).bits == 0x3C00);
  STATIC_REQUIRE(amla::fp8_e4m3::from_float(-2.0f).bits == 0xC0);
  STATIC_REQUIRE(amla::e8m0::from_float(0.25f).bits == 125);
}

TEST_CASE("the generic narrowing rounds small IEEE-like and fn formats to nearest even",
          "[minifloat]") {
  // e3m2 (bias 3, IEEE-like: max 14) and e2m3fn (bias 1, finite: max 7, no Inf), over a strided
  // sweep of every binade (the stride is odd, so every low-bit pattern class is reached).
  struct Case {
    minifloat_spec spec;
    std::uint32_t max_code;
    double max_value;
  };
  const Case cases[] = {{{3, 2, 3, true}, 0x1Bu, 14.0}, {{2, 3, 1, false}, 0x1Eu, 7.0}};
  for (const Case& c : cases) {
    CAPTURE(c.spec.exponent_bits, c.spec.mantissa_bits);
    REQUIRE(c.spec.max_finite() == c.max_code);
    REQUIRE(amla::as_fp32(amla::detail::minifloat_to_fp32(c.spec, c.max_code)) == c.max_value);
    const auto pieces = minifloat_test::nearest_even_pieces(
        minifloat_test::code_values(c.spec.mantissa_bits, c.spec.bias, c.max_code));
    for (const saturation sat : {saturation::none, saturation::finite}) {
      const std::uint32_t over = sat == saturation::finite ? c.max_code : c.spec.overflow_code();
      const std::uint32_t sign = c.spec.sign_bit();
      const minifloat_spec spec = c.spec;
      std::atomic<std::uint64_t> visited{0};
      const std::uint64_t bad = minifloat_test::sweep_pieces(
          pieces, 997, visited,
          [&](std::uint32_t u0, std::uint32_t count, std::uint32_t step, std::uint32_t code) {
            const std::uint32_t want = code > c.max_code ? over : code;
            std::uint32_t n = 0;
            for (std::uint32_t j = 0; j < count; ++j) {
              const std::uint32_t v = u0 + j * step;
              n += amla::detail::minifloat_from_fp32(spec, v, sat) != want;
              n += amla::detail::minifloat_from_fp32(spec, v | 0x80000000u, sat) != (want | sign);
            }
            return n;
          });
      CHECK(visited.load() == minifloat_test::expected_visits(997));
      CHECK(bad == 0);
    }
    // Widening then narrowing is the identity on every non-NaN code.
    for (std::uint32_t code = 0; code < 2 * c.spec.sign_bit(); ++code) {
      const float f = amla::as_fp32(amla::detail::minifloat_to_fp32(c.spec, code));
      if (std::isnan(f)) continue;
      CHECK(amla::detail::minifloat_from_fp32(c.spec, amla::as_uint32(f), saturation::none) ==
            code);
    }
  }
}
