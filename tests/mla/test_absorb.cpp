// Tests of amla/mla/absorb.hpp: the absorbed formulation against the long-double oracle.
#include <catch2/catch.hpp>

#include <cmath>

#include "amla/mla/absorb.hpp"
#include "mla/mla_test_util.hpp"

namespace mla = amla::mla;

namespace {
constexpr mla::MlaDims small{3, 16, 8, 12, 32};
}

TEST_CASE("absorb float64 equals the long-double oracle", "[mla][absorb]") {
  for (bool causal : {false, true}) {
    for (int s_q : {1, 2}) {
      for (int prefix : {0, 9}) {
        const auto p = mla::MlaProblemBuilder(small)
                           .batch(4)
                           .s_q(s_q)
                           .prefix_len(prefix)
                           .suffix_lens({5, 0, 17, 1})
                           .page_size(4)
                           .seed(31 + s_q + prefix)
                           .build<amla::bf16>();
        mla::MlaOptions o;
        o.causal = causal;
        const auto r = mla::absorb_decode(p.model(), p.inputs(), o);
        const auto ref = mla_test::oracle(p, causal);
        INFO("causal " << causal << " s_q " << s_q << " prefix " << prefix);
        CHECK(r.ran == mla::formulation::absorb);
        CHECK(mla_test::rel_error(r, ref) < 1e-13);
        CHECK(mla_test::lse_error(r, ref) < 1e-12);
      }
    }
  }
}

TEST_CASE("absorb keeps the naive softmax scale 1/sqrt(D_n + D_r)", "[mla][absorb]") {
  // Using the absorbed width's 1/sqrt(D_l + D_r) would be a different attention.
  const auto p = mla::MlaProblemBuilder(small)
                     .batch(2)
                     .prefix_len(6)
                     .suffix_lens({4, 9})
                     .seed(2)
                     .build<amla::bf16>();
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
