// Tests of amla/sim/tiling.hpp: the AMLA presets fit the Ascend 910, and every kind of capacity or
// nesting violation comes back as a Status with the reason (never a crash or an exception).
#include <catch2/catch.hpp>

#include "amla/sim/chip.hpp"
#include "amla/sim/tiling.hpp"

using amla::sim::check_fit;
using amla::sim::Tiling;

TEST_CASE("AMLA's C1 / C2 tilings fit the Ascend 910 at M = 128 and 256", "[sim][tiling]") {
  const auto chip = amla::sim::ascend910();
  for (const std::int64_t m : {128, 256}) {
    const Tiling c1 = amla::sim::amla_c1_tiling(m);
    const Tiling c2 = amla::sim::amla_c2_tiling(m);
    INFO("M = " << m);
    CHECK(check_fit(c1, chip).ok);
    CHECK(check_fit(c2, chip).ok);
    // Section 4.2's figures: 72 KB stripes, seven 72 KB L1 buffers (504 KB <= 512 KB).
    CHECK(c1.a_stripe_bytes().count == 128 * 288 * 2);
    CHECK(c1.b_stripe_bytes().count == 72 * 1024);
    CHECK(c2.b_stripe_bytes().count == 64 * 1024);
    CHECK(c1.a_stripes() == (m / 128) * 2);
    CHECK(amla::sim::l0c_tiles(c1, chip) == 2);  // double-buffered 128 x 128 FP32 tiles
  }
  // C1: 2 x 128 x 96 x 2 B = 48 KB of L0A; C2: 2 x 128 x 128 x 2 B = 64 KB, exactly full.
  CHECK(amla::sim::amla_c1_tiling(128).base_k == 96);
  CHECK(amla::sim::amla_c2_tiling(128).base_k == 128);
  CHECK(amla::sim::amla_c1_tiling().flops() == 2.0 * 256 * 512 * 576);
}

TEST_CASE("capacity violations come back as a result with the reason", "[sim][tiling]") {
  const auto chip = amla::sim::ascend910();
  SECTION("L0A") {
    Tiling t = amla::sim::amla_c1_tiling(128);
    t.base_k = 144;  // 2 x 128 x 144 x 2 B = 72 KB > 64 KB
    t.single_k = 288;
    const auto f = check_fit(t, chip);
    CHECK_FALSE(f.ok);
    CHECK_THAT(f.reason, Catch::StartsWith("L0A overflow") && Catch::Contains("72 KB > 64 KB"));
  }
  SECTION("L0B") {
    Tiling t = amla::sim::amla_c1_tiling(128);
    t.base_m = 64;  // L0A fine (24 KB), L0B: 2 x 256 x 96 x 2 B = 96 KB
    t.single_m = 64;
    t.base_n = 256;
    t.single_n = 256;
    const auto f = check_fit(t, chip);
    CHECK_FALSE(f.ok);
    CHECK_THAT(f.reason, Catch::StartsWith("L0B overflow"));
  }
  SECTION("L0C") {
    Tiling t = amla::sim::amla_c1_tiling(512);  // 4 live 64 KB accumulators
    const auto f = check_fit(t, chip);
    CHECK_FALSE(f.ok);
    CHECK_THAT(f.reason, Catch::StartsWith("L0C overflow") && Catch::Contains("256 KB > 128 KB"));
  }
  SECTION("L1") {
    Tiling t = amla::sim::amla_c1_tiling(128);
    t.b_slots = 4;  // 8 x 72 KB = 576 KB > 512 KB
    const auto f = check_fit(t, chip);
    CHECK_FALSE(f.ok);
    CHECK_THAT(f.reason, Catch::StartsWith("L1 overflow") && Catch::Contains("576 KB > 512 KB"));
  }
  SECTION("L1 A region") {
    Tiling t = amla::sim::amla_c1_tiling(256);
    t.base_n = 64;  // keep L0C fine: 2 x 128 x 64 x 4 B
    t.single_n = 128;
    t.M = 384;  // 3 row blocks x 2 k stripes = 6 stripes > 4 buffers; L0C 3 x 32 KB fits
    const auto f = check_fit(t, chip);
    CHECK_FALSE(f.ok);
    CHECK_THAT(f.reason, Catch::Contains("6 stripes") && Catch::Contains("only 4 buffers"));
  }
  SECTION("L1 stripe larger than a buffer") {
    Tiling t = amla::sim::amla_c1_tiling(128);
    t.single_k = 576;  // A stripe 128 x 576 x 2 B = 144 KB > 72 KB
    const auto f = check_fit(t, chip);
    CHECK_FALSE(f.ok);
    CHECK_THAT(f.reason, Catch::Contains("singleM x singleK = 144 KB"));
  }
  SECTION("K/V region") {
    Tiling t = amla::sim::amla_c1_tiling(128);
    t.single_n = 512;  // 512 x 288 x 2 B = 288 KB > 3 x 72 KB
    const auto f = check_fit(t, chip);
    CHECK_FALSE(f.ok);
    CHECK_THAT(f.reason, Catch::Contains("K/V region") && Catch::Contains("288 KB > 3 buffers"));
  }
  SECTION("nesting") {
    Tiling t = amla::sim::amla_c1_tiling(128);
    t.base_k = 128;  // 288 is not a multiple of 128
    const auto f = check_fit(t, chip);
    CHECK_FALSE(f.ok);
    CHECK_THAT(f.reason, Catch::Contains("singleK 288 is not a multiple of baseK 128"));
  }
  SECTION("UB") {
    amla::sim::VectorTiling v;
    v.rows = 8;
    v.in_bytes_per_row = 2048;
    v.out_bytes_per_row = 1024 + 2048;
    v.scratch_bytes_per_row = 2048;
    CHECK(check_fit(v, chip).ok);                 // 2 x 8 x 7 KB = 112 KB
    v.resident = amla::sim::Bytes{128.0 * 1024};  // + O kept in UB (64 rows x 512 x 4 B)
    const auto f = check_fit(v, chip);
    CHECK_FALSE(f.ok);
    CHECK_THAT(f.reason, Catch::StartsWith("UB overflow") && Catch::Contains("240 KB > 192 KB"));
  }
}

TEST_CASE("malformed tilings throw, naming the argument", "[sim][tiling]") {
  const auto chip = amla::sim::ascend910();
  Tiling t = amla::sim::amla_c1_tiling(128);
  t.base_k = 0;
  CHECK_THROWS_WITH(check_fit(t, chip), Catch::Contains("'tiling.base_k' = 0"));
  t = amla::sim::amla_c1_tiling(128);
  t.M = -4;
  CHECK_THROWS_AS(check_fit(t, chip), amla::invalid_argument);
  CHECK_THROWS_WITH(check_fit(t, chip), Catch::Contains("'tiling.M' = -4"));
  t = amla::sim::amla_c1_tiling(128);
  t.b_slots = 0;
  CHECK_THROWS_WITH(check_fit(t, chip), Catch::Contains("'tiling.b_slots' = 0"));
  amla::sim::VectorTiling v;
  CHECK_THROWS_WITH(check_fit(v, chip), Catch::Contains("rows"));
}

TEST_CASE("Tiling::validate bounds sizes and element widths", "[sim][tiling]") {
  const auto chip = amla::sim::ascend910();
  Tiling t = amla::sim::amla_c1_tiling(128);
  t.N = (std::int64_t{1} << 20) + 1;
  CHECK_THROWS_WITH(check_fit(t, chip),
                    Catch::Contains("'tiling.N' = 1048577") && Catch::Contains("[1, 2^20]"));
  t = amla::sim::amla_c1_tiling(128);
  t.single_k = std::int64_t{1} << 40;  // single_m x single_k once overflowed int64 arithmetic
  CHECK_THROWS_WITH(check_fit(t, chip), Catch::Contains("'tiling.single_k' = 1099511627776"));
  t = amla::sim::amla_c1_tiling(128);
  t.acc_bytes = 1e-300;  // made the L0C tile count astronomical
  CHECK_THROWS_WITH(check_fit(t, chip), Catch::Contains("'tiling.acc_bytes' = 1e-300"));
  t = amla::sim::amla_c1_tiling(128);
  t.in_bytes = 128;
  CHECK_THROWS_WITH(check_fit(t, chip), Catch::Contains("'tiling.in_bytes' = 128"));
  t = amla::sim::amla_c1_tiling(128);
  t.a_slots = 1025;
  CHECK_THROWS_WITH(check_fit(t, chip), Catch::Contains("'tiling.a_slots' = 1025"));
  t = amla::sim::amla_c1_tiling(128);
  t.l1_slot = amla::sim::Bytes{INFINITY};
  CHECK_THROWS_WITH(check_fit(t, chip), Catch::Contains("'tiling.l1_slot' = inf"));
  // At the bounds: well formed (whether it fits is check_fit's answer).
  t = amla::sim::amla_c1_tiling(128);
  t.in_bytes = 0.125;
  t.acc_bytes = 64;
  CHECK_NOTHROW(check_fit(t, chip));
}
