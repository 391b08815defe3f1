// Tests of attention/transposed.hpp: the ETAP transposed recurrence against a float64 reference
// in both precision modes and both block orders, against the seesaw schedule in float32, masking,
// empty rows, unread keys, and bad input.
#include "amla/attention/transposed.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "amla/attention/seesaw.hpp"
#include "attention/variant_test_util.hpp"

using amla::MatrixF;
using amla::attention::HeadGroup;
using amla::attention::kv_block_order;
using amla::attention::transposed_head_group;
using amla::attention::TransposedOptions;
namespace vt = amla_test::variants;

namespace {

struct Run {
  MatrixF out;
  std::vector<float> lse;
};

Run run_transposed(const HeadGroup& g, const TransposedOptions& o) {
  Run r{MatrixF(g.rows(), g.d_v()), std::vector<float>(static_cast<std::size_t>(g.rows()))};
  transposed_head_group(g, r.out, r.lse, o);
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
    const vt::Reference ref = vt::reference(g);
    for (const kv_block_order order : both_orders) {
      CAPTURE(c.rows, c.n_keys, c.d_qk, c.d_v, c.block, c.causal, static_cast<int>(order));
      const Run r =
          run_transposed(g, {.emulate_bf16 = false, .block_size = c.block, .order = order});
      CHECK(vt::relative_error(r.out, ref.out) <= 1e-5);
      CHECK(vt::max_row_relative_error(r.out, ref.out) <= 1e-5);
      for (int i = 0; i < c.rows; ++i) {
        const auto ii = static_cast<std::size_t>(i);
        CHECK(std::abs(r.lse[ii] - ref.lse[ii]) <= 1e-5 * std::max(1.0, std::abs(ref.lse[ii])));
      }
    }
  }
}

TEST_CASE("transposed BF16 mode agrees with the float64 reference at the BF16 level",
          "[transposed]") {
  const vt::Inputs in = vt::random_inputs(32, 700, 96, 64, 12, 1.0f);
  const HeadGroup g = in.group({});
  const vt::Reference ref = vt::reference(g);
  for (const kv_block_order order : both_orders) {
    for (const bool out_bf16 : {false, true}) {
      CAPTURE(static_cast<int>(order), out_bf16);
      const Run r = run_transposed(
          g, {.emulate_bf16 = true, .block_size = 64, .bf16_output = out_bf16, .order = order});
      const double err = vt::relative_error(r.out, ref.out);
      CHECK(err <= 6e-3);
      CHECK(err >= 1e-5);  // the BF16 cast of P^T really happens
      if (out_bf16) {
        for (Eigen::Index i = 0; i < r.out.size(); ++i) CHECK(amla::is_bf16_exact(r.out.data()[i]));
      }
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
  amla::attention::seesaw_head_group(g, seesaw_out, seesaw_lse,
                                     {.emulate_bf16 = false, .block_size = 64});
  for (const kv_block_order order : both_orders) {
    CAPTURE(static_cast<int>(order));
    const Run r = run_transposed(g, {.emulate_bf16 = false, .block_size = 64, .order = order});
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
  const Run fwd = run_transposed(g, {.emulate_bf16 = false, .block_size = 16});
  const Run rev = run_transposed(
      g, {.emulate_bf16 = false, .block_size = 16, .order = kv_block_order::reverse});
  CHECK(vt::relative_error(rev.out, fwd.out) <= 2e-6);
  // With one block the two orders are the same computation.
  const Run one_f = run_transposed(g, {.emulate_bf16 = true, .block_size = 250});
  const Run one_r = run_transposed(
      g, {.emulate_bf16 = true, .block_size = 250, .order = kv_block_order::reverse});
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
  const vt::Reference ref = vt::reference(g);
  for (const bool bf : {false, true}) {
    for (const kv_block_order order : both_orders) {
      CAPTURE(bf, static_cast<int>(order));
      const Run r = run_transposed(g, {.emulate_bf16 = bf, .block_size = 16, .order = order});
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
      transposed_head_group(g, o, l, opt);
      FAIL("no exception for " << needle);
    } catch (const amla::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains(needle) && Catch::Contains("transposed_head_group"));
    }
  };
  const HeadGroup good = in.group({});
  throws_naming(good, out, lse, {.block_size = 0}, "options.block_size");
  HeadGroup bad_scale = good;
  bad_scale.scale = std::numeric_limits<float>::quiet_NaN();
  throws_naming(bad_scale, out, lse, {}, "g.scale");
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
      transposed_head_group(g, {.block_size = 16, .order = kv_block_order::reverse});
  CHECK(a.out == b.out);
  CHECK(a.lse == b.lse);
}
