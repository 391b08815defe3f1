// Tests of the float64 golden: a hand-computed case, agreement with an independent long-double
// attention that walks the paged cache itself (over a sweep of batch, head, length and page
// shapes), invariance to paging, NaN-poisoned pages, empty and fully masked rows, and validation
// of the dense core.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "amla/attention/golden.hpp"
#include "amla/attention/problem_builder.hpp"
#include "attention/variant_test_util.hpp"

using amla::bf16;
using amla::MatrixF;
using namespace amla::attention;
namespace vt = amla_test::variants;

namespace {

constexpr double dinf = std::numeric_limits<double>::infinity();

// Softmax attention in long double straight from the paged cache (no gather, no GEMM, no
// HeadGroup): out[b, t, h, :] and lse[b, h, t].
template <class T>
DecodeResult<double, double> naive_attention(const DecodeProblem<T>& p, const DecodeOptions& o) {
  const DecodeShape& s = p.shape;
  DecodeResult<double, double> r(s);
  const long double scale = resolved_scale(o, s);
  const int hpg = s.heads_per_group();
  for (int b = 0; b < s.batch; ++b) {
    const int len = p.seqlens[static_cast<std::size_t>(b)];
    for (int t = 0; t < s.s_q; ++t) {
      const int vis = visible_keys(len, s.s_q, t, o.causal);
      for (int h = 0; h < s.h_q; ++h) {
        const int g = h / hpg;
        std::vector<long double> x(static_cast<std::size_t>(vis));
        long double m = -std::numeric_limits<long double>::infinity();
        for (int k = 0; k < vis; ++k) {
          long double dot = 0;
          for (int d = 0; d < s.d_qk; ++d) {
            dot += static_cast<long double>(amla::detail::to_float(p.query(b, t, h)[d])) *
                   amla::detail::to_float(p.key(b, k, g)[d]);
          }
          x[static_cast<std::size_t>(k)] = dot * scale;
          m = std::max(m, x[static_cast<std::size_t>(k)]);
        }
        long double sum = 0;
        std::vector<long double> acc(static_cast<std::size_t>(s.d_v), 0.0L);
        for (int k = 0; k < vis; ++k) {
          const long double e = std::exp(x[static_cast<std::size_t>(k)] - m);
          sum += e;
          for (int d = 0; d < s.d_v; ++d) {
            acc[static_cast<std::size_t>(d)] += e * amla::detail::to_float(p.value(b, k, g)[d]);
          }
        }
        double* out = r.out.data() + s.out_offset(b, t, h);
        for (int d = 0; d < s.d_v; ++d) {
          out[d] = vis > 0 ? static_cast<double>(acc[static_cast<std::size_t>(d)] / sum) : 0.0;
        }
        r.lse[s.lse_offset(b, t, h)] = vis > 0 ? static_cast<double>(m + std::log(sum)) : -dinf;
      }
    }
  }
  return r;
}

double rel_frobenius64(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num) / (std::sqrt(den) + 1e-300);
}

void check_lse(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      CHECK(got[i] == want[i]);
    } else {
      CHECK(std::abs(got[i] - want[i]) <= tol * (1.0 + std::abs(want[i])));
    }
  }
}

}  // namespace

TEST_CASE("golden matches a hand-computed two-key case", "[golden]") {
  MatrixF q(1, 2), k(2, 2), v(2, 2);
  q << 1, 0;
  k << 1, 0, 0, 1;
  v << 1, 2, 3, 4;
  const HeadGroup g{q, k, v, {}, 1.0f};
  const GoldenResult r = golden_attention(g);
  const double e = std::exp(1.0);
  const double p0 = e / (e + 1), p1 = 1 / (e + 1);
  CHECK(r.out(0, 0) == Approx(p0 * 1 + p1 * 3).epsilon(1e-15));
  CHECK(r.out(0, 1) == Approx(p0 * 2 + p1 * 4).epsilon(1e-15));
  CHECK(r.lse(0) == Approx(std::log(e + 1)).epsilon(1e-15));
  // Only the first key visible: out is v0, lse is its score.
  const int one[] = {1};
  const GoldenResult r1 = golden_attention(HeadGroup{q, k, v, one, 1.0f});
  CHECK(r1.out(0, 0) == 1.0);
  CHECK(r1.out(0, 1) == 2.0);
  CHECK(r1.lse(0) == 1.0);
  CHECK(r1.out_float()(0, 1) == 2.0f);
  CHECK(r1.lse_float()(0) == 1.0f);
}

TEST_CASE("golden agrees with a long-double attention over the shape sweep", "[golden]") {
  const std::vector<vt::PagedCase> cases = {
      {1, 1, 1, 1, 0, {0, 1, 37}},  {3, 1, 2, 16, 0, {1, 130, 16}}, {16, 1, 4, 64, 0, {65, 3}},
      {16, 4, 2, 128, 0, {200, 0}}, {64, 1, 1, 16, 0, {33}},        {128, 1, 2, 64, 0, {70}},
      {6, 3, 4, 1, 0, {5, 2}},
  };
  for (const auto& c : cases) {
    vt::for_each_layout(c, 24, 16, static_cast<std::uint64_t>(c.h_q * 100 + c.page),
                        [&](const auto& p, DecodeOptions o) {
                          o.softmax_scale = o.causal ? 0.3f : std::optional<float>{};
                          CAPTURE(c.h_q, c.h_kv, c.s_q, c.page, o.causal, p.v_in_kv());
                          const auto got = golden_decode(p.inputs(), o);
                          const auto want = naive_attention(p, o);
                          CHECK(rel_frobenius64(got.out, want.out) < 1e-13);
                          check_lse(got.lse, want.lse, 1e-13);
                          for (const double x : got.out) REQUIRE(std::isfinite(x));  // unread pages
                        });
  }
}

TEST_CASE("golden on a DeepSeek-shaped head group", "[golden]") {
  const auto p = ProblemBuilder::deepseek_mla(1, 300).heads(32, 1).s_q(2).seed(9).build<bf16>();
  DecodeOptions o;
  o.causal = true;
  const auto got = golden_decode(p.inputs(), o);
  const auto want = naive_attention(p, o);
  CHECK(rel_frobenius64(got.out, want.out) < 1e-13);
  check_lse(got.lse, want.lse, 1e-13);
}

TEST_CASE("paging does not change golden's result", "[golden]") {
  DecodeResult<double, double>* first = nullptr;
  std::vector<DecodeResult<double, double>> results;
  results.reserve(8);
  for (const int page : {1, 16, 64, 128}) {
    for (const bool shuffle : {false, true}) {
      const auto p = vt::builder({.heads = {8, 2},
                                  .s_q = 2,
                                  .dims = {32, 16},
                                  .page_size = page,
                                  .seqlens = {150, 64, 1}})
                         .shuffle_pages(shuffle)
                         .spare_pages(3)
                         .seed(21)
                         .build<bf16>();
      DecodeOptions o;
      o.causal = true;
      results.push_back(golden_decode(p.inputs(), o));
      if (!first) first = &results.front();
      CAPTURE(page, shuffle);
      CHECK(results.back().out == first->out);
      CHECK(results.back().lse == first->lse);
    }
  }
}

TEST_CASE("golden: float and bf16 storage of the same values agree bit for bit", "[golden]") {
  auto pb = ProblemBuilder().heads(4, 1).dims(16, 16).page_size(16).seqlens({40}).separate_v();
  const auto b = pb.seed(4).build<bf16>();
  const auto f = pb.build<float>();  // the same values stored as float
  const auto rb = golden_decode(b.inputs());
  const auto rf = golden_decode(f.inputs());
  CHECK(rb.out == rf.out);
  CHECK(rb.lse == rf.lse);
}

TEST_CASE("golden: keys past every row's window are never read", "[golden]") {
  MatrixF q = MatrixF::Ones(2, 4), k = MatrixF::Ones(5, 4), v = MatrixF::Ones(5, 3);
  k.bottomRows(2).setConstant(std::numeric_limits<float>::quiet_NaN());
  v.bottomRows(2).setConstant(std::numeric_limits<float>::quiet_NaN());
  const int vis[] = {3, 1};
  const GoldenResult r = golden_attention(HeadGroup{q, k, v, vis, 0.5f});
  CHECK(r.out.allFinite());
  CHECK(r.out(0, 0) == 1.0);
  CHECK(r.lse(0) == Approx(2.0 + std::log(3.0)).epsilon(1e-15));
  CHECK(r.lse(1) == 2.0);
}
