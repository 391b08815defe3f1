// Tests of the decode data model: validation (every bad input names its argument), the driver's
// gather and scatter (checked with a probe core against the cache read through the block table),
// masking counts, empty sequences, output storage types, and thread-count independence.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "amla/attention/amla.hpp"
#include "amla/attention/driver.hpp"
#include "amla/attention/golden.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/problem_builder.hpp"
#include "amla/attention/seesaw.hpp"
#include "amla/attention/transposed.hpp"
#include "amla/problem/flashinfer_layout.hpp"
#include "amla/problem/fp8_cache.hpp"
#include "amla/problem/nz_layout.hpp"
#include "attention/variant_test_util.hpp"
#include "common/error_message.hpp"

using amla::bf16;
using amla::MatrixF;
using namespace amla::attention;
namespace vt = amla_test::variants;

namespace {

// Calls golden_decode and returns the message of the amla::invalid_argument it throws ("" if
// none).
template <class T>
std::string decode_error_of(const DecodeInputs<T>& in, const DecodeOptions& opt = {}) {
  DecodeResult<float, float> r(in.shape.batch > 0 && in.shape.s_q > 0 && in.shape.h_q > 0 &&
                                       in.shape.d_v > 0
                                   ? in.shape
                                   : DecodeShape{});
  return amla_test::error_of([&] { golden_decode(in, opt, r.view()); });
}

// A span whose pointer is null but whose size is not (what a caller's bug looks like).
template <class T>
std::span<const T> null_span(std::size_t n) {
  return {static_cast<const T*>(nullptr), n};
}

using amla_test::names;

DecodeProblem<float> small_problem(bool separate_v = false) {
  return vt::builder({.heads = {4, 2}, .dims = {16, 8}, .page_size = 4, .seqlens = {10, 5}})
      .separate_v(separate_v)
      .seed(3)
      .build<float>();
}

}  // namespace

TEST_CASE("validation names every bad shape argument", "[decode_problem][validation]") {
  const auto p = small_problem();
  auto with = [&](auto edit) {
    DecodeInputs<float> in = p.inputs();
    edit(in);
    return decode_error_of(in);
  };
  CHECK(with([](auto&) {}).empty());
  CHECK(names(with([](auto& in) { in.shape.batch = 0; }), "shape.batch"));
  CHECK(names(with([](auto& in) { in.shape.s_q = -1; }), "shape.s_q"));
  CHECK(names(with([](auto& in) { in.shape.h_q = 0; }), "shape.h_q"));
  CHECK(names(with([](auto& in) { in.shape.h_kv = 0; }), "shape.h_kv"));
  CHECK(names(with([](auto& in) { in.shape.d_qk = 0; }), "shape.d_qk"));
  CHECK(names(with([](auto& in) { in.shape.d_v = 0; }), "shape.d_v"));
  CHECK(names(with([](auto& in) { in.shape.num_pages = 0; }), "shape.num_pages"));
  CHECK(names(with([](auto& in) { in.shape.page_size = 0; }), "shape.page_size"));
  CHECK(names(with([](auto& in) { in.shape.max_pages_per_seq = 0; }), "shape.max_pages_per_seq"));
  const std::string h = with([](auto& in) { in.shape.h_kv = 3; });
  CHECK(names(h, "shape.h_kv"));
  CHECK(h.find("divide") != std::string::npos);
  CHECK(names(with([](auto& in) { in.shape.d_v = 17; }), "shape.d_v"));  // > d_qk, shared V
  // The message carries the function, the value and the rule.
  const std::string m = with([](auto& in) { in.shape.page_size = -4; });
  CHECK(m.find("golden_decode") != std::string::npos);
  CHECK(m.find("-4") != std::string::npos);
  CHECK(m.find(">= 1") != std::string::npos);
}

TEST_CASE("validation of spans: sizes and null pointers", "[decode_problem][validation]") {
  const auto p = small_problem();
  const auto ps = small_problem(true);
  auto with = [&](const DecodeProblem<float>& prob, auto edit) {
    DecodeInputs<float> in = prob.inputs();
    edit(in);
    return decode_error_of(in);
  };
  CHECK(names(with(p, [](auto& in) { in.q = in.q.first(in.q.size() - 1); }), "q"));
  CHECK(names(with(p, [](auto& in) { in.q = null_span<float>(in.q.size()); }), "q"));
  CHECK(with(p, [](auto& in) { in.q = null_span<float>(in.q.size()); }).find("null") !=
        std::string::npos);
  CHECK(names(with(p, [](auto& in) { in.kv = in.kv.first(3); }), "kv"));
  CHECK(names(with(p, [](auto& in) { in.kv = null_span<float>(in.kv.size()); }), "kv"));
  CHECK(names(with(ps, [](auto& in) { in.v = in.v.first(in.v.size() - 8); }), "v"));
  CHECK(names(with(ps, [](auto& in) { in.v = null_span<float>(in.v.size()); }), "v"));
  CHECK(names(with(p, [](auto& in) { in.block_table = in.block_table.first(1); }), "block_table"));
  CHECK(names(
      with(p, [](auto& in) { in.block_table = null_span<std::int32_t>(in.block_table.size()); }),
      "block_table"));
  CHECK(names(with(p, [](auto& in) { in.seqlens = in.seqlens.first(1); }), "seqlens"));
  CHECK(names(with(p, [](auto& in) { in.seqlens = null_span<std::int32_t>(2); }), "seqlens"));
  // A separate V cache of the shared layout's size (d_v != d_qk) is a mismatch.
  CHECK(names(with(p, [](auto& in) { in.v = in.kv; }), "v"));
}

TEST_CASE("validation of seqlens and block_table entries", "[decode_problem][validation]") {
  auto p = small_problem();
  const DecodeShape s = p.shape;
  SECTION("negative and too long seqlens") {
    p.seqlens[1] = -1;
    const std::string m = decode_error_of(p.inputs());
    CHECK(names(m, "seqlens"));
    CHECK(m.find("seqlens[1] = -1") != std::string::npos);
    p.seqlens[1] = static_cast<std::int32_t>(s.max_seqlen() + 1);
    CHECK(names(decode_error_of(p.inputs()), "seqlens"));
    p.seqlens[1] = static_cast<std::int32_t>(s.max_seqlen());  // exactly full: valid
    p.block_table.assign(p.block_table.size(), 0);
    CHECK(decode_error_of(p.inputs()).empty());
  }
  SECTION("an entry for a page in use must lie in the cache") {
    for (const std::int32_t bad : {-1, s.num_pages, s.num_pages + 100}) {
      auto q = p;
      q.block_table[static_cast<std::size_t>(s.max_pages_per_seq) + 1] = bad;  // b=1, page 1
      const std::string m = decode_error_of(q.inputs());
      CHECK(names(m, "block_table"));
      CHECK(m.find("block_table[1][1] = " + std::to_string(bad)) != std::string::npos);
    }
  }
  SECTION("entries past a sequence's pages are never validated") {
    // Sequence 1 holds 5 keys = 2 pages of 4; its remaining entries may hold anything.
    for (int i = 2; i < s.max_pages_per_seq; ++i) {
      p.block_table[static_cast<std::size_t>(s.max_pages_per_seq) + i] = -123456;
    }
    p.seqlens[0] = 0;  // a length-0 sequence reads no entry at all
    p.block_table.front() = 99999;
    CHECK(decode_error_of(p.inputs()).empty());
  }
}

TEST_CASE("validation of the scale, options and outputs", "[decode_problem][validation]") {
  const auto p = small_problem();
  for (const float bad : {0.0f, -0.5f, std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    DecodeOptions o;
    o.softmax_scale = bad;
    CHECK(names(decode_error_of(p.inputs(), o), "options.softmax_scale"));
  }
  DecodeOptions o;
  o.threads = -1;
  CHECK(names(decode_error_of(p.inputs(), o), "options.threads"));
  o = {};
  o.rows_per_task = -2;
  CHECK(names(decode_error_of(p.inputs(), o), "options.rows_per_task"));

  DecodeResult<float, float> r(p.shape);
  std::vector<float> short_out(r.out.size() - 1), bad_lse(r.lse.size() + 1);
  try {
    golden_decode(p.inputs(), {}, DecodeOutputs<float, float>{short_out, r.lse});
    FAIL("no throw");
  } catch (const amla::invalid_argument& e) {
    CHECK(names(e.what(), "out"));
  }
  try {
    golden_decode(p.inputs(), {}, DecodeOutputs<float, float>{r.out, bad_lse});
    FAIL("no throw");
  } catch (const amla::invalid_argument& e) {
    CHECK(names(e.what(), "lse"));
  }
  // lse is optional.
  CHECK_NOTHROW(golden_decode(p.inputs(), {}, DecodeOutputs<float, float>{r.out, {}}));
}

TEST_CASE("visible key counts follow the end-aligned causal mask", "[decode_problem]") {
  CHECK(visible_keys(10, 1, 0, true) == 10);
  CHECK(visible_keys(10, 4, 0, true) == 7);
  CHECK(visible_keys(10, 4, 3, true) == 10);
  CHECK(visible_keys(2, 4, 0, true) == 0);  // fully masked
  CHECK(visible_keys(2, 4, 2, true) == 1);
  CHECK(visible_keys(0, 2, 1, true) == 0);
  CHECK(visible_keys(10, 4, 0, false) == 10);
}

TEST_CASE("lse helpers", "[decode_problem]") {
  CHECK(lse_to_log2(std::log(8.0)) == Approx(3.0).epsilon(1e-15));
  CHECK(lse_to_log2(-std::numeric_limits<float>::infinity()) ==
        -std::numeric_limits<float>::infinity());
  CHECK(empty_row_lse == -std::numeric_limits<float>::infinity());
  DecodeShape s;
  CHECK(resolved_scale({}, s) == static_cast<float>(1.0 / 24.0));
  DecodeOptions o;
  o.softmax_scale = 0.25f;
  CHECK(resolved_scale(o, s) == 0.25f);
}

// A probe core copies what the driver hands it into out/lse so the test can check the gather, the
// row order and the scatter against the cache read through the block table.
TEMPLATE_TEST_CASE("the driver gathers head groups and scatters rows", "[decode_problem][driver]",
                   float, bf16) {
  const bool separate_v = GENERATE(false, true);
  const bool causal = GENERATE(false, true);
  const int threads = GENERATE(1, 3);
  const int rows_per_task = GENERATE(0, 1, 5);
  // d_v = 10 <= d_qk = 12; h_q = 6 over h_kv = 2 (GQA), s_q = 2.
  const auto p =
      vt::builder(
          {.heads = {6, 2}, .s_q = 2, .dims = {12, 10}, .page_size = 3, .seqlens = {7, 0, 1, 12}})
          .separate_v(separate_v)
          .seed(11)
          .build<TestType>();
  const DecodeShape& s = p.shape;
  DecodeOptions opt;
  opt.causal = causal;
  opt.threads = threads;
  opt.rows_per_task = rows_per_task;
  // out row = [q[0..3], k[last visible key][0..1], v[last visible key][0..1], row index, 0];
  // lse = visible count * 1000 + batch * 10 + kv head.
  DecodeResult<float, float> r(s);
  std::vector<int> calls(static_cast<std::size_t>(s.batch * s.h_kv), 0);
  std::mutex mu;
  run_decode<float>("probe", p.inputs(), opt, r.view(), operand_gather::as_stored,
                    [&](const HeadGroup& g, const GroupLocation& at, Eigen::Ref<MatrixF> out,
                        std::span<float> lse) {
                      {
                        std::lock_guard<std::mutex> lock(mu);
                        calls[static_cast<std::size_t>(at.batch * s.h_kv + at.kv_head)] +=
                            static_cast<int>(g.rows());
                      }
                      REQUIRE(g.n_keys() == p.seqlens[static_cast<std::size_t>(at.batch)]);
                      REQUIRE(g.d_qk() == s.d_qk);
                      REQUIRE(g.d_v() == s.d_v);
                      for (Eigen::Index i = 0; i < g.rows(); ++i) {
                        const Eigen::Index vis = g.visible_keys(i);
                        for (int d = 0; d < 4; ++d) out(i, d) = g.q(i, d);
                        for (int d = 0; d < 2; ++d) {
                          out(i, 4 + d) = vis > 0 ? g.k(vis - 1, d) : -7.0f;
                          out(i, 6 + d) = vis > 0 ? g.v(vis - 1, d) : -7.0f;
                        }
                        out(i, 8) = static_cast<float>(at.row_begin + i);
                        out(i, 9) = 0.0f;
                        lse[static_cast<std::size_t>(i)] =
                            static_cast<float>(vis * 1000 + at.batch * 10 + at.kv_head);
                      }
                    });
  for (const int c : calls) CHECK(c == s.rows_per_group());
  const int hpg = s.heads_per_group();
  for (int b = 0; b < s.batch; ++b) {
    const int len = p.seqlens[static_cast<std::size_t>(b)];
    for (int t = 0; t < s.s_q; ++t) {
      const int vis = visible_keys(len, s.s_q, t, causal);
      for (int h = 0; h < s.h_q; ++h) {
        const int g = h / hpg;
        const float* o = r.out_row(b, t, h);
        for (int d = 0; d < 4; ++d) CHECK(o[d] == amla::detail::to_float(p.query(b, t, h)[d]));
        for (int d = 0; d < 2; ++d) {
          CHECK(o[4 + d] == (vis > 0 ? amla::detail::to_float(p.key(b, vis - 1, g)[d]) : -7.0f));
          CHECK(o[6 + d] == (vis > 0 ? amla::detail::to_float(p.value(b, vis - 1, g)[d]) : -7.0f));
        }
        CHECK(o[8] == static_cast<float>(t * hpg + h % hpg));
        CHECK(r.lse_at(b, t, h) == static_cast<float>(vis * 1000 + b * 10 + g));
      }
    }
  }
}

TEST_CASE("float caches are rounded to BF16 when the recurrence asks", "[decode_problem][driver]") {
  auto p = vt::builder({.heads = {2, 1}, .dims = {4, 4}, .page_size = 2, .seqlens = {3}})
               .round_to_bf16(false)
               .seed(5)
               .build<float>();
  DecodeResult<float, float> as_stored(p.shape), rounded(p.shape);
  auto copy_q = [](const HeadGroup& g, const GroupLocation&, Eigen::Ref<MatrixF> out,
                   std::span<float> lse) {
    out = g.q.leftCols(out.cols()) + g.k.topRows(1).leftCols(out.cols()).replicate(g.rows(), 1);
    for (auto& l : lse) l = 0.0f;
  };
  run_decode<float>("probe", p.inputs(), {}, as_stored.view(), operand_gather::as_stored, copy_q);
  run_decode<float>("probe", p.inputs(), {}, rounded.view(), operand_gather::round_bf16, copy_q);
  int differ = 0;
  for (std::size_t i = 0; i < as_stored.out.size(); ++i) {
    const float* q = p.query(0, 0, static_cast<int>(i / 4));
    const float* k = p.key(0, 0, 0);
    const std::size_t d = i % 4;
    CHECK(as_stored.out[i] == q[d] + k[d]);
    CHECK(rounded.out[i] == amla::round_bf16(q[d]) + amla::round_bf16(k[d]));
    differ += as_stored.out[i] != rounded.out[i];
  }
  CHECK(differ > 0);  // the values were not BF16 to begin with
}

namespace {

/// The problem of the output cast tests, its values drawn in T's format.
template <class T>
DecodeProblem<T> output_cast_problem() {
  return vt::builder(
             {.heads = {8, 2}, .s_q = 2, .dims = {32, 16}, .page_size = 16, .seqlens = {40, 17}})
      .build<T>();
}

}  // namespace

TEST_CASE("output storage: bf16 and the BF16 output cast round once", "[decode_problem]") {
  const auto p = output_cast_problem<bf16>();
  const auto exact = golden_decode(p.inputs());
  DecodeResult<bf16, double> as_bf16(p.shape);
  golden_decode(p.inputs(), {}, as_bf16.view());
  DecodeOptions cast;
  cast.round_output_bf16 = true;
  DecodeResult<float, float> as_float(p.shape);
  golden_decode(p.inputs(), cast, as_float.view());
  for (std::size_t i = 0; i < exact.out.size(); ++i) {
    const bf16 want = amla::detail::bf16_from_double(exact.out[i]);
    CHECK(as_bf16.out[i] == want);
    CHECK(as_float.out[i] == want.to_float());
  }
  for (std::size_t i = 0; i < exact.lse.size(); ++i) {
    CHECK(as_bf16.lse[i] == exact.lse[i]);
    CHECK(as_float.lse[i] == static_cast<float>(exact.lse[i]));
  }
}

TEST_CASE("output storage: the FP16 output cast rounds once", "[decode_problem][fp16]") {
  const auto p = output_cast_problem<amla::fp16>();
  const auto exact = golden_decode(p.inputs());
  DecodeOptions cast;
  cast.round_output_fp16 = true;
  DecodeResult<float, float> as_float(p.shape);
  golden_decode(p.inputs(), cast, as_float.view());
  DecodeResult<double, double> as_double(p.shape);
  golden_decode(p.inputs(), cast, as_double.view());
  for (std::size_t i = 0; i < exact.out.size(); ++i) {
    const float want = amla::detail::fp16_from_double(exact.out[i]).to_float();
    CHECK(as_float.out[i] == want);
    CHECK(as_double.out[i] == static_cast<double>(want));
  }
}

TEST_CASE("fp16_from_double rounds once, to nearest even", "[decode_problem][fp16]") {
  using amla::fp16;
  using amla::detail::fp16_from_double;
  // 1 + 2^-11 is the midpoint between FP16 1 and 1 + 2^-10: ties to even gives 1; a hair above
  // it (below float resolution) must round up, which a rounding through float would lose.
  CHECK(fp16_from_double(1.0 + 0x1.0p-11).bits == fp16::from_float(1.0f).bits);
  CHECK(fp16_from_double(1.0 + 0x1.0p-11 + 0x1.0p-40).to_float() == 1.0f + 0x1.0p-10f);
  CHECK(fp16_from_double(-(1.0 + 0x1.0p-11 + 0x1.0p-40)).to_float() == -(1.0f + 0x1.0p-10f));
  CHECK(fp16_from_double(1.0 + 3 * 0x1.0p-11).to_float() == 1.0f + 0x1.0p-9f);  // tie: to even
  // Subnormals: half of the smallest subnormal 2^-24 ties to 0, a hair above rounds up.
  CHECK(fp16_from_double(0x1.0p-25).bits == 0);
  CHECK(fp16_from_double(0x1.0p-25 + 0x1.0p-60).bits == 1);
  CHECK(std::isinf(fp16_from_double(65520.0).to_float()));  // the overflow midpoint: to Inf
  CHECK(fp16_from_double(65519.99).to_float() == 65504.0f);
  CHECK(std::isnan(fp16_from_double(std::numeric_limits<double>::quiet_NaN()).to_float()));
  // Against the exact rounding on a sweep of doubles: the nearest FP16 by distance.
  std::uint64_t state = 12345;
  for (int i = 0; i < 20000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double x = std::ldexp(static_cast<double>(state >> 11) / 0x1.0p53 - 0.5, (i % 40) - 26);
    const fp16 got = fp16_from_double(x);
    const double g = got.to_float();
    const double up = fp16::from_bits(static_cast<std::uint16_t>(got.bits + 1u)).to_float();
    const double down = got.bits & 0x7FFFu
                            ? fp16::from_bits(static_cast<std::uint16_t>(got.bits - 1u)).to_float()
                            : -g;
    CAPTURE(x, g);
    CHECK(std::abs(x - g) <= std::abs(x - up));
    CHECK(std::abs(x - g) <= std::abs(x - down));
  }
}

TEST_CASE("bf16_from_double rounds once, to nearest even", "[decode_problem]") {
  using amla::detail::bf16_from_double;
  // 1 + 2^-8 is the midpoint between BF16 1 and 1 + 2^-7: ties to even gives 1. A value a hair
  // above it (below float resolution near 1 + 2^-8) must round up; through float it would tie.
  CHECK(bf16_from_double(1.0 + 0x1.0p-8).bits == bf16::from_float(1.0f).bits);
  CHECK(bf16_from_double(1.0 + 0x1.0p-8 + 0x1.0p-40).to_float() == 1.0f + 0x1.0p-7f);
  CHECK(bf16_from_double(-(1.0 + 0x1.0p-8 + 0x1.0p-40)).to_float() == -(1.0f + 0x1.0p-7f));
  CHECK(bf16_from_double(1.0 + 3 * 0x1.0p-8).to_float() == 1.0f + 0x1.0p-6f);  // tie: to even
  CHECK(bf16_from_double(0.0).bits == 0);
  CHECK(std::isinf(bf16_from_double(1e300).to_float()));
  CHECK(std::isnan(bf16_from_double(std::nan("")).to_float()));
  CHECK(bf16_from_double(3.0e38).to_float() == bf16::from_float(3.0e38f).to_float());
}

TEST_CASE("a float64 lse past FP32's range is stored as NaN, not as an empty row's infinity",
          "[decode_problem]") {
  using amla::detail::store_lse;
  constexpr double dinf = std::numeric_limits<double>::infinity();
  CHECK(store_lse<float>(2.5) == 2.5f);
  CHECK(store_lse<float>(-dinf) == -std::numeric_limits<float>::infinity());  // empty rows
  CHECK(store_lse<float>(dinf) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(store_lse<float>(std::nan(""))));
  CHECK(std::isnan(store_lse<float>(2e40)));  // finite in float64, past FP32's range
  CHECK(std::isnan(store_lse<float>(-2e40)));
  CHECK(store_lse<double>(2e40) == 2e40);
  CHECK(store_lse<float>(3.0e38) == 3.0e38f);
  // Through golden_decode: q = 1e20 and k = 1e20 (1, -1, 2) give lse = 2e40 in float64.
  DecodeShape s{1, 1, 1, 1, 1, 1, 1, 4, 1};
  const std::vector<float> q = {1e20f}, kv = {1e20f, -1e20f, 2e20f, 0.0f};
  const std::vector<std::int32_t> table = {0}, lens = {3};
  const DecodeInputs<float> in{s, q, kv, {}, table, lens};
  DecodeResult<float, float> r(s);
  DecodeOptions opt;
  opt.softmax_scale = 1.0f;
  golden_decode(in, opt, r.view());
  CHECK(r.out[0] == 2e20f);  // V is the first column of the K cache: the key of score 2e40
  CHECK(std::isnan(r.lse[0]));
  const auto wide = golden_decode(in, opt);  // float64 outputs hold it
  CHECK(wide.lse[0] == Approx(2e40));
}

TEST_CASE("results do not depend on the thread count", "[decode_problem][threads]") {
  // Few groups (row-chunk parallelism) and many groups (group parallelism).
  for (const int batch : {1, 5}) {
    const auto p =
        vt::builder(
            {.heads = {24, 1}, .s_q = 2, .dims = {64, 48}, .page_size = 16, .seqlens = {200}})
            .batch(batch)
            .seed(static_cast<std::uint64_t>(batch))
            .build<bf16>();
    DecodeOptions opt;
    opt.causal = true;
    opt.rows_per_task = 16;
    opt.threads = 1;
    const auto one = golden_decode(p.inputs(), opt);
    for (const int threads : {2, 3, 7}) {
      opt.threads = threads;
      const auto many = golden_decode(p.inputs(), opt);
      CHECK(many.out == one.out);
      CHECK(many.lse == one.lse);
    }
  }
}

TEST_CASE("an exception in a core reaches the caller", "[decode_problem][threads]") {
  const auto p =
      ProblemBuilder().batch(4).heads(4, 1).dims(8, 8).page_size(4).seqlens({9}).build<bf16>();
  DecodeResult<float, float> r(p.shape);
  DecodeOptions opt;
  opt.threads = 3;
  CHECK_THROWS_AS(run_decode<float>("probe", p.inputs(), opt, r.view(), operand_gather::as_stored,
                                    [](const HeadGroup&, const GroupLocation& at,
                                       Eigen::Ref<MatrixF>, std::span<float>) {
                                      if (at.batch == 2) throw std::runtime_error("core failed");
                                    }),
                  std::runtime_error);
}

TEST_CASE("threads the system refuses to start leave the work to the others",
          "[decode_problem][threads]") {
  // start(work) starts `allowed` threads and then throws as std::thread does at the system's
  // limit: every task still runs exactly once, on the threads that did start.
  for (const int allowed : {0, 1, 2}) {
    std::vector<int> runs(100, 0);
    std::mutex m;
    int started = 0;
    amla::detail::parallel_for_started_by(
        runs.size(), 4,
        [&](std::size_t i) {
          const std::lock_guard<std::mutex> lock(m);
          ++runs[i];
        },
        [&](auto& work) {
          if (started == allowed) {
            throw std::system_error(
                std::make_error_code(std::errc::resource_unavailable_try_again));
          }
          ++started;
          return std::thread(std::ref(work));
        });
    CAPTURE(allowed);
    CHECK(started == allowed);
    for (const int n : runs) CHECK(n == 1);
  }
  // A task's exception still reaches the caller when threads are refused.
  CHECK_THROWS_AS(amla::detail::parallel_for_started_by(
                      8, 4,
                      [](std::size_t i) {
                        if (i == 5) throw std::runtime_error("task failed");
                      },
                      [](auto&) -> std::thread { throw std::bad_alloc(); }),
                  std::runtime_error);
}

// ---- Every input layout the driver reads (problem/inputs.hpp's decode_source) ----------------

namespace {

/// Checks that `view` gives bit for bit the result of the FlashMLA-layout problem `dense` for
/// golden and for Base, seesaw and transposed in their modes.
template <class View, class T>
void check_same_results(const View& view, const DecodeProblem<T>& dense, const char* what) {
  CAPTURE(what);
  DecodeOptions o;
  o.causal = dense.shape.s_q > 1;
  const auto g0 = golden_decode(dense.inputs(), o);
  const auto g1 = golden_decode(view, o);
  CHECK(g0.out == g1.out);
  CHECK(g0.lse == g1.lse);
  for (const precision mode : {precision::bf16, precision::float32, precision::fp16}) {
    CAPTURE(static_cast<int>(mode));
    const auto b0 = base_decode(dense.inputs(), o, {mode, 16});
    const auto b1 = base_decode(view, o, {mode, 16});
    CHECK(b0.out == b1.out);
    CHECK(b0.lse == b1.lse);
    const auto t0 = transposed_decode(dense.inputs(), o, {{mode, 16}});
    const auto t1 = transposed_decode(view, o, {{mode, 16}});
    CHECK(t0.out == t1.out);
    const auto s0 = seesaw_decode(dense.inputs(), o, {mode, 16});
    const auto s1 = seesaw_decode(view, o, {mode, 16});
    CHECK(s0.out == s1.out);
  }
  const auto a0 = amla_decode(dense.inputs(), o);
  const auto a1 = amla_decode(view, o);
  CHECK(a0.out == a1.out);
}

}  // namespace

TEST_CASE("layouts: NZ and FlashInfer caches give the FlashMLA layout's results",
          "[decode_problem][layouts]") {
  const auto p =
      vt::builder(
          {.heads = {4, 1}, .s_q = 2, .dims = {96, 64}, .page_size = 16, .seqlens = {37, 0, 16}})
          .shuffle_pages()
          .seed(71)
          .build<bf16>();
  const DecodeShape& s = p.shape;
  // NZ: the K cache rearranged, queries and tables as they are.
  const amla::NzLayout l = amla::nz_layout_of(s, amla::nz_c0(sizeof(bf16)));
  std::vector<bf16> nz(p.kv.size());
  amla::nd_to_nz<bf16>(l, p.kv, nz);
  const amla::NzInputs<bf16> nz_in{s, p.q, {l, nz}, {}, p.block_table, p.seqlens};
  check_same_results(nz_in, p, "NZ");
  // FlashInfer: split caches and queries, pages by indptr / indices.
  std::vector<bf16> ckv(static_cast<std::size_t>(s.num_pages) * s.page_size * s.d_v);
  std::vector<bf16> kpe(static_cast<std::size_t>(s.num_pages) * s.page_size * (s.d_qk - s.d_v));
  std::vector<std::int32_t> indptr(static_cast<std::size_t>(s.batch) + 1);
  std::vector<std::int32_t> indices(amla::flashinfer_index_count(s, p.seqlens));
  std::vector<std::int32_t> last(static_cast<std::size_t>(s.batch));
  amla::flashmla_to_flashinfer<bf16>(s, p.kv, p.block_table, p.seqlens, ckv, kpe, indptr, indices,
                                     last);
  const int q_rows = s.batch * s.s_q * s.h_q;
  std::vector<bf16> q_nope(static_cast<std::size_t>(q_rows) * s.d_v);
  std::vector<bf16> q_pe(static_cast<std::size_t>(q_rows) * (s.d_qk - s.d_v));
  amla::split_channels<bf16>(p.q, q_nope, q_pe, q_rows, s.d_v, s.d_qk - s.d_v);
  amla::FlashInferCache<bf16> cache;
  cache.num_pages = s.num_pages;
  cache.page_size = s.page_size;
  cache.d_ckv = s.d_v;
  cache.d_kpe = s.d_qk - s.d_v;
  cache.ckv = ckv;
  cache.kpe = kpe;
  cache.kv_indptr = indptr;
  cache.kv_indices = indices;
  cache.last_page_len = last;
  const amla::FlashInferInputs<bf16> fi{s, q_nope, q_pe, cache};
  check_same_results(fi, p, "FlashInfer");
  // A shape that disagrees with the cache is rejected, naming the field.
  amla::FlashInferInputs<bf16> bad = fi;
  bad.shape.d_v = s.d_v - 16;
  CHECK(amla_test::names(amla_test::error_of([&] { (void)golden_decode(bad); }), "shape.d_v"));
  bad = fi;
  bad.q_pe = std::span<const bf16>(q_pe).first(q_pe.size() - 1);
  CHECK(amla_test::names(amla_test::error_of([&] { (void)base_decode(bad); }), "q_pe"));
  amla::NzInputs<bf16> nz_bad = nz_in;
  nz_bad.shape.page_size = 8;
  CHECK(amla_test::names(amla_test::error_of([&] { (void)golden_decode(nz_bad); }),
                         "shape.page_size"));
}

TEST_CASE("FP8 caches: read as the dense dequantized cache, golden and every recurrence",
          "[decode_problem][fp8]") {
  // FlashMLA's two FP8 layouts: h_kv 1, d_qk 576 (v32, V the first 512) or 512 (MODEL1, V the
  // first 448).
  for (const auto layout : {amla::flashmla_fp8_layout::v32, amla::flashmla_fp8_layout::model1}) {
    const amla::FlashMlaFp8Geometry geo = amla::flashmla_fp8_geometry(layout);
    const auto p = vt::builder({.heads = {8, 1},
                                .dims = {geo.d_qk, geo.d_nope},
                                .page_size = 64,
                                .seqlens = {100, 64}})
                       .poison_unused(false)
                       .seed(5)
                       .build<bf16>();
    const auto bytes = amla::quantize_flashmla_fp8(layout, p.shape.num_pages, p.shape.page_size,
                                                   std::span<const bf16>(p.kv));
    amla::FlashMlaFp8Cache c;
    c.layout = layout;
    c.num_pages = p.shape.num_pages;
    c.page_size = p.shape.page_size;
    c.bytes = bytes;
    DecodeProblem<bf16> deq = p;
    amla::dequantize_flashmla_fp8<bf16>(c, deq.kv);
    const amla::FlashMlaFp8Inputs<bf16> in{p.shape, p.q, c, p.block_table, p.seqlens};
    check_same_results(in, deq, layout == amla::flashmla_fp8_layout::v32 ? "v32" : "model1");
    // The float64 golden on the unquantized values: the quantization error alone, as FlashMLA's
    // tests separate it from the kernel's (e4m3 keeps 3 significand bits: a few percent per
    // value, less in the weighted sums).
    const auto exact = golden_decode(p.inputs());
    const auto quant = golden_decode(in);
    const amla::QuantizationError e = amla::quantization_error(std::span<const double>(exact.out),
                                                               std::span<const double>(quant.out));
    CAPTURE(e.relative_rms());
    CHECK(e.relative_rms() > 1e-3);
    CHECK(e.relative_rms() < 5e-2);
    // A shape that disagrees with the cache is rejected.
    amla::FlashMlaFp8Inputs<bf16> bad = in;
    bad.shape.d_qk = 576 + 512 - geo.d_qk;
    CHECK(amla_test::names(amla_test::error_of([&] { (void)golden_decode(bad); }), "shape.d_qk"));
  }
  // Scaled FP8 (vLLM / FlashInfer): per-tensor and per-group scales, e4m3 and e5m2, a separate V.
  const auto p =
      vt::builder({.heads = {4, 2}, .dims = {64, 32}, .page_size = 16, .seqlens = {40, 9}})
          .separate_v()
          .poison_unused(false)
          .round_to_bf16(false)
          .seed(8)
          .build<float>();
  for (const auto kind : {amla::fp8_kind::e4m3, amla::fp8_kind::e5m2}) {
    for (const int group : {0, 16}) {
      CAPTURE(static_cast<int>(kind), group);
      const DecodeShape& s = p.shape;
      const auto quantize = [&](const std::vector<float>& x, int d,
                                std::vector<std::uint8_t>& codes, std::vector<float>& scales) {
        codes.resize(x.size());
        scales.resize(group == 0 ? 1 : x.size() / static_cast<std::size_t>(group));
        amla::quantize_scaled_fp8<float>(kind, s.num_pages, s.page_size, s.h_kv, d, group, x, codes,
                                         scales);
        amla::ScaledFp8Cache c{kind, s.num_pages, s.page_size, s.h_kv, d, group, codes, scales};
        return c;
      };
      std::vector<std::uint8_t> kc, vc;
      std::vector<float> ks, vs;
      const amla::ScaledFp8Cache kcache = quantize(p.kv, s.d_qk, kc, ks);
      const amla::ScaledFp8Cache vcache = quantize(p.v, s.d_v, vc, vs);
      DecodeProblem<float> deq = p;
      amla::dequantize_scaled_fp8<float>(kcache, deq.kv);
      amla::dequantize_scaled_fp8<float>(vcache, deq.v);
      const amla::ScaledFp8Inputs<float> in{s, p.q, kcache, vcache, p.block_table, p.seqlens};
      check_same_results(in, deq, "scaled");
      const auto exact = golden_decode(p.inputs());
      const auto quant = golden_decode(in);
      const amla::QuantizationError e = amla::quantization_error(
          std::span<const double>(exact.out), std::span<const double>(quant.out));
      CHECK(e.relative_rms() > 1e-4);
      CHECK(e.relative_rms() < (kind == amla::fp8_kind::e5m2 ? 1e-1 : 5e-2));
    }
  }
}
