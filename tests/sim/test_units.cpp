// Tests of amla/sim/units.hpp: Cycles arithmetic is exact where it fits and refuses to wrap where
// it does not; the conversions name their rate.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "amla/sim/units.hpp"
#include "common/error_message.hpp"

using amla::sim::Cycles;

TEST_CASE("Cycles add, subtract and scale exactly", "[sim][units]") {
  CHECK((Cycles{40} + Cycles{2}).count == 42);
  CHECK((Cycles{40} - Cycles{50}).count == -10);
  CHECK((Cycles{21} * 2).count == 42);
  CHECK((3 * Cycles{-7}).count == -21);
  Cycles c{5};
  c += Cycles{10};
  c -= Cycles{3};
  CHECK(c.count == 12);
  // At the edge of int64 the exact result still fits.
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  CHECK((Cycles{max - 1} + Cycles{1}).count == max);
  CHECK((Cycles{std::int64_t{1} << 31} * (std::int64_t{1} << 31)).count == std::int64_t{1} << 62);
}

TEST_CASE("Cycles arithmetic that overflows int64 throws, naming the operation and operands",
          "[sim][units]") {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t min = std::numeric_limits<std::int64_t>::min();
  const std::string sum = amla_test::error_of([&] { (void)(Cycles{max} + Cycles{1}); });
  CHECK_THAT(sum, Catch::Contains("amla::sim::Cycles") && Catch::Contains("'a + b'") &&
                      Catch::Contains("9223372036854775807 + 1") && Catch::Contains("int64"));
  CHECK_THAT(amla_test::error_of([&] { (void)(Cycles{min} - Cycles{1}); }),
             Catch::Contains("'a - b'"));
  CHECK_THAT(amla_test::error_of([&] { (void)(Cycles{std::int64_t{1} << 62} * 2); }),
             Catch::Contains("'a * k'"));
  CHECK_THAT(amla_test::error_of([&] { (void)(-2 * Cycles{max}); }), Catch::Contains("'a * k'"));
  Cycles c{max};
  CHECK_THROWS_AS(c += Cycles{max}, amla::invalid_argument);
  CHECK(c.count == max);  // unchanged by the refused update
  Cycles d{min};
  CHECK_THROWS_AS(d -= Cycles{1}, amla::invalid_argument);
}

TEST_CASE("the conversions go through the rate they name", "[sim][units]") {
  const amla::sim::Hertz clock{2e9};
  CHECK(clock.to_seconds(Cycles{4000}).us() == Approx(2.0));
  CHECK((amla::sim::Bytes{3} * 2.0).count == 6);
}
