// Tests of problem/outputs.hpp: owning outputs that cannot be allocated are reported, not thrown
// as std::bad_alloc.
#include <catch2/catch.hpp>

#include <string>

#include "amla/problem/outputs.hpp"
#include "common/error_message.hpp"

using namespace amla;

TEST_CASE("DecodeResult owns zeroed buffers of the shape's sizes", "[problem][outputs]") {
  const DecodeShape s{2, 3, 4, 2, 8, 6, 5, 4, 3};
  DecodeResult<float, float> r(s);
  CHECK(r.out.size() == 2 * 3 * 4 * 6);
  CHECK(r.lse.size() == 2 * 4 * 3);
  for (const float x : r.out) CHECK(x == 0.0f);
  CHECK(r.view().out.data() == r.out.data());
}

TEST_CASE("DecodeResult past what amla allocates names the buffer", "[problem][outputs]") {
  // out [2^20, 1, 2^10, 2^10] floats = 4 TiB: a valid shape, past the 1 TiB of one buffer.
  const DecodeShape s{1 << 20, 1, 1 << 10, 1, 8, 1 << 10, 1, 1, 1};
  const std::string m = amla_test::error_of([&] { DecodeResult<float, float> r(s); });
  CHECK(amla_test::names(m, "out"));
  CHECK(m.find("amla::DecodeResult") != std::string::npos);
  CHECK(m.find("1099511627776 bytes") != std::string::npos);
}
