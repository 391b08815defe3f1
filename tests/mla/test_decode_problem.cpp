// Tests of amla/mla/decode_problem.hpp: validation of every input, and the masking rule.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "amla/mla/absorb.hpp"
#include "amla/mla/decode_problem.hpp"
#include "amla/mla/naive.hpp"
#include "amla/mla/problem_builder.hpp"
#include "mla/mla_test_util.hpp"

namespace mla = amla::mla;

using mla_test::tiny;

TEST_CASE("visible_keys: all keys, or a causal window aligned to the end", "[mla][problem]") {
  CHECK(mla::visible_keys(10, 2, 0, false) == 10);
  CHECK(mla::visible_keys(10, 2, 0, true) == 9);
  CHECK(mla::visible_keys(10, 2, 1, true) == 10);
  CHECK(mla::visible_keys(1, 3, 0, true) == 0);
  CHECK(mla::visible_keys(1, 3, 2, true) == 1);
  CHECK(mla::visible_keys(0, 1, 0, true) == 0);
}

TEST_CASE("Every malformed input is rejected with its name, value and rule", "[mla][problem]") {
  const auto p = mla::MlaProblemBuilder(tiny)
                     .prefix_len(3)
                     .suffix_lens({4, 2})
                     .page_size(2)
                     .seed(1)
                     .build<float>();
  const auto model = p.model();
  const auto good = p.inputs();
  auto expect_throw = [&](const mla::MlaDecodeInputs<float>& in, const char* what,
                          const mla::MlaOptions& o = {}) {
    CHECK_THROWS_WITH(mla::naive_decode(model, in, o),
                      Catch::Contains(what) && Catch::Contains("naive_decode"));
    CHECK_THROWS_WITH(mla::absorb_decode(model, in, o), Catch::Contains(what));
  };
  CHECK_NOTHROW(mla::naive_decode(model, good));

  auto in = good;
  in.batch = 0;
  expect_throw(in, "inputs.batch");
  in = good;
  in.s_q = 0;
  expect_throw(in, "inputs.s_q");
  in = good;
  in.q = in.q.first(in.q.size() - 1);
  expect_throw(in, "inputs.q");
  in = good;
  in.prefix_len = 4;
  expect_throw(in, "inputs.prefix_latent");
  in = good;
  in.prefix_len = -2;
  expect_throw(in, "inputs.prefix_len");
  in = good;
  in.suffix.page_size = 3;
  expect_throw(in, "inputs.suffix.data");
  in = good;
  in.suffix.num_pages = 0;
  expect_throw(in, "inputs.suffix.num_pages");
  in = good;
  in.suffix.block_table = in.suffix.block_table.first(1);
  expect_throw(in, "inputs.suffix.block_table");
  in = good;
  in.suffix.seqlens = in.suffix.seqlens.first(1);
  expect_throw(in, "inputs.suffix.seqlens");

  // Values inside the tables.
  std::vector<std::int32_t> lens(p.seqlens.begin(), p.seqlens.end());
  lens[1] = -1;
  in = good;
  in.suffix.seqlens = lens;
  expect_throw(in, "seqlens[1] = -1");
  lens[1] = p.shape.max_pages_per_seq * p.shape.page_size + 1;
  in.suffix.seqlens = lens;
  expect_throw(in, "max_pages_per_seq * page_size");
  std::vector<std::int32_t> table(p.block_table.begin(), p.block_table.end());
  table[0] = p.shape.num_pages;
  in = good;
  in.suffix.block_table = table;
  expect_throw(in, "block_table[0][0]");

  // Weights.
  auto m = model;
  m.w_kvb1 = m.w_kvb1.first(3);
  CHECK_THROWS_WITH(mla::naive_decode(m, good), Catch::Contains("model.w_kvb1"));
  m = model;
  m.dims.heads = 0;
  CHECK_THROWS_WITH(mla::absorb_decode(m, good), Catch::Contains("dims.heads"));

  // Options.
  mla::MlaOptions o;
  o.softmax_scale = NAN;
  expect_throw(good, "options.softmax_scale", o);
  o = {};
  o.softmax_scale = 0.0;
  expect_throw(good, "options.softmax_scale", o);
  o = {};
  o.kv_block = 0;
  expect_throw(good, "options.kv_block", o);
  o = {};
  o.threads = -1;
  expect_throw(good, "options.threads", o);
  o = {};
  o.mode = static_cast<mla::numerics>(7);
  expect_throw(good, "options.mode", o);
}

TEST_CASE("Block-table entries past a request's pages may hold anything", "[mla][problem]") {
  // The builder poisons them (and unused pages hold NaN); decoding must not look at them.
  const auto p =
      mla::MlaProblemBuilder(tiny).batch(2).suffix_lens({1, 5}).page_size(2).seed(3).build<float>();
  bool poisoned = false;
  for (int i = 1; i < p.shape.max_pages_per_seq; ++i)
    poisoned |= p.block_table[i] < 0 || p.block_table[i] >= p.shape.num_pages;
  REQUIRE(poisoned);
  const auto r = mla::naive_decode(p.model(), p.inputs());
  for (double x : r.out) CHECK(std::isfinite(x));
}

TEST_CASE("The step's layouts are problem-layer DecodeShapes", "[mla][problem]") {
  const auto p = mla::MlaProblemBuilder(tiny)
                     .batch(3)
                     .s_q(2)
                     .prefix_len(5)
                     .suffix_lens({4, 0, 7})
                     .page_size(2)
                     .seed(4)
                     .build<float>();
  const auto in = p.inputs();
  // The suffix cache: one KV head of D_l + D_r columns, paged as the inputs say.
  const amla::DecodeShape s = mla::suffix_shape(tiny, in);
  CHECK(s.h_kv == 1);
  CHECK(s.d_qk == tiny.absorb_d_qk());
  CHECK(s.d_v == tiny.d_latent);
  CHECK(s.kv_elems() == in.suffix.data.size());
  CHECK(s.block_table_elems() == in.suffix.block_table.size());
  // q, out and lse: the naive view's layouts.
  const amla::DecodeShape io = mla::io_shape(tiny, 3, 2);
  CHECK(io.q_elems() == in.q.size());
  auto r = mla::naive_decode(p.model(), in);
  CHECK(r.shape.out_elems() == r.out.size());
  CHECK(r.out.size() == io.out_elems());
  CHECK(r.lse.size() == io.lse_elems());
  CHECK(&r.lse_at(2, 1, 1) == r.lse.data() + io.lse_offset(2, 1, 1));
  CHECK(r.out_row(2, 1, 1) == r.out.data() + io.out_offset(2, 1, 1));
  // The attention workload: every request attends the prefix and its suffix.
  const amla::Workload w = mla::workload(tiny, in, true);
  CHECK(w.seqlens == std::vector<int>{9, 5, 12});
  CHECK(w.causal);
  CHECK(w.v_in_kv);
  const mla::DecodeStep step = mla::decode_step(tiny, in);
  CHECK(step.batch == 3);
  CHECK(step.prefix_len == 5);
  CHECK(step.suffix_len == 4);  // (4 + 0 + 7) / 3 = 3.67
}
