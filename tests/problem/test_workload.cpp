// Tests of problem/workload.hpp: the workload summary of a problem, its counts under the mask,
// and its validation.
#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "amla/problem/workload.hpp"

using namespace amla;

TEST_CASE("a uniform workload counts Q K^T and P V flops as AMLA does", "[problem][workload]") {
  const Workload w = Workload::uniform(96, 1, 128, 4096);
  CHECK(w.batch() == 96);
  CHECK(w.is_uniform());
  CHECK(w.max_seqlen() == 4096);
  CHECK(w.total_keys() == 96 * 4096);
  CHECK(w.flops() == 2.0 * 96 * 128 * 1 * 4096.0 * (576 + 512));
  CHECK(w.kv_bytes(2.0) == 96.0 * 4096 * 576 * 2);
}

TEST_CASE("a varlen causal workload counts what each token attends", "[problem][workload]") {
  DecodeShape s{3, 2, 4, 2, 8, 8, 8, 4, 2};
  std::vector<float> q(s.q_elems()), kv(s.kv_elems());
  std::vector<std::int32_t> table(s.block_table_elems(), 0), seqlens{5, 0, 1};
  DecodeInputs<float> in{s, q, kv, {}, table, seqlens};
  DecodeOptions o;
  o.causal = true;
  const Workload w = Workload::of(in, o);
  CHECK(w.batch() == 3);
  CHECK(!w.is_uniform());
  CHECK(w.max_seqlen() == 5);
  CHECK(w.total_keys() == 6);
  // Token 0 sees len - 1 keys, token 1 sees len: 4 + 5, 0 + 0, 0 + 1.
  CHECK(w.attended_pairs() == 10);
  CHECK(w.flops() == 2.0 * 4 * 10 * (8 + 8));
  CHECK(w.kv_bytes(2.0) == 6.0 * 2 * 8 * 2);
}

TEST_CASE("workload validation names the field", "[problem][workload]") {
  Workload w;
  w.seqlens = {4, -1};
  try {
    w.validate("probe");
    FAIL("no throw");
  } catch (const amla::invalid_argument& e) {
    CHECK(std::string(e.what()).find("seqlens[1] = -1") != std::string::npos);
  }
  w.seqlens.clear();
  CHECK_THROWS_AS(w.validate("probe"), amla::invalid_argument);
  CHECK_THROWS_AS(Workload::uniform(0, 1, 128, 10), amla::invalid_argument);
  CHECK_THROWS_AS(Workload::uniform(1, 1, 128, 10, 576, 512, 3), amla::invalid_argument);
}

TEST_CASE("attended pairs: the causal sum in closed form equals the token-by-token count",
          "[problem][workload]") {
  for (const bool causal : {false, true}) {
    for (const int s_q : {1, 2, 3, 7, 64}) {
      Workload w;
      w.s_q = s_q;
      w.h_q = 64;
      w.causal = causal;
      w.seqlens = {0, 1, 2, 5, 6, 7, 63, 64, 65, 1000};
      std::int64_t brute = 0;
      for (const int len : w.seqlens) {
        for (int t = 0; t < s_q; ++t) brute += visible_keys(len, s_q, t, causal);
      }
      CAPTURE(causal, s_q);
      CHECK(w.attended_pairs() == brute);
    }
  }
  // A huge s_q costs nothing (no loop over tokens): s_q 2^24 over 2^30 keys.
  Workload w;
  w.s_q = 1 << 24;
  w.h_q = 1;
  w.causal = true;
  w.seqlens = {1 << 30};
  const std::int64_t sq = 1 << 24, l = 1 << 30;
  CHECK(w.attended_pairs() == sq * (2 * l - sq + 1) / 2);
}

TEST_CASE("workload counts that overflow an int64 are rejected", "[problem][workload]") {
  Workload w;
  w.s_q = 1 << 20;
  w.h_q = 1;
  // 4097 * 2^20 * (2^31 - 1) = 2^63 + 2^51 - 2^32 - 2^20 query-key pairs: past an int64.
  w.seqlens.assign(4097, INT_MAX);
  try {
    w.validate("probe");
    FAIL("no throw");
  } catch (const amla::invalid_argument& e) {
    CHECK(std::string(e.what()).find("'workload.seqlens'") != std::string::npos);
  }
  w.seqlens.resize(4096);  // 2^63 - 2^32: just below
  CHECK_NOTHROW(w.validate("probe"));
}
