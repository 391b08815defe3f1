// Tests of amla/mla/typhoon.hpp: TyphoonMLA agrees with naive and absorb, in float64 to float64
// rounding and in the bf16 mode at the BF16 level; its fall-back and plan selection.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "amla/mla/absorb.hpp"
#include "amla/mla/naive.hpp"
#include "amla/mla/typhoon.hpp"
#include "common/reduced.hpp"
#include "mla/mla_test_util.hpp"

namespace mla = amla::mla;

namespace {

using mla_test::small;

// The presets carry 17 million weights each; sanitizer builds run fewer preset cases.
using amla_test::reduced;

mla::TyphoonOptions forced(mla::typhoon_plan plan) {
  mla::TyphoonOptions t;
  t.plan = plan;
  return t;
}

struct Case {
  int s_q;
  int prefix;
  std::vector<int> suffixes;
  bool causal;
};

// The problem of a case: one request per suffix, pages of 4, BF16 values.
mla::MlaProblem<amla::bf16> build(const mla::MlaDims& dims, const Case& c, int seed) {
  return mla::MlaProblemBuilder(dims)
      .s_q(c.s_q)
      .prefix_len(c.prefix)
      .suffix_lens(c.suffixes)
      .batch(static_cast<int>(c.suffixes.size()))
      .page_size(4)
      .seed(static_cast<std::uint64_t>(seed))
      .build<amla::bf16>();
}

}  // namespace

TEST_CASE("float64: naive, absorb and TyphoonMLA agree to float64 rounding", "[mla][typhoon]") {
  const Case cases[] = {
      {1, 13, {5, 0, 17, 1}, false},
      {2, 13, {5, 0, 17, 1}, true},
      {1, 0, {4, 9}, false},
      {2, 0, {3, 1}, true},
      {1, 7, {0, 0, 0}, false},
      {2, 7, {0, 2}, true},
      {2, 1, {0}, true},  // s_q = 2 with a context of 1: the first token sees nothing
  };
  int seed = 100;
  for (const Case& c : cases) {
    const auto p = build(small, c, ++seed);
    mla::MlaOptions o;
    o.causal = c.causal;
    const auto naive = mla::naive_decode(p.model(), p.inputs(), o);
    const auto absorb = mla::absorb_decode(p.model(), p.inputs(), o);
    const auto prefix = mla::decompress_prefix<double>(p.model(), p.inputs());
    const auto ty =
        mla::typhoon_decode(p.model(), p.inputs(), prefix, o, forced(mla::typhoon_plan::mixed));
    const auto ref = mla_test::oracle(p, c.causal);
    INFO("s_q " << c.s_q << " prefix " << c.prefix << " causal " << c.causal);
    CHECK(ty.ran == mla::formulation::typhoon);
    CHECK(mla_test::rel_error(absorb, naive) < 1e-15);
    CHECK(mla_test::rel_error(ty, naive) < 1e-15);
    CHECK(mla_test::lse_error(absorb, naive) < 4e-15);
    CHECK(mla_test::lse_error(ty, naive) < 4e-15);
    CHECK(mla_test::rel_error(ty, ref) < 1e-15);
  }
}

TEST_CASE("float64: the presets agree across formulations (short contexts)", "[mla][typhoon]") {
  for (const auto& dims : {mla::presets::deepseek_v3, mla::presets::kimi_k2}) {
    for (int s_q : {1, 2}) {
      // Sanitizer builds: Kimi K2 at s_q 2 alone (the other runs are the same code).
      if (reduced && (dims.heads != 64 || s_q != 2)) continue;
      const auto p = mla::MlaProblemBuilder(dims)
                         .s_q(s_q)
                         .prefix_len(6)
                         .suffix_lens({3, 0, 5})
                         .page_size(2)
                         .seed(static_cast<std::uint64_t>(dims.heads + s_q))
                         .build<amla::bf16>();
      mla::MlaOptions o;
      o.causal = true;
      const auto naive = mla::naive_decode(p.model(), p.inputs(), o);
      const auto absorb = mla::absorb_decode(p.model(), p.inputs(), o);
      const auto ty = mla::typhoon_decode(p.model(), p.inputs(),
                                          mla::decompress_prefix<double>(p.model(), p.inputs()), o,
                                          forced(mla::typhoon_plan::mixed));
      INFO("heads " << dims.heads << " s_q " << s_q);
      REQUIRE(naive.out.size() == static_cast<std::size_t>(3 * s_q * dims.heads * 128));
      CHECK(mla_test::rel_error(absorb, naive) < 1e-14);
      CHECK(mla_test::rel_error(ty, naive) < 1e-14);
      CHECK(mla_test::lse_error(ty, naive) < 1e-13);
    }
  }
}

TEST_CASE("TyphoonMLA's absorb fall-back is the absorb formulation", "[mla][typhoon]") {
  const auto p =
      mla::MlaProblemBuilder(small).prefix_len(8).suffix_lens({3, 6}).seed(9).build<amla::bf16>();
  const auto prefix = mla::decompress_prefix<double>(p.model(), p.inputs());
  const auto ty = mla::typhoon_decode(p.model(), p.inputs(), prefix, {},
                                      forced(mla::typhoon_plan::absorb_only));
  const auto absorb = mla::absorb_decode(p.model(), p.inputs());
  CHECK(ty.ran == mla::formulation::absorb);
  CHECK(ty.out == absorb.out);
  CHECK(ty.lse == absorb.lse);
}

TEST_CASE("TyphoonMLA's automatic plan follows the cost model for the chosen chip",
          "[mla][typhoon]") {
  // B = 2 on the paper's NPU: far below B_theta, absorb alone.
  const auto p =
      mla::MlaProblemBuilder(small).prefix_len(8).suffix_lens({3, 6}).seed(10).build<amla::bf16>();
  const auto prefix = mla::decompress_prefix<double>(p.model(), p.inputs());
  mla::TyphoonOptions npu;
  CHECK_FALSE(mla::typhoon_runs_mixed(p.model(), p.inputs(), npu));
  CHECK(mla::typhoon_decode(p.model(), p.inputs(), prefix, {}, npu).ran ==
        mla::formulation::absorb);
  // A chip whose ridge is 1 FLOP/byte makes the naive prefix pay off already at B = 2.
  mla::TyphoonOptions toy;
  toy.hw = mla::Hardware{1e12, 1e12, "toy"};
  const auto step = mla::decode_step(small, p.inputs());
  CHECK(step.batch == 2);
  CHECK(step.prefix_len == 8);
  CHECK(step.suffix_len == 5);  // mean of 3 and 6, rounded half up
  CHECK(mla::typhoon_choice(small, step, toy.hw).mixed);
  CHECK(mla::typhoon_runs_mixed(p.model(), p.inputs(), toy));
  const auto ty = mla::typhoon_decode(p.model(), p.inputs(), prefix, {}, toy);
  CHECK(ty.ran == mla::formulation::typhoon);
  CHECK(mla_test::rel_error(ty, mla_test::oracle(p, false)) < 1e-13);
  // Without a shared prefix the mixed plan only adds the combine: absorb, whatever the chip.
  const auto q = mla::MlaProblemBuilder(small).suffix_lens({3, 6}).seed(10).build<amla::bf16>();
  CHECK_FALSE(mla::typhoon_runs_mixed(q.model(), q.inputs(), toy));
}

TEST_CASE("typhoon_decode rejects a prefix that does not match the inputs", "[mla][typhoon]") {
  const auto p =
      mla::MlaProblemBuilder(small).prefix_len(4).suffix_lens({2}).seed(1).build<amla::bf16>();
  const auto other =
      mla::MlaProblemBuilder(small).prefix_len(5).suffix_lens({2}).seed(1).build<amla::bf16>();
  const auto wrong_len = mla::decompress_prefix<double>(other.model(), other.inputs());
  CHECK_THROWS_WITH(mla::typhoon_decode(p.model(), p.inputs(), wrong_len),
                    Catch::Contains("prefix.len") && Catch::Contains("= 5") &&
                        Catch::Contains("inputs.prefix_len = 4"));
  auto good = mla::decompress_prefix<double>(p.model(), p.inputs());
  mla::PrefixKVView<double> cut = good.view();
  cut.v = cut.v.subspan(1);
  CHECK_THROWS_WITH(mla::typhoon_decode(p.model(), p.inputs(), cut),
                    Catch::Contains("prefix.v") && Catch::Contains("[len, H, D_v]"));
  mla::TyphoonOptions bad;
  bad.hw = mla::Hardware{0, 1, "x"};
  CHECK_THROWS_WITH(mla::typhoon_decode(p.model(), p.inputs(), good, {}, bad),
                    Catch::Contains("hw.peak_flops_per_s"));
  // Forced plans do not consult the chip.
  bad.plan = mla::typhoon_plan::mixed;
  CHECK_NOTHROW(mla::typhoon_decode(p.model(), p.inputs(), good, {}, bad));
}

TEST_CASE("bf16: naive, absorb and TyphoonMLA agree at the BF16 level", "[mla][typhoon]") {
  // Each rounds in its own places (decompressed K/V, q_A, o_A, partial outputs), so they differ
  // from the float64 truth and from each other by a few BF16 roundings: about 2^-9 relative.
  const double bf16_level = std::ldexp(1.0, -7);
  const Case cases[] = {
      {1, 13, {5, 0, 17, 1}, false},
      {2, 13, {5, 0, 17, 1}, true},
      {2, 0, {3, 11}, true},
      {1, 20, {0, 0}, false},
  };
  const mla::MlaDims dims_list[] = {small, mla::presets::kimi_k2, mla::presets::deepseek_v3};
  int seed = 200;
  for (const auto& dims : dims_list) {
    for (const Case& c : cases) {
      if (dims.heads > 3 && c.prefix == 20) continue;  // keep the preset runs short
      // Sanitizer builds: one preset case, Kimi K2's causal one with a prefix (DeepSeek-V3's
      // layer with half its heads).
      if (dims.heads > 3 && reduced && (!c.causal || dims.heads == 128 || c.prefix == 0)) continue;
      const auto p = build(dims, c, ++seed);
      mla::MlaOptions o;
      o.causal = c.causal;
      const auto truth = mla::naive_decode(p.model(), p.inputs(), o);
      o.mode = mla::numerics::bf16;
      o.kv_block = 8;
      const auto naive = mla::naive_decode(p.model(), p.inputs(), o);
      const auto absorb = mla::absorb_decode(p.model(), p.inputs(), o);
      const auto ty = mla::typhoon_decode(p.model(), p.inputs(),
                                          mla::decompress_prefix<amla::bf16>(p.model(), p.inputs()),
                                          o, forced(mla::typhoon_plan::mixed));
      INFO("heads " << dims.heads << " s_q " << c.s_q << " prefix " << c.prefix << " causal "
                    << c.causal);
      for (const auto* r : {&naive, &absorb, &ty}) {
        REQUIRE(mla_test::all_finite(*r));
        CHECK(mla_test::rel_error(*r, truth) < bf16_level);
        CHECK(mla_test::rel_error(*r, truth) > 1e-5);  // the BF16 emulation is really on
        CHECK(mla_test::lse_error(*r, truth) < bf16_level);
      }
      CHECK(mla_test::rel_error(absorb, naive) < bf16_level);
      CHECK(mla_test::rel_error(ty, naive) < bf16_level);
      CHECK(mla_test::rel_error(ty, absorb) < bf16_level);
    }
  }
}

TEST_CASE("bf16: the fall-back is bit-identical to absorb and outputs can be cast to BF16",
          "[mla][typhoon]") {
  const auto p = mla::MlaProblemBuilder(small)
                     .s_q(2)
                     .prefix_len(9)
                     .suffix_lens({3, 6})
                     .seed(12)
                     .build<float>();
  mla::MlaOptions o;
  o.mode = mla::numerics::bf16;
  o.round_output_bf16 = true;
  const auto prefix = mla::decompress_prefix<amla::bf16>(p.model(), p.inputs());
  const auto fb =
      mla::typhoon_decode(p.model(), p.inputs(), prefix, o, forced(mla::typhoon_plan::absorb_only));
  const auto ab = mla::absorb_decode(p.model(), p.inputs(), o);
  CHECK(fb.out == ab.out);
  CHECK(fb.lse == ab.lse);
  const auto mixed =
      mla::typhoon_decode(p.model(), p.inputs(), prefix, o, forced(mla::typhoon_plan::mixed));
  for (double x : mixed.out)
    CHECK(static_cast<double>(amla::round_bf16(static_cast<float>(x))) == x);
  // A float64 prefix in the bf16 mode is rounded to BF16 when read (the exact products rounded
  // once instead of the FP32 sums): the same result at the BF16 level.
  const auto prefix64 = mla::decompress_prefix<double>(p.model(), p.inputs());
  const auto mixed64 =
      mla::typhoon_decode(p.model(), p.inputs(), prefix64, o, forced(mla::typhoon_plan::mixed));
  CHECK(mla_test::rel_error(mixed64, mixed) < std::ldexp(1.0, -7));
}
