// Tests of amla/mla/model.hpp.
#include <catch2/catch.hpp>

#include <vector>

#include "amla/mla/model.hpp"

namespace mla = amla::mla;

TEST_CASE("MlaModel views the caller's weights and per-head blocks are W[h]", "[mla][model]") {
  const mla::MlaDims d{2, 3, 1, 2, 4};
  std::vector<float> w1(2 * 3 * 4), w2(2 * 2 * 4);
  for (std::size_t i = 0; i < w1.size(); ++i) w1[i] = static_cast<float>(i) + 0.001f;
  for (std::size_t i = 0; i < w2.size(); ++i) w2[i] = -static_cast<float>(i);
  const mla::MlaModel<float> m{d, w1, w2};
  CHECK_NOTHROW(mla::validate(m));
  const auto h1 = mla::w_kvb1_head<double>(m, 1);
  REQUIRE(h1.rows() == 3);
  REQUIRE(h1.cols() == 4);
  CHECK(h1(0, 0) == static_cast<double>(w1[12]));
  CHECK(h1(2, 3) == static_cast<double>(w1[23]));
  const auto h1r = mla::w_kvb1_head<float>(m, 1, true);
  CHECK(h1r(0, 0) == amla::round_bf16(w1[12]));
  const auto v0 = mla::w_kvb2_head<double>(m, 0);
  CHECK(v0(1, 2) == -6.0);
  CHECK_THROWS_WITH(mla::w_kvb1_head<double>(m, 2), Catch::Contains("h") && Catch::Contains("= 2"));
  const mla::MlaModel<float> bad{d, std::span<const float>(w1).first(5), w2};
  CHECK_THROWS_WITH(mla::validate(bad), Catch::Contains("model.w_kvb1") &&
                                            Catch::Contains("5 elements") &&
                                            Catch::Contains("= 24 elements"));
}

TEST_CASE("weight element counts that overflow throw instead of wrapping", "[mla][model]") {
  // H D_n D_l = 2^20 * 2^20 * 2^30 = 2^70: a 64-bit product wraps to 0.
  const mla::MlaModel<float> m{mla::MlaDims{1 << 20, 1 << 20, 1, 1 << 20, 1 << 30}, {}, {}};
  CHECK_THROWS_WITH(m.w_kvb1_elems(), Catch::Contains("W_KVb1") && Catch::Contains("overflows"));
  CHECK_THROWS_WITH(m.w_kvb2_elems(), Catch::Contains("W_KVb2") && Catch::Contains("overflows"));
  CHECK_THROWS_WITH(mla::validate(m), Catch::Contains("W_KVb1"));
}
