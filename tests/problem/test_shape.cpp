// Tests of problem/shape.hpp: layouts (offsets), checked element counts, and the causal mask.
#include <catch2/catch.hpp>

#include <climits>
#include <string>

#include "amla/problem/shape.hpp"

using amla::DecodeShape;
using amla::visible_keys;

TEST_CASE("offsets follow the documented row-major layouts", "[problem][shape]") {
  const DecodeShape s{3, 2, 8, 2, 16, 8, 10, 4, 5};
  CHECK(s.heads_per_group() == 4);
  CHECK(s.rows_per_group() == 8);
  CHECK(s.max_seqlen() == 20);
  CHECK(s.q_offset(1, 1, 3) == ((1 * 2 + 1) * 8 + 3) * 16);
  CHECK(s.out_offset(2, 0, 7) == ((2 * 2 + 0) * 8 + 7) * 8);
  CHECK(s.lse_offset(2, 1, 5) == (2 * 8 + 5) * 2 + 1);
  CHECK(s.slot_index(9, 3, 1) == (9 * 4 + 3) * 2 + 1);
  CHECK(s.table_offset(2, 4) == 2 * 5 + 4);
  CHECK(s.q_elems() == 3u * 2 * 8 * 16);
  CHECK(s.kv_elems() == 10u * 4 * 2 * 16);
  CHECK(s.v_elems() == 10u * 4 * 2 * 8);
  CHECK(s.out_elems() == 3u * 2 * 8 * 8);
  CHECK(s.lse_elems() == 3u * 8 * 2);
  CHECK(s.block_table_elems() == 15u);
  CHECK(s.seqlens_elems() == 3u);
}

TEST_CASE("pages_for rounds up without overflowing", "[problem][shape]") {
  DecodeShape s;
  s.page_size = 64;
  CHECK(s.pages_for(0) == 0);
  CHECK(s.pages_for(1) == 1);
  CHECK(s.pages_for(64) == 1);
  CHECK(s.pages_for(65) == 2);
  s.page_size = INT_MAX;
  CHECK(s.pages_for(INT_MAX) == 1);  // seqlen + page_size - 1 would overflow an int
  CHECK(s.pages_for(1) == 1);
}

TEST_CASE("element counts that cannot be represented throw instead of wrapping",
          "[problem][shape][overflow]") {
  DecodeShape s{.h_kv = INT_MAX, .num_pages = INT_MAX, .page_size = INT_MAX};
  s.d_qk = INT_MAX;  // 2^124: a 64-bit product wraps, here to a small number
  try {
    (void)s.kv_elems();
    FAIL("kv_elems did not throw");
  } catch (const amla::invalid_argument& e) {
    const std::string m = e.what();
    CHECK(m.find("'kv'") != std::string::npos);
    CHECK(m.find("overflows") != std::string::npos);
  }
  CHECK_THROWS_AS(s.v_elems(), amla::invalid_argument);
  DecodeShape q{.batch = INT_MAX, .s_q = INT_MAX, .h_q = INT_MAX, .d_qk = 4};
  CHECK_THROWS_AS(q.q_elems(), amla::invalid_argument);
}

TEST_CASE("visible key counts follow the end-aligned causal mask at the int limits",
          "[problem][shape]") {
  CHECK(visible_keys(10, 1, 0, true) == 10);
  CHECK(visible_keys(10, 4, 0, true) == 7);
  CHECK(visible_keys(2, 4, 0, true) == 0);
  CHECK(visible_keys(10, 4, 0, false) == 10);
  // seqlen - s_q + t + 1 computed without overflow.
  CHECK(visible_keys(INT_MAX, 1, 0, true) == INT_MAX);
  CHECK(visible_keys(0, INT_MAX, 0, true) == 0);
  CHECK(visible_keys(INT_MAX, INT_MAX, INT_MAX - 1, true) == INT_MAX);
  static_assert(visible_keys(5, 2, 0, true) == 4, "usable at compile time (and on a device)");
}
