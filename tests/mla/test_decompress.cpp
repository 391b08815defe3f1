// Tests of amla/mla/decompress.hpp.
#include <catch2/catch.hpp>

#include <cmath>

#include "amla/mla/decompress.hpp"
#include "amla/mla/problem_builder.hpp"
#include "mla/mla_test_util.hpp"

namespace mla = amla::mla;

using mla_test::small;

TEST_CASE("decompress_prefix<double> is W_KVb1 c_n, c_r and W_KVb2 c_n per head",
          "[mla][decompress]") {
  const auto p = mla::MlaProblemBuilder(small).prefix_len(7).seed(4).build<amla::bf16>();
  const auto kv = mla::decompress_prefix<double>(p.model(), p.inputs());
  REQUIRE(kv.len == 7);
  REQUIRE(kv.k.size() == 7u * 3 * 24);
  REQUIRE(kv.v.size() == 7u * 3 * 12);
  const int cols = small.absorb_d_qk();
  double worst = 0;
  for (int s = 0; s < 7; ++s) {
    const amla::bf16* c = p.prefix_latent.data() + s * cols;
    for (int h = 0; h < 3; ++h) {
      const double* k = kv.k.data() + (s * 3 + h) * 24;
      const double* v = kv.v.data() + (s * 3 + h) * 12;
      for (int i = 0; i < 16; ++i) {
        long double acc = 0;
        for (int j = 0; j < 32; ++j) {
          acc += mla_test::val(p.w_kvb1[(h * 16 + i) * 32 + j]) * mla_test::val(c[j]);
        }
        worst = std::max(worst, std::abs(k[i] - static_cast<double>(acc)));
      }
      for (int i = 0; i < 8; ++i) CHECK(k[16 + i] == static_cast<double>(c[32 + i].to_float()));
      for (int i = 0; i < 12; ++i) {
        long double acc = 0;
        for (int j = 0; j < 32; ++j) {
          acc += mla_test::val(p.w_kvb2[(h * 12 + i) * 32 + j]) * mla_test::val(c[j]);
        }
        worst = std::max(worst, std::abs(v[i] - static_cast<double>(acc)));
      }
    }
  }
  CHECK(worst < 1e-14);
}

TEST_CASE("decompress_prefix<bf16> stores BF16 GEMM results with FP32 accumulation",
          "[mla][decompress]") {
  const auto p = mla::MlaProblemBuilder(small).prefix_len(5).seed(6).build<float>();
  const auto kb = mla::decompress_prefix<amla::bf16>(p.model(), p.inputs());
  const auto kf = mla::decompress_prefix<float>(p.model(), p.inputs());
  const auto kd = mla::decompress_prefix<double>(p.model(), p.inputs());
  REQUIRE(kb.k.size() == kd.k.size());
  double worst_rel = 0;
  for (std::size_t i = 0; i < kb.k.size(); ++i) {
    const float b = kb.k[i].to_float();
    CHECK(b == kf.k[i]);              // same values in either storage
    CHECK(amla::round_bf16(b) == b);  // BF16-exact
    // One BF16 rounding of an FP32 sum: within 2^-8 relative of the float64 value (plus FP32
    // accumulation noise), never more.
    if (kd.k[i] != 0) worst_rel = std::max(worst_rel, std::abs((b - kd.k[i]) / kd.k[i]));
  }
  CHECK(worst_rel <= std::ldexp(1.0, -8) * 1.01);
  CHECK(worst_rel > 0);  // it does round
  // The emulation exactly: W_KVb1[0] times the first token, FP32 GEMM of BF16 operands, rounded.
  const auto w1 = mla::w_kvb1_head<float>(p.model(), 0, true);
  const amla::MatrixF c =
      Eigen::Map<const amla::MatrixF>(p.prefix_latent.data(), 5, 40).leftCols(32);
  const amla::MatrixF expect = amla::rounded_bf16(amla::matmul_bf16(c, w1.transpose()));
  for (int s = 0; s < 5; ++s) {
    for (int i = 0; i < 16; ++i) CHECK(kf.k[(s * 3 + 0) * 24 + i] == expect(s, i));
  }
}

TEST_CASE("decompress_prefix: an empty prefix and bad inputs", "[mla][decompress]") {
  const auto p = mla::MlaProblemBuilder(small).suffix_lens({3}).seed(1).build<amla::bf16>();
  const auto kv = mla::decompress_prefix<double>(p.model(), p.inputs());
  CHECK(kv.len == 0);
  CHECK(kv.k.empty());
  CHECK(kv.v.empty());
  auto in = p.inputs();
  in.prefix_len = 2;  // but prefix_latent is empty
  CHECK_THROWS_WITH(
      mla::decompress_prefix<double>(p.model(), in),
      Catch::Contains("inputs.prefix_latent") && Catch::Contains("decompress_prefix"));
  in.prefix_len = -1;
  CHECK_THROWS_WITH(mla::decompress_prefix<double>(p.model(), in),
                    Catch::Contains("inputs.prefix_len"));
  auto m = p.model();
  m.w_kvb2 = m.w_kvb2.first(10);
  CHECK_THROWS_WITH(mla::decompress_prefix<double>(m, p.inputs()),
                    Catch::Contains("model.w_kvb2") && Catch::Contains("[H, D_v, D_l]"));
  CHECK_THROWS_AS(mla::decompress_prefix<double>(p.model(), p.inputs(), -1),
                  amla::invalid_argument);
}
