// Tests of problem/validate.hpp beyond what the recurrences' own tests cover: size arithmetic that
// would overflow, and the page-table rules at the int limits.
#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "amla/problem/validate.hpp"
#include "common/error_message.hpp"

using namespace amla;

namespace {

using amla_test::names;

std::string shape_error(const DecodeShape& s, bool v_in_kv = true) {
  return amla_test::error_of([&] { validate_shape("probe", s, v_in_kv); });
}

}  // namespace

TEST_CASE("shapes whose counts overflow are rejected, naming the fields", "[problem][overflow]") {
  CHECK(shape_error(DecodeShape{}).empty());
  DecodeShape s{.batch = INT_MAX, .h_q = 2, .h_kv = 2};
  CHECK(names(shape_error(s), "shape.batch * shape.h_kv"));
  s = {};
  s.s_q = 1 << 20;
  s.h_q = 1 << 12;
  const std::string m = shape_error(s);
  CHECK(names(m, "shape.s_q * shape.h_q"));
  CHECK(m.find("1048576 * 4096") != std::string::npos);
  s = {};
  s.num_pages = INT_MAX;
  s.page_size = INT_MAX;
  s.h_kv = 1 << 16;
  s.h_q = 1 << 16;
  s.d_qk = 1 << 16;
  s.d_v = 16;
  CHECK(names(shape_error(s), "shape (kv elements)"));
  s = {};
  s.batch = 1 << 20;
  s.s_q = 1 << 20;
  s.h_q = 1;
  s.d_qk = 1;
  s.d_v = 1 << 30;  // out [batch, s_q, h_q, d_v] holds 2^70 elements
  const std::string out = shape_error(s, /*v_in_kv=*/false);
  CHECK(names(out, "shape (out elements)"));
  CHECK(out.find("probe") != std::string::npos);
}

TEST_CASE("page tables at the int limits are validated, not skipped", "[problem][tables]") {
  DecodeShape s;
  s.batch = 1;
  s.num_pages = 2;
  s.page_size = INT_MAX;  // one page holds any int32 sequence
  s.max_pages_per_seq = 1;
  std::vector<std::int32_t> seqlens{INT_MAX};
  std::vector<std::int32_t> table{5};  // out of range: must be caught
  try {
    validate_tables("probe", s, table, seqlens);
    FAIL("no throw");
  } catch (const amla::invalid_argument& e) {
    CHECK(names(e.what(), "block_table"));
  }
  table[0] = 1;
  CHECK_NOTHROW(validate_tables("probe", s, table, seqlens));
}

TEST_CASE("options are validated and resolve the scale", "[problem][options]") {
  DecodeShape s;
  CHECK(validate_options("probe", {}, s) == static_cast<float>(1.0 / 24.0));
  DecodeOptions o;
  o.softmax_scale = 0.25f;
  CHECK(resolved_scale(o, s) == 0.25f);
  o.softmax_scale = -1.0f;
  CHECK_THROWS_AS(validate_options("probe", o, s), amla::invalid_argument);
}

TEST_CASE("one output cast: BF16 or FP16, not both", "[problem][options]") {
  const DecodeShape s;
  DecodeOptions o;
  o.round_output_fp16 = true;
  CHECK_NOTHROW(validate_options("probe", o, s));
  o.round_output_bf16 = true;
  try {
    validate_options("probe", o, s);
    FAIL("both output casts accepted");
  } catch (const amla::invalid_argument& e) {
    const std::string m = e.what();
    CHECK(m.find("'options.round_output_fp16'") != std::string::npos);
    CHECK(m.find("round_output_bf16") != std::string::npos);
  }
}
