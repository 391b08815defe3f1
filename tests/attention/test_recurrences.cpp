// The contract every recurrence keeps (golden, Base, AMLA in its three rescale modes, seesaw,
// transposed in both block orders, split-KV), tested once over all of them: empty and fully masked
// rows give out = 0 and lse = -inf, keys no row sees (NaN-poisoned pages and slots) are never read
// and values a row does not see never reach it, NaN and Inf among what a row reads reach it as
// golden's arithmetic carries them and what FP32 cannot hold loses the row to NaN
// (problem/conventions.hpp), results do not depend on the thread count, bad options, outputs and
// shapes whose size products wrap are rejected naming the field, the owning overloads return what
// the buffer overloads write, and the paged entry points agree with golden; sparse top-k problems
// (problem/sparse.hpp) and attention sinks (problem/conventions.hpp) against a float64 reference
// written here. Each recurrence's own mathematics is tested in its own file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
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
#include "common/reduced.hpp"

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

/// The entry points at::<stem>_attention (both overloads) and at::<stem>_decode, the function
/// names their errors give, and the options' path in decode errors (`decode_prefix`).
#define AMLA_ENTRY_POINTS(stem, decode_path)                            \
  static constexpr const char* dense_fn = #stem "_attention";           \
  static constexpr const char* decode_fn = #stem "_decode";             \
  static constexpr const char* decode_prefix = decode_path;             \
  static constexpr auto attention = AMLA_FORWARD(at::stem##_attention); \
  static constexpr const auto& decode = at::stem##_decode

/// What the kernel recurrences share; each adapter states what differs. options() builds the
/// {mode, block_size} aggregate that Base and seesaw take.
template <class Opts>
struct Kernel {
  using Scalar = float;
  using Options = Opts;
  static constexpr bool has_options = true;
  static constexpr bool one_key_exact = false;  ///< a row with one key gets its value exactly
  /// Whether the recurrence folds the max into base 2 once (m = RN(max * c)): such a schedule
  /// loses the row's largest weight at huge softmax scales (seesaw.hpp).
  static constexpr bool base2_folded_max = false;
  /// Whether the recurrence has precision::fp16 (every kernel recurrence but AMLA).
  static constexpr bool has_fp16 = true;
  static constexpr const char* dense_prefix = "options";
  static Options options(precision mode, int block) { return {mode, block}; }
};

struct Golden {
  static constexpr const char* name = "golden";
  using Scalar = double;
  static constexpr bool has_options = false;
  static constexpr bool one_key_exact = true;
  static constexpr bool base2_folded_max = false;
  static constexpr const char* dense_fn = "golden_attention";
  using Options = at::GoldenOptions;
  static Options options(precision, int) { return {}; }
  static constexpr auto attention = [](const HeadGroup& g, const Options&, auto&&... out) {
    return at::golden_attention(g, out...);
  };
  static constexpr const auto& decode = at::golden_decode;
};

struct Base : Kernel<at::BaseOptions> {
  static constexpr const char* name = "base";
  static constexpr bool one_key_exact = true;
  AMLA_ENTRY_POINTS(base, "base");
};

struct Amla : Kernel<at::AmlaOptions> {
  static constexpr const char* name = "amla";
  static constexpr bool has_fp16 = false;
  AMLA_ENTRY_POINTS(amla, "amla");
  static Options options(precision mode, int block) {
    Options o;
    o.mode = mode;
    o.block_size = block;
    return o;
  }
};

/// AMLA in its checked and safe rescale modes (Amla is the hardware mode).
template <amla::pow2_mode Mode>
struct AmlaMode : Amla {
  static constexpr const char* name =
      Mode == amla::pow2_mode::checked ? "amla checked" : "amla safe";
  static Options options(precision mode, int block) {
    Options o = Amla::options(mode, block);
    o.rescale = Mode;
    return o;
  }
};
using AmlaChecked = AmlaMode<amla::pow2_mode::checked>;
using AmlaSafe = AmlaMode<amla::pow2_mode::safe>;

struct Seesaw : Kernel<at::SeesawOptions> {
  static constexpr const char* name = "seesaw";
  static constexpr bool base2_folded_max = true;
  AMLA_ENTRY_POINTS(seesaw, "seesaw");
};

template <at::kv_block_order Order>
struct Transposed : Kernel<at::TransposedOptions> {
  static constexpr const char* name =
      Order == at::kv_block_order::forward ? "transposed forward" : "transposed reverse";
  static constexpr bool base2_folded_max = true;
  AMLA_ENTRY_POINTS(transposed, "transposed");
  static Options options(precision mode, int block) { return {{mode, block}, Order}; }
};
using TransposedForward = Transposed<at::kv_block_order::forward>;
using TransposedReverse = Transposed<at::kv_block_order::reverse>;

struct SplitKv : Kernel<at::SplitKvOptions> {
  static constexpr const char* name = "split-KV";
  static constexpr bool one_key_exact = true;
  static constexpr const char* dense_prefix = "options.split";
  AMLA_ENTRY_POINTS(split_kv, "split.split");
  static Options options(precision mode, int block) { return {3, {mode, block}}; }
};

#define AMLA_ALL_RECURRENCES \
  Golden, Base, Amla, Seesaw, TransposedForward, TransposedReverse, SplitKv
#define AMLA_KERNEL_RECURRENCES Base, Amla, Seesaw, TransposedForward, TransposedReverse, SplitKv
/// Every recurrence in every form that problem/conventions.hpp's contract binds.
#define AMLA_CONTRACT_RECURRENCES \
  Golden, Base, Amla, AmlaChecked, AmlaSafe, Seesaw, TransposedForward, TransposedReverse, SplitKv

/// The precision modes a recurrence runs in (golden: one, float64). with_fp16 = false leaves
/// fp16 out where a test's values lie outside FP16's range (its operands would become Inf, which
/// golden on the float values never sees).
template <class R>
std::vector<precision> modes(bool with_fp16 = true) {
  if constexpr (R::has_options) {
    if (R::has_fp16 && with_fp16) return {precision::bf16, precision::float32, precision::fp16};
    return {precision::bf16, precision::float32};
  } else {
    return {precision::float32};
  }
}

/// The float64 tolerance of a mode: FP32 agreement, the BF16 level, or the FP16 level (an FP16
/// significand has 3 bits more than a BF16 one: unit roundoff 2^-11 against 2^-8).
double tolerance(precision mode, double bf16_level) {
  if (mode == precision::bf16) return bf16_level;
  if (mode == precision::fp16) return bf16_level / 8.0;
  return 1e-5;
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
  const auto p =
      vt::builder({.heads = {2, 1}, .s_q = 4, .dims = {8, 8}, .page_size = 2, .seqlens = {3, 0}})
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
    const bool half = mode == precision::fp16;
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
      const MatrixF v0 = bf     ? amla::rounded_bf16(in.kv_v.row(0))
                         : half ? amla::rounded_fp16(in.kv_v.row(0))
                                : MatrixF(in.kv_v.row(0));
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
  vt::Inputs in = vt::random_inputs(2, 20, 8, 4, 3, 1.0f);
  in.kv_v(5, 1) = std::numeric_limits<float>::quiet_NaN();
  const auto r = TestType::attention(in.group({}), TestType::options(precision::bf16, 8));
  CHECK(std::isnan(r.out(0, 1)));
  CHECK(std::isnan(r.out(1, 1)));
  CHECK(std::isfinite(r.out(0, 0)));
}

// ---- Paged problems against golden ----------------------------------------------------------

namespace {

/// Recurrence R over the paged sweep in modes `first` and `second`: calls
/// check(golden's result, R's in `first`, R's in `second`) for each case, the case captured.
template <class R, class Check>
void sweep_two_modes(precision first, precision second, Check&& check) {
  vt::for_each_paged_case([&](const auto& p, const at::DecodeOptions& o, int block) {
    const auto want = at::golden_decode(p.inputs(), o);
    CAPTURE(R::name, p.shape.h_q, p.shape.h_kv, p.shape.s_q, p.shape.page_size, block, o.causal,
            p.v_in_kv());
    check(want, R::decode(p.inputs(), o, R::options(first, block)),
          R::decode(p.inputs(), o, R::options(second, block)));
  });
}

/// Recurrence R in `mode` (block 64) on pb's problem with its values stored as T (bf16 or fp16)
/// and as float, T's output cast on: both storages give the same bits, T-exact outputs, and
/// golden's result within `tol`.
template <class R, class T>
void check_cache_storage(const at::ProblemBuilder& pb, precision mode, double tol) {
  const auto pt = pb.build<T>();
  const auto p32 = pb.build<float>();  // the same values stored as float
  constexpr bool bf = std::is_same_v<T, amla::bf16>;
  at::DecodeOptions o;
  (bf ? o.round_output_bf16 : o.round_output_fp16) = true;  // the kernel's output cast
  const auto want = at::golden_decode(pt.inputs(), {});
  const auto a = R::decode(pt.inputs(), o, R::options(mode, 64));
  const auto b = R::decode(p32.inputs(), o, R::options(mode, 64));
  CAPTURE(R::name);
  CHECK(a.out == b.out);
  CHECK(a.lse == b.lse);
  CHECK(vt::rel_frobenius(a.out, want.out) <= tol);
  for (const auto x : a.out) {
    CHECK((bf ? amla::is_bf16_exact(static_cast<float>(x))
              : amla::is_fp16_exact(static_cast<float>(x))));
  }
}

/// ||out - ref||_F / ||ref||_F of a dense result, after the kernel's output cast to T's format
/// (bf16 or fp16) when `cast`.
template <class T>
double output_error(MatrixF out, const amla::MatrixD& ref, bool cast) {
  if (cast && std::is_same_v<T, amla::bf16>) amla::round_bf16_inplace(out);
  if (cast && std::is_same_v<T, amla::fp16>) amla::round_fp16_inplace(out);
  return vt::relative_error(out, ref);
}

}  // namespace

TEMPLATE_TEST_CASE("paged: every recurrence matches golden over the sweep, poisoned pages unread",
                   "[recurrences][decode]", AMLA_KERNEL_RECURRENCES) {
  sweep_two_modes<TestType>(
      precision::float32, precision::bf16, [](const auto& want, const auto& f32, const auto& b16) {
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
  // h_q 128, d_qk 576, d_v 512 (V = the first 512 columns of K), 1000 keys over 64-key pages
  // (sanitizer builds: 300, five pages).
  check_cache_storage<TestType, amla::bf16>(
      at::ProblemBuilder::deepseek_mla(1, amla_test::reduced ? 300 : 1000).seed(9), precision::bf16,
      5e-3);
}

/// The kernel recurrences that have precision::fp16 (all but AMLA, which stays BF16).
#define AMLA_FP16_RECURRENCES Base, Seesaw, TransposedForward, TransposedReverse, SplitKv

TEMPLATE_TEST_CASE("paged fp16: every recurrence matches golden at the FP16 level",
                   "[recurrences][decode][fp16]", AMLA_FP16_RECURRENCES) {
  sweep_two_modes<TestType>(
      precision::bf16, precision::fp16, [](const auto& want, const auto& b16, const auto& f16) {
        for (const float x : f16.out) REQUIRE(std::isfinite(x));  // poisoned pages never read
        const double err16 = vt::rel_frobenius(f16.out, want.out);
        CHECK(err16 <= 1e-2 / 8.0);
        CHECK(err16 <= vt::rel_frobenius(b16.out, want.out));  // 3 more significand bits for P
        CHECK(vt::max_lse_error(f16.lse, want.lse) <= 1e-5);
      });
}

TEMPLATE_TEST_CASE("paged fp16: fp16 and float caches of the same values give the same result",
                   "[recurrences][decode][fp16]", AMLA_FP16_RECURRENCES) {
  // The DeepSeek shape with FP16 values, stored as FP16 and as float; the FP16 output cast. 700
  // keys (sanitizer builds: 300).
  check_cache_storage<TestType, amla::fp16>(
      at::ProblemBuilder::deepseek_mla(1, amla_test::reduced ? 300 : 700).seed(19).round_to_fp16(),
      precision::fp16, 1e-3);
}

TEMPLATE_TEST_CASE("dense fp16: the mode rounds operands that are not FP16 values",
                   "[recurrences][fp16]", AMLA_FP16_RECURRENCES) {
  vt::Inputs in = vt::random_inputs(8, 130, 32, 16, 5, 1.0f);
  for (MatrixF* m : {&in.q, &in.k, &in.kv_v}) amla::round_fp16_inplace(*m);
  const auto opt = TestType::options(precision::fp16, 64);
  const auto exact = TestType::attention(in.group({}), opt);
  // Perturb below half an FP16 ulp (2^-11 relative at least, for normal values): the fp16 mode
  // must not see it.
  vt::Inputs perturbed = in;
  for (MatrixF* m : {&perturbed.q, &perturbed.k, &perturbed.kv_v}) {
    for (Eigen::Index i = 0; i < m->size(); ++i) {
      float& x = m->data()[i];
      if (std::abs(x) >= 6.2e-5f) x = x + std::ldexp(std::abs(x), -13);  // FP16 normals
    }
  }
  const auto rounded = TestType::attention(perturbed.group({}), opt);
  CAPTURE(TestType::name);
  CHECK(rounded.out == exact.out);
  CHECK(rounded.lse == exact.lse);
  // ... and a perturbation of a whole FP16 ulp is seen.
  vt::Inputs moved = in;
  moved.kv_v(0, 0) = amla::fp16::from_bits(static_cast<std::uint16_t>(
                                               amla::fp16::from_float(in.kv_v(0, 0)).bits + 1u))
                         .to_float();
  CHECK(TestType::attention(moved.group({}), opt).out != exact.out);
}

TEMPLATE_TEST_CASE("fp16 mode agrees with the float64 reference at the FP16 level",
                   "[recurrences][fp16]", AMLA_FP16_RECURRENCES) {
  const vt::Inputs in = vt::random_inputs(32, 700, 96, 64, 11, 1.0f);
  const HeadGroup g = in.group({});
  const at::GoldenResult ref = at::golden_attention(g);
  const auto b16 = TestType::attention(g, TestType::options(precision::bf16, 64));
  const auto f16 = TestType::attention(g, TestType::options(precision::fp16, 64));
  const auto f32 = TestType::attention(g, TestType::options(precision::float32, 64));
  for (const bool out_fp16 : {false, true}) {
    CAPTURE(TestType::name, out_fp16);
    const double err = output_error<amla::fp16>(f16.out, ref.out, out_fp16);
    // Q, K, V and P rounded to FP16 (unit roundoff 2^-11), and with out_fp16 the output too:
    // the BF16 mode's bound divided by 2^3.
    CHECK(err <= 6e-3 / 8.0);
    CHECK(err <= vt::relative_error(b16.out, ref.out) / 2.0);
    CHECK(err >= 10.0 * vt::relative_error(f32.out, ref.out));  // the FP16 casts really happen
  }
}

// ---- Threads ------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("paged: results do not depend on the thread count", "[recurrences][threads]",
                   AMLA_ALL_RECURRENCES) {
  // Few groups (row-chunk parallelism) and many groups (group parallelism), both caches.
  for (const int batch : {1, 3}) {
    const auto p =
        vt::builder(
            {.heads = {128, 1}, .s_q = 2, .dims = {64, 32}, .page_size = 16, .seqlens = {300}})
            .batch(batch)
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
  // The DeepSeek shape with two sequences of different lengths and the default options
  // (sanitizer builds: half as long).
  const auto p =
      at::ProblemBuilder::deepseek_mla(2, 0)
          .seqlens(amla_test::reduced ? std::vector<int>{650, 300} : std::vector<int>{1300, 600})
          .seed(9)
          .build<amla::bf16>();
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

  const auto p =
      vt::builder(
          {.heads = {6, 2}, .s_q = 2, .dims = {16, 8}, .page_size = 4, .seqlens = {9, 0, 30}})
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
      CHECK(paged.find(TestType::decode_fn) != std::string::npos);
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

TEMPLATE_TEST_CASE("decode entry points validate their outputs, lse is optional",
                   "[recurrences][errors]", AMLA_ALL_RECURRENCES) {
  using Scalar = typename TestType::Scalar;
  const auto p = vt::builder({.heads = {4, 2}, .dims = {16, 8}, .page_size = 4, .seqlens = {10, 5}})
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

TEMPLATE_TEST_CASE("shapes whose size products wrap to 0 are rejected before any work",
                   "[recurrences][errors][overflow]", AMLA_ALL_RECURRENCES) {
  // Each product is 2^32 in an int or 2^64 in a 64-bit count, which wraps to exactly 0: read as
  // written, the shape would describe no head group, head groups of no row, or a kv cache of no
  // element behind an empty span. Every decode entry point must name the product and write
  // nothing; the spans are empty because the shape is checked before them.
  using Scalar = typename TestType::Scalar;
  struct Wrap {
    const char* product;
    int batch, s_q, h_q, h_kv, d_qk, num_pages, page_size;
  };
  const Wrap wraps[] = {
      {"shape.batch * shape.h_kv", 1 << 16, 1, 1 << 16, 1 << 16, 1, 1, 1},
      {"shape.s_q * shape.h_q", 1, 1 << 16, 1 << 16, 1, 1, 1, 1},
      {"shape (kv elements)", 1, 1, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16},
  };
  for (const Wrap& w : wraps) {
    CAPTURE(TestType::name, w.product);
    at::DecodeShape s;
    s.batch = w.batch;
    s.s_q = w.s_q;
    s.h_q = w.h_q;
    s.h_kv = w.h_kv;
    s.d_qk = w.d_qk;
    s.d_v = 1;
    s.num_pages = w.num_pages;
    s.page_size = w.page_size;
    s.max_pages_per_seq = 1;
    const at::DecodeInputs<float> in{s, {}, {}, {}, {}, {}};
    std::vector<Scalar> out(4, Scalar{42}), lse(4, Scalar{42});
    const std::string m = error_of([&] {
      TestType::decode(in, {}, at::DecodeOutputs<Scalar, Scalar>{out, lse});
    });
    CHECK(names(m, w.product));
    for (const Scalar x : out) CHECK(x == Scalar{42});
    for (const Scalar x : lse) CHECK(x == Scalar{42});
    // The owning overload refuses before it allocates outputs of the wrapped sizes.
    CHECK(error_of([&] { (void)TestType::decode(in); }) == m);
  }
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
    const double err = output_error<amla::bf16>(raw.out, ref.out, out_bf16);
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

// ---- The contract of a row: non-finite values and FP32's limits (problem/conventions.hpp) ---

namespace {

constexpr float fnan = std::numeric_limits<float>::quiet_NaN();

/// Checks one row of a recurrence's result against golden's row as problem/conventions.hpp
/// promises: an empty golden row is empty, a lost golden row (lse NaN) is NaN throughout, and
/// otherwise each element is NaN, infinite or finite as golden's is, the lse finite, and the
/// finite elements within `tol` of golden (relative, over the row).
template <class Result>
void check_row_follows_golden(const Result& r, const at::GoldenResult& ref, Eigen::Index row,
                              double tol) {
  CAPTURE(row, ref.lse(row), static_cast<double>(r.lse(row)));
  if (ref.lse(row) == -std::numeric_limits<double>::infinity()) {
    CHECK(r.lse(row) == -finf);
    CHECK(r.out.row(row).isZero(0.0));
    return;
  }
  if (std::isnan(ref.lse(row))) {
    CHECK(std::isnan(r.lse(row)));
    for (Eigen::Index d = 0; d < ref.out.cols(); ++d) CHECK(std::isnan(r.out(row, d)));
    return;
  }
  CHECK(std::isfinite(r.lse(row)));
  double num = 0.0, den = 0.0;
  for (Eigen::Index d = 0; d < ref.out.cols(); ++d) {
    const double want = ref.out(row, d);
    const double got = static_cast<double>(r.out(row, d));
    CAPTURE(d, want, got);
    if (std::isnan(want)) {
      CHECK(std::isnan(got));
    } else if (std::isinf(want)) {
      CHECK(!std::isfinite(got));
    } else {
      REQUIRE(std::isfinite(got));
      num += (got - want) * (got - want);
      den += want * want;
    }
  }
  CHECK(std::sqrt(num) <= tol * std::sqrt(den) + 1e-30);
}

/// Whether two result rows are equal element for element (NaN never equals: callers pass rows
/// that must be finite or zero).
template <class A, class B>
bool rows_equal(const A& a, const B& b, Eigen::Index row) {
  return a.out.row(row) == b.out.row(row) && a.lse(row) == b.lse(row);
}

}  // namespace

TEMPLATE_TEST_CASE(
    "a NaN or Inf in a row's q or in K of a key it sees reaches that row as golden's",
    "[recurrences][nonfinite]", AMLA_CONTRACT_RECURRENCES) {
  // 6 rows over 40 keys in blocks of 8: rows 0-3 see every key, row 4 the first 12, row 5 none.
  const std::vector<int> vis = {40, 40, 40, 40, 12, 0};
  const vt::Inputs clean = vt::random_inputs(6, 40, 16, 8, 61, 1.0f);
  struct Poison {
    const char* what;
    bool in_q;
    Eigen::Index at;  ///< q row, or key
    float value;
  };
  const Poison poisons[] = {
      {"NaN in q of row 1", true, 1, fnan},
      {"+inf in q of row 2", true, 2, finf},
      {"-inf in q of row 3", true, 3, -finf},
      {"NaN in q of the empty row 5", true, 5, fnan},
      {"NaN in K of key 20", false, 20, fnan},
      {"+inf in K of key 20", false, 20, finf},
      {"-inf in K of key 3 (row 4 sees it)", false, 3, -finf},
  };
  for (const Poison& poison : poisons) {
    vt::Inputs in = clean;
    if (poison.in_q) {
      in.q(poison.at, 3) = poison.value;
    } else {
      in.k(poison.at, 3) = poison.value;
    }
    const HeadGroup g = in.group(vis);
    const at::GoldenResult ref = at::golden_attention(g);
    for (const precision mode : modes<TestType>()) {
      CAPTURE(TestType::name, poison.what, static_cast<int>(mode));
      const auto opt = TestType::options(mode, 8);
      const auto r = TestType::attention(g, opt);
      const auto base = TestType::attention(clean.group(vis), opt);
      for (Eigen::Index row = 0; row < 6; ++row) {
        check_row_follows_golden(r, ref, row, tolerance(mode, 1e-2));
        // A row that does not read the poisoned value gets exactly its clean result.
        const bool reads =
            poison.in_q ? row == poison.at : vis[static_cast<std::size_t>(row)] > poison.at;
        if (!reads) CHECK(rows_equal(r, base, row));
      }
    }
  }
  // Golden itself: a NaN in q or K and a +inf score lose the row; a -inf score with a finite max
  // only drops its key.
  vt::Inputs in = clean;
  in.q(1, 3) = fnan;
  in.k(3, 3) = -finf * (clean.q(4, 3) > 0 ? 1.0f : -1.0f);  // row 4 scores key 3 at -inf
  const at::GoldenResult ref = at::golden_attention(in.group(vis));
  CHECK(std::isnan(ref.lse(1)));
  CHECK(std::isfinite(ref.lse(4)));
  CHECK(ref.out.row(4).allFinite());
}

TEMPLATE_TEST_CASE("a NaN or Inf in V of a key a row sees reaches that output column only",
                   "[recurrences][nonfinite]", AMLA_CONTRACT_RECURRENCES) {
  const std::vector<int> vis = {40, 40, 33, 12, 0};
  const vt::Inputs clean = vt::random_inputs(5, 40, 16, 8, 62, 1.0f);
  for (const float value : {fnan, finf, -finf}) {
    for (const Eigen::Index key : {Eigen::Index{0}, Eigen::Index{20}, Eigen::Index{39}}) {
      vt::Inputs in = clean;
      in.kv_v(key, 5) = value;
      const HeadGroup g = in.group(vis);
      const at::GoldenResult ref = at::golden_attention(g);
      for (const precision mode : modes<TestType>()) {
        CAPTURE(TestType::name, value, key, static_cast<int>(mode));
        const auto opt = TestType::options(mode, 8);
        const auto r = TestType::attention(g, opt);
        const auto base = TestType::attention(clean.group(vis), opt);
        for (Eigen::Index row = 0; row < 5; ++row) {
          CAPTURE(row);
          check_row_follows_golden(r, ref, row, tolerance(mode, 1e-2));
          CHECK(r.lse(row) == base.lse(row));  // the lse never reads V
          for (Eigen::Index d = 0; d < 8; ++d) {
            if (d == 5 && vis[static_cast<std::size_t>(row)] > key) {
              if (std::isnan(value)) CHECK(std::isnan(r.out(row, d)));
              if (std::isinf(value)) CHECK(!std::isfinite(r.out(row, d)));
            } else {
              CHECK(r.out(row, d) == base.out(row, d));  // bit for bit but for the sign of 0
            }
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("scores past FP32's range: golden's value, or NaN, never an empty row",
                   "[recurrences][nonfinite]", AMLA_CONTRACT_RECURRENCES) {
  // q = 1e20, k = 1e20 (1, -1, 2): the scores 1e40, -1e40, 2e40 overflow FP32 but not float64.
  MatrixF q = MatrixF::Constant(1, 1, 1e20f);
  MatrixF k(3, 1);
  k << 1e20f, -1e20f, 2e20f;
  MatrixF v(3, 2);
  v << 10, 1, 20, 2, 30, 3;
  const at::GoldenResult ref = at::golden_attention(HeadGroup{q, k, v, {}, 1.0f});
  CHECK(ref.out(0, 0) == 30.0);
  CHECK(ref.lse(0) == Approx(2e40));
  // Every FP32 score -inf (k = -1e20): golden still finite (the largest, -1e40, wins).
  const MatrixF k_neg = MatrixF::Constant(3, 1, -1e20f);
  const at::GoldenResult ref_neg = at::golden_attention(HeadGroup{q, k_neg, v, {}, 1.0f});
  CHECK(ref_neg.out(0, 0) == Approx(20.0));
  for (const MatrixF* keys : std::vector<const MatrixF*>{&k, &k_neg}) {
    for (const precision mode : modes<TestType>()) {
      CAPTURE(TestType::name, static_cast<int>(mode), (*keys)(0, 0));
      const auto r =
          TestType::attention(HeadGroup{q, *keys, v, {}, 1.0f}, TestType::options(mode, 2));
      if constexpr (std::is_same_v<TestType, Golden>) {
        CHECK(r.out.allFinite());
      } else {
        CHECK(std::isnan(r.lse(0)));  // the FP32 arithmetic cannot hold it: the row is lost
        CHECK(std::isnan(r.out(0, 0)));
        CHECK(std::isnan(r.out(0, 1)));
      }
    }
  }
}

TEMPLATE_TEST_CASE("a huge softmax scale: golden's value, or NaN where the schedule loses the row",
                   "[recurrences][nonfinite]", AMLA_CONTRACT_RECURRENCES) {
  vt::Inputs in = vt::random_inputs(4, 20, 8, 4, 63, 1.0f);
  in.scale = 1e30f;
  const HeadGroup g = in.group({});
  const at::GoldenResult ref = at::golden_attention(g);
  for (const precision mode : modes<TestType>()) {
    CAPTURE(TestType::name, static_cast<int>(mode));
    const auto r = TestType::attention(g, TestType::options(mode, 8));
    for (Eigen::Index row = 0; row < 4; ++row) {
      CHECK(r.lse(row) != -finf);  // never an empty row
      if constexpr (TestType::base2_folded_max) {
        // m = RN(max * c) is off by about 1e23 at |m| ~ 1e30: the largest weight is lost.
        CHECK(std::isnan(r.lse(row)));
        for (Eigen::Index d = 0; d < 4; ++d) CHECK(std::isnan(r.out(row, d)));
      } else {
        // One key dominates: the softmax is (almost) one-hot, golden's value at the BF16 level.
        check_row_follows_golden(r, ref, row, tolerance(mode, 1e-2));
      }
    }
  }
}

TEMPLATE_TEST_CASE(
    "paged causal: a NaN or Inf in a key only a later token sees never reaches an "
    "earlier token",
    "[recurrences][nonfinite][masking]", AMLA_CONTRACT_RECURRENCES) {
  // s_q 2, seqlen 6: token 0 sees keys 0-4, token 1 keys 0-5. Key 5 is poisoned in K and V (V in
  // the K cache) or in a separate V cache only. Sequence 1 (9 keys) is left clean.
  for (const bool separate_v : {false, true}) {
    const auto clean =
        vt::builder({.heads = {4, 2}, .s_q = 2, .dims = {16, 8}, .page_size = 4, .seqlens = {6, 9}})
            .separate_v(separate_v)
            .seed(64)
            .build<float>();
    at::DecodeOptions o;
    o.causal = true;
    for (const float value : {fnan, finf, -finf}) {
      auto p = clean;
      for (int g = 0; g < 2; ++g) {
        if (separate_v) {
          p.v[static_cast<std::size_t>(p.value(0, 5, g) - p.v.data()) + 2] = value;
        } else {
          const auto key5 = static_cast<std::size_t>(p.key(0, 5, g) - p.kv.data());
          for (std::size_t d = 0; d < 16; ++d) p.kv[key5 + d] = value;
        }
      }
      const auto ref = at::golden_decode(p.inputs(), o);
      for (const precision mode : modes<TestType>()) {
        CAPTURE(TestType::name, separate_v, value, static_cast<int>(mode));
        const auto opt = TestType::options(mode, 2);
        const auto want = TestType::decode(clean.inputs(), o, opt);
        const auto r = TestType::decode(p.inputs(), o, opt);
        for (int h = 0; h < 4; ++h) {
          CAPTURE(h);
          // Token 0 of sequence 0 and all of sequence 1: exactly the clean result.
          for (int d = 0; d < 8; ++d) CHECK(r.out_row(0, 0, h)[d] == want.out_row(0, 0, h)[d]);
          CHECK(r.lse_at(0, 0, h) == want.lse_at(0, 0, h));
          for (int t = 0; t < 2; ++t) {
            for (int d = 0; d < 8; ++d) CHECK(r.out_row(1, t, h)[d] == want.out_row(1, t, h)[d]);
          }
          // Token 1 reads key 5: as golden says (a poisoned K loses the row, V only column 2).
          const double g_lse = ref.lse_at(0, 1, h);
          if (std::isnan(g_lse)) {
            CHECK(std::isnan(r.lse_at(0, 1, h)));
            for (int d = 0; d < 8; ++d) CHECK(std::isnan(r.out_row(0, 1, h)[d]));
          } else {
            for (int d = 0; d < 8; ++d) {
              CHECK(std::isfinite(r.out_row(0, 1, h)[d]) == std::isfinite(ref.out_row(0, 1, h)[d]));
            }
          }
          if (std::isnan(value)) CHECK(std::isnan(r.out_row(0, 1, h)[2]));
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("dense: values only some rows see never reach the others",
                   "[recurrences][masking]", AMLA_CONTRACT_RECURRENCES) {
  // Visible counts need not be causal: keys 7..31 are seen by some rows only.
  const std::vector<int> vis = {32, 7, 0, 20, 31, 9};
  const vt::Inputs clean = vt::random_inputs(6, 32, 8, 6, 65, 1.0f);
  vt::Inputs in = clean;
  for (const Eigen::Index key : {7, 8, 19, 30, 31}) {
    in.kv_v(key, 1) = fnan;
    in.kv_v(key, 4) = key % 2 == 0 ? finf : -finf;
  }
  for (const precision mode : modes<TestType>()) {
    CAPTURE(TestType::name, static_cast<int>(mode));
    const auto opt = TestType::options(mode, 4);
    const auto want = TestType::attention(clean.group(vis), opt);
    const auto r = TestType::attention(in.group(vis), opt);
    CHECK(rows_equal(r, want, 1));  // sees keys 0-6 only
    CHECK(rows_equal(r, want, 2));  // sees nothing: out 0, lse -inf
    for (const Eigen::Index row : {0, 3, 4, 5}) {
      CAPTURE(row);
      CHECK(std::isnan(r.out(row, 1)));
      CHECK(!std::isfinite(r.out(row, 4)));
      for (const Eigen::Index d : {0, 2, 3, 5}) CHECK(r.out(row, d) == want.out(row, d));
      CHECK(r.lse(row) == want.lse(row));
    }
  }
}

// ---- Sparse top-k and attention sinks -------------------------------------------------------

namespace {

/// out [batch, s_q, h_q, d_v] and lse [batch, h_q, s_q] of a float64 reference written here from
/// the definitions (problem/sparse.hpp, problem/conventions.hpp), one row at a time: the row's keys
/// are its counted valid index entries (a duplicate twice), or every key it sees when dense; the
/// sink joins the denominator; lse is the keys' alone.
struct Reference {
  std::vector<double> out, lse;
};

template <class T>
double value_of(T x) {
  if constexpr (std::is_same_v<T, amla::bf16>) {
    return static_cast<double>(x.to_float());
  } else {
    return static_cast<double>(x);
  }
}

template <class T>
Reference reference_decode(const at::DecodeProblem<T>& p, const amla::SparseTopk& sp,
                           std::span<const float> sink, bool causal) {
  const amla::DecodeShape& s = p.shape;
  Reference ref{std::vector<double>(s.out_elems(), 0.0), std::vector<double>(s.lse_elems())};
  // The default softmax scale, a float (problem/options.hpp).
  const double scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.d_qk)));
  const int hpg = s.h_q / s.h_kv;
  for (int b = 0; b < s.batch; ++b) {
    const int len = p.seqlens[static_cast<std::size_t>(b)];
    for (int t = 0; t < s.s_q; ++t) {
      std::vector<int> keys;
      if (sp.topk > 0) {
        const int n = sp.topk_length.empty()
                          ? sp.topk
                          : sp.topk_length[static_cast<std::size_t>(b * s.s_q + t)];
        for (int i = 0; i < n; ++i) {
          const int key = sp.indices[static_cast<std::size_t>((b * s.s_q + t) * sp.topk + i)];
          if (key >= 0) keys.push_back(key);
        }
      } else {
        const int seen = causal ? std::clamp(len - s.s_q + t + 1, 0, len) : len;
        for (int key = 0; key < seen; ++key) keys.push_back(key);
      }
      for (int h = 0; h < s.h_q; ++h) {
        const int g = h / hpg;
        const std::size_t lse_at = (static_cast<std::size_t>(b) * s.h_q + h) * s.s_q + t;
        double* out = ref.out.data() + ((static_cast<std::size_t>(b) * s.s_q + t) * s.h_q + h) *
                                           static_cast<std::size_t>(s.d_v);
        if (keys.empty()) {
          ref.lse[lse_at] = -std::numeric_limits<double>::infinity();
          continue;
        }
        std::vector<double> x;
        for (const int key : keys) {
          double dot = 0.0;
          for (int d = 0; d < s.d_qk; ++d) {
            dot += value_of(p.query(b, t, h)[d]) * value_of(p.key(b, key, g)[d]);
          }
          x.push_back(scale * dot);
        }
        const double m = *std::max_element(x.begin(), x.end());
        double l = 0.0;
        for (const double xi : x) l += std::exp(xi - m);
        ref.lse[lse_at] = m + std::log(l);
        const double denominator =
            l + (sink.empty() ? 0.0 : std::exp(static_cast<double>(sink[h]) - m));
        for (std::size_t i = 0; i < keys.size(); ++i) {
          const double w = std::exp(x[i] - m) / denominator;
          for (int d = 0; d < s.d_v; ++d) out[d] += w * value_of(p.value(b, keys[i], g)[d]);
        }
      }
    }
  }
  return ref;
}

/// Random index lists over the keys each token may see: about a quarter -1, some duplicates, and
/// optionally topk_length. Lists of tokens that see no key hold -1 only.
struct RandomTopk {
  std::vector<std::int32_t> indices, lengths;
  amla::SparseTopk view(int topk) const { return {topk, indices, lengths}; }
};

RandomTopk random_topk(const amla::DecodeShape& s, const std::vector<std::int32_t>& seqlens,
                       int topk, bool causal, bool with_lengths, unsigned seed) {
  std::mt19937 gen(seed);
  RandomTopk r;
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.s_q; ++t) {
      const int seen = amla::visible_keys(seqlens[static_cast<std::size_t>(b)], s.s_q, t, causal);
      for (int i = 0; i < topk; ++i) {
        const bool invalid = seen == 0 || gen() % 4 == 0;
        r.indices.push_back(invalid ? -1 : static_cast<std::int32_t>(gen() % seen));
      }
      if (with_lengths) r.lengths.push_back(static_cast<std::int32_t>(gen() % (topk + 1)));
    }
  }
  return r;
}

/// The largest |a - b| over finite pairs, relative to the largest |b|; infinity where one is
/// finite and the other is not, or the NaN-ness differs.
template <class A>
double relative_max_error(const std::vector<A>& a, const std::vector<double>& b) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const double x = static_cast<double>(a[i]);
    if (std::isnan(x) != std::isnan(b[i]) || std::isinf(x) != std::isinf(b[i])) {
      return std::numeric_limits<double>::infinity();
    }
    if (std::isfinite(b[i])) {
      worst = std::max(worst, std::abs(x - b[i]));
      scale = std::max(scale, std::abs(b[i]));
    } else if (!std::isnan(b[i]) && x != b[i]) {
      return std::numeric_limits<double>::infinity();
    }
  }
  return scale == 0.0 ? worst : worst / scale;
}

/// The bound of a recurrence's error against the reference in a mode: float64 rounding for
/// golden, FP32's level, the BF16 level, or the FP16 level (3 significand bits more than BF16).
template <class R>
double sparse_bound(precision mode) {
  if constexpr (!R::has_options) return 1e-12;
  if (mode == precision::float32) return 1e-5;
  return mode == precision::bf16 ? 2e-2 : 4e-3;
}

}  // namespace

TEMPLATE_TEST_CASE("sparse: every recurrence matches a float64 reference over odd page sizes",
                   "[recurrences][sparse]", AMLA_CONTRACT_RECURRENCES) {
  // FlashMLA's sparse tests' page sizes; topk 80 over sequences of 0 to 700 keys (topk larger
  // than some of them), GQA and MLA heads, causal and not, with and without topk_length.
  for (const int page : {2, 53, 61, 64, 69, 576}) {
    for (const bool causal : {false, true}) {
      const int h_kv = page % 2 == 0 ? 1 : 2;
      const auto p = vt::builder({.heads = {4, h_kv},
                                  .s_q = 2,
                                  .dims = {24, 16},
                                  .page_size = page,
                                  .seqlens = {700, 37, 0}})
                         .separate_v(page == 61)
                         .seed(static_cast<std::uint64_t>(page))
                         .build<amla::bf16>();
      const RandomTopk lists =
          random_topk(p.shape, p.seqlens, 80, causal, page % 3 == 0, static_cast<unsigned>(page));
      auto in = p.inputs();
      in.sparse = lists.view(80);
      at::DecodeOptions o;
      o.causal = causal;
      const Reference want = reference_decode(p, in.sparse, {}, causal);
      for (const precision mode : modes<TestType>()) {
        CAPTURE(TestType::name, page, causal, static_cast<int>(mode));
        const auto r = TestType::decode(in, o, TestType::options(mode, 16));
        for (const auto x : r.out) REQUIRE(std::isfinite(x));  // poisoned pages never read
        CHECK(relative_max_error(r.out, want.out) <= sparse_bound<TestType>(mode));
        CHECK(relative_max_error(r.lse, want.lse) <=
              std::max(1e-6, sparse_bound<TestType>(mode) / 100));
      }
    }
  }
}

TEMPLATE_TEST_CASE("sparse: a token whose every entry is invalid is an empty row, also with a sink",
                   "[recurrences][sparse][masking]", AMLA_CONTRACT_RECURRENCES) {
  const auto p =
      vt::builder({.heads = {2, 1}, .s_q = 2, .dims = {8, 8}, .page_size = 3, .seqlens = {10, 4}})
          .build<amla::bf16>();
  // (0, 0) all -1; (0, 1) has keys; (1, 0) has keys but topk_length 0; (1, 1) only its first
  // entry counts, and it is -1.
  const std::vector<std::int32_t> idx = {-1, -1, -1, 9, -1, 2, 0, 1, 2, -1, 3, 3};
  const std::vector<std::int32_t> lengths = {3, 3, 0, 1};
  const std::vector<float> sink = {finf, 0.5f};
  for (const bool with_sink : {false, true}) {
    auto in = p.inputs();
    in.sparse = {3, idx, lengths};
    if (with_sink) in.sink = sink;
    const auto r = TestType::decode(in, {}, TestType::options(precision::bf16, 2));
    CAPTURE(TestType::name, with_sink);
    for (const auto& [b, t] : {std::pair{0, 0}, {1, 0}, {1, 1}}) {
      for (int h = 0; h < 2; ++h) {
        CHECK(r.lse_at(b, t, h) == -finf);
        for (int d = 0; d < 8; ++d) CHECK(r.out_row(b, t, h)[d] == 0.0f);
      }
    }
    CHECK(std::isfinite(r.lse_at(0, 1, 0)));
    CHECK(std::isfinite(r.out_row(0, 1, 1)[0]));
  }
}

TEMPLATE_TEST_CASE("sparse: a duplicate index counts twice, topk past the sequence",
                   "[recurrences][sparse]", AMLA_CONTRACT_RECURRENCES) {
  const auto p = vt::builder({.heads = {2, 1}, .dims = {16, 8}, .page_size = 2, .seqlens = {3}})
                     .seed(4)
                     .build<amla::bf16>();
  const std::vector<std::int32_t> twice = {1, 0, 1, -1, -1, -1, -1, -1};  // topk 8 > seqlen 3
  const std::vector<std::int32_t> once = {1, 0, -1, -1, -1, -1, -1, -1};
  auto in = p.inputs();
  in.sparse = {8, twice, {}};
  const Reference want = reference_decode(p, in.sparse, {}, false);
  const auto opt = TestType::options(precision::float32, 2);
  const auto r = TestType::decode(in, {}, opt);
  in.sparse = {8, once, {}};
  const auto single = TestType::decode(in, {}, opt);
  CAPTURE(TestType::name);
  CHECK(relative_max_error(r.out, want.out) <= 1e-5);
  // Key 1 listed twice has twice its weight: lse = log(2 e^x1 + e^x0) differs from the single
  // listing's, and so does out.
  const Reference single_want = reference_decode(p, in.sparse, {}, false);
  CHECK(relative_max_error(single.out, single_want.out) <= 1e-5);
  for (int h = 0; h < 2; ++h) {
    const double x1_share = std::exp(want.lse[static_cast<std::size_t>(h)]) -
                            std::exp(single_want.lse[static_cast<std::size_t>(h)]);
    CHECK(x1_share > 0.0);
    CHECK(r.lse_at(0, 0, h) != single.lse_at(0, 0, h));
  }
  CHECK(relative_max_error(single.out, want.out) > 1e-3);
}

TEMPLATE_TEST_CASE("sparse: keys no counted entry lists are never read", "[recurrences][sparse]",
                   AMLA_CONTRACT_RECURRENCES) {
  auto p =
      vt::builder({.heads = {4, 1}, .s_q = 2, .dims = {16, 8}, .page_size = 5, .seqlens = {40}})
          .seed(6)
          .build<float>();
  // Token 0 lists keys 3, 17, 17, 30 (the last past topk_length 3); token 1 lists 0 and 39.
  const std::vector<std::int32_t> idx = {3, 17, 17, 30, 0, -1, 39, -1};
  const std::vector<std::int32_t> lengths = {3, 4};
  const std::vector<int> listed = {0, 3, 17, 39};
  for (int key = 0; key < 40; ++key) {
    if (std::find(listed.begin(), listed.end(), key) != listed.end()) continue;
    auto* k = const_cast<float*>(p.key(0, key, 0));
    for (int d = 0; d < 16; ++d) k[d] = std::numeric_limits<float>::quiet_NaN();
  }
  auto in = p.inputs();
  in.sparse = {4, idx, lengths};
  const Reference want = reference_decode(p, in.sparse, {}, false);
  for (const precision mode : modes<TestType>()) {
    CAPTURE(TestType::name, static_cast<int>(mode));
    const auto r = TestType::decode(in, {}, TestType::options(mode, 2));
    for (const auto x : r.out) REQUIRE(std::isfinite(x));
    CHECK(relative_max_error(r.out, want.out) <= sparse_bound<TestType>(mode));
  }
}

TEMPLATE_TEST_CASE("sparse: results do not depend on the thread count", "[recurrences][sparse]",
                   AMLA_ALL_RECURRENCES) {
  const auto p =
      vt::builder(
          {.heads = {32, 2}, .s_q = 3, .dims = {32, 16}, .page_size = 7, .seqlens = {300, 90}})
          .build<amla::bf16>();
  const RandomTopk lists = random_topk(p.shape, p.seqlens, 64, true, true, 3);
  auto in = p.inputs();
  in.sparse = lists.view(64);
  at::DecodeOptions o;
  o.causal = true;
  o.threads = 1;
  o.rows_per_task = 5;
  const auto opt = TestType::options(precision::bf16, 16);
  const auto one = TestType::decode(in, o, opt);
  o.threads = 3;
  const auto many = TestType::decode(in, o, opt);
  CAPTURE(TestType::name);
  CHECK(same_bits(many.out, one.out));
  CHECK(same_bits(many.lse, one.lse));
}

TEMPLATE_TEST_CASE("sinks join the denominator, lse is the keys' alone", "[recurrences][sink]",
                   AMLA_CONTRACT_RECURRENCES) {
  // Sinks below, near and far above the rows' lse (about 4 here).
  const std::vector<float> sink = {-3.0f, 4.0f, 1.5f, 30.0f};
  const auto p =
      vt::builder({.heads = {4, 2}, .s_q = 2, .dims = {24, 16}, .page_size = 6, .seqlens = {50, 0}})
          .seed(8)
          .build<amla::bf16>();
  for (const bool sparse : {false, true}) {
    const RandomTopk lists = random_topk(p.shape, p.seqlens, 40, false, false, 5);
    auto in = p.inputs();
    if (sparse) in.sparse = lists.view(40);
    in.sink = sink;
    const Reference want = reference_decode(p, in.sparse, sink, false);
    for (const precision mode : modes<TestType>()) {
      CAPTURE(TestType::name, sparse, static_cast<int>(mode));
      const auto r = TestType::decode(in, {}, TestType::options(mode, 16));
      CHECK(relative_max_error(r.out, want.out) <= sparse_bound<TestType>(mode));
      CHECK(relative_max_error(r.lse, want.lse) <= 1e-6);
      // The empty sequence keeps the empty-row result.
      for (int h = 0; h < 4; ++h) CHECK(r.lse_at(1, 0, h) == -finf);
    }
  }
}

TEMPLATE_TEST_CASE("sinks of -inf, +inf and NaN", "[recurrences][sink]",
                   AMLA_CONTRACT_RECURRENCES) {
  const auto p =
      vt::builder({.heads = {3, 1}, .s_q = 2, .dims = {16, 8}, .page_size = 4, .seqlens = {20, 1}})
          .seed(3)
          .build<amla::bf16>();
  at::DecodeOptions o;
  o.causal = true;  // sequence 1, token 0 sees no key
  const auto opt = TestType::options(precision::bf16, 8);
  const auto plain = TestType::decode(p.inputs(), o, opt);
  const std::vector<float> sink = {-finf, finf, fnan};
  auto in = p.inputs();
  in.sink = sink;
  const auto r = TestType::decode(in, o, opt);
  CAPTURE(TestType::name);
  CHECK(same_bits(r.lse, plain.lse));  // lse never includes the sink
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 2; ++t) {
      const bool empty = b == 1 && t == 0;
      for (int d = 0; d < 8; ++d) {
        // -inf: bit for bit no sink. +inf: out 0. NaN: out NaN. An empty row stays 0.
        CHECK(std::memcmp(&r.out_row(b, t, 0)[d], &plain.out_row(b, t, 0)[d], sizeof(r.out[0])) ==
              0);
        CHECK(r.out_row(b, t, 1)[d] == 0.0f);
        if (empty) {
          CHECK(r.out_row(b, t, 2)[d] == 0.0f);
        } else {
          CHECK(std::isnan(r.out_row(b, t, 2)[d]));
        }
      }
    }
  }
}

TEST_CASE("sparse and sink inputs are validated before anything is written",
          "[recurrences][sparse][errors]") {
  const auto p =
      at::ProblemBuilder().heads(2, 1).dims(8, 8).page_size(4).seqlens({5}).build<amla::bf16>();
  const std::vector<std::int32_t> idx = {0, 5};
  auto in = p.inputs();
  in.sparse = {2, idx, {}};
  at::DecodeResult<float> r(p.shape);
  std::fill(r.out.begin(), r.out.end(), 7.0f);
  const std::string m = amla_test::error_of([&] { at::base_decode(in, {}, r.view()); });
  CHECK(names(m, "sparse.indices"));
  CHECK(m.find("base_decode") != std::string::npos);
  CHECK(m.find("indices[0][0][1] = 5") != std::string::npos);
  for (const float x : r.out) CHECK(x == 7.0f);
  in.sparse = {};
  const std::vector<float> sink(3);
  in.sink = sink;
  CHECK(names(amla_test::error_of([&] { at::split_kv_decode(in, {}, r.view()); }), "sink"));
  for (const float x : r.out) CHECK(x == 7.0f);
}
