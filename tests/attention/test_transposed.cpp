// Tests of attention/transposed.hpp: the ETAP transposed recurrence against the seesaw schedule in
// float32, and its block order. The contract it shares with every recurrence (masking, empty rows,
// unread keys, bad input, agreement with golden and Base in both modes and both block orders) is
// tested in test_recurrences.cpp.
#include "amla/attention/transposed.hpp"

#include <catch2/catch.hpp>
#include <vector>

#include "amla/attention/seesaw.hpp"
#include "attention/variant_test_util.hpp"

using amla::MatrixF;
using namespace amla::attention;
namespace vt = amla_test::variants;

namespace {

constexpr kv_block_order both_orders[] = {kv_block_order::forward, kv_block_order::reverse};

}  // namespace

TEST_CASE("transposed float32 mode equals the seesaw schedule's float32 result closely",
          "[transposed]") {
  const vt::Inputs in = vt::random_inputs(24, 333, 48, 40, 13, 2.0f);
  const std::vector<int> vis = vt::causal_visible(24, 333, 2);
  const HeadGroup g = in.group(vis);
  MatrixF seesaw_out(24, 40);
  std::vector<float> seesaw_lse(24);
  amla::attention::seesaw_attention(g, {.mode = precision::float32, .block_size = 64}, seesaw_out,
                                    seesaw_lse);
  for (const kv_block_order order : both_orders) {
    CAPTURE(static_cast<int>(order));
    const auto r = transposed_attention(g, {{.mode = precision::float32, .block_size = 64}, order});
    // Two FP32 computations of the same mathematics: FP32 rounding apart, nothing more.
    CHECK(vt::relative_error(r.out, seesaw_out) <= 2e-6);
    for (std::size_t i = 0; i < seesaw_lse.size(); ++i) {
      CHECK(r.lse(static_cast<Eigen::Index>(i)) ==
            Approx(seesaw_lse[i]).epsilon(1e-6).margin(1e-6));
    }
  }
}

TEST_CASE("transposed block order changes only rounding", "[transposed]") {
  const vt::Inputs in = vt::random_inputs(16, 250, 32, 32, 14, 3.0f);
  const HeadGroup g = in.group({});
  const auto fwd = transposed_attention(g, {{.mode = precision::float32, .block_size = 16}});
  const auto rev = transposed_attention(
      g, {{.mode = precision::float32, .block_size = 16}, kv_block_order::reverse});
  CHECK(vt::relative_error(rev.out, fwd.out) <= 2e-6);
  // With one block the two orders are the same computation.
  const auto one_f = transposed_attention(g, {{.mode = precision::bf16, .block_size = 250}});
  const auto one_r = transposed_attention(
      g, {{.mode = precision::bf16, .block_size = 250}, kv_block_order::reverse});
  CHECK(one_f.out == one_r.out);
  CHECK(one_f.lse == one_r.lse);
}
