// Tests for amla/numeric/gemm.hpp: the emulated BF16 x BF16 -> FP32 product and its float64
// counterpart.
#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "amla/numeric/gemm.hpp"

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
