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

#include "amla/attention/driver.hpp"
#include "amla/attention/golden.hpp"
#include "amla/attention/problem_builder.hpp"
#include "common/error_message.hpp"

using amla::bf16;
using amla::MatrixD;
using amla::MatrixF;
using namespace amla::attention;

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
  return ProblemBuilder()
      .batch(2)
      .heads(4, 2)
      .dims(16, 8)
      .page_size(4)
      .seqlens({10, 5})
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
  const auto p = ProblemBuilder()
                     .heads(6, 2)
                     .s_q(2)
                     .dims(12, 10)
                     .page_size(3)
                     .seqlens({7, 0, 1, 12})
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
  auto p = ProblemBuilder()
               .heads(2, 1)
               .dims(4, 4)
               .page_size(2)
               .seqlens({3})
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

TEST_CASE("output storage: bf16 and the BF16 output cast round once", "[decode_problem]") {
  const auto p = ProblemBuilder()
                     .heads(8, 2)
                     .dims(32, 16)
                     .page_size(16)
                     .seqlens({40, 17})
                     .s_q(2)
                     .build<bf16>();
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
    const auto p = ProblemBuilder()
                       .batch(batch)
                       .heads(24, 1)
                       .dims(64, 48)
                       .page_size(16)
                       .seqlens({200})
                       .s_q(2)
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
