// Tests of Base (AMLA Algorithm 1): float32 mode against the float64 golden over the shape sweep,
// bf16 mode at the BF16 level (and measurably worse than float32 mode), agreement with a scalar
// transcription of Algorithm 1, masking without NaN, operand rounding, thread independence.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "amla/attention/golden.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/problem_builder.hpp"
#include "error_norms.hpp"

using amla::bf16;
using amla::MatrixF;
using namespace amla::attention;

namespace {

constexpr float finf = std::numeric_limits<float>::infinity();

using amla_test::max_lse_error;
using amla_test::rel_frobenius;

// Algorithm 1 transcribed literally with scalar loops (sequential FP32 sums, std::exp), for a
// dense group whose operands are BF16 values. round_p selects the P cast.
amla::MatrixF algorithm1(const MatrixF& q, const MatrixF& k, const MatrixF& v, float scale,
                         int block, bool round_p) {
  const int rows = static_cast<int>(q.rows()), n = static_cast<int>(k.rows());
  const int dqk = static_cast<int>(q.cols()), dv = static_cast<int>(v.cols());
  MatrixF o = MatrixF::Zero(rows, dv);
  for (int r = 0; r < rows; ++r) {
    float m = -finf, l = 0;
    for (int j0 = 0; j0 < n; j0 += block) {
      const int nb = std::min(block, n - j0);
      std::vector<float> x(static_cast<std::size_t>(nb));
      float mb = -finf;
      for (int j = 0; j < nb; ++j) {
        float acc = 0;
        for (int d = 0; d < dqk; ++d) acc += q(r, d) * k(j0 + j, d);
        x[static_cast<std::size_t>(j)] = acc * scale;
        mb = std::max(mb, x[static_cast<std::size_t>(j)]);
      }
      const float m_new = std::max(m, mb);
      const float alpha = std::exp(m - m_new);
      float sum = 0;
      for (auto& e : x) {
        e = std::exp(e - m_new);
        sum += e;
        if (round_p) e = amla::round_bf16(e);
      }
      l = l * alpha + sum;
      m = m_new;
      for (int d = 0; d < dv; ++d) {
        float t = 0;
        for (int j = 0; j < nb; ++j) t += x[static_cast<std::size_t>(j)] * v(j0 + j, d);
        o(r, d) = o(r, d) * alpha + t;
      }
    }
    o.row(r) /= l;
  }
  return o;
}

struct Errors {
  double out_f32, out_bf16, lse_f32, lse_bf16;
};

template <class T>
Errors base_errors(const DecodeProblem<T>& p, const DecodeOptions& o, int block) {
  const auto want = golden_decode(p.inputs(), o);
  BaseOptions f32{precision::float32, block, false};
  BaseOptions b16{precision::bf16, block, false};
  const auto got32 = base_decode(p.inputs(), o, f32);
  const auto got16 = base_decode(p.inputs(), o, b16);
  for (const float x : got16.out) REQUIRE(std::isfinite(x));
  return {rel_frobenius(got32.out, want.out), rel_frobenius(got16.out, want.out),
          max_lse_error(got32.lse, want.lse), max_lse_error(got16.lse, want.lse)};
}

}  // namespace

TEST_CASE("Base float32 mode matches golden over the shape sweep", "[online_softmax]") {
  struct Case {
    int h_q, h_kv, s_q, page, block;
    std::vector<int> lens;
  };
  const std::vector<Case> cases = {
      {1, 1, 1, 1, 64, {0, 1, 37}},     {3, 1, 2, 16, 7, {1, 130, 16}},
      {16, 1, 4, 64, 64, {65, 3, 200}}, {16, 4, 2, 128, 512, {700, 0}},
      {64, 1, 1, 16, 64, {129}},        {128, 1, 2, 64, 512, {600}},
      {6, 3, 4, 1, 1, {5, 2}},
  };
  for (const auto& c : cases) {
    for (const bool causal : {false, true}) {
      for (const bool separate_v : {false, true}) {
        const auto p = ProblemBuilder()
                           .heads(c.h_q, c.h_kv)
                           .s_q(c.s_q)
                           .dims(48, 32)
                           .page_size(c.page)
                           .seqlens(c.lens)
                           .separate_v(separate_v)
                           .seed(static_cast<std::uint64_t>(c.h_q * 7 + c.page))
                           .build<bf16>();
        DecodeOptions o;
        o.causal = causal;
        CAPTURE(c.h_q, c.h_kv, c.s_q, c.page, c.block, causal, separate_v);
        const Errors e = base_errors(p, o, c.block);
        CHECK(e.out_f32 <= 1e-5);
        CHECK(e.lse_f32 <= 1e-5);
        CHECK(e.out_bf16 <= 1e-2);
        CHECK(e.lse_bf16 <= 1e-5);  // lse comes from FP32 m and l: the P cast does not touch it
      }
    }
  }
}

TEST_CASE("Base on DeepSeek shapes: float32 tight, bf16 at the BF16 level and worse",
          "[online_softmax]") {
  // h_q 128, s_q 1, d_qk 576, d_v 512 (V = first 512 columns of K), 1500 keys: not a multiple of
  // the 512-key block nor of the 64-key page.
  const auto p = ProblemBuilder::deepseek_mla(1, 1500).seed(17).build<bf16>();
#ifdef AMLA_TEST_REDUCED
  const std::vector<int> blocks = {512};
#else
  const std::vector<int> blocks = {512, 64};
#endif
  for (const int block : blocks) {
    CAPTURE(block);
    const Errors e = base_errors(p, {}, block);
    CHECK(e.out_f32 <= 1e-5);
    CHECK(e.out_bf16 <= 1e-2);
    // The P cast costs accuracy: bf16 mode is far from float32 mode's error, so this test fails
    // if the cast is lost.
    CHECK(e.out_bf16 > 1e-4);
    CHECK(e.out_bf16 > 20 * e.out_f32);
  }
  // MTP (s_q 2) with the causal mask.
  const auto m = ProblemBuilder::deepseek_mla(1, 1000).heads(64, 1).s_q(2).seed(5).build<bf16>();
  DecodeOptions o;
  o.causal = true;
  const Errors e = base_errors(m, o, 512);
  CHECK(e.out_f32 <= 1e-5);
  CHECK(e.out_bf16 <= 1e-2);
}

TEST_CASE("Base bf16 mode is Algorithm 1 with the P cast", "[online_softmax]") {
  const auto p = ProblemBuilder()
                     .heads(8, 1)
                     .dims(32, 24)
                     .page_size(16)
                     .seqlens({150})
                     .separate_v()
                     .seed(8)
                     .build<float>();
  MatrixF q(8, 32), k(150, 32), v(150, 24);
  for (int h = 0; h < 8; ++h) {
    for (int d = 0; d < 32; ++d) q(h, d) = p.query(0, 0, h)[d];
  }
  for (int j = 0; j < 150; ++j) {
    for (int d = 0; d < 32; ++d) k(j, d) = p.key(0, j, 0)[d];
    for (int d = 0; d < 24; ++d) v(j, d) = p.value(0, j, 0)[d];
  }
  const float scale = 0.2f;
  for (const int block : {16, 64, 150}) {
    CAPTURE(block);
    const BaseResult got =
        base_attention(HeadGroup{q, k, v, {}, scale}, BaseOptions{precision::bf16, block, false});
    const MatrixF with_cast = algorithm1(q, k, v, scale, block, true);
    const MatrixF without_cast = algorithm1(q, k, v, scale, block, false);
    const double to_with = (got.out - with_cast).norm() / with_cast.norm();
    const double to_without = (got.out - without_cast).norm() / without_cast.norm();
    CHECK(to_with < 2e-6);             // only summation order and exp ulps differ
    CHECK(to_without > 20 * to_with);  // the cast is really there
  }
}

TEST_CASE("Base rounds float operands to BF16 in bf16 mode, once", "[online_softmax]") {
  // Values that are not BF16: bf16 mode must equal running on the rounded values.
  const auto p = ProblemBuilder()
                     .heads(16, 2)
                     .s_q(2)
                     .dims(40, 40)
                     .page_size(16)
                     .seqlens({90, 33})
                     .round_to_bf16(false)
                     .seed(12)
                     .build<float>();
  auto pr = p;
  for (auto& x : pr.q) x = amla::round_bf16(x);
  for (auto& x : pr.kv) x = amla::round_bf16(x);  // NaN poison stays NaN
  DecodeOptions o;
  o.causal = true;
  const auto a = base_decode(p.inputs(), o);
  const auto b = base_decode(pr.inputs(), o);
  CHECK(a.out == b.out);
  CHECK(a.lse == b.lse);
  // The dense core rounds its own copies unless told the operands are pre-rounded.
  MatrixF q = MatrixF::Random(4, 40), k = MatrixF::Random(30, 40);
  const BaseResult own = base_attention(HeadGroup{q, k, k, {}, 0.3f});
  const MatrixF qr = amla::rounded_bf16(q), kr = amla::rounded_bf16(k);
  const BaseResult pre =
      base_attention(HeadGroup{qr, kr, kr, {}, 0.3f}, BaseOptions{precision::bf16, 512, true});
  CHECK(own.out == pre.out);
  // float32 mode uses the float values: not the same as the rounded ones.
  const auto f = base_decode(p.inputs(), o, BaseOptions{precision::float32, 512, false});
  CHECK(f.out != a.out);
}

TEST_CASE("Base masking: empty rows, empty blocks, no NaN", "[online_softmax]") {
  // seqlen 3 with s_q 4 (causal): token 0 sees nothing, token 1 one key, ...; block size 1 makes
  // every row meet blocks it cannot see after ones it can, and the first row never sees any.
  const auto p =
      ProblemBuilder().heads(2, 1).s_q(4).dims(8, 8).page_size(2).seqlens({3, 0}).build<bf16>();
  DecodeOptions o;
  o.causal = true;
  for (const int block : {1, 2, 512}) {
    for (const auto mode : {precision::bf16, precision::float32}) {
      const auto r = base_decode(p.inputs(), o, BaseOptions{mode, block, false});
      const auto want = golden_decode(p.inputs(), o);
      for (int h = 0; h < 2; ++h) {
        CHECK(r.lse_at(0, 0, h) == -finf);
        for (int d = 0; d < 8; ++d) CHECK(r.out_row(0, 0, h)[d] == 0.0f);
        for (int t = 0; t < 4; ++t) {
          CHECK(r.lse_at(1, t, h) == -finf);
          for (int d = 0; d < 8; ++d) CHECK(r.out_row(1, t, h)[d] == 0.0f);
        }
        // One visible key: out is that value exactly (P = 1, l = 1).
        for (int d = 0; d < 8; ++d) {
          CHECK(r.out_row(0, 1, h)[d] == static_cast<float>(want.out_row(0, 1, h)[d]));
        }
      }
      for (const float x : r.out) CHECK(std::isfinite(x));
      CHECK(rel_frobenius(r.out, want.out) < 1e-2);
    }
  }
  // A row whose first block is invisible in a dense group (visible counts need not be causal).
  MatrixF q = MatrixF::Random(3, 8), k = MatrixF::Random(10, 8);
  const int vis[] = {0, 10, 4};
  const BaseResult r =
      base_attention(HeadGroup{q, k, k, vis, 0.5f}, BaseOptions{precision::float32, 4, false});
  CHECK(r.out.allFinite());
  CHECK(r.lse(0) == -finf);
  const GoldenResult g = golden_attention(HeadGroup{q, k, k, vis, 0.5f});
  CHECK((r.out.cast<double>() - g.out).norm() <= 1e-5 * g.out.norm());
}

TEST_CASE("Base output cast and bf16 storage", "[online_softmax]") {
  const auto p =
      ProblemBuilder().heads(16, 1).dims(64, 64).page_size(64).seqlens({300}).build<bf16>();
  DecodeOptions o;
  o.round_output_bf16 = true;
  const auto cast = base_decode(p.inputs(), o);
  const auto plain = base_decode(p.inputs());
  for (std::size_t i = 0; i < cast.out.size(); ++i) {
    CHECK(cast.out[i] == amla::round_bf16(plain.out[i]));
  }
  DecodeResult<bf16, float> stored(p.shape);
  base_decode(p.inputs(), {}, stored.view());
  for (std::size_t i = 0; i < cast.out.size(); ++i) CHECK(stored.out[i].to_float() == cast.out[i]);
}

TEST_CASE("Base results do not depend on the thread count", "[online_softmax][threads]") {
  for (const int batch : {1, 3}) {
    const auto p = ProblemBuilder()
                       .batch(batch)
                       .heads(128, 1)
                       .dims(64, 32)
                       .page_size(16)
                       .seqlens({300})
                       .s_q(2)
                       .build<bf16>();
    DecodeOptions o;
    o.causal = true;
    o.threads = 1;
    const auto one = base_decode(p.inputs(), o, BaseOptions{precision::bf16, 64, false});
    for (const int threads : {2, 5}) {
      o.threads = threads;
      const auto many = base_decode(p.inputs(), o, BaseOptions{precision::bf16, 64, false});
      CHECK(many.out == one.out);
      CHECK(many.lse == one.lse);
    }
  }
}

TEST_CASE("Base validates its options", "[online_softmax][validation]") {
  const auto p = ProblemBuilder().heads(2, 1).dims(8, 8).page_size(4).seqlens({5}).build<bf16>();
  try {
    base_decode(p.inputs(), {}, BaseOptions{precision::bf16, 0, false});
    FAIL("no throw");
  } catch (const amla::invalid_argument& e) {
    CHECK(std::string(e.what()).find("'base.block_size'") != std::string::npos);
  }
  MatrixF q = MatrixF::Ones(1, 4), k = MatrixF::Ones(2, 4);
  CHECK_THROWS_AS(
      base_attention(HeadGroup{q, k, k, {}, 1.0f}, BaseOptions{precision::bf16, -1, false}),
      amla::invalid_argument);
  CHECK_THROWS_AS(base_attention(HeadGroup{q, k, k, {}, -1.0f}), amla::invalid_argument);
}
