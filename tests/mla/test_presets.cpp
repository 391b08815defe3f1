// Tests of amla/mla/presets.hpp.
#include <catch2/catch.hpp>

#include <climits>

#include "amla/mla/presets.hpp"

namespace mla = amla::mla;

TEST_CASE("DeepSeek-V3 and Kimi K2 presets have the published dimensions", "[mla][presets]") {
  constexpr auto ds = mla::presets::deepseek_v3;
  static_assert(ds.heads == 128 && ds.d_nope == 128 && ds.d_rope == 64 && ds.d_v == 128 &&
                ds.d_latent == 512);
  constexpr auto k2 = mla::presets::kimi_k2;
  static_assert(k2.heads == 64 && k2.d_nope == 128 && k2.d_rope == 64 && k2.d_v == 128 &&
                k2.d_latent == 512);
  // The shapes each formulation's attention sees.
  CHECK(ds.d_qk() == 192);
  CHECK(ds.absorb_d_qk() == 576);
  CHECK(ds.absorb_d_v() == 512);
  CHECK_NOTHROW(mla::validate(ds));
  CHECK_NOTHROW(mla::validate(k2));
}

TEST_CASE("validate names the first dimension below 1", "[mla][presets]") {
  mla::MlaDims d = mla::presets::deepseek_v3;
  d.heads = 0;
  CHECK_THROWS_WITH(mla::validate(d), Catch::Contains("dims.heads") && Catch::Contains("= 0"));
  d = mla::presets::deepseek_v3;
  d.d_rope = -3;
  CHECK_THROWS_WITH(mla::validate(d), Catch::Contains("dims.d_rope") && Catch::Contains("-3"));
  d = mla::presets::deepseek_v3;
  d.d_v = 0;
  CHECK_THROWS_AS(mla::validate(d), amla::invalid_argument);
  // A user-defined layer: any positive sizes.
  CHECK_NOTHROW(mla::validate(mla::MlaDims{3, 8, 4, 5, 16}));
}

TEST_CASE("validate rejects dimensions whose sums or weight sizes overflow", "[mla][presets]") {
  mla::MlaDims d = mla::presets::deepseek_v3;
  d.d_nope = INT_MAX;  // D_qk = D_n + D_r is an int
  CHECK_THROWS_WITH(mla::validate(d), Catch::Contains("dims.d_nope + dims.d_rope"));
  d = mla::presets::deepseek_v3;
  d.d_latent = INT_MAX;  // D_l + D_r is an int
  CHECK_THROWS_WITH(mla::validate(d), Catch::Contains("dims.d_latent + dims.d_rope"));
  d = mla::presets::deepseek_v3;
  d.heads = 1 << 20;
  d.d_nope = 1 << 20;
  d.d_latent = 1 << 30;  // H D_n D_l = 2^70 elements of W_KVb1
  CHECK_THROWS_WITH(mla::validate(d), Catch::Contains("W_KVb1"));
  d.d_nope = 1;
  d.d_v = 1 << 20;
  CHECK_THROWS_WITH(mla::validate(d), Catch::Contains("W_KVb2"));
}
