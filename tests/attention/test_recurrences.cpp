// The contract every recurrence keeps (golden, Base, AMLA, seesaw, transposed in both block
// orders, split-KV), tested once over all of them: empty and fully masked rows give out = 0 and
// lse = -inf, keys no row sees (NaN-poisoned pages and slots) are never read, results do not
// depend on the thread count, bad options and outputs are rejected naming the field, the owning
// overloads return what the buffer overloads write, and the paged entry points agree with golden.
// Each recurrence's own mathematics is tested in its own file.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "amla/attention/amla.hpp"
#include "amla/attention/golden.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/problem_builder.hpp"
#include "amla/attention/seesaw.hpp"
#include "amla/attention/split_kv.hpp"
#include "amla/attention/transposed.hpp"
#include "attention/variant_test_util.hpp"
#include "common/error_message.hpp"

namespace at = amla::attention;
namespace vt = amla_test::variants;
using amla::MatrixF;
using at::HeadGroup;
using at::precision;

namespace {

using amla_test::finf;

// ---- One adapter per recurrence: its entry points, options and traits ----------------------

// Forwards to an overload set (the dense entry points have two overloads each).
#define AMLA_FORWARD(fn) \
  [](auto&&... args) -> decltype(auto) { return fn(std::forward<decltype(args)>(args)...); }

/// What the kernel recurrences share; each adapter states what differs.
struct Kernel {
  using Scalar = float;
  static constexpr bool has_options = true;
  static constexpr bool propagates_nan = true;
  static constexpr bool one_key_exact = false;  ///< a row with one key gets its value exactly
  static constexpr const char* dense_prefix = "options";
};

struct Golden {
  static constexpr const char* name = "golden";
  using Scalar = double;
  static constexpr bool has_options = false;
  static constexpr bool propagates_nan = true;
  static constexpr bool one_key_exact = true;
  static constexpr const char* dense_fn = "golden_attention";
  using Options = at::GoldenOptions;
  static Options options(precision, int) { return {}; }
  static constexpr auto attention = [](const HeadGroup& g, const Options&, auto&&... out) {
    return at::golden_attention(g, out...);
  };
  static constexpr const auto& decode = at::golden_decode;
};

struct Base : Kernel {
  static constexpr const char* name = "base";
  static constexpr bool one_key_exact = true;
  static constexpr const char* dense_fn = "base_attention";
  static constexpr const char* decode_prefix = "base";
  using Options = at::BaseOptions;
  static Options options(precision mode, int block) { return {mode, block}; }
  static constexpr auto attention = AMLA_FORWARD(at::base_attention);
  static constexpr const auto& decode = at::base_decode;
};

struct Amla : Kernel {
  static constexpr const char* name = "amla";
  // A NaN in O is rescaled by an integer add on its pattern: it need not stay a NaN.
  static constexpr bool propagates_nan = false;
  static constexpr const char* dense_fn = "amla_attention";
  static constexpr const char* decode_prefix = "amla";
  using Options = at::AmlaOptions;
  static Options options(precision mode, int block) {
    Options o;
    o.mode = mode;
    o.block_size = block;
    return o;
  }
  static constexpr auto attention = AMLA_FORWARD(at::amla_attention);
  static constexpr const auto& decode = at::amla_decode;
};

struct Seesaw : Kernel {
  static constexpr const char* name = "seesaw";
  static constexpr const char* dense_fn = "seesaw_attention";
  static constexpr const char* decode_prefix = "seesaw";
  using Options = at::SeesawOptions;
  static Options options(precision mode, int block) { return {mode, block}; }
  static constexpr auto attention = AMLA_FORWARD(at::seesaw_attention);
  static constexpr const auto& decode = at::seesaw_decode;
};

template <at::kv_block_order Order>
struct Transposed : Kernel {
  static constexpr const char* name =
      Order == at::kv_block_order::forward ? "transposed forward" : "transposed reverse";
  static constexpr const char* dense_fn = "transposed_attention";
  static constexpr const char* decode_prefix = "transposed";
  using Options = at::TransposedOptions;
  static Options options(precision mode, int block) { return {{mode, block}, Order}; }
  static constexpr auto attention = AMLA_FORWARD(at::transposed_attention);
  static constexpr const auto& decode = at::transposed_decode;
};
using TransposedForward = Transposed<at::kv_block_order::forward>;
using TransposedReverse = Transposed<at::kv_block_order::reverse>;

struct SplitKv : Kernel {
  static constexpr const char* name = "split-KV";
  static constexpr bool one_key_exact = true;
  static constexpr const char* dense_fn = "split_kv_attention";
  static constexpr const char* dense_prefix = "options.split";
  static constexpr const char* decode_prefix = "split.split";
  using Options = at::SplitKvOptions;
  static Options options(precision mode, int block) { return {3, {mode, block}}; }
  static constexpr auto attention = AMLA_FORWARD(at::split_kv_attention);
  static constexpr const auto& decode = at::split_kv_decode;
};

#define AMLA_ALL_RECURRENCES \
  Golden, Base, Amla, Seesaw, TransposedForward, TransposedReverse, SplitKv
#define AMLA_KERNEL_RECURRENCES Base, Amla, Seesaw, TransposedForward, TransposedReverse, SplitKv

/// The precision modes a recurrence runs in (golden: one, float64).
template <class R>
std::vector<precision> modes() {
  if constexpr (R::has_options) {
    return {precision::bf16, precision::float32};
  } else {
    return {precision::float32};
  }
}

/// The float64 tolerance of a mode: FP32 agreement, or the BF16 level.
double tolerance(precision mode, double bf16_level) {
  return mode == precision::bf16 ? bf16_level : 1e-5;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

using amla_test::error_of;
using amla_test::names;

}  // namespace

// ---- Empty and masked rows ---------------------------------------------------------------

TEMPLATE_TEST_CASE("paged: seqlen 0 and fully masked causal rows give out 0 and lse -inf",
                   "[recurrences][masking]", AMLA_ALL_RECURRENCES) {
  // seqlen 3 with s_q 4 (causal): token 0 sees nothing, token 1 one key, ...; block size 1 makes
  // every row meet blocks it cannot see after ones it can, and sequence 1 is empty.
  const auto p = at::ProblemBuilder()
                     .heads(2, 1)
                     .s_q(4)
                     .dims(8, 8)
                     .page_size(2)
                     .seqlens({3, 0})
                     .build<amla::bf16>();
  at::DecodeOptions o;
  o.causal = true;
  const auto want = at::golden_decode(p.inputs(), o);
  for (const int block : {1, 2, 512}) {
    for (const precision mode : modes<TestType>()) {
      CAPTURE(TestType::name, block, static_cast<int>(mode));
      const auto r = TestType::decode(p.inputs(), o, TestType::options(mode, block));
      for (int h = 0; h < 2; ++h) {
        CHECK(r.lse_at(0, 0, h) == -finf);
        for (int d = 0; d < 8; ++d) CHECK(r.out_row(0, 0, h)[d] == 0.0f);
        for (int t = 0; t < 4; ++t) {
          CHECK(r.lse_at(1, t, h) == -finf);
          for (int d = 0; d < 8; ++d) CHECK(r.out_row(1, t, h)[d] == 0.0f);
          if (t > 0) CHECK(std::isfinite(r.lse_at(0, t, h)));  // tokens 1-3 see 1-3 keys
        }
        // One visible key: out is that value (P = 1, l = 1), exactly for Base and split-KV. The
        // base-2 schedules round m = max * c, so their p can be 2^(tiny > 0), one ulp above 1,
        // and AMLA scales P by S16 and divides by it at the end: within a few ulps there.
        for (int d = 0; d < 8; ++d) {
          const float v = static_cast<float>(want.out_row(0, 1, h)[d]);
          if (TestType::one_key_exact) {
            CHECK(r.out_row(0, 1, h)[d] == v);
          } else {
            CHECK(r.out_row(0, 1, h)[d] == Approx(v).epsilon(tolerance(mode, 1e-2)));
          }
        }
      }
      for (const auto x : r.out) CHECK(std::isfinite(x));
      CHECK(vt::rel_frobenius(r.out, want.out) < 1e-2);
    }
  }
}

TEMPLATE_TEST_CASE("dense: empty rows, rows that see one key, keys nobody sees are never read",
                   "[recurrences][masking]", AMLA_ALL_RECURRENCES) {
  const int rows = 8, n_keys = 100, d_qk = 24, d_v = 16;
  vt::Inputs in = vt::random_inputs(rows, n_keys, d_qk, d_v, 41, 1.0f);
  // Rows 0 and 6 see nothing; the first row of a block need not see it (visible counts need not
  // be causal). Keys 70..99 are visible to nobody: poison them.
  const std::vector<int> vis = {0, 1, 63, 64, 65, 70, 0, 70};
  for (int j = 70; j < n_keys; ++j) {
    in.k.row(j).setConstant(std::numeric_limits<float>::quiet_NaN());
    in.kv_v.row(j).setConstant(std::numeric_limits<float>::quiet_NaN());
  }
  const HeadGroup g = in.group(vis);
  const at::GoldenResult ref = at::golden_attention(g);
  for (const precision mode : modes<TestType>()) {
    CAPTURE(TestType::name, static_cast<int>(mode));
    const bool bf = mode == precision::bf16;
    const auto r = TestType::attention(g, TestType::options(mode, 16));
    CHECK(r.out.allFinite());
    CHECK(vt::relative_error(r.out, ref.out) <= tolerance(mode, 6e-3));
    for (int rr : {0, 6}) {
      CHECK(r.out.row(rr).isZero(0.0));
      CHECK(r.lse(rr) == -finf);
    }
    for (int rr = 0; rr < rows; ++rr) {
      if (vis[static_cast<std::size_t>(rr)] == 0) continue;
      CHECK(std::abs(r.lse(rr) - ref.lse(rr)) <= 1e-5 * std::max(1.0, std::abs(ref.lse(rr))));
    }
    // A row that sees exactly one key gets that key's value (the softmax of one score is 1).
    if (!(std::is_same_v<TestType, Amla> && bf)) {
      const MatrixF v0 = bf ? amla::rounded_bf16(in.kv_v.row(0)) : MatrixF(in.kv_v.row(0));
      CHECK(r.out.row(1).template cast<float>() == v0);
    }
  }
  // No keys at all.
  const vt::Inputs none = vt::random_inputs(3, 0, 8, 4, 1, 1.0f);
  const auto e = TestType::attention(none.group({}), typename TestType::Options{});
  CHECK(e.out.rows() == 3);
  CHECK(e.out.isZero(0.0));
  for (Eigen::Index i = 0; i < 3; ++i) CHECK(e.lse(i) == -finf);
}

TEMPLATE_TEST_CASE("dense: bf16 mode rounds operands that are not BF16 values", "[recurrences]",
                   AMLA_KERNEL_RECURRENCES) {
  const vt::Inputs in = vt::random_inputs(8, 130, 32, 16, 5, 1.0f);
  const auto exact = TestType::attention(in.group({}), typename TestType::Options{});
  // Perturb below half a BF16 ulp: the bf16 mode must not see it.
  vt::Inputs perturbed = in;
  for (MatrixF* m : {&perturbed.q, &perturbed.k, &perturbed.kv_v}) {
    for (Eigen::Index i = 0; i < m->size(); ++i) {
      float& x = m->data()[i];
      x = x + std::ldexp(std::abs(x), -12);
    }
  }
  const auto rounded = TestType::attention(perturbed.group({}), typename TestType::Options{});
  CAPTURE(TestType::name);
  CHECK(rounded.out == exact.out);
  CHECK(rounded.lse == exact.lse);
}

TEMPLATE_TEST_CASE("dense: a NaN in a value that is read propagates", "[recurrences][masking]",
                   AMLA_ALL_RECURRENCES) {
  if constexpr (TestType::propagates_nan) {
    vt::Inputs in = vt::random_inputs(2, 20, 8, 4, 3, 1.0f);
    in.kv_v(5, 1) = std::numeric_limits<float>::quiet_NaN();
    const auto r = TestType::attention(in.group({}), TestType::options(precision::bf16, 8));
    CHECK(std::isnan(r.out(0, 1)));
    CHECK(std::isnan(r.out(1, 1)));
    CHECK(std::isfinite(r.out(0, 0)));
  }
}

// ---- Paged problems against golden ----------------------------------------------------------

TEMPLATE_TEST_CASE("paged: every recurrence matches golden over the sweep; poisoned pages unread",
                   "[recurrences][decode]", AMLA_KERNEL_RECURRENCES) {
  vt::for_each_paged_case([](const auto& p, const at::DecodeOptions& o, int block) {
    const auto want = at::golden_decode(p.inputs(), o);
    CAPTURE(TestType::name, p.shape.h_q, p.shape.h_kv, p.shape.s_q, p.shape.page_size, block,
            o.causal, p.v_in_kv());
    const auto f32 = TestType::decode(p.inputs(), o, TestType::options(precision::float32, block));
    const auto b16 = TestType::decode(p.inputs(), o, TestType::options(precision::bf16, block));
    for (const float x : f32.out) REQUIRE(std::isfinite(x));  // poisoned pages never read
    for (const float x : b16.out) REQUIRE(std::isfinite(x));
    CHECK(vt::rel_frobenius(f32.out, want.out) <= 1e-5);
    CHECK(vt::max_lse_error(f32.lse, want.lse) <= 1e-5);
    CHECK(vt::rel_frobenius(b16.out, want.out) <= 1e-2);
    CHECK(vt::max_lse_error(b16.lse, want.lse) <= 1e-5);  // lse from FP32 m and l
  });
}

TEMPLATE_TEST_CASE("paged: the DeepSeek shape, float and bf16 caches of the same values",
                   "[recurrences][decode]", AMLA_ALL_RECURRENCES) {
  // h_q 128, d_qk 576, d_v 512 (V = the first 512 columns of K), 1000 keys over 64-key pages.
  const auto pb = at::ProblemBuilder::deepseek_mla(1, 1000).seed(9);
  const auto p16 = pb.build<amla::bf16>();
  const auto p32 = pb.build<float>();  // the same BF16 values stored as float
  at::DecodeOptions o;
  o.round_output_bf16 = true;  // the kernel's output cast
  const auto want = at::golden_decode(p16.inputs(), {});
  const auto a = TestType::decode(p16.inputs(), o, TestType::options(precision::bf16, 64));
  const auto b = TestType::decode(p32.inputs(), o, TestType::options(precision::bf16, 64));
  CAPTURE(TestType::name);
  CHECK(a.out == b.out);
  CHECK(a.lse == b.lse);
  CHECK(vt::rel_frobenius(a.out, want.out) <= 5e-3);
  for (const auto x : a.out) CHECK(amla::is_bf16_exact(static_cast<float>(x)));
}

// ---- Threads ------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("paged: results do not depend on the thread count", "[recurrences][threads]",
                   AMLA_ALL_RECURRENCES) {
  // Few groups (row-chunk parallelism) and many groups (group parallelism), both caches.
  for (const int batch : {1, 3}) {
    const auto p = at::ProblemBuilder()
                       .batch(batch)
                       .heads(128, 1)
                       .dims(64, 32)
                       .page_size(16)
                       .seqlens({300})
                       .s_q(2)
                       .build<amla::bf16>();
    at::DecodeOptions o;
    o.causal = true;
    o.threads = 1;
    const auto options = TestType::options(precision::bf16, 64);
    const auto one = TestType::decode(p.inputs(), o, options);
    for (const int threads : {2, 5}) {
      CAPTURE(TestType::name, batch, threads);
      o.threads = threads;
      const auto many = TestType::decode(p.inputs(), o, options);
      CHECK(same_bits(many.out, one.out));
      CHECK(same_bits(many.lse, one.lse));
    }
  }
  // The DeepSeek shape with two sequences of different lengths and the default options.
  const auto p =
      at::ProblemBuilder::deepseek_mla(2, 0).seqlens({1300, 600}).seed(9).build<amla::bf16>();
  at::DecodeOptions one, two;
  one.threads = 1;
  two.threads = 2;
  const auto a = TestType::decode(p.inputs(), one);
  const auto b = TestType::decode(p.inputs(), two);
  CAPTURE(TestType::name);
  CHECK(same_bits(a.out, b.out));
  CHECK(same_bits(a.lse, b.lse));
}

// ---- Owning overloads ------------------------------------------------------------------------

TEMPLATE_TEST_CASE("the owning overloads return what the buffer overloads write", "[recurrences]",
                   AMLA_ALL_RECURRENCES) {
  using Scalar = typename TestType::Scalar;
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const vt::Inputs in = vt::random_inputs(9, 77, 16, 10, 2, 1.0f);
  const std::vector<int> vis = vt::causal_visible(9, 77, 3);
  const HeadGroup g = in.group(vis);
  const auto opt = TestType::options(precision::bf16, 16);
  const auto owned = TestType::attention(g, opt);
  Matrix out(9, 10);
  std::vector<Scalar> lse(9);
  TestType::attention(g, opt, out, lse);
  CAPTURE(TestType::name);
  CHECK(out == owned.out);
  CHECK(Eigen::Map<const Eigen::Matrix<Scalar, Eigen::Dynamic, 1>>(lse.data(), 9) == owned.lse);

  const auto p = at::ProblemBuilder()
                     .heads(6, 2)
                     .s_q(2)
                     .dims(16, 8)
                     .page_size(4)
                     .seqlens({9, 0, 30})
                     .seed(2)
                     .build<amla::bf16>();
  at::DecodeOptions o;
  o.causal = true;
  const auto own = TestType::decode(p.inputs(), o, opt);
  at::DecodeResult<Scalar, Scalar> r(p.shape);
  TestType::decode(p.inputs(), o, r.view(), opt);
  CHECK(same_bits(r.out, own.out));
  CHECK(same_bits(r.lse, own.lse));
}

// ---- Bad options and outputs ---------------------------------------------------------------

TEMPLATE_TEST_CASE("bad options are rejected naming the field, before anything is written",
                   "[recurrences][errors]", AMLA_KERNEL_RECURRENCES) {
  const auto p =
      at::ProblemBuilder().heads(2, 1).dims(8, 8).page_size(4).seqlens({5}).build<amla::bf16>();
  const vt::Inputs in = vt::random_inputs(4, 10, 8, 6, 1, 1.0f);
  const HeadGroup g = in.group({});
  const std::string decode_fn = std::string(TestType::decode_prefix) == "split.split"
                                    ? "split_kv_decode"
                                    : std::string(TestType::decode_prefix) + "_decode";
  struct Bad {
    typename TestType::Options options;
    std::string field;
  };
  for (const int bad_block : {0, -3}) {
    const Bad bad[] = {{TestType::options(static_cast<precision>(7), 64), "mode"},
                       {TestType::options(precision::bf16, bad_block), "block_size"}};
    for (const Bad& b : bad) {
      CAPTURE(TestType::name, bad_block, b.field);
      // Dense entry points.
      MatrixF out(4, 6);
      std::vector<float> lse(4);
      const std::string dense = error_of([&] { TestType::attention(g, b.options, out, lse); });
      CHECK(names(dense, std::string(TestType::dense_prefix) + "." + b.field));
      CHECK(dense.find(TestType::dense_fn) != std::string::npos);
      CHECK(error_of([&] { (void)TestType::attention(g, b.options); }) == dense);
      // Decode entry points: nothing written on a throw.
      at::DecodeResult<float, float> r(p.shape);
      std::fill(r.out.begin(), r.out.end(), 42.0f);
      std::fill(r.lse.begin(), r.lse.end(), 42.0f);
      const std::string paged =
          error_of([&] { TestType::decode(p.inputs(), {}, r.view(), b.options); });
      CHECK(names(paged, std::string(TestType::decode_prefix) + "." + b.field));
      CHECK(paged.find(decode_fn) != std::string::npos);
      for (const float x : r.out) CHECK(x == 42.0f);
      for (const float x : r.lse) CHECK(x == 42.0f);
      CHECK(error_of([&] { (void)TestType::decode(p.inputs(), {}, b.options); }) == paged);
    }
  }
}

TEMPLATE_TEST_CASE("dense entry points reject a bad group or output, naming the argument",
                   "[recurrences][errors]", AMLA_ALL_RECURRENCES) {
  using Scalar = typename TestType::Scalar;
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const vt::Inputs in = vt::random_inputs(4, 10, 8, 6, 1, 1.0f);
  const HeadGroup good = in.group({});
  const auto message = [](const HeadGroup& g, Eigen::Index rows, Eigen::Index cols, std::size_t n) {
    Matrix out(rows, cols);
    std::vector<Scalar> lse(n);
    return error_of([&] { TestType::attention(g, typename TestType::Options{}, out, lse); });
  };
  const auto check = [&](const HeadGroup& g, Eigen::Index rows, Eigen::Index cols, std::size_t n,
                         const std::string& needle) {
    const std::string m = message(g, rows, cols, n);
    CAPTURE(TestType::name, needle, m);
    CHECK(m.find(needle) != std::string::npos);
    CHECK(m.find(TestType::dense_fn) != std::string::npos);
  };
  CHECK(message(good, 4, 6, 4).empty());
  for (const float s : {0.0f, -1.0f, finf, std::numeric_limits<float>::quiet_NaN()}) {
    HeadGroup g = good;
    g.scale = s;
    check(g, 4, 6, 4, "'group.scale'");
  }
  const MatrixF k_bad = MatrixF::Zero(10, 7);
  check(HeadGroup{in.q, k_bad, in.kv_v, {}, good.scale}, 4, 6, 4, "'group.k'");
  const MatrixF v_bad = MatrixF::Zero(9, 6);
  check(HeadGroup{in.q, in.k, v_bad, {}, good.scale}, 4, 6, 4, "'group.v'");
  check(good, 4, 5, 4, "'out'");
  check(good, 5, 6, 4, "'out'");
  check(good, 4, 6, 3, "'lse'");
  const std::vector<int> too_few = {1, 2};
  check(in.group(too_few), 4, 6, 4, "'group.visible'");
  const std::vector<int> negative = {1, 2, -1, 3};
  check(in.group(negative), 4, 6, 4, "'group.visible' = visible[2] = -1");
  const std::vector<int> too_many = {1, 2, 11, 3};
  check(in.group(too_many), 4, 6, 4, "'group.visible' = visible[2] = 11");
}

TEMPLATE_TEST_CASE("decode entry points validate their outputs; lse is optional",
                   "[recurrences][errors]", AMLA_ALL_RECURRENCES) {
  using Scalar = typename TestType::Scalar;
  const auto p = at::ProblemBuilder()
                     .heads(4, 2)
                     .dims(16, 8)
                     .page_size(4)
                     .seqlens({10, 5})
                     .seed(3)
                     .build<float>();
  at::DecodeResult<Scalar, Scalar> r(p.shape);
  std::vector<Scalar> short_out(r.out.size() - 1), bad_lse(r.lse.size() + 1);
  CAPTURE(TestType::name);
  CHECK(
      names(error_of([&] {
              TestType::decode(p.inputs(), {}, at::DecodeOutputs<Scalar, Scalar>{short_out, r.lse});
            }),
            "out"));
  CHECK(names(error_of([&] {
                TestType::decode(p.inputs(), {}, at::DecodeOutputs<Scalar, Scalar>{r.out, bad_lse});
              }),
              "lse"));
  const auto want = TestType::decode(p.inputs());
  CHECK_NOTHROW(TestType::decode(p.inputs(), {}, at::DecodeOutputs<Scalar, Scalar>{r.out, {}}));
  CHECK(same_bits(r.out, want.out));
}

// ---- The FlashMLA and ETAP schedules: Base's mathematics in another order ------------------

#define AMLA_SCHEDULES Seesaw, TransposedForward, TransposedReverse

TEMPLATE_TEST_CASE("float32 mode agrees with the float64 reference to 1e-5", "[recurrences]",
                   AMLA_SCHEDULES) {
  struct Case {
    int rows, n_keys, d_qk, d_v, block;
    bool causal;
  };
  const std::vector<Case> cases = {{1, 1, 8, 4, 64, false},       {3, 63, 32, 16, 64, false},
                                   {16, 64, 64, 32, 64, false},   {16, 65, 64, 32, 64, true},
                                   {64, 128, 96, 64, 64, false},  {4, 192, 40, 24, 64, true},
                                   {128, 300, 72, 64, 64, false}, {5, 37, 16, 7, 8, true},
                                   {2, 9, 8, 1, 1, false},        {8, 513, 64, 48, 128, false}};
  int seed = 1;
  for (const auto& c : cases) {
    CAPTURE(TestType::name, c.rows, c.n_keys, c.d_qk, c.d_v, c.block, c.causal);
    const vt::Inputs in = vt::random_inputs(c.rows, c.n_keys, c.d_qk, c.d_v, seed++, 1.5f);
    const std::vector<int> vis =
        c.causal ? vt::causal_visible(c.rows, c.n_keys, /*s_q=*/std::min(c.rows, 4))
                 : std::vector<int>{};
    const HeadGroup g = in.group(vis);
    const at::GoldenResult ref = at::golden_attention(g);
    const auto r = TestType::attention(g, TestType::options(precision::float32, c.block));
    CHECK(vt::relative_error(r.out, ref.out) <= 1e-5);
    CHECK(vt::max_row_relative_error(r.out, ref.out) <= 1e-5);
    for (int i = 0; i < c.rows; ++i) {
      CHECK(std::abs(r.lse(i) - ref.lse(i)) <= 1e-5 * std::max(1.0, std::abs(ref.lse(i))));
    }
  }
}

TEMPLATE_TEST_CASE("bf16 mode agrees with the float64 reference at the BF16 level", "[recurrences]",
                   AMLA_SCHEDULES) {
  const vt::Inputs in = vt::random_inputs(32, 700, 96, 64, 11, 1.0f);
  const HeadGroup g = in.group({});
  const at::GoldenResult ref = at::golden_attention(g);
  const auto raw = TestType::attention(g, TestType::options(precision::bf16, 64));
  for (const bool out_bf16 : {false, true}) {
    CAPTURE(TestType::name, out_bf16);
    MatrixF out = raw.out;
    if (out_bf16) amla::round_bf16_inplace(out);  // the kernel's output cast
    const double err = vt::relative_error(out, ref.out);
    // P rounded to BF16 (unit roundoff 2^-8) and, with out_bf16, the output too.
    CHECK(err <= 6e-3);
    CHECK(err >= 1e-5);  // the BF16 casts really happen: far above the float32 mode's error
  }
}

TEMPLATE_TEST_CASE("float32 mode equals Base's float32 result closely", "[recurrences][base]",
                   AMLA_SCHEDULES) {
  const vt::Inputs in = vt::random_inputs(48, 1000, 64, 48, 51, 2.0f);
  const std::vector<int> vis = vt::causal_visible(48, 1000, 3);
  const HeadGroup g = in.group(vis);
  for (const int block : {64, 512}) {
    CAPTURE(TestType::name, block);
    const at::BaseResult base = at::base_attention(g, {precision::float32, block});
    const auto r = TestType::attention(g, TestType::options(precision::float32, block));
    // The same mathematics in FP32 in another order: FP32 rounding apart, nothing more.
    CHECK(vt::relative_error(r.out, base.out) <= 2e-6);
    CHECK(vt::max_row_relative_error(r.out, base.out) <= 4e-6);
    for (Eigen::Index i = 0; i < g.rows(); ++i) {
      CHECK(r.lse(i) == Approx(base.lse(i)).epsilon(1e-6).margin(1e-6));
    }
  }
}

TEMPLATE_TEST_CASE("bf16 mode is Base's mathematics at the BF16 level", "[recurrences][base]",
                   AMLA_SCHEDULES) {
  const vt::Inputs in = vt::random_inputs(64, 1500, 96, 64, 52, 1.0f);
  const HeadGroup g = in.group({});
  const at::GoldenResult ref = at::golden_attention(g);
  const at::BaseResult base = at::base_attention(g, {precision::bf16, 64});
  const double base_err = vt::relative_error(base.out, ref.out);
  const auto r = TestType::attention(g, TestType::options(precision::bf16, 64));
  const double err = vt::relative_error(r.out, ref.out);
  CAPTURE(TestType::name);
  // Both cast P to BF16 once per product: the same error level, and close to each other.
  CHECK(err <= 1.25 * base_err);
  CHECK(err >= 0.8 * base_err);
  CHECK(vt::relative_error(r.out, base.out) <= 1.5 * base_err);
}
