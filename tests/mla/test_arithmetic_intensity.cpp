// Tests of amla/mla/arithmetic_intensity.hpp: the AMLA paper's Table 2 and the FlashMLA deep
// dive's compute-bound threshold.
#include <catch2/catch.hpp>

#include <cmath>

#include "amla/mla/arithmetic_intensity.hpp"

namespace mla = amla::mla;
using amla::Workload;

namespace {
// One request of one cached token with separate K and V per KV head (MHA / GQA).
Workload separate_kv(int h_q, int h_kv, int d_qk = 128, int d_v = 128) {
  Workload w = Workload::uniform(1, 1, h_q, 1, d_qk, d_v, h_kv);
  w.v_in_kv = false;
  return w;
}
}  // namespace

TEST_CASE("AMLA Table 2: MHA 1, GQA 8, MLA about 121, 242 and 484", "[mla][intensity]") {
  const Workload mha = separate_kv(64, 64);
  const Workload gqa = separate_kv(64, 8);
  CHECK(mla::kv_only_intensity(mha) == Approx(1.0).epsilon(1e-12));
  CHECK(mla::kv_only_intensity(gqa) == Approx(8.0).epsilon(1e-12));
  const double mla64 = mla::kv_only_intensity(mla::mla_decode_workload(64));
  const double mla128 = mla::kv_only_intensity(mla::mla_decode_workload(128));
  const double mla128_mtp = mla::kv_only_intensity(mla::mla_decode_workload(128, 2));
  CHECK(std::round(mla64) == 121);
  CHECK(std::round(mla128) == 242);
  CHECK(std::round(mla128_mtp) == 484);
  CHECK(mla64 == Approx(64.0 * 1088 / 576).epsilon(1e-12));
  // The paper's text states the MHA/GQA intensity as N_1 S_1, without N_2: 64 for both, not the
  // table's 1 and 8. The cache term 2 N_2 S_2 (D_k + D_v) puts N_2 in the denominator; the two
  // readings agree only with one KV head.
  CHECK(mha.h_q * mha.s_q == 64);
  CHECK(mla::kv_only_intensity(mha) != Approx(mha.h_q * mha.s_q));
  const Workload mqa = separate_kv(64, 1);
  CHECK(mla::kv_only_intensity(mqa) == Approx(mqa.h_q * mqa.s_q));
}

TEST_CASE("Intensity with Q and O traffic approaches the cache-only value from below",
          "[mla][intensity]") {
  const double limit = mla::kv_only_intensity(mla::mla_decode_workload(128));
  double prev = 0;
  for (std::int64_t len : {1, 64, 1024, 8192, 1 << 20}) {
    const double v = mla::decode_intensity(mla::mla_decode_workload(128, 1, len));
    CHECK(v < limit);
    CHECK(v > prev);
    prev = v;
  }
  CHECK(mla::decode_intensity(mla::mla_decode_workload(128, 1, 1 << 20)) ==
        Approx(limit).epsilon(1e-3));
  // The deep dive's count for one token: 2 h_q s_q (d_k + d_v) FLOP over
  // 2 (h_q s_q d_k + s_k d_k + h_q s_q d_v) bytes.
  const double flops = 2.0 * 128 * 1 * 8192 * (576 + 512);
  const double bytes = 2.0 * (128 * 576 + 8192 * 576 + 128 * 512);
  CHECK(mla::decode_intensity(mla::mla_decode_workload(128, 1, 8192)) ==
        Approx(flops / bytes).epsilon(1e-12));
  // A batch of such requests has the same intensity.
  CHECK(mla::decode_intensity(mla::mla_decode_workload(128, 1, 8192, 4)) ==
        Approx(flops / bytes).epsilon(1e-12));
}

TEST_CASE("FlashMLA deep dive: compute-bound once h_q s_q >= 128 at 865 TFLOPS, 3.35 TB/s",
          "[mla][intensity]") {
  const auto& hw = mla::hardware::h800_sxm_throttled;
  REQUIRE(hw.peak_flops_per_s == 865e12);
  REQUIRE(hw.hbm_bytes_per_s == 3.35e12);
  // The blog's reading: intensity ~ 2 h_q s_q, so h_q s_q >= 865 / 3.35 / 2 = 129.1 ("128").
  const double approx =
      mla::compute_bound_rows(hw, 576, 512, mla::intensity_reading::flashmla_approx);
  CHECK(approx == Approx(865.0 / 3.35 / 2).epsilon(1e-12));
  CHECK(std::abs(approx - 128) / 128 < 0.01);
  // Without the approximation (1088 / 576 = 1.89 per row): 136.7.
  const double exact = mla::compute_bound_rows(hw);
  CHECK(exact == Approx(865.0 / 3.35 * 576 / 1088).epsilon(1e-12));
  CHECK(exact > approx);
  // Both readings agree on the cases that matter: 64 heads memory-bound, 128 heads with MTP
  // (256 rows) compute-bound. DeepSeek's 128 heads at s_q = 1 sit on the boundary (241.8 FLOP/B
  // against a ridge of 258.2).
  for (double t : {approx, exact}) {
    CHECK(64 < t);
    CHECK(256 > t);
  }
  const double i128 = mla::kv_only_intensity(mla::mla_decode_workload(128));
  CHECK(i128 / hw.ridge_flops_per_byte() == Approx(0.936).epsilon(1e-3));
  // At the datasheet's 989 TFLOPS the H100 needs more rows.
  CHECK(mla::compute_bound_rows(mla::hardware::h100_sxm) > exact);
}

TEST_CASE("Intensity functions reject malformed shapes", "[mla][intensity]") {
  Workload s = mla::mla_decode_workload(128);
  s.h_kv = 2;
  s.h_q = 128;
  CHECK_THROWS_WITH(mla::kv_only_intensity(s),
                    Catch::Contains("workload.h_kv") && Catch::Contains("latent"));
  Workload g = separate_kv(64, 8);
  g.h_kv = 5;
  CHECK_THROWS_WITH(mla::kv_only_intensity(g), Catch::Contains("must divide"));
  Workload v = mla::mla_decode_workload(16);
  v.d_v = 600;
  CHECK_THROWS_WITH(mla::kv_only_intensity(v), Catch::Contains("workload.d_v"));
  CHECK_THROWS_WITH(mla::decode_intensity(mla::mla_decode_workload(16, 1, 0)),
                    Catch::Contains("workload.seqlens"));
  Workload q = mla::mla_decode_workload(16);
  q.h_q = 0;
  CHECK_THROWS_WITH(mla::kv_only_intensity(q), Catch::Contains("workload.h_q"));
  CHECK_THROWS_WITH(mla::kv_only_intensity(mla::mla_decode_workload(16), 0),
                    Catch::Contains("bytes_per_element"));
  CHECK_THROWS_AS(mla::compute_bound_rows(mla::Hardware{1, 0, "x"}), amla::invalid_argument);
}
