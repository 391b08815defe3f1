// Tests of amla/mla/problem_builder.hpp.
#include <catch2/catch.hpp>

#include <climits>
#include <cmath>

#include "amla/mla/naive.hpp"
#include "amla/mla/problem_builder.hpp"
#include "mla/mla_test_util.hpp"

namespace mla = amla::mla;

using mla_test::small;
using mla_test::tiny;

TEST_CASE("MlaProblemBuilder is reproducible and seed-dependent", "[mla][builder]") {
  auto b = mla::MlaProblemBuilder(tiny).prefix_len(3).suffix_lens({4, 0, 2}).seed(5);
  const auto p1 = b.build<amla::bf16>();
  const auto p2 = b.build<amla::bf16>();
  CHECK(p1.shape.batch == 3);
  CHECK(p1.q == p2.q);
  CHECK(p1.cache == p2.cache);
  CHECK(p1.w_kvb1 == p2.w_kvb1);
  const auto p3 = b.seed(6).build<amla::bf16>();
  CHECK_FALSE(p1.q == p3.q);
  // Every value is BF16 in a float problem too.
  const auto pf =
      mla::MlaProblemBuilder(tiny).prefix_len(2).suffix_lens({3}).seed(5).build<float>();
  for (float x : pf.q) CHECK(amla::round_bf16(x) == x);
  for (float x : pf.prefix_latent) CHECK(amla::round_bf16(x) == x);
}

TEST_CASE("Paging does not change the problem's meaning", "[mla][builder]") {
  auto b = mla::MlaProblemBuilder(tiny).prefix_len(2).suffix_lens({5, 3}).seed(9);
  const auto p1 = b.page_size(1).build<float>();
  const auto p4 = b.page_size(4).build<float>();
  const auto p64 = b.page_size(64).build<float>();
  const auto r1 = mla::naive_decode(p1.model(), p1.inputs());
  CHECK(mla::naive_decode(p4.model(), p4.inputs()).out == r1.out);
  CHECK(mla::naive_decode(p64.model(), p64.inputs()).out == r1.out);
}

TEST_CASE("Weights have the requested scale and unused cache is poisoned", "[mla][builder]") {
  const auto p = mla::MlaProblemBuilder(mla::presets::kimi_k2)
                     .suffix_lens({3})
                     .page_size(4)
                     .seed(2)
                     .build<float>();
  double ss = 0;
  for (float w : p.w_kvb1) ss += static_cast<double>(w) * w;
  const double rms = std::sqrt(ss / static_cast<double>(p.w_kvb1.size()));
  CHECK(rms == Approx(1.0 / std::sqrt(512.0)).epsilon(0.01));
  // Slot 3 of the request's only page and the spare page hold NaN.
  int nan = 0;
  for (float x : p.cache) nan += std::isnan(x) ? 1 : 0;
  CHECK(nan == (p.shape.num_pages * p.shape.page_size - 3) * 576);
}

TEST_CASE("MlaProblemBuilder rejects bad settings", "[mla][builder]") {
  CHECK_THROWS_WITH(mla::MlaProblemBuilder(tiny).batch(0).build<float>(), Catch::Contains("batch"));
  CHECK_THROWS_WITH(
      mla::MlaProblemBuilder(tiny).batch(3).suffix_lens({1, 2}).batch(3).build<float>(),
      Catch::Contains("suffix_lens"));
  CHECK_THROWS_WITH(mla::MlaProblemBuilder(tiny).suffix_lens({-1}).build<float>(),
                    Catch::Contains("suffix_lens"));
  CHECK_THROWS_WITH(mla::MlaProblemBuilder(tiny).prefix_len(-1).build<float>(),
                    Catch::Contains("prefix_len"));
  CHECK_THROWS_WITH(mla::MlaProblemBuilder(tiny).weight_std(-1).build<float>(),
                    Catch::Contains("weight_std"));
  CHECK_THROWS_WITH(mla::MlaProblemBuilder(tiny).value_std(0).build<float>(),
                    Catch::Contains("value_std"));
  CHECK_THROWS_WITH(mla::MlaProblemBuilder(mla::MlaDims{}).build<float>(),
                    Catch::Contains("dims.heads"));
}

TEST_CASE("MlaProblemBuilder rejects sizes past an int or past memory, naming the setting",
          "[mla][builder][overflow]") {
  // INT_MAX suffix keys in pages of one, plus the poisoned spare page.
  CHECK_THROWS_WITH(
      mla::MlaProblemBuilder(small).suffix_lens({INT_MAX}).page_size(1).build<float>(),
      Catch::Contains("'suffix_lens'") && Catch::Contains("2147483647 + 1"));
  CHECK_THROWS_WITH(
      mla::MlaProblemBuilder(small).suffix_lens({INT_MAX, INT_MAX}).page_size(1).build<float>(),
      Catch::Contains("'suffix_lens'"));
  // A context of prefix + suffix keys must fit an int.
  CHECK_THROWS_WITH(
      mla::MlaProblemBuilder(small).prefix_len(INT_MAX).suffix_lens({1}).build<float>(),
      Catch::Contains("'suffix_lens'") && Catch::Contains("prefix_len + a suffix length"));
  // 2^31 prefix rows of 576 BF16 values: 2.5 TB, past the 1 TiB amla allocates for one buffer.
  CHECK_THROWS_WITH(
      mla::MlaProblemBuilder(mla::presets::deepseek_v3).prefix_len(INT_MAX).build<amla::bf16>(),
      Catch::Contains("'prefix_len'") && Catch::Contains("1099511627776 bytes"));
}
