// Tests of problem/conventions.hpp: the lse conventions and the conversions between them.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "amla/problem/conventions.hpp"

using namespace amla;

TEST_CASE("lse in base 2 and amla's empty-row value", "[problem][conventions]") {
  CHECK(lse_to_log2(std::log(8.0)) == Approx(3.0).epsilon(1e-15));
  CHECK(lse_to_log2(-std::numeric_limits<float>::infinity()) ==
        -std::numeric_limits<float>::infinity());
  CHECK(empty_row_lse == -std::numeric_limits<float>::infinity());
}

TEST_CASE("convert_lse maps bases and empty-row markers", "[problem][conventions]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const LseConvention base2{lse_base::two, empty_lse::neg_inf};
  CHECK(convert_lse(std::log(8.0), amla_lse, base2) == Approx(3.0).epsilon(1e-15));
  CHECK(convert_lse(3.0, base2, amla_lse) == Approx(std::log(8.0)).epsilon(1e-15));
  CHECK(convert_lse(1.25, amla_lse, flashmla_lse) == 1.25);  // same base: finite values unchanged
  CHECK(convert_lse(-inf, amla_lse, flashmla_lse) == inf);
  CHECK(convert_lse(inf, flashmla_lse, amla_lse) == -inf);
  CHECK(convert_lse(-inf, amla_lse, amla_lse) == -inf);
  CHECK(std::isnan(convert_lse(std::nan(""), amla_lse, flashmla_lse)));
  // A round trip through base 2 is exact to a few ulps.
  const double x = 17.375;
  CHECK(convert_lse(convert_lse(x, amla_lse, base2), base2, amla_lse) == Approx(x).epsilon(1e-15));
  CHECK(amla_lse != flashmla_lse);
}

TEST_CASE("row_end_of: empty rows, lost rows and normal rows", "[problem][conventions]") {
  constexpr float finf = std::numeric_limits<float>::infinity();
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  // A row that sees no key is empty whatever its sum holds.
  for (const float l : {0.0f, 1.0f, fnan, finf}) CHECK(row_end_of(0, l) == row_end::empty);
  // A row that sees keys: normal for a positive finite sum, lost otherwise.
  CHECK(row_end_of(1, 1.0f) == row_end::normal);
  CHECK(row_end_of(4096, 0x1p-149f) == row_end::normal);
  CHECK(row_end_of(4096, std::numeric_limits<float>::max()) == row_end::normal);
  for (const float l : {0.0f, -0.0f, -1.0f, fnan, finf, -finf}) {
    CAPTURE(l);
    CHECK(row_end_of(3, l) == row_end::lost);
  }
  CHECK(row_end_of(std::int64_t{1} << 40, 2.5) == row_end::normal);
  CHECK(row_end_of(7, std::numeric_limits<double>::infinity()) == row_end::lost);
  STATIC_REQUIRE(row_end_of(2, 0.0) == row_end::lost);
  STATIC_REQUIRE(row_end_of(0, 0.0) == row_end::empty);
}
