// Tests of amla/mla/naive.hpp: the decompress-then-MHA formulation against an independent
// long-double oracle of MLA's definition.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "amla/mla/naive.hpp"
#include "mla/mla_test_util.hpp"

namespace mla = amla::mla;

namespace {
// Real head-dim ratios in miniature: D_n 16, D_r 8, D_v 12, D_l 32, 3 heads.
constexpr mla::MlaDims small{3, 16, 8, 12, 32};
}  // namespace

TEST_CASE("naive float64 equals the long-double oracle", "[mla][naive]") {
  for (bool causal : {false, true}) {
    for (int s_q : {1, 2}) {
      for (int prefix : {0, 9}) {
        const auto p = mla::MlaProblemBuilder(small)
                           .batch(4)
                           .s_q(s_q)
                           .prefix_len(prefix)
                           .suffix_lens({5, 0, 17, 1})
                           .page_size(4)
                           .seed(11 + s_q + prefix)
                           .build<amla::bf16>();
        mla::MlaOptions o;
        o.causal = causal;
        const auto r = mla::naive_decode(p.model(), p.inputs(), o);
        const auto ref = mla_test::oracle(p, causal);
        INFO("causal " << causal << " s_q " << s_q << " prefix " << prefix);
        CHECK(r.ran == mla::formulation::naive);
        CHECK(mla_test::rel_error(r, ref) < 1e-13);
        CHECK(mla_test::lse_error(r, ref) < 1e-12);
      }
    }
  }
}

TEST_CASE("naive: empty contexts give out = 0 and lse = -inf; poisoned pages are never read",
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
  for (auto mode : {mla::numerics::float64}) {
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
