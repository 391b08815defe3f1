// Tests of attention/transposed.hpp: the ETAP transposed recurrence against a float64 reference
// in both precision modes and both block orders, against the seesaw schedule in float32, masking,
// empty rows, unread keys, and bad input.
#include "amla/attention/transposed.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "amla/attention/golden.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/seesaw.hpp"
#include "attention/variant_test_util.hpp"

using amla::MatrixF;
using amla::attention::golden_attention;
using amla::attention::GoldenResult;
using amla::attention::HeadGroup;
using amla::attention::kv_block_order;
using amla::attention::precision;
using amla::attention::transposed_attention;
using amla::attention::TransposedOptions;
namespace vt = amla_test::variants;

namespace {

struct Run {
  MatrixF out;
  std::vector<float> lse;
};

Run run_transposed(const HeadGroup& g, const TransposedOptions& o) {
  Run r{MatrixF(g.rows(), g.d_v()), std::vector<float>(static_cast<std::size_t>(g.rows()))};
  transposed_attention(g, o, r.out, r.lse);
  return r;
}

constexpr kv_block_order both_orders[] = {kv_block_order::forward, kv_block_order::reverse};

}  // namespace

TEST_CASE("transposed float32 mode agrees with the float64 reference to 1e-5", "[transposed]") {
  struct Case {
    int rows, n_keys, d_qk, d_v, block;
    bool causal;
  };
  const std::vector<Case> cases = {{1, 1, 8, 4, 64, false},       {3, 63, 32, 16, 64, false},
                                   {16, 64, 64, 32, 64, false},   {16, 65, 64, 32, 64, true},
                                   {64, 128, 96, 64, 64, false},  {4, 192, 40, 24, 64, true},
                                   {128, 300, 72, 64, 64, false}, {5, 37, 16, 7, 8, true},
                                   {2, 9, 8, 1, 1, false},        {8, 513, 64, 48, 128, false}};
  int seed = 100;
  for (const auto& c : cases) {
    const vt::Inputs in = vt::random_inputs(c.rows, c.n_keys, c.d_qk, c.d_v, seed++, 1.5f);
    const std::vector<int> vis =
        c.causal ? vt::causal_visible(c.rows, c.n_keys, std::min(c.rows, 4)) : std::vector<int>{};
    const HeadGroup g = in.group(vis);
    const GoldenResult ref = golden_attention(g);
    for (const kv_block_order order : both_orders) {
      CAPTURE(c.rows, c.n_keys, c.d_qk, c.d_v, c.block, c.causal, static_cast<int>(order));
      const Run r =
          run_transposed(g, {.mode = precision::float32, .block_size = c.block, .order = order});
      CHECK(vt::relative_error(r.out, ref.out) <= 1e-5);
      CHECK(vt::max_row_relative_error(r.out, ref.out) <= 1e-5);
      for (int i = 0; i < c.rows; ++i) {
        const auto ii = static_cast<std::size_t>(i);
        CHECK(std::abs(r.lse[ii] - ref.lse(i)) <= 1e-5 * std::max(1.0, std::abs(ref.lse(i))));
      }
    }
  }
}

TEST_CASE("transposed BF16 mode agrees with the float64 reference at the BF16 level",
          "[transposed]") {
  const vt::Inputs in = vt::random_inputs(32, 700, 96, 64, 12, 1.0f);
  const HeadGroup g = in.group({});
  const GoldenResult ref = golden_attention(g);
  for (const kv_block_order order : both_orders) {
    const Run raw = run_transposed(g, {.mode = precision::bf16, .block_size = 64, .order = order});
    for (const bool out_bf16 : {false, true}) {
      CAPTURE(static_cast<int>(order), out_bf16);
      Run r = raw;
      if (out_bf16) amla::round_bf16_inplace(r.out);  // the kernel's output cast
      const double err = vt::relative_error(r.out, ref.out);
      CHECK(err <= 6e-3);
      CHECK(err >= 1e-5);  // the BF16 cast of P^T really happens
    }
  }
}

TEST_CASE("transposed float32 mode equals the seesaw schedule's float32 result closely",
          "[transposed]") {
  const vt::Inputs in = vt::random_inputs(24, 333, 48, 40, 13, 2.0f);
  const std::vector<int> vis = vt::causal_visible(24, 333, 2);
  const HeadGroup g = in.group(vis);
  MatrixF seesaw_out(24, 40);
  std::vector<float> seesaw_lse(24);
  amla::attention::seesaw_attention(g, {.mode = precision::float32, .block_size = 64}, seesaw_out,
                                    seesaw_lse);
  for (const kv_block_order order : both_orders) {
    CAPTURE(static_cast<int>(order));
    const Run r = run_transposed(g, {.mode = precision::float32, .block_size = 64, .order = order});
    // Two FP32 computations of the same mathematics: FP32 rounding apart, nothing more.
    CHECK(vt::relative_error(r.out, seesaw_out) <= 2e-6);
    for (std::size_t i = 0; i < r.lse.size(); ++i) {
      CHECK(r.lse[i] == Approx(seesaw_lse[i]).epsilon(1e-6).margin(1e-6));
    }
  }
}

TEST_CASE("transposed block order changes only rounding", "[transposed]") {
  const vt::Inputs in = vt::random_inputs(16, 250, 32, 32, 14, 3.0f);
  const HeadGroup g = in.group({});
  const Run fwd = run_transposed(g, {.mode = precision::float32, .block_size = 16});
  const Run rev = run_transposed(
      g, {.mode = precision::float32, .block_size = 16, .order = kv_block_order::reverse});
  CHECK(vt::relative_error(rev.out, fwd.out) <= 2e-6);
  // With one block the two orders are the same computation.
  const Run one_f = run_transposed(g, {.mode = precision::bf16, .block_size = 250});
  const Run one_r = run_transposed(
      g, {.mode = precision::bf16, .block_size = 250, .order = kv_block_order::reverse});
  CHECK(one_f.out == one_r.out);
  CHECK(one_f.lse == one_r.lse);
}

TEST_CASE("transposed masking: causal rows, empty rows, and keys nobody sees are never read",
          "[transposed]") {
  const int rows = 8, n_keys = 100, d_qk = 24, d_v = 16;
  vt::Inputs in = vt::random_inputs(rows, n_keys, d_qk, d_v, 15, 1.0f);
  const std::vector<int> vis = {0, 1, 63, 64, 65, 70, 0, 70};
  for (int j = 70; j < n_keys; ++j) {
    in.k.row(j).setConstant(std::numeric_limits<float>::quiet_NaN());
    in.kv_v.row(j).setConstant(std::numeric_limits<float>::quiet_NaN());
  }
  const HeadGroup g = in.group(vis);
  const GoldenResult ref = golden_attention(g);
  for (const bool bf : {false, true}) {
    for (const kv_block_order order : both_orders) {
      CAPTURE(bf, static_cast<int>(order));
      const Run r = run_transposed(
          g, {.mode = bf ? precision::bf16 : precision::float32, .block_size = 16, .order = order});
      CHECK(r.out.allFinite());
      CHECK(vt::relative_error(r.out, ref.out) <= (bf ? 6e-3 : 1e-5));
      for (int rr : {0, 6}) {
        CHECK(r.out.row(rr).isZero(0.0f));
        CHECK(r.lse[static_cast<std::size_t>(rr)] == -std::numeric_limits<float>::infinity());
      }
      const MatrixF v0 = bf ? amla::rounded_bf16(in.kv_v.row(0)) : MatrixF(in.kv_v.row(0));
      CHECK(r.out.row(1) == v0);  // one visible key: its value, exactly
    }
  }
}

TEST_CASE("transposed with no keys at all gives out = 0 and lse = -inf", "[transposed]") {
  const vt::Inputs in = vt::random_inputs(3, 0, 8, 4, 1, 1.0f);
  const Run r = run_transposed(in.group({}), {});
  CHECK(r.out.isZero(0.0f));
  for (float l : r.lse) CHECK(l == -std::numeric_limits<float>::infinity());
}

TEST_CASE("transposed propagates a NaN in a value that is read", "[transposed]") {
  vt::Inputs in = vt::random_inputs(2, 20, 8, 4, 3, 1.0f);
  in.kv_v(5, 1) = std::numeric_limits<float>::quiet_NaN();
  const Run r = run_transposed(in.group({}), {.block_size = 8});
  CHECK(std::isnan(r.out(0, 1)));
  CHECK(std::isfinite(r.out(0, 0)));
}

TEST_CASE("transposed rejects bad input with a message naming the argument",
          "[transposed][errors]") {
  const vt::Inputs in = vt::random_inputs(4, 10, 8, 6, 1, 1.0f);
  MatrixF out(4, 6);
  std::vector<float> lse(4);
  const auto throws_naming = [&](const HeadGroup& g, Eigen::Ref<MatrixF> o, std::span<float> l,
                                 TransposedOptions opt, const std::string& needle) {
    try {
      transposed_attention(g, opt, o, l);
      FAIL("no exception for " << needle);
    } catch (const amla::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains(needle) && Catch::Contains("transposed_attention"));
    }
  };
  const HeadGroup good = in.group({});
  throws_naming(good, out, lse, {.block_size = 0}, "options.block_size");
  HeadGroup bad_scale = good;
  bad_scale.scale = std::numeric_limits<float>::quiet_NaN();
  throws_naming(bad_scale, out, lse, {}, "group.scale");
  MatrixF out_bad(5, 6);
  throws_naming(good, out_bad, lse, {}, "out");
  const std::vector<int> too_many = {1, 2, 11, 3};
  throws_naming(in.group(too_many), out, lse, {}, "visible[2] = 11");
}

TEST_CASE("transposed owning overload returns what the buffer overload writes", "[transposed]") {
  const vt::Inputs in = vt::random_inputs(9, 77, 16, 10, 2, 1.0f);
  const std::vector<int> vis = vt::causal_visible(9, 77, 3);
  const HeadGroup g = in.group(vis);
  const Run a = run_transposed(g, {.block_size = 16, .order = kv_block_order::reverse});
  const amla::attention::TransposedResult b =
      transposed_attention(g, {.block_size = 16, .order = kv_block_order::reverse});
  CHECK(a.out == b.out);
  CHECK(Eigen::Map<const Eigen::VectorXf>(a.lse.data(), b.lse.size()) == b.lse);
}

TEST_CASE("transposed float32 mode equals Base's float32 result closely", "[transposed][base]") {
  const vt::Inputs in = vt::random_inputs(48, 1000, 64, 48, 51, 2.0f);
  const std::vector<int> vis = vt::causal_visible(48, 1000, 3);
  const HeadGroup g = in.group(vis);
  for (const int block : {64, 512}) {
    const amla::attention::BaseResult base =
        amla::attention::base_attention(g, {precision::float32, block, false});
    for (const kv_block_order order : both_orders) {
      CAPTURE(block);
      const auto r = transposed_attention(
          g, {.mode = precision::float32, .block_size = block, .order = order});
      // The same mathematics in FP32 in another order: FP32 rounding apart, nothing more.
      CHECK(vt::relative_error(r.out, base.out) <= 2e-6);
      CHECK(vt::max_row_relative_error(r.out, base.out) <= 4e-6);
      for (Eigen::Index i = 0; i < g.rows(); ++i) {
        CHECK(r.lse(i) == Approx(base.lse(i)).epsilon(1e-6).margin(1e-6));
      }
    }
  }
}

TEST_CASE("transposed bf16 mode is Base's mathematics at the BF16 level", "[transposed][base]") {
  const vt::Inputs in = vt::random_inputs(64, 1500, 96, 64, 52, 1.0f);
  const HeadGroup g = in.group({});
  const GoldenResult ref = golden_attention(g);
  const amla::attention::BaseResult base =
      amla::attention::base_attention(g, {precision::bf16, 64, false});
  const double base_err = vt::relative_error(base.out, ref.out);
  for (const kv_block_order order : both_orders) {
    const auto r =
        transposed_attention(g, {.mode = precision::bf16, .block_size = 64, .order = order});
    const double err = vt::relative_error(r.out, ref.out);
    // Both cast P to BF16 once per product: the same error level, and close to each other.
    CHECK(err <= 1.25 * base_err);
    CHECK(err >= 0.8 * base_err);
    CHECK(vt::relative_error(r.out, base.out) <= 1.5 * base_err);
  }
}

TEST_CASE("transposed_decode matches golden over the paged sweep", "[transposed][decode]") {
  vt::for_each_paged_case([](const auto& p, const amla::attention::DecodeOptions& o, int block) {
    const auto want = amla::attention::golden_decode(p.inputs(), o);
    for (const kv_block_order order : both_orders) {
      CAPTURE(p.shape.h_q, p.shape.h_kv, p.shape.s_q, p.shape.page_size, block, o.causal,
              p.v_in_kv());
      const auto f32 = amla::attention::transposed_decode(
          p.inputs(), o, {.mode = precision::float32, .block_size = block, .order = order});
      const auto b16 = amla::attention::transposed_decode(
          p.inputs(), o, {.mode = precision::bf16, .block_size = block, .order = order});
      for (const float x : b16.out) REQUIRE(std::isfinite(x));  // poisoned pages never read
      CHECK(vt::rel_frobenius(f32.out, want.out) <= 1e-5);
      CHECK(vt::max_lse_error(f32.lse, want.lse) <= 1e-5);
      CHECK(vt::rel_frobenius(b16.out, want.out) <= 1e-2);
      CHECK(vt::max_lse_error(b16.lse, want.lse) <= 1e-5);  // lse from FP32 m and l
    }
  });
}

TEST_CASE("transposed_decode on the DeepSeek shape, float and bf16 caches",
          "[transposed][decode]") {
  // h_q 128, d_qk 576, d_v 512 (V = the first 512 columns of K), 1000 keys over 64-key pages.
  const auto pb = amla::attention::ProblemBuilder::deepseek_mla(1, 1000).seed(9);
  const auto p16 = pb.build<amla::bf16>();
  const auto p32 = pb.build<float>();  // the same BF16 values stored as float
  amla::attention::DecodeOptions o;
  o.round_output_bf16 = true;  // the kernel's output cast
  const auto want = amla::attention::golden_decode(p16.inputs(), {});
  for (const kv_block_order order : both_orders) {
    const auto a =
        amla::attention::transposed_decode(p16.inputs(), o, {.block_size = 64, .order = order});
    const auto b =
        amla::attention::transposed_decode(p32.inputs(), o, {.block_size = 64, .order = order});
    CHECK(a.out == b.out);
    CHECK(vt::rel_frobenius(a.out, want.out) <= 5e-3);
    for (const float x : a.out) CHECK(amla::is_bf16_exact(x));
  }
}

TEST_CASE("transposed_decode validates its options before writing",
          "[transposed][decode][errors]") {
  const auto p = amla::attention::ProblemBuilder()
                     .heads(2, 1)
                     .dims(8, 8)
                     .page_size(4)
                     .seqlens({5})
                     .build<amla::bf16>();
  amla::attention::DecodeResult<float, float> r(p.shape);
  std::fill(r.out.begin(), r.out.end(), 42.0f);
  try {
    amla::attention::transposed_decode(p.inputs(), {}, r.view(), {.block_size = 0});
    FAIL("no throw");
  } catch (const amla::invalid_argument& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("'transposed.block_size'") && Catch::Contains("transposed_decode"));
  }
  for (const float x : r.out) CHECK(x == 42.0f);
  CHECK_THROWS_AS(
      amla::attention::transposed_decode(p.inputs(), {}, {.mode = static_cast<precision>(7)}),
      amla::invalid_argument);
}
