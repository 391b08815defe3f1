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
