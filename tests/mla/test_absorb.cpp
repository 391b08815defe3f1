// Tests of amla/mla/absorb.hpp: the absorbed formulation against the long-double oracle.
#include <catch2/catch.hpp>

#include <cmath>

#include "amla/attention/online_softmax.hpp"
#include "amla/mla/absorb.hpp"
#include "mla/mla_test_util.hpp"

namespace mla = amla::mla;

using mla_test::small;

TEST_CASE("absorb float64 equals the long-double oracle", "[mla][absorb]") {
  mla_test::check_formulation_sweep(mla::formulation::absorb, 31, 1e-15, 4e-15);
}

TEST_CASE("absorb keeps the naive softmax scale 1/sqrt(D_n + D_r)", "[mla][absorb]") {
  // Using the absorbed width's 1/sqrt(D_l + D_r) would be a different attention.
  const auto p =
      mla::MlaProblemBuilder(small).prefix_len(6).suffix_lens({4, 9}).seed(2).build<amla::bf16>();
  const auto r = mla::absorb_decode(p.model(), p.inputs());
  CHECK(mla_test::rel_error(r, mla_test::oracle(p, false)) < 1e-13);
  const double wrong = 1.0 / std::sqrt(static_cast<double>(small.absorb_d_qk()));
  CHECK(mla_test::rel_error(r, mla_test::oracle(p, false, wrong)) > 1e-3);
}

TEST_CASE("absorb: empty contexts and poisoned pages", "[mla][absorb]") {
  const auto p =
      mla::MlaProblemBuilder(small).suffix_lens({0, 3, 0}).page_size(2).seed(5).build<float>();
  const auto r = mla::absorb_decode(p.model(), p.inputs());
  REQUIRE(mla_test::all_finite(r));
  for (int h = 0; h < small.heads; ++h) {
    CHECK(r.lse_at(0, 0, h) == -INFINITY);
    CHECK(r.lse_at(2, 0, h) == -INFINITY);
    CHECK(r.out_row(0, 0, h)[0] == 0.0);
  }
  CHECK(mla_test::rel_error(r, mla_test::oracle(p, false)) < 1e-13);
}

TEST_CASE("absorb bf16 mode: BF16 q_A, Base on the latent cache, BF16 o_A, BF16 GEMM with W_KVb2",
          "[mla][absorb]") {
  const auto p = mla::MlaProblemBuilder(small)
                     .s_q(2)
                     .prefix_len(5)
                     .suffix_lens({7})
                     .page_size(3)
                     .seed(23)
                     .build<float>();
  mla::MlaOptions o{.mode = mla::numerics::bf16, .kv_block = 4};
  const auto r = mla::absorb_decode(p.model(), p.inputs(), o);
  const int cols = small.absorb_d_qk();
  const amla::MatrixF latent = mla_test::context_latent(p, 0);  // 5 prefix + 7 suffix rows
  // q_A rows t * H + h.
  amla::MatrixF q_a(2 * 3, cols);
  for (int h = 0; h < 3; ++h) {
    const amla::MatrixF w1 = mla::w_kvb1_head<float>(p.model(), h);
    for (int t = 0; t < 2; ++t) {
      const float* q = p.q.data() + (t * 3 + h) * small.d_qk();
      const amla::MatrixF qn = Eigen::Map<const amla::MatrixF>(q, 1, 16);
      q_a.row(t * 3 + h).head(32) = amla::rounded_bf16(amla::matmul_bf16(qn, w1));
      for (int c = 0; c < 8; ++c) q_a(t * 3 + h, 32 + c) = q[16 + c];
    }
  }
  amla::attention::BaseOptions bo;
  bo.block_size = 4;
  const amla::MatrixF values = latent.leftCols(32);
  const auto att = amla::attention::base_attention(
      amla::attention::HeadGroup{
          q_a, latent, values, {}, static_cast<float>(1.0 / std::sqrt(24.0))},
      bo);
  const amla::MatrixF o_a = amla::rounded_bf16(att.out);
  for (int h = 0; h < 3; ++h) {
    const amla::MatrixF w2 = mla::w_kvb2_head<float>(p.model(), h);
    for (int t = 0; t < 2; ++t) {
      const amla::MatrixF up = amla::matmul_bf16(o_a.row(t * 3 + h), w2.transpose());
      for (int c = 0; c < small.d_v; ++c) {
        CHECK(r.out_row(0, t, h)[c] == static_cast<double>(up(0, c)));
      }
      CHECK(r.lse_at(0, t, h) == static_cast<double>(att.lse(t * 3 + h)));
    }
  }
}
