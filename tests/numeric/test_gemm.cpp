// Tests for amla/numeric/gemm.hpp: the emulated BF16 x BF16 -> FP32 product and its float64
// counterpart.
#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "amla/numeric/gemm.hpp"

#include <cmath>
#include <limits>

namespace {
amla::MatrixF random_matrix(int rows, int cols, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  amla::MatrixF m(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) m(i, j) = d(rng);
  return m;
}
}  // namespace

TEST_CASE("matmul_bf16 rounds both operands to BF16 before multiplying", "[gemm]") {
  amla::MatrixF a(1, 1), b(1, 1);
  a(0, 0) = 1.00390625f;  // 1 + 2^-8: a tie between 1 and 1 + 2^-7, rounds to even (1.0)
  b(0, 0) = 3.0f;
  CHECK(amla::matmul_bf16(a, b)(0, 0) == 3.0f);
  CHECK(amla::matmul_prerounded(a, b)(0, 0) == 3.01171875f);  // no rounding on that path
  CHECK(amla::matmul_f64(a, b)(0, 0) == 3.01171875);
}

TEST_CASE("matmul_bf16 is exact when every partial sum is representable", "[gemm]") {
  // Small integers are BF16-exact and their products and sums stay below 2^24: FP32 accumulation
  // in any order gives the exact integer result, so the comparison can be bit for bit.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> d(-8, 8);
  amla::MatrixF a(17, 576), b(576, 33);
  for (int i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(d(rng));
  for (int i = 0; i < b.size(); ++i) b.data()[i] = static_cast<float>(d(rng));
  const amla::MatrixF c = amla::matmul_bf16(a, b);
  const amla::MatrixD r = amla::matmul_f64(a, b);
  REQUIRE(c.rows() == 17);
  REQUIRE(c.cols() == 33);
  for (int i = 0; i < c.rows(); ++i)
    for (int j = 0; j < c.cols(); ++j) REQUIRE(static_cast<double>(c(i, j)) == r(i, j));
}

TEST_CASE("matmul_bf16 matches a float64 product of the rounded operands", "[gemm]") {
  std::mt19937 rng(11);
  const amla::MatrixF a = random_matrix(64, 576, rng), b = random_matrix(576, 96, rng);
  const amla::MatrixF c = amla::matmul_bf16(a, b);
  const amla::MatrixD exact = amla::matmul_f64(amla::rounded_bf16(a), amla::rounded_bf16(b));
  const amla::MatrixD unrounded = amla::matmul_f64(a, b);
  const double err = (c.cast<double>() - exact).norm() / exact.norm();
  const double rounding_effect = (exact - unrounded).norm() / unrounded.norm();
  // FP32 accumulation over K = 576: ~sqrt(K) 2^-24 relative; the operand rounding is ~2^-9.
  CHECK(err < 1e-6);
  CHECK(rounding_effect > 1e-4);
}

TEST_CASE("shape mismatches throw with the argument, its value and the rule", "[gemm]") {
  amla::MatrixF a(4, 3), b(2, 5);
  a.setOnes();
  b.setOnes();
  try {
    (void)amla::matmul_bf16(a, b);
    FAIL("no exception");
  } catch (const amla::invalid_argument& e) {
    const std::string msg = e.what();
    CHECK(msg.find("matmul_bf16") != std::string::npos);
    CHECK(msg.find("'b'") != std::string::npos);
    CHECK(msg.find("[2 x 5]") != std::string::npos);
    CHECK(msg.find("a.cols() = 3") != std::string::npos);
  }
  CHECK_THROWS_AS(amla::matmul_f64(a, b), std::invalid_argument);
  CHECK_THROWS_AS(amla::matmul_prerounded(a, b), amla::invalid_argument);
}

TEST_CASE("rounded_fp16 and round_fp16_inplace round every element once to FP16", "[gemm][fp16]") {
  amla::MatrixF m(3, 4);
  m << 1.0f, 1.0f + 0x1.0p-11f, 1.0f + 3 * 0x1.0p-11f, 65519.0f,  //
      -0x1.0p-25f, 0x1.8p-25f, 1e5f, -1e5f,                       //
      std::numeric_limits<float>::quiet_NaN(), 0.1f, -0.1f, 0.0f;
  const amla::MatrixF r = amla::rounded_fp16(m);
  amla::MatrixF in_place = m;
  amla::round_fp16_inplace(in_place);
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    for (Eigen::Index j = 0; j < m.cols(); ++j) {
      const float want = amla::fp16::from_float(m(i, j)).to_float();
      CAPTURE(i, j, m(i, j));
      if (std::isnan(want)) {
        CHECK(std::isnan(r(i, j)));
        CHECK(std::isnan(in_place(i, j)));
      } else {
        CHECK(r(i, j) == want);
        CHECK(in_place(i, j) == want);
      }
    }
  }
  CHECK(r(0, 1) == 1.0f);              // a tie: to even
  CHECK(r(0, 2) == 1.0f + 0x1.0p-9f);  // a tie: to even, upward
  CHECK(r(0, 3) == 65504.0f);          // below the overflow midpoint 65520
  CHECK(r(1, 1) == 0x1.0p-24f);        // 3/4 of the smallest subnormal 2^-24: up to it
  CHECK(std::isinf(r(1, 2)));          // overflow: Inf
  CHECK(r(1, 3) == -std::numeric_limits<float>::infinity());
}
