// Tests of split-KV decoding: the split ranges, exactness of the LSE combine (float64 partials
// from golden recombine to golden), one split equals Base bit for bit, empty splits change
// nothing, all-empty rows give 0 / -inf, float32 and bf16 modes against golden over the sweep.
#include <catch2/catch.hpp>

#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "amla/attention/golden.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/problem_builder.hpp"
#include "amla/attention/split_kv.hpp"
#include "attention/variant_test_util.hpp"
#include "error_norms.hpp"

using amla::bf16;
using amla::MatrixD;
using amla::MatrixF;
using namespace amla::attention;
namespace vt = amla_test::variants;

namespace {

using amla_test::finf;

using amla_test::rel_frobenius;

SplitKvOptions splits(int n, precision mode, int block) {
  SplitKvOptions o;
  o.num_splits = n;
  o.split = BaseOptions{mode, block};
  return o;
}

}  // namespace

TEST_CASE("split ranges are runs of whole blocks", "[split_kv]") {
  using R = std::vector<KeyRange>;
  CHECK(split_key_ranges(1000, 64, 4) == R{{0, 256}, {256, 512}, {512, 768}, {768, 1000}});
  CHECK(split_key_ranges(100, 64, 4) == R{{0, 64}, {64, 100}, {100, 100}, {100, 100}});
  CHECK(split_key_ranges(0, 64, 2) == R{{0, 0}, {0, 0}});
  CHECK(split_key_ranges(10, 3, 1) == R{{0, 10}});
  CHECK(split_key_ranges(7, 1, 3) == R{{0, 3}, {3, 6}, {6, 7}});
  CHECK_THROWS_WITH(split_key_ranges(10, 0, 2), Catch::Contains("'block_size'"));
  CHECK_THROWS_WITH(split_key_ranges(10, 4, 0), Catch::Contains("'num_splits'"));
  CHECK_THROWS_WITH(split_key_ranges(-1, 4, 1), Catch::Contains("'n_keys'"));
}

TEST_CASE("the LSE combine of float64 golden partials is golden", "[split_kv]") {
  MatrixF q = MatrixF::Random(6, 16), k = MatrixF::Random(90, 16), v = MatrixF::Random(90, 12);
  q *= 3.0f;  // peaked softmax: partial lse values far apart
  const int vis[] = {90, 1, 40, 0, 64, 65};
  const HeadGroup g{q, k, v, vis, 0.7f};
  const GoldenResult full = golden_attention(g);
  for (const int n_splits : {1, 2, 3, 7, 12}) {
    const auto ranges = split_key_ranges(90, 8, n_splits);
    std::vector<SplitPartial<double>> parts;
    std::vector<int> sub_vis;
    for (const auto& range : ranges) {
      const GoldenResult r = golden_attention(restrict_keys(g, range, sub_vis));
      parts.push_back({r.out, r.lse, range});
    }
    MatrixD out(6, 12);
    std::vector<double> lse(6);
    combine_splits<double>(parts, out, lse);
    CAPTURE(n_splits);
    CHECK((out - full.out).norm() <= 1e-14 * full.out.norm());
    for (int r = 0; r < 6; ++r) {
      if (std::isinf(full.lse(r))) {
        CHECK(lse[static_cast<std::size_t>(r)] == full.lse(r));
        CHECK(out.row(r).isZero(0.0));
      } else {
        CHECK(lse[static_cast<std::size_t>(r)] == Approx(full.lse(r)).epsilon(1e-14));
      }
    }
  }
}

TEST_CASE("combine: extreme lse gaps, empty and all-empty rows", "[split_kv]") {
  std::vector<SplitPartial<float>> parts(3);
  for (auto& p : parts) {
    p.out = MatrixF::Zero(3, 2);
    p.lse = Eigen::VectorXf::Constant(3, -finf);
  }
  // Row 0: lse 1000 and 0: the second weight underflows to 0, no overflow.
  parts[0].out.row(0) << 1, 2;
  parts[0].lse(0) = 1000.0f;
  parts[2].out.row(0) << 5, 7;
  parts[2].lse(0) = 0.0f;
  // Row 1: two equal halves.
  parts[0].out.row(1) << 2, 4;
  parts[0].lse(1) = 3.0f;
  parts[1].out.row(1) << 4, 8;
  parts[1].lse(1) = 3.0f;
  // Row 2: every split empty.
  MatrixF out(3, 2);
  std::vector<float> lse(3);
  combine_splits<float>(parts, out, lse);
  CHECK(out(0, 0) == 1.0f);
  CHECK(out(0, 1) == 2.0f);
  CHECK(lse[0] == 1000.0f);
  CHECK(out(1, 0) == 3.0f);
  CHECK(out(1, 1) == 6.0f);
  CHECK(lse[1] == Approx(3.0f + std::log(2.0f)).epsilon(1e-7));
  CHECK(out(2, 0) == 0.0f);
  CHECK(out(2, 1) == 0.0f);
  CHECK(lse[2] == -finf);
  // Shape errors.
  parts[1].lse.resize(2);
  CHECK_THROWS_WITH(combine_splits<float>(parts, out, lse), Catch::Contains("'parts'"));
  CHECK_THROWS_WITH(combine_splits<float>({}, out, lse), Catch::Contains("'parts'"));
}

TEST_CASE("one split is Base bit for bit, empty splits change nothing", "[split_kv]") {
  const auto p =
      vt::builder(
          {.heads = {16, 2}, .s_q = 2, .dims = {64, 32}, .page_size = 16, .seqlens = {300, 45, 0}})
          .build<bf16>();
  DecodeOptions o;
  o.causal = true;
  for (const auto mode : {precision::bf16, precision::float32}) {
    const auto base = base_decode(p.inputs(), o, BaseOptions{mode, 64});
    const auto one = split_kv_decode(p.inputs(), o, splits(1, mode, 64));
    CHECK(one.out == base.out);
    CHECK(one.lse == base.lse);
    // 300 keys = 5 blocks of 64: 5 splits of one block each, and 9 splits with 4 empty ones.
    const auto five = split_kv_decode(p.inputs(), o, splits(5, mode, 64));
    const auto nine = split_kv_decode(p.inputs(), o, splits(9, mode, 64));
    CHECK(nine.out == five.out);
    CHECK(nine.lse == five.lse);
  }
}

TEST_CASE("split-KV against golden over the shape sweep", "[split_kv]") {
  struct Case {
    vt::PagedCase paged;
    int n_splits;
  };
  const std::vector<Case> cases = {
      {{1, 1, 1, 1, 64, {0, 1, 200}}, 3}, {{3, 1, 2, 16, 16, {130, 16}}, 4},
      {{16, 4, 4, 64, 64, {65, 300}}, 2}, {{64, 1, 1, 128, 64, {1000}}, 8},
      {{128, 1, 2, 64, 64, {333}}, 5},
  };
  for (const auto& [c, n_splits] : cases) {
    vt::for_each_layout(
        c, 48, 32, static_cast<std::uint64_t>(c.h_q + n_splits),
        [&, &c = c, n = n_splits](const auto& p, const DecodeOptions& o) {
          CAPTURE(c.h_q, c.h_kv, c.s_q, c.page, c.block, n, o.causal, p.v_in_kv());
          const auto want = golden_decode(p.inputs(), o);
          const auto f32 = split_kv_decode(p.inputs(), o, splits(n, precision::float32, c.block));
          const auto b16 = split_kv_decode(p.inputs(), o, splits(n, precision::bf16, c.block));
          const double e32 = rel_frobenius(f32.out, want.out);
          const double e16 = rel_frobenius(b16.out, want.out);
          CHECK(e32 <= 1e-5);
          CHECK(e16 <= 1e-2);
          for (std::size_t i = 0; i < want.lse.size(); ++i) {
            if (std::isinf(want.lse[i])) {
              CHECK(f32.lse[i] == -finf);
              CHECK(b16.lse[i] == -finf);
            } else {
              CHECK(std::abs(f32.lse[i] - want.lse[i]) <= 1e-5 * (1 + std::abs(want.lse[i])));
            }
          }
          for (const float x : b16.out) REQUIRE(std::isfinite(x));
        });
  }
}

TEST_CASE("split-KV on a DeepSeek head group: bf16 error at the BF16 level", "[split_kv]") {
  const auto p = ProblemBuilder::deepseek_mla(1, 2000).seed(3).build<bf16>();
  const auto want = golden_decode(p.inputs());
  const auto f32 = split_kv_decode(p.inputs(), {}, splits(4, precision::float32, 64));
  const auto b16 = split_kv_decode(p.inputs(), {}, splits(4, precision::bf16, 64));
  const double e32 = rel_frobenius(f32.out, want.out);
  const double e16 = rel_frobenius(b16.out, want.out);
  CHECK(e32 <= 1e-5);
  CHECK(e16 <= 1e-2);
  CHECK(e16 > 20 * e32);
}

TEST_CASE("split-KV validates its options", "[split_kv][validation]") {
  const auto p = ProblemBuilder().heads(2, 1).dims(8, 8).page_size(4).seqlens({5}).build<bf16>();
  CHECK_THROWS_WITH(split_kv_decode(p.inputs(), {}, splits(0, precision::bf16, 64)),
                    Catch::Contains("'split.num_splits'"));
  MatrixF q = MatrixF::Ones(1, 4), k = MatrixF::Ones(2, 4);
  CHECK_THROWS_WITH(split_kv_attention(HeadGroup{q, k, k, {}, 1.0f}, splits(0, precision::bf16, 4)),
                    Catch::Contains("'options.num_splits'"));
}

TEST_CASE("more splits than blocks cost no memory: only splits that hold keys are computed",
          "[split_kv][overflow]") {
  // A million splits of a 20-key group: at most 20 partials are kept (blocks of 1), and the
  // result is the one of 20 splits, bit for bit (the other splits are empty: weight 0).
  const vt::Inputs in = vt::random_inputs(8, 20, 16, 8, 71, 1.0f);
  const std::vector<int> vis = vt::causal_visible(8, 20, 4);
  const HeadGroup g = in.group(vis);
  for (const int block : {1, 3}) {
    const auto want = split_kv_attention(g, splits(20, precision::bf16, block));
    const auto many = split_kv_attention(g, splits(1000000, precision::bf16, block));
    CAPTURE(block);
    CHECK(many.out == want.out);
    CHECK(many.lse == want.lse);
  }
  // The paged entry point over sequences of 0, 1 and 20 keys, causal.
  const auto p =
      vt::builder(
          {.heads = {4, 2}, .s_q = 2, .dims = {16, 8}, .page_size = 4, .seqlens = {0, 1, 20}})
          .seed(72)
          .build<bf16>();
  DecodeOptions o;
  o.causal = true;
  const auto want = split_kv_decode(p.inputs(), o, splits(20, precision::bf16, 1));
  const auto many = split_kv_decode(p.inputs(), o, splits(INT_MAX, precision::bf16, 1));
  CHECK(many.out == want.out);
  CHECK(many.lse == want.lse);
  // Every split as a partial is what split_kv_partials returns: INT_MAX partials of [4 x 512]
  // floats (32 TiB) are refused before anything is allocated.
  MatrixF q = MatrixF::Ones(4, 8), k = MatrixF::Ones(20, 8), v = MatrixF::Ones(20, 512);
  CHECK_THROWS_WITH(
      split_kv_partials(HeadGroup{q, k, v, {}, 1.0f}, splits(INT_MAX, precision::bf16, 1)),
      Catch::Contains("split_kv_partials") && Catch::Contains("'options.num_splits'"));
  CHECK(split_kv_partials(HeadGroup{q, k, v, {}, 1.0f}, splits(30, precision::bf16, 1)).size() ==
        30);
}
