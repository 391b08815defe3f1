// Tests of problem/workload.hpp: the workload summary of a problem, its counts under the mask,
// and its validation.
#include <catch2/catch.hpp>

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
