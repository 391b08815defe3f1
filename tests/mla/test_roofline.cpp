// Tests of amla/mla/roofline.hpp.
#include <catch2/catch.hpp>

#include <cmath>

#include "amla/mla/roofline.hpp"

namespace mla = amla::mla;

TEST_CASE("Named chips take their figures from arch/", "[mla][roofline]") {
  namespace arch = amla::arch;
  CHECK(mla::hardware::typhoon_npu.peak_flops_per_s == arch::typhoon_npu::fp16_peak_flops_per_s);
  CHECK(mla::hardware::typhoon_npu.hbm_bytes_per_s == arch::typhoon_npu::hbm_bytes_per_s);
  CHECK(mla::hardware::h100_sxm.peak_flops_per_s == 989e12);
  CHECK(mla::hardware::h100_sxm.hbm_bytes_per_s == 3.35e12);
  CHECK(mla::hardware::h800_sxm_throttled.peak_flops_per_s ==
        arch::h800_sxm::bf16_practical_flops_per_s);
  CHECK(mla::hardware::ascend910.hbm_bytes_per_s ==
        arch::ascend910::hbm_bytes_per_s_per_die * arch::ascend910::dies);
  CHECK(mla::hardware::h100_sxm.ridge_flops_per_byte() == Approx(989.0 / 3.35));
}

TEST_CASE("Roofline time is the larger of the compute and memory bounds", "[mla][roofline]") {
  const mla::Hardware hw{100.0, 10.0, "toy"};  // ridge 10 FLOP/byte
  const auto mem = mla::roofline(50.0, 10.0, hw);
  CHECK(mem.compute_s == 0.5);
  CHECK(mem.memory_s == 1.0);
  CHECK(mem.time_s() == 1.0);
  CHECK_FALSE(mem.compute_bound());
  const auto cmp = mla::roofline(500.0, 10.0, hw);
  CHECK(cmp.time_s() == 5.0);
  CHECK(cmp.compute_bound());
  // Exactly at the ridge both bounds are equal and it counts as compute-bound.
  const auto ridge = mla::roofline(100.0, 10.0, hw);
  CHECK(ridge.compute_s == ridge.memory_s);
  CHECK(ridge.compute_bound());
  CHECK(mla::roofline(0.0, 0.0, hw).time_s() == 0.0);
}

TEST_CASE("Roofline rejects bad work and bad chips", "[mla][roofline]") {
  const mla::Hardware hw{100.0, 10.0, "toy"};
  CHECK_THROWS_WITH(mla::roofline(-1.0, 1.0, hw),
                    Catch::Contains("flops") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(mla::roofline(1.0, INFINITY, hw), Catch::Contains("hbm_bytes"));
  CHECK_THROWS_WITH(mla::roofline(1.0, 1.0, mla::Hardware{-1, 1, "x"}),
                    Catch::Contains("hw.peak_flops_per_s"));
  CHECK_THROWS_WITH(mla::roofline(1.0, 1.0, mla::Hardware{1, 0, "x"}),
                    Catch::Contains("hw.hbm_bytes_per_s"));
}
