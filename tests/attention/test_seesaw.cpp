// Tests of attention/seesaw.hpp: FlashMLA's seesaw schedule against a float64 reference, its
// observer (order, shapes, and the arithmetic of every step), odd block counts, masking, empty
// rows, unread keys, and bad input.
#include "amla/attention/seesaw.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "amla/attention/golden.hpp"
#include "amla/attention/online_softmax.hpp"
#include "attention/variant_test_util.hpp"

using amla::MatrixF;
using amla::attention::golden_attention;
using amla::attention::GoldenResult;
using amla::attention::HeadGroup;
using amla::attention::precision;
using amla::attention::seesaw_attention;
using amla::attention::seesaw_step;
using amla::attention::SeesawOptions;
using amla::attention::SeesawState;
namespace vt = amla_test::variants;

namespace {

struct Run {
  MatrixF out;
  std::vector<float> lse;
};

Run run_seesaw(const HeadGroup& g, const SeesawOptions& o,
               const amla::attention::SeesawObserver& obs = {}) {
  Run r{MatrixF(g.rows(), g.d_v()), std::vector<float>(static_cast<std::size_t>(g.rows()))};
  seesaw_attention(g, o, r.out, r.lse, obs);
  return r;
}

// A copy of the state after one step, so that consecutive steps can be compared.
struct Snapshot {
  seesaw_step step;
  Eigen::Index pair, begin0, keys0, begin1, keys1;
  std::vector<float> m, scale0, scale1, l_left, l_right;
  MatrixF p0, p1, o_left, o_right;
};

Snapshot snap(const SeesawState& s) {
  const auto vec = [](std::span<const float> x) { return std::vector<float>(x.begin(), x.end()); };
  return Snapshot{s.step,         s.pair,   s.key_begin0,  s.keys0,       s.key_begin1,
                  s.keys1,        vec(s.m), vec(s.scale0), vec(s.scale1), vec(s.l_left),
                  vec(s.l_right), s.p0,     s.p1,          s.o_left,      s.o_right};
}

}  // namespace

TEST_CASE("seesaw float32 mode agrees with the float64 reference to 1e-5", "[seesaw]") {
  struct Case {
    int rows, n_keys, d_qk, d_v, block;
    bool causal;
  };
  const std::vector<Case> cases = {{1, 1, 8, 4, 64, false},       {3, 63, 32, 16, 64, false},
                                   {16, 64, 64, 32, 64, false},   {16, 65, 64, 32, 64, true},
                                   {64, 128, 96, 64, 64, false},  {4, 192, 40, 24, 64, true},
                                   {128, 300, 72, 64, 64, false}, {5, 37, 16, 7, 8, true},
                                   {2, 9, 8, 1, 1, false},        {8, 513, 64, 48, 128, false}};
  int seed = 1;
  for (const auto& c : cases) {
    CAPTURE(c.rows, c.n_keys, c.d_qk, c.d_v, c.block, c.causal);
    const vt::Inputs in = vt::random_inputs(c.rows, c.n_keys, c.d_qk, c.d_v, seed++, 1.5f);
    const std::vector<int> vis =
        c.causal ? vt::causal_visible(c.rows, c.n_keys, /*s_q=*/std::min(c.rows, 4))
                 : std::vector<int>{};
    const HeadGroup g = in.group(vis);
    const GoldenResult ref = golden_attention(g);
    const Run r = run_seesaw(g, {.mode = precision::float32, .block_size = c.block});
    CHECK(vt::relative_error(r.out, ref.out) <= 1e-5);
    CHECK(vt::max_row_relative_error(r.out, ref.out) <= 1e-5);
    for (int i = 0; i < c.rows; ++i) {
      CHECK(std::abs(r.lse[static_cast<std::size_t>(i)] - ref.lse(i)) <=
            1e-5 * std::max(1.0, std::abs(ref.lse(i))));
    }
  }
}

TEST_CASE("seesaw BF16 mode agrees with the float64 reference at the BF16 level", "[seesaw]") {
  const vt::Inputs in = vt::random_inputs(32, 700, 96, 64, 11, 1.0f);
  const HeadGroup g = in.group({});
  const GoldenResult ref = golden_attention(g);
  const Run raw = run_seesaw(g, {.mode = precision::bf16, .block_size = 64});
  for (const bool out_bf16 : {false, true}) {
    CAPTURE(out_bf16);
    Run r = raw;
    if (out_bf16) amla::round_bf16_inplace(r.out);  // the kernel's output cast
    const double err = vt::relative_error(r.out, ref.out);
    // P rounded to BF16 (unit roundoff 2^-8) and, with out_bf16, the output too.
    CHECK(err <= 6e-3);
    CHECK(err >= 1e-5);  // the BF16 casts really happen: far above the float32 mode's error
  }
}

TEST_CASE("seesaw BF16 mode rounds inputs that are not BF16-exact", "[seesaw]") {
  vt::Inputs in = vt::random_inputs(8, 130, 32, 16, 5, 1.0f);
  const Run exact = run_seesaw(in.group({}), {});
  // Perturb below half a BF16 ulp: the BF16 mode must not see it.
  vt::Inputs perturbed = in;
  for (MatrixF* m : {&perturbed.q, &perturbed.k, &perturbed.kv_v}) {
    for (Eigen::Index i = 0; i < m->size(); ++i) {
      float& x = m->data()[i];
      x = x + std::ldexp(std::abs(x), -12);
    }
  }
  const Run rounded = run_seesaw(perturbed.group({}), {});
  CHECK(rounded.out == exact.out);
  CHECK(rounded.lse == exact.lse);
}

TEST_CASE("seesaw observer sees step 0 then steps 1-11 of every pair with the right shapes",
          "[seesaw][observer]") {
  const int rows = 6, d_v = 10;
  for (const int n_keys : {0, 1, 16, 17, 32, 40, 48, 64}) {
    CAPTURE(n_keys);
    const int bs = 8;
    const vt::Inputs in = vt::random_inputs(rows, n_keys, 12, d_v, 3, 1.0f);
    std::vector<Snapshot> seen;
    run_seesaw(in.group({}), {.block_size = bs},
               [&](const SeesawState& s) { seen.push_back(snap(s)); });
    const int blocks = (n_keys + bs - 1) / bs;
    const int pairs = (blocks + 1) / 2;
    REQUIRE(seen.size() == static_cast<std::size_t>(1 + 11 * pairs));
    CHECK(seen[0].step == seesaw_step::init);
    CHECK(seen[0].o_left.rows() == rows);
    CHECK(seen[0].o_left.cols() == d_v / 2);
    CHECK(seen[0].o_right.cols() == d_v - d_v / 2);
    for (float m : seen[0].m) CHECK(m == -std::numeric_limits<float>::infinity());
    CHECK(seen[0].o_left.isZero(0.0f));
    for (int p = 0; p < pairs; ++p) {
      const int begin0 = 2 * p * bs;
      const int keys0 = std::min(bs, n_keys - begin0);
      const int keys1 = std::clamp(n_keys - begin0 - keys0, 0, bs);
      for (int s = 1; s <= 11; ++s) {
        const Snapshot& st = seen[static_cast<std::size_t>(1 + 11 * p + s - 1)];
        CAPTURE(p, s);
        CHECK(static_cast<int>(st.step) == s);
        CHECK(st.pair == p);
        CHECK(st.begin0 == begin0);
        CHECK(st.keys0 == keys0);
        CHECK(st.begin1 == begin0 + keys0);
        CHECK(st.keys1 == keys1);
        CHECK(st.m.size() == static_cast<std::size_t>(rows));
        CHECK(st.p0.rows() == rows);
        CHECK(st.p0.cols() == keys0);
        CHECK(st.p1.rows() == rows);
        CHECK(st.p1.cols() == (s >= 2 ? keys1 : st.p1.cols()));
        CHECK(st.o_left.cols() == d_v / 2);
        CHECK(st.o_right.cols() == d_v - d_v / 2);
      }
    }
  }
}

// Replays every step from the previous snapshot with the rules of the schedule (seesaw.hpp's
// file comment) and checks the observed state: element-wise steps exactly, product steps to FP32
// accumulation noise.
TEST_CASE("seesaw observer: every step does exactly what the schedule says", "[seesaw][observer]") {
  const int rows = 5, n_keys = 45, d_qk = 16, d_v = 9, bs = 8;  // 6 blocks: the last one partial
  for (const bool bf : {true, false}) {
    CAPTURE(bf);
    vt::Inputs in = vt::random_inputs(rows, n_keys, d_qk, d_v, 21, 2.0f);
    const std::vector<int> vis = {45, 44, 30, 0, 9};  // row 3 sees nothing, row 4 one block+1
    const HeadGroup g = in.group(vis);
    std::vector<Snapshot> seen;
    const Run r =
        run_seesaw(g, {.mode = bf ? precision::bf16 : precision::float32, .block_size = bs},
                   [&](const SeesawState& s) { seen.push_back(snap(s)); });
    const float c = static_cast<float>(static_cast<double>(g.scale) * std::numbers::log2e);
    const auto op = [&](const MatrixF& p) { return bf ? amla::rounded_bf16(p) : p; };
    const MatrixF q = bf ? amla::rounded_bf16(in.q) : in.q;
    const MatrixF k = bf ? amla::rounded_bf16(in.k) : in.k;
    const MatrixF v = bf ? amla::rounded_bf16(in.kv_v) : in.kv_v;
    const float ninf = -std::numeric_limits<float>::infinity();
    const int dl = d_v / 2, dr = d_v - dl;
    for (std::size_t i = 1; i < seen.size(); ++i) {
      const Snapshot& a = seen[i - 1];
      const Snapshot& b = seen[i];
      CAPTURE(b.pair, static_cast<int>(b.step));
      switch (b.step) {
        case seesaw_step::qk0:
        case seesaw_step::qk1: {
          const bool first = b.step == seesaw_step::qk0;
          const MatrixF& p = first ? b.p0 : b.p1;
          const Eigen::Index begin = first ? b.begin0 : b.begin1;
          for (Eigen::Index rr = 0; rr < rows; ++rr) {
            for (Eigen::Index j = 0; j < p.cols(); ++j) {
              if (begin + j >= vis[static_cast<std::size_t>(rr)]) {
                CHECK(p(rr, j) == ninf);
              } else {
                const float want = q.row(rr).dot(k.row(begin + j));
                CHECK(p(rr, j) == Approx(want).epsilon(1e-5).margin(1e-5));
              }
            }
          }
          CHECK(b.o_left == a.o_left);
          CHECK(b.o_right == a.o_right);
          break;
        }
        case seesaw_step::max0:
        case seesaw_step::max1: {
          const bool first = b.step == seesaw_step::max0;
          const MatrixF& p = first ? b.p0 : b.p1;
          const std::vector<float>& sc = first ? b.scale0 : b.scale1;
          for (int rr = 0; rr < rows; ++rr) {
            const auto ri = static_cast<std::size_t>(rr);
            float mx = ninf;
            for (Eigen::Index j = 0; j < p.cols(); ++j) mx = std::max(mx, p(rr, j));
            const float m_new = std::max(a.m[ri], mx * c);
            CHECK(b.m[ri] == m_new);
            CHECK(sc[ri] == (m_new == ninf ? 1.0f : std::exp2(a.m[ri] - m_new)));
            CHECK(sc[ri] <= 1.0f);
          }
          break;
        }
        case seesaw_step::exp0:
        case seesaw_step::exp1: {
          const bool first = b.step == seesaw_step::exp0;
          const MatrixF& before = first ? a.p0 : a.p1;
          const MatrixF& after = first ? b.p0 : b.p1;
          float sum_check = 0.0f;
          for (int rr = 0; rr < rows; ++rr) {
            const auto ri = static_cast<std::size_t>(rr);
            float sum = 0.0f;
            for (Eigen::Index j = 0; j < after.cols(); ++j) {
              const float want =
                  b.m[ri] == ninf ? 0.0f : std::exp2(std::fma(before(rr, j), c, -b.m[ri]));
              CHECK(after(rr, j) == want);
              // fma(s, c, -m) sees the rounding error of m = round(max * c): the row's max
              // score can give 2^(tiny > 0), one ulp above 1, as on the GPU.
              CHECK(after(rr, j) <= 1.0f + 0x1p-22f);
              sum += want;
            }
            if (first) CHECK(b.l_left[ri] == std::fma(a.l_left[ri], b.scale0[ri], sum));
            sum_check += sum;
          }
          if (!first) CHECK(b.l_right == a.l_right);  // l_R changes at step 8
          (void)sum_check;
          break;
        }
        case seesaw_step::o_left_p0: {
          MatrixF want = a.o_left;
          for (int rr = 0; rr < rows; ++rr) want.row(rr) *= b.scale0[static_cast<std::size_t>(rr)];
          want += op(b.p0) * v.middleRows(b.begin0, b.keys0).leftCols(dl);
          CHECK(vt::relative_error(b.o_left, want.cast<double>()) <= 1e-6);
          CHECK(b.o_right == a.o_right);
          break;
        }
        case seesaw_step::o_right_p1: {
          MatrixF want = a.o_right;
          for (int rr = 0; rr < rows; ++rr) {
            const auto ri = static_cast<std::size_t>(rr);
            const float both = b.scale1[ri] * b.scale0[ri];
            want.row(rr) *= both;
            float sum = 0.0f;
            for (Eigen::Index j = 0; j < b.p1.cols(); ++j) sum += b.p1(rr, j);
            CHECK(b.l_right[ri] == std::fma(a.l_right[ri], both, sum));
          }
          if (b.keys1 > 0) want += op(b.p1) * v.middleRows(b.begin1, b.keys1).rightCols(dr);
          CHECK(vt::relative_error(b.o_right, want.cast<double>()) <= 1e-6);
          CHECK(b.o_left == a.o_left);
          break;
        }
        case seesaw_step::rescale_p0: {
          for (int rr = 0; rr < rows; ++rr) {
            for (Eigen::Index j = 0; j < b.p0.cols(); ++j) {
              CHECK(b.p0(rr, j) == a.p0(rr, j) * b.scale1[static_cast<std::size_t>(rr)]);
            }
          }
          CHECK(b.o_left == a.o_left);
          CHECK(b.o_right == a.o_right);
          break;
        }
        case seesaw_step::o_right_p0: {
          MatrixF want = a.o_right;
          want += op(b.p0) * v.middleRows(b.begin0, b.keys0).rightCols(dr);
          CHECK(vt::relative_error(b.o_right, want.cast<double>()) <= 1e-6);
          break;
        }
        case seesaw_step::o_left_p1: {
          MatrixF want = a.o_left;
          std::vector<float> l = a.l_left;
          if (b.keys1 > 0) {
            for (int rr = 0; rr < rows; ++rr) {
              const auto ri = static_cast<std::size_t>(rr);
              want.row(rr) *= b.scale1[ri];
              l[ri] *= b.scale1[ri];
            }
            want += op(b.p1) * v.middleRows(b.begin1, b.keys1).leftCols(dl);
          } else {
            for (float s1 : b.scale1) CHECK(s1 == 1.0f);  // no K_1: nothing to rescale
          }
          CHECK(b.l_left == l);
          CHECK(vt::relative_error(b.o_left, want.cast<double>()) <= 1e-6);
          break;
        }
        case seesaw_step::init:
          FAIL("init reported twice");
          break;
      }
    }
    // The end: out = [o_L o_R] / (l_L + l_R), lse = ln(l) + m / log2(e); row 3 saw nothing.
    const Snapshot& last = seen.back();
    for (int rr = 0; rr < rows; ++rr) {
      const auto ri = static_cast<std::size_t>(rr);
      const float l = last.l_left[ri] + last.l_right[ri];
      if (vis[ri] == 0) {
        CHECK(l == 0.0f);
        CHECK(r.out.row(rr).isZero(0.0f));
        CHECK(r.lse[ri] == -std::numeric_limits<float>::infinity());
        continue;
      }
      for (int j = 0; j < dl; ++j) CHECK(r.out(rr, j) == last.o_left(rr, j) / l);
      for (int j = 0; j < dr; ++j) CHECK(r.out(rr, dl + j) == last.o_right(rr, j) / l);
      CHECK(r.lse[ri] == std::log(l) + last.m[ri] / static_cast<float>(std::numbers::log2e));
    }
  }
}

TEST_CASE("seesaw with an odd number of blocks: the last pair has no K_1", "[seesaw]") {
  for (const int n_keys : {24, 17, 40, 8}) {  // blocks of 8: 3, 3 (partial), 5, 1
    CAPTURE(n_keys);
    const vt::Inputs in = vt::random_inputs(7, n_keys, 16, 12, 31, 1.5f);
    const HeadGroup g = in.group({});
    std::vector<Snapshot> seen;
    const Run r = run_seesaw(g, {.mode = precision::float32, .block_size = 8},
                             [&](const SeesawState& s) { seen.push_back(snap(s)); });
    const Snapshot& last = seen.back();
    CHECK(last.keys1 == 0);
    for (float s1 : last.scale1) CHECK(s1 == 1.0f);
    CHECK(vt::relative_error(r.out, golden_attention(g).out) <= 1e-5);
  }
}

TEST_CASE("seesaw masking: causal rows, empty rows, and keys nobody sees are never read",
          "[seesaw]") {
  const int rows = 8, n_keys = 100, d_qk = 24, d_v = 16;
  vt::Inputs in = vt::random_inputs(rows, n_keys, d_qk, d_v, 41, 1.0f);
  const std::vector<int> vis = {0, 1, 63, 64, 65, 70, 0, 70};
  // Keys 70..99 are visible to nobody: poison them.
  for (int j = 70; j < n_keys; ++j) {
    in.k.row(j).setConstant(std::numeric_limits<float>::quiet_NaN());
    in.kv_v.row(j).setConstant(std::numeric_limits<float>::quiet_NaN());
  }
  const HeadGroup g = in.group(vis);
  const GoldenResult ref = golden_attention(g);
  for (const bool bf : {false, true}) {
    CAPTURE(bf);
    const Run r =
        run_seesaw(g, {.mode = bf ? precision::bf16 : precision::float32, .block_size = 16});
    CHECK(r.out.allFinite());
    CHECK(vt::relative_error(r.out, ref.out) <= (bf ? 6e-3 : 1e-5));
    for (int rr : {0, 6}) {
      CHECK(r.out.row(rr).isZero(0.0f));
      CHECK(r.lse[static_cast<std::size_t>(rr)] == -std::numeric_limits<float>::infinity());
    }
    // A row that sees exactly one key gets that key's value (the softmax of one score is 1).
    const MatrixF v0 = bf ? amla::rounded_bf16(in.kv_v.row(0)) : MatrixF(in.kv_v.row(0));
    CHECK(r.out.row(1) == v0);
  }
}

TEST_CASE("seesaw with no keys at all gives out = 0 and lse = -inf", "[seesaw]") {
  const vt::Inputs in = vt::random_inputs(3, 0, 8, 4, 1, 1.0f);
  std::vector<Snapshot> seen;
  const Run r =
      run_seesaw(in.group({}), {}, [&](const SeesawState& s) { seen.push_back(snap(s)); });
  CHECK(seen.size() == 1);
  CHECK(r.out.isZero(0.0f));
  for (float l : r.lse) CHECK(l == -std::numeric_limits<float>::infinity());
}

TEST_CASE("seesaw propagates a NaN in a key that is read", "[seesaw]") {
  vt::Inputs in = vt::random_inputs(2, 20, 8, 4, 3, 1.0f);
  in.kv_v(5, 1) = std::numeric_limits<float>::quiet_NaN();
  const Run r = run_seesaw(in.group({}), {.block_size = 8});
  CHECK(std::isnan(r.out(0, 1)));
  CHECK(std::isnan(r.out(1, 1)));
  CHECK(std::isfinite(r.out(0, 0)));
}

TEST_CASE("seesaw block size changes only rounding", "[seesaw]") {
  const vt::Inputs in = vt::random_inputs(16, 257, 32, 32, 8, 2.0f);
  const HeadGroup g = in.group({});
  const GoldenResult ref = golden_attention(g);
  for (const int bs : {1, 2, 7, 64, 256, 257, 1000}) {
    CAPTURE(bs);
    const Run r = run_seesaw(g, {.mode = precision::float32, .block_size = bs});
    CHECK(vt::relative_error(r.out, ref.out) <= 1e-5);
  }
}

TEST_CASE("seesaw rejects bad input with a message naming the argument", "[seesaw][errors]") {
  const vt::Inputs in = vt::random_inputs(4, 10, 8, 6, 1, 1.0f);
  MatrixF out(4, 6);
  std::vector<float> lse(4);
  const auto throws_naming = [&](const HeadGroup& g, Eigen::Ref<MatrixF> o, std::span<float> l,
                                 SeesawOptions opt, const std::string& needle) {
    try {
      seesaw_attention(g, opt, o, l);
      FAIL("no exception for " << needle);
    } catch (const amla::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains(needle) && Catch::Contains("seesaw_attention"));
    }
  };
  const HeadGroup good = in.group({});
  SECTION("block size") {
    throws_naming(good, out, lse, {.block_size = 0}, "options.block_size");
  }
  SECTION("scale") {
    for (float s : {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
      HeadGroup g = good;
      g.scale = s;
      throws_naming(g, out, lse, {}, "group.scale");
    }
  }
  SECTION("shapes") {
    const MatrixF k_bad = MatrixF::Zero(10, 7);
    HeadGroup g{in.q, k_bad, in.kv_v, {}, good.scale};
    throws_naming(g, out, lse, {}, "group.k");
    const MatrixF v_bad = MatrixF::Zero(9, 6);
    HeadGroup g2{in.q, in.k, v_bad, {}, good.scale};
    throws_naming(g2, out, lse, {}, "group.v");
    MatrixF out_bad(4, 5);
    throws_naming(good, out_bad, lse, {}, "out");
    std::vector<float> lse_bad(3);
    throws_naming(good, out, lse_bad, {}, "lse");
  }
  SECTION("visible") {
    const std::vector<int> too_few = {1, 2};
    throws_naming(in.group(too_few), out, lse, {}, "group.visible");
    const std::vector<int> negative = {1, 2, -1, 3};
    throws_naming(in.group(negative), out, lse, {}, "visible[2] = -1");
    const std::vector<int> too_many = {1, 2, 11, 3};
    throws_naming(in.group(too_many), out, lse, {}, "visible[2] = 11");
  }
}

TEST_CASE("seesaw owning overload returns what the buffer overload writes", "[seesaw]") {
  const vt::Inputs in = vt::random_inputs(9, 77, 16, 10, 2, 1.0f);
  const std::vector<int> vis = vt::causal_visible(9, 77, 3);
  const HeadGroup g = in.group(vis);
  const Run a = run_seesaw(g, {.block_size = 16});
  const amla::attention::SeesawResult b = seesaw_attention(g, {.block_size = 16});
  CHECK(a.out == b.out);
  CHECK(Eigen::Map<const Eigen::VectorXf>(a.lse.data(), b.lse.size()) == b.lse);
}

TEST_CASE("seesaw float32 mode equals Base's float32 result closely", "[seesaw][base]") {
  const vt::Inputs in = vt::random_inputs(48, 1000, 64, 48, 51, 2.0f);
  const std::vector<int> vis = vt::causal_visible(48, 1000, 3);
  const HeadGroup g = in.group(vis);
  for (const int block : {64, 512}) {
    const amla::attention::BaseResult base =
        amla::attention::base_attention(g, {precision::float32, block, false});
    {
      CAPTURE(block);
      const auto r = seesaw_attention(g, {.mode = precision::float32, .block_size = block});
      // The same mathematics in FP32 in another order: FP32 rounding apart, nothing more.
      CHECK(vt::relative_error(r.out, base.out) <= 2e-6);
      CHECK(vt::max_row_relative_error(r.out, base.out) <= 4e-6);
      for (Eigen::Index i = 0; i < g.rows(); ++i) {
        CHECK(r.lse(i) == Approx(base.lse(i)).epsilon(1e-6).margin(1e-6));
      }
    }
  }
}

TEST_CASE("seesaw bf16 mode is Base's mathematics at the BF16 level", "[seesaw][base]") {
  const vt::Inputs in = vt::random_inputs(64, 1500, 96, 64, 52, 1.0f);
  const HeadGroup g = in.group({});
  const GoldenResult ref = golden_attention(g);
  const amla::attention::BaseResult base =
      amla::attention::base_attention(g, {precision::bf16, 64, false});
  const double base_err = vt::relative_error(base.out, ref.out);
  {
    const auto r = seesaw_attention(g, {.mode = precision::bf16, .block_size = 64});
    const double err = vt::relative_error(r.out, ref.out);
    // Both cast P to BF16 once per product: the same error level, and close to each other.
    CHECK(err <= 1.25 * base_err);
    CHECK(err >= 0.8 * base_err);
    CHECK(vt::relative_error(r.out, base.out) <= 1.5 * base_err);
  }
}

TEST_CASE("seesaw_decode matches golden over the paged sweep", "[seesaw][decode]") {
  vt::for_each_paged_case([](const auto& p, const amla::attention::DecodeOptions& o, int block) {
    const auto want = amla::attention::golden_decode(p.inputs(), o);
    {
      CAPTURE(p.shape.h_q, p.shape.h_kv, p.shape.s_q, p.shape.page_size, block, o.causal,
              p.v_in_kv());
      const auto f32 = amla::attention::seesaw_decode(
          p.inputs(), o, {.mode = precision::float32, .block_size = block});
      const auto b16 = amla::attention::seesaw_decode(
          p.inputs(), o, {.mode = precision::bf16, .block_size = block});
      for (const float x : b16.out) REQUIRE(std::isfinite(x));  // poisoned pages never read
      CHECK(vt::rel_frobenius(f32.out, want.out) <= 1e-5);
      CHECK(vt::max_lse_error(f32.lse, want.lse) <= 1e-5);
      CHECK(vt::rel_frobenius(b16.out, want.out) <= 1e-2);
      CHECK(vt::max_lse_error(b16.lse, want.lse) <= 1e-5);  // lse from FP32 m and l
    }
  });
}

TEST_CASE("seesaw_decode on the DeepSeek shape, float and bf16 caches", "[seesaw][decode]") {
  // h_q 128, d_qk 576, d_v 512 (V = the first 512 columns of K), 1000 keys over 64-key pages.
  const auto pb = amla::attention::ProblemBuilder::deepseek_mla(1, 1000).seed(9);
  const auto p16 = pb.build<amla::bf16>();
  const auto p32 = pb.build<float>();  // the same BF16 values stored as float
  amla::attention::DecodeOptions o;
  o.round_output_bf16 = true;  // the kernel's output cast
  const auto want = amla::attention::golden_decode(p16.inputs(), {});
  {
    const auto a = amla::attention::seesaw_decode(p16.inputs(), o, {.block_size = 64});
    const auto b = amla::attention::seesaw_decode(p32.inputs(), o, {.block_size = 64});
    CHECK(a.out == b.out);
    CHECK(vt::rel_frobenius(a.out, want.out) <= 5e-3);
    for (const float x : a.out) CHECK(amla::is_bf16_exact(x));
  }
}

TEST_CASE("seesaw_decode validates its options before writing", "[seesaw][decode][errors]") {
  const auto p = amla::attention::ProblemBuilder()
                     .heads(2, 1)
                     .dims(8, 8)
                     .page_size(4)
                     .seqlens({5})
                     .build<amla::bf16>();
  amla::attention::DecodeResult<float, float> r(p.shape);
  std::fill(r.out.begin(), r.out.end(), 42.0f);
  try {
    amla::attention::seesaw_decode(p.inputs(), {}, r.view(), {.block_size = 0});
    FAIL("no throw");
  } catch (const amla::invalid_argument& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("'seesaw.block_size'") && Catch::Contains("seesaw_decode"));
  }
  for (const float x : r.out) CHECK(x == 42.0f);
  CHECK_THROWS_AS(
      amla::attention::seesaw_decode(p.inputs(), {}, {.mode = static_cast<precision>(7)}),
      amla::invalid_argument);
}
