// Tests of attention/seesaw.hpp: FlashMLA's seesaw schedule: its observer (order, shapes, and the
// arithmetic of every step), odd block counts, no keys at all, and block sizes. The contract it
// shares with every recurrence (masking, empty rows, unread keys, bad input, agreement with golden
// and Base in both modes) is tested in test_recurrences.cpp.
#include "amla/attention/seesaw.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "amla/attention/golden.hpp"
#include "attention/variant_test_util.hpp"

using amla::MatrixF;
using namespace amla::attention;
namespace vt = amla_test::variants;

namespace {

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

TEST_CASE("seesaw observer sees step 0 then steps 1-11 of every pair with the right shapes",
          "[seesaw][observer]") {
  const int rows = 6, d_v = 10;
  for (const int n_keys : {0, 1, 16, 17, 32, 40, 48, 64}) {
    CAPTURE(n_keys);
    const int bs = 8;
    const vt::Inputs in = vt::random_inputs(rows, n_keys, 12, d_v, 3, 1.0f);
    std::vector<Snapshot> seen;
    seesaw_attention(in.group({}), {.block_size = bs},
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
    const auto r =
        seesaw_attention(g, {.mode = bf ? precision::bf16 : precision::float32, .block_size = bs},
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
        CHECK(r.lse(rr) == -std::numeric_limits<float>::infinity());
        continue;
      }
      for (int j = 0; j < dl; ++j) CHECK(r.out(rr, j) == last.o_left(rr, j) / l);
      for (int j = 0; j < dr; ++j) CHECK(r.out(rr, dl + j) == last.o_right(rr, j) / l);
      CHECK(r.lse(rr) == std::log(l) + last.m[ri] / static_cast<float>(std::numbers::log2e));
    }
  }
}

TEST_CASE("seesaw with an odd number of blocks: the last pair has no K_1", "[seesaw]") {
  for (const int n_keys : {24, 17, 40, 8}) {  // blocks of 8: 3, 3 (partial), 5, 1
    CAPTURE(n_keys);
    const vt::Inputs in = vt::random_inputs(7, n_keys, 16, 12, 31, 1.5f);
    const HeadGroup g = in.group({});
    std::vector<Snapshot> seen;
    const auto r = seesaw_attention(g, {.mode = precision::float32, .block_size = 8},
                                    [&](const SeesawState& s) { seen.push_back(snap(s)); });
    const Snapshot& last = seen.back();
    CHECK(last.keys1 == 0);
    for (float s1 : last.scale1) CHECK(s1 == 1.0f);
    CHECK(vt::relative_error(r.out, golden_attention(g).out) <= 1e-5);
  }
}

TEST_CASE("seesaw with no keys at all gives out = 0 and lse = -inf", "[seesaw]") {
  const vt::Inputs in = vt::random_inputs(3, 0, 8, 4, 1, 1.0f);
  std::vector<Snapshot> seen;
  const auto r =
      seesaw_attention(in.group({}), {}, [&](const SeesawState& s) { seen.push_back(snap(s)); });
  CHECK(seen.size() == 1);
  CHECK(r.out.isZero(0.0f));
  for (float l : r.lse) CHECK(l == -std::numeric_limits<float>::infinity());
}

TEST_CASE("seesaw block size changes only rounding", "[seesaw]") {
  const vt::Inputs in = vt::random_inputs(16, 257, 32, 32, 8, 2.0f);
  const HeadGroup g = in.group({});
  const GoldenResult ref = golden_attention(g);
  for (const int bs : {1, 2, 7, 64, 256, 257, 1000}) {
    CAPTURE(bs);
    const auto r = seesaw_attention(g, {.mode = precision::float32, .block_size = bs});
    CHECK(vt::relative_error(r.out, ref.out) <= 1e-5);
  }
}
