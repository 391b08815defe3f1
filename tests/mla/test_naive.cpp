// Tests of amla/mla/naive.hpp: the decompress-then-MHA formulation against an independent
// long-double oracle of MLA's definition.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "amla/attention/online_softmax.hpp"
#include "amla/mla/naive.hpp"
#include "mla/mla_test_util.hpp"

namespace mla = amla::mla;

using mla_test::small;

TEST_CASE("naive float64 equals the long-double oracle", "[mla][naive]") {
  mla_test::check_formulation_sweep(mla::formulation::naive, 11, 1e-15, 4e-15);
}

TEST_CASE("naive: empty contexts give out = 0 and lse = -inf, poisoned pages are never read",
          "[mla][naive]") {
  // Request 1 has no suffix and there is no prefix: nothing to attend.
  const auto p =
      mla::MlaProblemBuilder(small).suffix_lens({3, 0}).page_size(2).seed(3).build<float>();
  const auto r = mla::naive_decode(p.model(), p.inputs());
  REQUIRE(mla_test::all_finite(r));
  for (int h = 0; h < small.heads; ++h) {
    CHECK(r.lse_at(1, 0, h) == -INFINITY);
    for (int c = 0; c < small.d_v; ++c) CHECK(r.out_row(1, 0, h)[c] == 0.0);
    CHECK(std::isfinite(r.lse_at(0, 0, h)));
  }
  // A causal window that is empty: context 1, s_q 2, token 0 sees nothing.
  const auto q = mla::MlaProblemBuilder(small).s_q(2).suffix_lens({1}).seed(4).build<float>();
  mla::MlaOptions o;
  o.causal = true;
  const auto rc = mla::naive_decode(q.model(), q.inputs(), o);
  CHECK(rc.lse_at(0, 0, 0) == -INFINITY);
  CHECK(std::isfinite(rc.lse_at(0, 1, 0)));
  CHECK(mla_test::rel_error(rc, mla_test::oracle(q, true)) < 1e-13);
}

TEST_CASE("naive: float and bf16 storage of the same values give the same result", "[mla][naive]") {
  auto builder = mla::MlaProblemBuilder(small).batch(2).prefix_len(5).suffix_lens({6, 3}).seed(8);
  const auto pb = builder.build<amla::bf16>();
  const auto pf = builder.build<float>();
  for (auto mode : {mla::numerics::float64, mla::numerics::bf16}) {
    mla::MlaOptions o;
    o.mode = mode;
    const auto rb = mla::naive_decode(pb.model(), pb.inputs(), o);
    const auto rf = mla::naive_decode(pf.model(), pf.inputs(), o);
    CHECK(rb.out == rf.out);
    CHECK(rb.lse == rf.lse);
  }
}

TEST_CASE("naive: a custom softmax scale and any thread count", "[mla][naive]") {
  const auto p = mla::MlaProblemBuilder(small)
                     .batch(3)
                     .prefix_len(4)
                     .suffix_lens({2, 7, 5})
                     .page_size(3)
                     .seed(21)
                     .build<amla::bf16>();
  mla::MlaOptions o;
  o.softmax_scale = 0.3;
  const auto r = mla::naive_decode(p.model(), p.inputs(), o);
  CHECK(mla_test::rel_error(r, mla_test::oracle(p, false, 0.3)) < 1e-13);
  o.threads = 1;
  const auto r1 = mla::naive_decode(p.model(), p.inputs(), o);
  o.threads = 3;
  const auto r3 = mla::naive_decode(p.model(), p.inputs(), o);
  CHECK(r1.out == r3.out);
  CHECK(r1.out == r.out);
}

TEST_CASE("naive bf16 mode is Base on the BF16-stored decompressed cache, bit for bit",
          "[mla][naive]") {
  const auto p = mla::MlaProblemBuilder(small)
                     .s_q(2)
                     .prefix_len(6)
                     .suffix_lens({9})
                     .page_size(4)
                     .seed(17)
                     .build<float>();
  mla::MlaOptions o{.mode = mla::numerics::bf16, .causal = true, .kv_block = 4};
  const auto r = mla::naive_decode(p.model(), p.inputs(), o);
  // Head 1 by hand: latent rows of the context, K = [bf16(C_N W1^T), C_R], V = bf16(C_N W2^T).
  const amla::MatrixF latent = mla_test::context_latent(p, 0);  // 6 prefix + 9 suffix rows
  const amla::MatrixF w1 = mla::w_kvb1_head<float>(p.model(), 1);
  const amla::MatrixF w2 = mla::w_kvb2_head<float>(p.model(), 1);
  amla::MatrixF k(15, small.d_qk());
  k.leftCols(16) = amla::rounded_bf16(amla::matmul_bf16(latent.leftCols(32), w1.transpose()));
  k.rightCols(8) = latent.rightCols(8);
  const amla::MatrixF v =
      amla::rounded_bf16(amla::matmul_bf16(latent.leftCols(32), w2.transpose()));
  amla::MatrixF q(2, small.d_qk());
  for (int t = 0; t < 2; ++t) {
    for (int c = 0; c < small.d_qk(); ++c) q(t, c) = p.q[(t * 3 + 1) * small.d_qk() + c];
  }
  const std::vector<int> visible{14, 15};
  amla::attention::BaseOptions bo;
  bo.block_size = 4;
  const auto expect = amla::attention::base_attention(
      amla::attention::HeadGroup{q, k, v, visible, static_cast<float>(1.0 / std::sqrt(24.0))}, bo);
  for (int t = 0; t < 2; ++t) {
    for (int c = 0; c < small.d_v; ++c) {
      CHECK(r.out_row(0, t, 1)[c] == static_cast<double>(expect.out(t, c)));
    }
    CHECK(r.lse_at(0, t, 1) == static_cast<double>(expect.lse(t)));
  }
  // round_output_bf16 casts exactly those values.
  o.round_output_bf16 = true;
  const auto rr = mla::naive_decode(p.model(), p.inputs(), o);
  for (std::size_t i = 0; i < rr.out.size(); ++i) {
    CHECK(rr.out[i] == static_cast<double>(amla::round_bf16(static_cast<float>(r.out[i]))));
  }
  CHECK(rr.lse == r.lse);
}
