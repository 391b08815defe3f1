// Tests of amla/mla/cost.hpp: the TyphoonMLA paper's Table 1, its equation 1 and the roofline
// choice between the mixed kernel and the absorb fall-back.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include "amla/mla/cost.hpp"
#include "common/reduced.hpp"

namespace mla = amla::mla;
using mla::DecodeStep;
using mla::formulation;

namespace {
constexpr double k1024 = 1024.0;
}

TEST_CASE("Table 1 per-token factors for DeepSeek-V3: 40, 136 (MACs) and 40, 0.56 (words) x 1024",
          "[mla][cost]") {
  const auto naive = mla::token_factors(formulation::naive, mla::presets::deepseek_v3);
  const auto absorb = mla::token_factors(formulation::absorb, mla::presets::deepseek_v3);
  CHECK(naive.macs_per_row_key == 40 * k1024);
  CHECK(absorb.macs_per_row_key == 136 * k1024);
  CHECK(naive.words_per_token == 40 * k1024);
  // The table prints 0.56 x 1024; the exact value is D_l + D_r = 576 = 0.5625 x 1024.
  CHECK(absorb.words_per_token == 576.0);
  CHECK(std::abs(absorb.words_per_token / k1024 - 0.56) < 0.005);
  // The text's ratios: 3.4x fewer MACs on the prefix, "approximately 70x" fewer words on the
  // suffix (40 / 0.5625 = 71.1).
  CHECK(absorb.macs_per_row_key / naive.macs_per_row_key == Approx(3.4).epsilon(1e-12));
  CHECK(naive.words_per_token / absorb.words_per_token == Approx(71.11).epsilon(1e-3));
  CHECK_THROWS_AS(mla::token_factors(formulation::typhoon, mla::presets::deepseek_v3),
                  amla::invalid_argument);
}

TEST_CASE("Kimi K2 halves the per-head terms but not the latent cache", "[mla][cost]") {
  const auto ds = mla::token_factors(formulation::absorb, mla::presets::deepseek_v3);
  const auto k2 = mla::token_factors(formulation::absorb, mla::presets::kimi_k2);
  CHECK(k2.macs_per_row_key * 2 == ds.macs_per_row_key);
  CHECK(k2.words_per_token == ds.words_per_token);
  const auto k2n = mla::token_factors(formulation::naive, mla::presets::kimi_k2);
  CHECK(k2n.words_per_token == 20 * k1024);
}

TEST_CASE("formulation_cost reproduces Table 1's DeepSeek-V3 column for any B, L_s, L_n",
          "[mla][cost]") {
  const auto dims = mla::presets::deepseek_v3;
  for (std::int64_t b : {1, 7, 64, 1000}) {
    for (std::int64_t ls : {0, 1, 4096, 26472}) {
      for (std::int64_t ln : {0, 3, 512}) {
        for (std::int64_t sq : {1, 2}) {
          const DecodeStep s{b, sq, ls, ln};
          const double B = static_cast<double>(b), Ls = static_cast<double>(ls),
                       Ln = static_cast<double>(ln), Sq = static_cast<double>(sq);
          const auto naive = mla::formulation_cost(formulation::naive, dims, s);
          const auto absorb = mla::formulation_cost(formulation::absorb, dims, s);
          const auto typhoon = mla::formulation_cost(formulation::typhoon, dims, s);
          // MACs: the column is per query token (S_q = 1); S_q multiplies every term.
          CHECK(naive.attention().macs == Sq * (40 * B * Ls + 40 * B * Ln) * k1024);
          CHECK(absorb.attention().macs == Sq * (136 * B * Ls + 136 * B * Ln) * k1024);
          CHECK(typhoon.attention().macs == Sq * (40 * B * Ls + 136 * B * Ln) * k1024);
          // HBM words: the prefix once, the suffix per request.
          CHECK(naive.attention().hbm_words == (40 * Ls + 40 * B * Ln) * k1024);
          CHECK(absorb.attention().hbm_words == (0.5625 * Ls + 0.5625 * B * Ln) * k1024);
          CHECK(typhoon.attention().hbm_words == (40 * Ls + 0.5625 * B * Ln) * k1024);
          // Only TyphoonMLA combines: 2 B S_q H D_v MACs and elements (Section 3.2).
          CHECK(naive.combine == mla::Work{});
          CHECK(absorb.combine == mla::Work{});
          CHECK(typhoon.combine.macs == 2 * B * Sq * 128 * 128);
          CHECK(typhoon.combine.hbm_words == 2 * B * Sq * 128 * 128);
          // The caption: never more memory than naive, never more MACs than absorb.
          CHECK(typhoon.attention().hbm_words <= naive.attention().hbm_words);
          CHECK(typhoon.attention().macs <= absorb.attention().macs);
        }
      }
    }
  }
}

TEST_CASE("Equation 1: B_theta = 61 for DeepSeek-V3 at T = 376 TOPS, M = 1.8 TB/s", "[mla][cost]") {
  const auto& hw = mla::hardware::typhoon_npu;
  REQUIRE(hw.peak_flops_per_s == 376e12);
  REQUIRE(hw.hbm_bytes_per_s == 1.8e12);
  const double b = mla::typhoon_batch_threshold(mla::presets::deepseek_v3, 1, hw);
  CHECK(b == Approx(61.44).epsilon(1e-3));
  CHECK(std::floor(b) == 61.0);  // the paper's "61"

  // Reading 1, the formula as printed: MACs over T, words over M, with the given numbers.
  const double dqk_dv = 192 + 128, two_dl_dr = 2 * 512 + 64;
  const double printed = dqk_dv / (1 * two_dl_dr) * (376e12 / 1.8e12);
  CHECK(b == Approx(printed).epsilon(1e-12));
  // Reading 2, unit-consistent (a MAC is 2 FLOP, a BF16 word 2 bytes): the factors cancel, so
  // it is the same number. Pricing only one of the two conversions would halve or double it.
  const double consistent = (dqk_dv * 2 / 1.8e12) / (two_dl_dr * 2 / 376e12);
  CHECK(b == Approx(consistent).epsilon(1e-12));
  CHECK(std::abs(printed / 2 - 61.0) > 25);  // MACs as FLOP, words left as bytes: not 61

  // H cancels (Kimi K2 has the same threshold); S_q divides it; an 8-bit cache halves it.
  CHECK(mla::typhoon_batch_threshold(mla::presets::kimi_k2, 1, hw) == Approx(b));
  CHECK(mla::typhoon_batch_threshold(mla::presets::deepseek_v3, 2, hw) == Approx(b / 2));
  CHECK(mla::typhoon_batch_threshold(mla::presets::deepseek_v3, 1, hw, 1.0) == Approx(b / 2));
  // Appendix A's Figure 6 chip (400 TFLOPS): about 65, which the appendix rounds to "64".
  const mla::Hardware fig6{400e12, 1.8e12, "fig6"};
  CHECK(mla::typhoon_batch_threshold(mla::presets::deepseek_v3, 1, fig6) ==
        Approx(65.36).epsilon(1e-3));
}

TEST_CASE("The roofline choice switches at the first batch above B_theta for long prefixes",
          "[mla][cost]") {
  const auto& hw = mla::hardware::typhoon_npu;
  const double b_theta = mla::typhoon_batch_threshold(mla::presets::deepseek_v3, 1, hw);
  const auto first = static_cast<std::int64_t>(std::ceil(b_theta));  // 62
  for (std::int64_t ls : {26472, 7069}) {
    const DecodeStep s{1, 1, ls, 512};
    const auto b = mla::typhoon_min_batch(mla::presets::deepseek_v3, s, hw);
    REQUIRE(b.has_value());
    CHECK(*b == first);
    // Just below: absorb; at it: mixed.
    CHECK_FALSE(mla::typhoon_choice(mla::presets::deepseek_v3, {first - 1, 1, ls, 512}, hw).mixed);
    CHECK(mla::typhoon_choice(mla::presets::deepseek_v3, {first, 1, ls, 512}, hw).mixed);
  }
  // Without the combine and without suffixes the model is exactly equation 1's comparison.
  const mla::CostOptions no_combine{2.0, false};
  for (std::int64_t ls : {1, 100, 4759}) {
    const auto b = mla::typhoon_min_batch(mla::presets::deepseek_v3, {1, 1, ls, 0}, hw, no_combine);
    REQUIRE(b.has_value());
    CHECK(*b == first);
  }
  // A short prefix or the combine can only push the switch up, never below B_theta.
  for (auto dims : {mla::presets::deepseek_v3, mla::presets::kimi_k2}) {
    for (std::int64_t ls : {100, 4096, 4759, 26472}) {
      const auto b = mla::typhoon_min_batch(dims, {1, 1, ls, 512}, hw);
      if (b) CHECK(static_cast<double>(*b) > b_theta);
    }
  }
}

TEST_CASE("TyphoonMLA falls back to absorb without a prefix or at batch 1", "[mla][cost]") {
  const auto dims = mla::presets::deepseek_v3;
  const auto& hw = mla::hardware::h100_sxm;
  const auto none = mla::typhoon_choice(dims, {1024, 1, 0, 512}, hw);
  CHECK_FALSE(none.mixed);
  CHECK(none.time_s() == none.absorb_s);
  const auto one = mla::typhoon_choice(dims, {1, 1, 26472, 512}, hw);
  CHECK_FALSE(one.mixed);
  const auto big = mla::typhoon_choice(dims, {1024, 1, 26472, 512}, hw);
  CHECK(big.mixed);
  CHECK(big.time_s() == big.mixed_s);
  CHECK(big.mixed_s < big.absorb_s);
  CHECK(big.threshold == Approx(mla::typhoon_batch_threshold(dims, 1, hw)));
}

TEST_CASE("Roofline regimes: absorb compute-bound, naive memory-bound on the prefix",
          "[mla][cost]") {
  const auto dims = mla::presets::deepseek_v3;
  const auto& hw = mla::hardware::typhoon_npu;
  for (std::int64_t b : {1, 8, 64, 512}) {
    const auto absorb = mla::roofline_time(formulation::absorb, dims, {b, 1, 4096, 512}, hw);
    REQUIRE(absorb.kernels.size() == 1);
    CHECK(absorb.kernels[0].time.compute_bound());
  }
  // The naive prefix read is batch-independent: memory-bound until B reaches T/M / S_q.
  const auto batch8 = mla::roofline_time(formulation::naive, dims, {8, 1, 4096, 0}, hw);
  CHECK_FALSE(batch8.kernels[0].time.compute_bound());
  const auto t1 = mla::roofline_time(formulation::naive, dims, {1, 1, 4096, 0}, hw).time_s();
  CHECK(batch8.time_s() == t1);
  // Typhoon runs three kernels; their times add.
  const auto ty = mla::roofline_time(formulation::typhoon, dims, {128, 1, 4096, 512}, hw);
  REQUIRE(ty.kernels.size() == 3);
  CHECK(ty.time_s() ==
        ty.kernels[0].time.time_s() + ty.kernels[1].time.time_s() + ty.kernels[2].time.time_s());
  CHECK(ty.kernels[0].work ==
        mla::formulation_cost(formulation::naive, dims, {128, 1, 4096, 0}).prefix);
  const auto ty2 =
      mla::roofline_time(formulation::typhoon, dims, {128, 1, 4096, 512}, hw, {2.0, false});
  CHECK(ty2.kernels.size() == 2);
}

TEST_CASE("Appendix A.1: at large batch naive is 3.4x faster than absorb on a shared prefix",
          "[mla][cost]") {
  const mla::Hardware fig6{400e12, 1.8e12, "fig6"};
  const auto dims = mla::presets::deepseek_v3;
  const DecodeStep s{4096, 1, 26472, 0};
  const double naive = mla::roofline_time(formulation::naive, dims, s, fig6).time_s();
  const double absorb = mla::roofline_time(formulation::absorb, dims, s, fig6).time_s();
  CHECK(absorb / naive == Approx(3.4).epsilon(1e-9));
  // At batch 1 absorb is the faster one.
  const DecodeStep s1{1, 1, 26472, 0};
  CHECK(mla::roofline_time(formulation::absorb, dims, s1, fig6).time_s() <
        mla::roofline_time(formulation::naive, dims, s1, fig6).time_s());
}

TEST_CASE("FP8 caches halve the memory time", "[mla][cost]") {
  const auto dims = mla::presets::deepseek_v3;
  const auto& hw = mla::hardware::h100_sxm;
  const DecodeStep s{1, 1, 4096, 512};
  const auto bf16 = mla::roofline_time(formulation::naive, dims, s, hw);
  const auto fp8 = mla::roofline_time(formulation::naive, dims, s, hw, {1.0, true});
  CHECK(fp8.kernels[0].time.memory_s == Approx(bf16.kernels[0].time.memory_s / 2));
  CHECK(fp8.kernels[0].time.compute_s == bf16.kernels[0].time.compute_s);
}

TEST_CASE("Cost model rejects bad shapes, dims, hardware and options with clear messages",
          "[mla][cost]") {
  const auto dims = mla::presets::deepseek_v3;
  const auto& hw = mla::hardware::h100_sxm;
  CHECK_THROWS_WITH(
      mla::formulation_cost(formulation::naive, dims, {0, 1, 1, 1}),
      Catch::Contains("step.batch") && Catch::Contains("= 0") && Catch::Contains(">= 1"));
  CHECK_THROWS_WITH(mla::formulation_cost(formulation::naive, dims, {1, 0, 1, 1}),
                    Catch::Contains("step.s_q"));
  CHECK_THROWS_WITH(mla::formulation_cost(formulation::naive, dims, {1, 1, -1, 1}),
                    Catch::Contains("step.prefix_len") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(mla::formulation_cost(formulation::naive, dims, {1, 1, 1, -5}),
                    Catch::Contains("step.suffix_len"));
  mla::MlaDims bad = dims;
  bad.d_latent = 0;
  CHECK_THROWS_WITH(mla::formulation_cost(formulation::absorb, bad, {1, 1, 1, 1}),
                    Catch::Contains("dims.d_latent") && Catch::Contains("formulation_cost"));
  CHECK_THROWS_WITH(mla::roofline_time(formulation::naive, dims, {1, 1, 1, 1}, {0, 1, "x"}),
                    Catch::Contains("hw.peak_flops_per_s"));
  CHECK_THROWS_WITH(mla::roofline_time(formulation::naive, dims, {1, 1, 1, 1}, {1, NAN, "x"}),
                    Catch::Contains("hw.hbm_bytes_per_s"));
  CHECK_THROWS_WITH(mla::roofline_time(formulation::naive, dims, {1, 1, 1, 1}, hw, {0.0, true}),
                    Catch::Contains("opts.bytes_per_element"));
  CHECK_THROWS_WITH(mla::typhoon_batch_threshold(dims, 0, hw), Catch::Contains("s_q"));
  CHECK_THROWS_AS(mla::typhoon_min_batch(dims, {1, 1, 1, 1}, hw, {}, 0), amla::invalid_argument);
}

TEST_CASE("typhoon_min_batch bounds its search: max_batch above 2^20 is refused at once",
          "[mla][cost]") {
  const auto dims = mla::presets::deepseek_v3;
  const mla::Hardware hw{376e12, 1.8e12, "NPU"};
  // With no prefix the mixed plan is never taken, so an unbounded search would price every batch
  // size up to max_batch (years at INT64_MAX).
  CHECK_THROWS_WITH(
      mla::typhoon_min_batch(dims, {1, 1, 0, 64}, hw, {}, INT64_MAX),
      Catch::Contains("'max_batch' = 9223372036854775807") && Catch::Contains("[1, 2^20]"));
  CHECK_THROWS_AS(
      mla::typhoon_min_batch(dims, {1, 1, 0, 64}, hw, {}, mla::typhoon_max_search_batch + 1),
      amla::invalid_argument);
  // The largest search allowed still answers (nullopt: never mixed without a prefix). Sanitizer
  // builds price the 2^20 batch sizes in about 15 s; there the largest bound is given to a search
  // that stops early (a long shared prefix is mixed from a small batch on), which must answer as
  // the default bound does.
  if (!amla_test::reduced) {
    CHECK_FALSE(mla::typhoon_min_batch(dims, {1, 1, 0, 64}, hw, {}, mla::typhoon_max_search_batch)
                    .has_value());
  } else {
    const auto at_bound =
        mla::typhoon_min_batch(dims, {1, 1, 1 << 20, 64}, hw, {}, mla::typhoon_max_search_batch);
    REQUIRE(at_bound.has_value());
    CHECK(at_bound == mla::typhoon_min_batch(dims, {1, 1, 1 << 20, 64}, hw));
  }
}

TEST_CASE("DecodeStep and Workload convert into each other, with the same FLOP count",
          "[mla][cost]") {
  const auto dims = mla::presets::deepseek_v3;
  const DecodeStep step{6, 2, 1000, 300};
  for (const formulation f : {formulation::naive, formulation::absorb}) {
    const amla::Workload w = mla::step_workload(dims, step, f);
    INFO(mla::to_string(f));
    CHECK(w.batch() == 6);
    CHECK(w.s_q == 2);
    CHECK(w.h_q == 128);
    CHECK(w.seqlens[5] == 1300);
    // Workload counts 2 FLOP per multiply-add over d_qk + d_v, Table 1 MACs per key.
    CHECK(w.flops() == mla::formulation_cost(f, dims, step).attention().flops());
    const DecodeStep back = mla::decode_step(w, 1000);
    CHECK(back.batch == step.batch);
    CHECK(back.s_q == step.s_q);
    CHECK(back.prefix_len == step.prefix_len);
    CHECK(back.suffix_len == step.suffix_len);
  }
  const amla::Workload naive = mla::step_workload(dims, step, formulation::naive);
  CHECK(naive.h_kv == 128);
  CHECK(naive.d_qk == 192);
  CHECK_FALSE(naive.v_in_kv);
  const amla::Workload absorb = mla::step_workload(dims, step, formulation::absorb);
  CHECK(absorb.h_kv == 1);
  CHECK(absorb.d_qk == 576);
  CHECK(absorb.d_v == 512);
  CHECK(absorb.v_in_kv);
  // Suffix lengths of a varlen workload average to the nearest token, halves up.
  amla::Workload v = absorb;
  v.seqlens = {1003, 1006};
  CHECK(mla::decode_step(v, 1000).suffix_len == 5);
  CHECK_THROWS_WITH(mla::decode_step(v, 1004),
                    Catch::Contains("seqlens[0] = 1003") && Catch::Contains("prefix_len = 1004"));
  CHECK_THROWS_WITH(mla::step_workload(dims, step, formulation::typhoon), Catch::Contains("view"));
}
