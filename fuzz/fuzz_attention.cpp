// fuzz/fuzz_attention.cpp: differential fuzzing of the attention recurrences against golden.
//
// Each input is read as a small paged decode problem (fields below, missing bytes read as 0): a
// random BF16-valued problem from the problem builder (shuffled pages, unused pages and slots
// poisoned with NaN), values injected into q, K or V (NaN, +-Inf, +-0, huge, subnormal, any BF16
// pattern), a causal mask or not, a softmax scale from 1e-30 to 1e30, block sizes, split counts
// and AMLA's options. Every recurrence (golden, Base, AMLA in its three rescale modes, seesaw,
// transposed in both block orders, split-KV) runs on it, and the relations of
// problem/conventions.hpp are checked:
//   * a row that sees no key gets out = 0 and lse = -inf, and only such a row: every other lse is
//     finite or NaN;
//   * keys a row does not see never reach it: with the keys only later tokens see set to NaN, the
//     rows of the earlier tokens are unchanged, in every recurrence;
//   * a row golden loses (lse NaN) is NaN in every recurrence; an out element whose column reads a
//     NaN value is NaN, and one golden gives as NaN or +-inf is not finite, in every recurrence;
//   * where a row reads only moderate values (|x| <= 1e4, scaled scores within 100 of each other
//     in size), its out lies within the recurrence's error bound of golden (FP32: 1e-4, BF16:
//     2^-6, of the largest |V| it reads) and its lse within 1e-4; AMLA's hardware and checked
//     modes only where the report shows no clamp event and no Lemma 3.1 violation; safe AMLA
//     within twice Base's error plus 2^-8;
//   * AMLA's checked mode computes hardware mode's values and both report the same counts, every
//     violation located; split-KV with one split is Base bit for bit; two threads give what one
//     gives, bit for bit;
//   * with the hostile flag, one argument is made invalid and every entry point must throw
//     amla::invalid_argument without writing its outputs;
//   * with the sparse flag, the problem is also run as a sparse top-k problem (problem/sparse.hpp:
//     index lists with -1 entries, duplicates and topk_length drawn from the seed) and with
//     attention sinks (-inf, +inf, NaN, finite and huge ones): a token whose counted entries are
//     all -1 gives every recurrence's rows the empty-row result and only those rows are empty; a
//     row golden loses is NaN in every recurrence; the relations between the recurrences hold;
//     a sink leaves lse unchanged, bit for bit, and divides out by sink_divisor(lse, sink) in the
//     recurrence's own scalar, bit for bit; an index past the keys its token sees, a topk_length
//     past topk or a sink of the wrong size is rejected without writing.
// Nothing may crash or trip AddressSanitizer or UBSan. A failed relation prints what differs
// and aborts, so libFuzzer keeps the input; each such finding becomes a regression test.
//
// Input layout (bytes): 0 flags (bit 0 causal, 1 separate V, 2 bf16 storage, 3 float32 mode,
// 4 hostile, 5 no page shuffle, 6 two threads, 7 sparse), 1 batch, 2 s_q, 3 heads (low 2 bits:
// heads per KV head - 1, bit 2: h_kv 2), 4 d_qk, 5 d_v, 6 page size, 7-9 seqlens, 10 block size, 11
// split count, 12 scale choice, 13 value scale, 14-15 seed, 16 AMLA options, 17 the token before
// which keys are poisoned, 18 hostile choice, then injections of 4 bytes: (tensor | value code <<
// 2), three index bytes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "amla/amla.hpp"
#include "byte_reader.hpp"

namespace {

namespace at = amla::attention;
using at::precision;

constexpr float fnan = std::numeric_limits<float>::quiet_NaN();
constexpr float finf = std::numeric_limits<float>::infinity();

using Bytes = amla_fuzz::ByteReader;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_attention: %s: %s\n", what, detail.c_str());
  std::abort();
}

#define FUZZ_REQUIRE(cond, detail)                 \
  do {                                             \
    if (!(cond)) fail(#cond, std::string(detail)); \
  } while (0)

bool same_value(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

/// Everything the fuzz input decides.
struct Case {
  bool causal = false, separate_v = false, bf16_storage = false, float32 = false, hostile = false;
  bool shuffle = true, sparse = false;
  int threads = 1;
  int batch = 1, s_q = 1, heads_per_group = 1, h_kv = 1, d_qk = 1, d_v = 1, page_size = 1;
  std::vector<int> seqlens;
  int block = 1, splits = 1;
  std::optional<float> scale;
  double sigma = 1.0;
  std::uint64_t seed = 0;
  amla::amla_compensation compensation = amla::amla_compensation::appendix_a;
  amla::eps_rounding n_cast = amla::eps_rounding::toward_zero;
  std::optional<float> nudge;
  int clamp = -30;
  int poison_token = 0;
  int hostile_choice = 0;
};

Case read_case(Bytes& in) {
  Case c;
  const std::uint8_t flags = in.byte();
  c.causal = (flags & 1) != 0;
  c.separate_v = (flags & 2) != 0;
  c.bf16_storage = (flags & 4) != 0;
  c.float32 = (flags & 8) != 0;
  c.hostile = (flags & 16) != 0;
  c.shuffle = (flags & 32) == 0;
  c.threads = (flags & 64) != 0 ? 2 : 1;
  c.sparse = (flags & 128) != 0;
  c.batch = in.byte() % 3 + 1;
  c.s_q = in.byte() % 3 + 1;
  const std::uint8_t heads = in.byte();
  c.heads_per_group = heads % 4 + 1;
  c.h_kv = (heads & 4) != 0 ? 2 : 1;
  c.d_qk = in.byte() % 16 + 1;
  const std::uint8_t dv = in.byte();
  c.d_v = c.separate_v ? dv % 16 + 1 : dv % c.d_qk + 1;
  c.page_size = in.byte() % 8 + 1;
  for (int b = 0; b < 3; ++b) c.seqlens.push_back(in.byte() % 49);
  c.seqlens.resize(static_cast<std::size_t>(c.batch));
  c.block = in.byte() % 16 + 1;
  c.splits = in.byte() % 5 + 1;
  // The softmax scale: choice 0 keeps 1 / sqrt(d_qk), 6 takes raw bits (when finite and > 0),
  // the others a value from the menu.
  static constexpr float scale_menu[8] = {0.0f, 1.0f, 1e-3f, 1e30f, 1e-30f, 40.0f, 0.0f, 0.05f};
  const int scale_choice = in.byte() % 8;
  if (scale_choice == 6) {
    const float s = std::fabs(amla::as_fp32(in.u32()));
    if (std::isfinite(s) && s > 0.0f) c.scale = s;
  } else if (scale_choice != 0) {
    c.scale = scale_menu[scale_choice];
  }
  const double sigmas[4] = {0.1, 1.0, 4.0, 30.0};
  c.sigma = sigmas[in.byte() % 4];
  c.seed = (static_cast<std::uint64_t>(in.byte()) << 8) | in.byte();
  const std::uint8_t amla_bits = in.byte();
  const amla::amla_compensation comps[3] = {amla::amla_compensation::appendix_a,
                                            amla::amla_compensation::as_printed,
                                            amla::amla_compensation::none};
  c.compensation = comps[amla_bits % 3];
  c.n_cast =
      (amla_bits & 4) != 0 ? amla::eps_rounding::nearest_even : amla::eps_rounding::toward_zero;
  if ((amla_bits & 8) != 0) c.nudge = 0.0f;
  const int clamps[4] = {-30, -24, -60, -126};
  c.clamp = clamps[(amla_bits >> 4) % 4];
  c.poison_token = in.byte() % 3;
  c.hostile_choice = in.byte();
  return c;
}

/// The values injected into q, K or V (index 11: a BF16 pattern from the input).
float injected_value(int code, std::uint8_t a, std::uint8_t b) {
  switch (code) {
    case 0:
      return fnan;
    case 1:
      return finf;
    case 2:
      return -finf;
    case 3:
      return 0.0f;
    case 4:
      return -0.0f;
    case 5:
      return 1e20f;
    case 6:
      return -1e20f;
    case 7:
      return 3.38e38f;
    case 8:
      return -3.38e38f;
    case 9:
      return 1e-40f;
    case 10:
      return 65504.0f;
    default:
      return amla::bf16::from_bits(static_cast<std::uint16_t>((a << 8) | b)).to_float();
  }
}

/// A problem of float or bf16 storage with the element at `i` of a tensor set to x.
template <class T>
void put(std::vector<T>& v, std::size_t i, float x) {
  if constexpr (std::is_same_v<T, float>) {
    v[i] = x;
  } else {
    v[i] = amla::bf16::from_float(x);
  }
}

template <class T>
float get(const std::vector<T>& v, std::size_t i) {
  return amla::detail::to_float(v[i]);
}

template <class T>
at::DecodeProblem<T> build(const Case& c, Bytes& in) {
  auto p = at::ProblemBuilder()
               .batch(c.batch)
               .s_q(c.s_q)
               .heads(c.heads_per_group * c.h_kv, c.h_kv)
               .dims(c.d_qk, c.d_v)
               .page_size(c.page_size)
               .seqlens(c.seqlens)
               .separate_v(c.separate_v)
               .distribution(at::ValueDistribution::normal(c.sigma))
               .shuffle_pages(c.shuffle)
               .seed(c.seed)
               .template build<T>();
  const amla::DecodeShape& s = p.shape;
  while (!in.done()) {
    const std::uint8_t head = in.byte();
    const std::uint8_t i0 = in.byte(), i1 = in.byte(), i2 = in.byte();
    const float x = injected_value((head >> 2) % 12, i1, i2);
    const int tensor = head % 3;
    if (tensor == 0) {
      const int b = i0 % s.batch, t = i1 % s.s_q, h = i2 % s.h_q;
      put(p.q, s.q_offset(b, t, h) + static_cast<std::size_t>((i0 >> 2) % s.d_qk), x);
      continue;
    }
    const int b = i0 % s.batch;
    const int len = p.seqlens[static_cast<std::size_t>(b)];
    if (len == 0) continue;
    const int key = i1 % len, g = i2 % s.h_kv;
    if (tensor == 1 || !c.separate_v) {
      const int d = (i2 >> 1) % (tensor == 1 ? s.d_qk : s.d_v);
      put(p.kv, static_cast<std::size_t>(p.key(b, key, g) - p.kv.data()) + d, x);
    } else {
      const int d = (i2 >> 1) % s.d_v;
      put(p.v, static_cast<std::size_t>(p.value(b, key, g) - p.v.data()) + d, x);
    }
  }
  return p;
}

/// One recurrence's results over a problem (in double: golden's own, a kernel's floats exactly).
struct Run {
  const char* name;
  std::vector<double> out, lse;
  at::AmlaReport report;
  bool has_report = false;
  /// The error bound of its bf16 mode (of the largest |V| a row reads), and whether a row may be
  /// held to it (AMLA's hardware and checked modes: only without clamp events and violations).
  double bf16_bound = 1.0 / 64;
  bool bounded = true;
  bool base2_max = false;  ///< seesaw and transposed: bounded only for moderate scaled scores
};

template <class R, class Entry, class Opt>
Run run_one(const char* name, const Entry& entry, const at::DecodeInputs<R>& in,
            const at::DecodeOptions& o, const Opt& opt) {
  Run r{name, {}, {}, {}, false};
  auto res = entry(in, o, opt);
  r.out.assign(res.out.begin(), res.out.end());
  r.lse.assign(res.lse.begin(), res.lse.end());
  if constexpr (std::is_same_v<decltype(res.report), at::AmlaReport>) {
    r.report = res.report;
    r.has_report = true;
  }
  return r;
}

at::AmlaOptions amla_options(const Case& c, precision mode, amla::pow2_mode rescale) {
  at::AmlaOptions o;
  o.mode = mode;
  o.block_size = c.block;
  o.compensation = c.compensation;
  o.n_cast = c.n_cast;
  o.nudge = c.nudge;
  o.exponent_clamp = c.clamp;
  o.rescale = rescale;
  return o;
}

/// Every recurrence's results; golden first.
template <class T>
std::vector<Run> run_all(const Case& c, const at::DecodeInputs<T>& in, const at::DecodeOptions& o) {
  const precision mode = c.float32 ? precision::float32 : precision::bf16;
  std::vector<Run> runs;
  runs.push_back(run_one("golden", at::golden_decode, in, o, at::GoldenOptions{}));
  runs.push_back(run_one("base", at::base_decode, in, o, at::BaseOptions{mode, c.block}));
  for (const auto rescale :
       {amla::pow2_mode::hardware, amla::pow2_mode::checked, amla::pow2_mode::safe}) {
    const char* names[3] = {"amla hardware", "amla checked", "amla safe"};
    Run r = run_one(names[static_cast<int>(rescale)], at::amla_decode, in, o,
                    amla_options(c, mode, rescale));
    r.bf16_bound = 1.0 / 32;
    r.bounded =
        rescale == amla::pow2_mode::safe || (r.report.clamped == 0 && r.report.violations == 0);
    runs.push_back(std::move(r));
  }
  Run seesaw = run_one("seesaw", at::seesaw_decode, in, o, at::SeesawOptions{mode, c.block});
  seesaw.base2_max = true;
  runs.push_back(std::move(seesaw));
  for (const auto order : {at::kv_block_order::forward, at::kv_block_order::reverse}) {
    Run t =
        run_one(order == at::kv_block_order::forward ? "transposed forward" : "transposed reverse",
                at::transposed_decode, in, o, at::TransposedOptions{{mode, c.block}, order});
    t.base2_max = true;
    runs.push_back(std::move(t));
  }
  runs.push_back(run_one("split-KV", at::split_kv_decode, in, o,
                         at::SplitKvOptions{c.splits, {mode, c.block}}));
  runs.push_back(run_one("split-KV, one split", at::split_kv_decode, in, o,
                         at::SplitKvOptions{1, {mode, c.block}}));
  return runs;
}

/// What one row reads: its largest |q|, |K| and |V| and its scaled scores' largest size (in
/// float64), and whether all of it is finite.
struct RowReads {
  int visible = 0;
  bool finite = true;
  std::vector<char> nan_v;  ///< [d_v]: a NaN among the values of column d the row reads
  double max_abs = 0.0;     ///< over q, K and V read
  double max_v = 0.0;       ///< over V read
  double max_score = 0.0;   ///< |scale * q.k| over visible keys
};

template <class T>
RowReads row_reads(const at::DecodeProblem<T>& p, float scale, bool causal, int b, int t, int h) {
  const amla::DecodeShape& s = p.shape;
  RowReads r;
  r.nan_v.assign(static_cast<std::size_t>(s.d_v), 0);
  const int len = p.seqlens[static_cast<std::size_t>(b)];
  r.visible = amla::visible_keys(len, s.s_q, t, causal);
  const int g = h / s.heads_per_group();
  const T* q = p.query(b, t, h);
  for (int d = 0; d < s.d_qk; ++d) {
    const double x = amla::detail::to_float(q[d]);
    r.finite = r.finite && std::isfinite(x);
    r.max_abs = std::max(r.max_abs, std::fabs(x));
  }
  for (int key = 0; key < r.visible; ++key) {
    const T* k = p.key(b, key, g);
    const T* v = p.value(b, key, g);
    double dot = 0.0;
    for (int d = 0; d < s.d_qk; ++d) {
      const double x = amla::detail::to_float(k[d]);
      r.finite = r.finite && std::isfinite(x);
      r.max_abs = std::max(r.max_abs, std::fabs(x));
      dot += x * amla::detail::to_float(q[d]);
    }
    for (int d = 0; d < s.d_v; ++d) {
      const double x = amla::detail::to_float(v[d]);
      r.finite = r.finite && std::isfinite(x);
      if (std::isnan(x)) r.nan_v[static_cast<std::size_t>(d)] = 1;
      r.max_abs = std::max(r.max_abs, std::fabs(x));
      r.max_v = std::max(r.max_v, std::fabs(x));
    }
    r.max_score = std::max(r.max_score, std::fabs(dot * scale));
  }
  return r;
}

std::string where(const Run& r, int b, int t, int h, int d = -1) {
  return std::string(r.name) + " at batch " + std::to_string(b) + ", token " + std::to_string(t) +
         ", head " + std::to_string(h) + (d >= 0 ? ", column " + std::to_string(d) : "");
}

/// The relations between every recurrence and golden (the file comment).
template <class T>
void check_against_golden(const Case& c, const at::DecodeProblem<T>& p, const at::DecodeOptions& o,
                          const std::vector<Run>& runs) {
  const amla::DecodeShape& s = p.shape;
  const float scale = amla::resolved_scale(o, s);
  const Run& golden = runs[0];
  const Run* base = nullptr;
  for (const Run& r : runs) {
    if (std::string(r.name) == "base") base = &r;
  }
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.s_q; ++t) {
      for (int h = 0; h < s.h_q; ++h) {
        const RowReads reads = row_reads(p, scale, c.causal, b, t, h);
        const std::size_t li = s.lse_offset(b, t, h);
        const std::size_t oi = s.out_offset(b, t, h);
        const double g_lse = golden.lse[li];
        const bool moderate = reads.finite && reads.max_abs <= 1e4 && reads.max_score <= 100.0;
        double base_err = 0.0;
        for (const Run& r : runs) {
          const double lse = r.lse[li];
          if (reads.visible == 0) {
            FUZZ_REQUIRE(lse == -finf, where(r, b, t, h) + ": an empty row's lse");
            for (int d = 0; d < s.d_v; ++d) {
              FUZZ_REQUIRE(r.out[oi + static_cast<std::size_t>(d)] == 0.0f,
                           where(r, b, t, h, d) + ": an empty row's out");
            }
            continue;
          }
          FUZZ_REQUIRE(!std::isinf(lse), where(r, b, t, h) + ": a row that sees " +
                                             std::to_string(reads.visible) + " keys has lse " +
                                             std::to_string(lse));
          if (std::isnan(g_lse)) {
            FUZZ_REQUIRE(std::isnan(lse), where(r, b, t, h) + ": golden loses the row");
            for (int d = 0; d < s.d_v; ++d) {
              FUZZ_REQUIRE(std::isnan(r.out[oi + static_cast<std::size_t>(d)]),
                           where(r, b, t, h, d) + ": golden loses the row");
            }
            continue;
          }
          for (int d = 0; d < s.d_v; ++d) {
            const double x = r.out[oi + static_cast<std::size_t>(d)];
            if (reads.nan_v[static_cast<std::size_t>(d)] != 0) {
              FUZZ_REQUIRE(std::isnan(x), where(r, b, t, h, d) + ": the column reads a NaN");
            }
            if (!std::isfinite(golden.out[oi + static_cast<std::size_t>(d)])) {
              FUZZ_REQUIRE(!std::isfinite(x),
                           where(r, b, t, h, d) + ": golden's element is " +
                               std::to_string(golden.out[oi + static_cast<std::size_t>(d)]));
            }
          }
          if (!moderate || std::isnan(lse)) {
            // Rule 4: FP32 may lose a row golden keeps; only moderate rows are held to bounds.
            FUZZ_REQUIRE(!moderate || !r.bounded || (r.base2_max && reads.max_score > 100.0),
                         where(r, b, t, h) + ": a moderate row is lost (lse " +
                             std::to_string(lse) + ", golden " + std::to_string(g_lse) + ")");
            continue;
          }
          if (!r.bounded) continue;
          double err = 0.0;
          for (int d = 0; d < s.d_v; ++d) {
            const double x = r.out[oi + static_cast<std::size_t>(d)];
            const double e = std::fabs(x - golden.out[oi + static_cast<std::size_t>(d)]);
            err = std::isnan(e) || e > err ? e : err;  // a NaN error is the worst
          }
          const double tol = (c.float32 ? 1e-4 : r.bf16_bound) * reads.max_v + 1e-30;
          FUZZ_REQUIRE(err <= tol, where(r, b, t, h) + ": out error " + std::to_string(err) +
                                       " > " + std::to_string(tol));
          FUZZ_REQUIRE(std::fabs(lse - g_lse) <= 1e-4 * std::max(1.0, std::fabs(g_lse)),
                       where(r, b, t, h) + ": lse " + std::to_string(lse) + ", golden " +
                           std::to_string(g_lse));
          if (&r == base) base_err = err;
          // Safe AMLA is held to Base's error with the compensation Appendix A derives; the
          // printed reading (S32 / S16) doubles the scale's BF16 error by design (amla_step.hpp).
          if (std::string(r.name) == "amla safe" &&
              c.compensation != amla::amla_compensation::as_printed) {
            FUZZ_REQUIRE(err <= 2.0 * base_err + reads.max_v / 256 + 1e-30,
                         where(r, b, t, h) + ": safe AMLA's error " + std::to_string(err) +
                             " against Base's " + std::to_string(base_err));
          }
        }
      }
    }
  }
}

/// Relations between the recurrences themselves.
void check_between(const std::vector<Run>& runs) {
  const Run* hw = nullptr;
  const Run* checked = nullptr;
  const Run* safe = nullptr;
  const Run* base = nullptr;
  const Run* one_split = nullptr;
  for (const Run& r : runs) {
    const std::string n = r.name;
    if (n == "amla hardware") hw = &r;
    if (n == "amla checked") checked = &r;
    if (n == "amla safe") safe = &r;
    if (n == "base") base = &r;
    if (n == "split-KV, one split") one_split = &r;
  }
  FUZZ_REQUIRE(hw && checked && safe && base && one_split, "a recurrence is missing");
  FUZZ_REQUIRE(
      std::memcmp(hw->out.data(), checked->out.data(), hw->out.size() * sizeof(double)) == 0,
      "AMLA checked mode differs from hardware mode");
  FUZZ_REQUIRE(hw->report.violations == checked->report.violations,
               "AMLA hardware and checked modes count different violations");
  FUZZ_REQUIRE(
      hw->report.clamped == checked->report.clamped && hw->report.clamped == safe->report.clamped,
      "AMLA's modes count different clamp events");
  FUZZ_REQUIRE(checked->report.clamps.size() == checked->report.clamped &&
                   safe->report.clamps.size() == safe->report.clamped && hw->report.clamps.empty(),
               "clamp events located in the wrong modes");
  for (const Run* r : {hw, checked, safe}) {
    FUZZ_REQUIRE(r->report.located.size() == r->report.violations,
                 std::string(r->name) + ": violations not all located");
  }
  for (std::size_t i = 0; i < base->out.size(); ++i) {
    FUZZ_REQUIRE(same_value(base->out[i], one_split->out[i]),
                 "split-KV with one split differs from Base at out[" + std::to_string(i) + "]");
  }
  for (std::size_t i = 0; i < base->lse.size(); ++i) {
    FUZZ_REQUIRE(same_value(base->lse[i], one_split->lse[i]),
                 "split-KV with one split differs from Base at lse[" + std::to_string(i) + "]");
  }
}

/// The problem with K and V of the keys only tokens after `c.poison_token` see set to NaN: the
/// rows of tokens up to it must not change.
template <class T>
void check_unseen_keys(const Case& c, const at::DecodeProblem<T>& p, const at::DecodeOptions& o,
                       const std::vector<Run>& runs) {
  const amla::DecodeShape& s = p.shape;
  if (!c.causal || c.poison_token >= s.s_q - 1) return;
  auto q = p;
  bool changed = false;
  for (int b = 0; b < s.batch; ++b) {
    const int len = p.seqlens[static_cast<std::size_t>(b)];
    const int first = amla::visible_keys(len, s.s_q, c.poison_token, true);
    for (int key = first; key < len; ++key) {
      for (int g = 0; g < s.h_kv; ++g) {
        const auto k0 = static_cast<std::size_t>(q.key(b, key, g) - q.kv.data());
        for (int d = 0; d < s.d_qk; ++d) put(q.kv, k0 + static_cast<std::size_t>(d), fnan);
        if (c.separate_v) {
          const auto v0 = static_cast<std::size_t>(q.value(b, key, g) - q.v.data());
          for (int d = 0; d < s.d_v; ++d) put(q.v, v0 + static_cast<std::size_t>(d), fnan);
        }
        changed = true;
      }
    }
  }
  if (!changed) return;
  const std::vector<Run> poisoned = run_all(c, q.inputs(), o);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (int b = 0; b < s.batch; ++b) {
      for (int t = 0; t <= c.poison_token; ++t) {
        for (int h = 0; h < s.h_q; ++h) {
          const std::size_t li = s.lse_offset(b, t, h);
          FUZZ_REQUIRE(same_value(runs[i].lse[li], poisoned[i].lse[li]),
                       where(runs[i], b, t, h) + ": lse changed by keys the row does not see");
          for (int d = 0; d < s.d_v; ++d) {
            const std::size_t oi = s.out_offset(b, t, h) + static_cast<std::size_t>(d);
            FUZZ_REQUIRE(same_value(runs[i].out[oi], poisoned[i].out[oi]),
                         where(runs[i], b, t, h, d) + ": changed by keys the row does not see");
          }
        }
      }
    }
  }
}

/// Calls `call` and requires an amla::invalid_argument and untouched outputs.
template <class Call>
void require_rejected(const char* what, std::vector<float>& out, std::vector<float>& lse,
                      Call&& call) {
  std::fill(out.begin(), out.end(), 42.0f);
  std::fill(lse.begin(), lse.end(), 42.0f);
  bool thrown = false;
  try {
    call();
  } catch (const amla::invalid_argument&) {
    thrown = true;
  }
  FUZZ_REQUIRE(thrown, std::string(what) + ": no amla::invalid_argument");
  for (const float x : out) FUZZ_REQUIRE(x == 42.0f, std::string(what) + ": out written");
  for (const float x : lse) FUZZ_REQUIRE(x == 42.0f, std::string(what) + ": lse written");
}

/// One invalid argument (chosen by the input) given to every decode entry point.
template <class T>
void check_hostile(const Case& c, at::DecodeProblem<T> p, at::DecodeOptions o) {
  const amla::DecodeShape& s = p.shape;
  std::vector<float> out(s.out_elems()), lse(s.lse_elems());
  at::DecodeOutputs<float, float> outs{out, lse};
  at::BaseOptions base{c.float32 ? precision::float32 : precision::bf16, c.block};
  at::AmlaOptions amla = amla_options(c, base.mode, amla::pow2_mode::checked);
  at::SeesawOptions seesaw{base.mode, base.block_size};
  at::TransposedOptions transposed{{base.mode, base.block_size}, at::kv_block_order::forward};
  at::SplitKvOptions split{c.splits, base};
  std::vector<std::int32_t> table = p.block_table, lens = p.seqlens;
  at::DecodeInputs<T> in = p.inputs();
  // 0-1: options every kernel recurrence shares; 2-7 and 13-15: the problem (golden too); 8:
  // split-KV's; 9-11: AMLA's; 12: transposed's.
  const int choice = c.hostile_choice % 16;
  switch (choice) {
    case 0:
      base.block_size = amla.block_size = seesaw.block_size = transposed.block_size =
          split.split.block_size = -(c.block % 3);
      break;
    case 1:
      base.mode = amla.mode = seesaw.mode = transposed.mode = split.split.mode =
          static_cast<precision>(3 + c.block);  // past bf16, float32 and fp16
      break;
    case 2:
      o.softmax_scale = fnan;
      break;
    case 3:
      o.softmax_scale = -1.0f;
      break;
    case 4:
      o.softmax_scale = 0.0f;
      break;
    case 5:
      o.softmax_scale = finf;
      break;
    case 6:
      o.threads = -1;
      break;
    case 7:
      o.rows_per_task = -2;
      break;
    case 8:
      split.num_splits = -(c.splits % 2);
      break;
    case 9:
      amla.exponent_clamp = (c.block % 2 == 0) ? 0 : -127;
      break;
    case 10:
      amla.nudge = fnan;
      break;
    case 11:
      amla.compensation = static_cast<amla::amla_compensation>(3 + c.block);
      break;
    case 12:
      transposed.order = static_cast<at::kv_block_order>(2 + c.block);
      break;
    case 13:  // a sequence longer than its block-table row can hold
      lens[0] = static_cast<std::int32_t>(s.max_seqlen() + 1);
      in.seqlens = lens;
      break;
    case 14:  // a page id out of range where a sequence has keys (or a negative length)
      if (lens[0] > 0) {
        table[0] = s.num_pages + c.block;
      } else {
        lens[0] = -1;
      }
      in.block_table = table;
      in.seqlens = lens;
      break;
    default:  // a q span one element short
      in.q = in.q.first(in.q.size() - 1);
      break;
  }
  const bool problem = (choice >= 2 && choice <= 7) || choice >= 13;
  const bool shared = problem || choice <= 1;
  if (problem) require_rejected("golden", out, lse, [&] { at::golden_decode(in, o, outs); });
  if (shared) {
    require_rejected("base", out, lse, [&] { at::base_decode(in, o, outs, base); });
    require_rejected("seesaw", out, lse, [&] { at::seesaw_decode(in, o, outs, seesaw); });
  }
  if (shared || choice == 8) {
    require_rejected("split-KV", out, lse, [&] { at::split_kv_decode(in, o, outs, split); });
  }
  if (shared || choice == 12) {
    require_rejected("transposed", out, lse,
                     [&] { at::transposed_decode(in, o, outs, transposed); });
  }
  if (shared || (choice >= 9 && choice <= 11)) {
    require_rejected("amla", out, lse, [&] { (void)at::amla_decode(in, o, outs, amla); });
  }
}

/// Sparse index lists and sinks drawn from the case's seed (see the file comment).
struct SparseDraw {
  int topk = 1;
  std::vector<std::int32_t> indices, lengths;
  std::vector<float> sink;
};

SparseDraw draw_sparse(const Case& c, const amla::DecodeShape& s,
                       const std::vector<std::int32_t>& seqlens) {
  std::uint64_t state = c.seed * 0x9E3779B97F4A7C15ull + 1;
  const auto next = [&state] {  // splitmix64
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  SparseDraw d;
  d.topk = static_cast<int>(next() % 12) + 1;
  const bool with_lengths = next() % 2 == 0;
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.s_q; ++t) {
      const int seen = amla::visible_keys(seqlens[static_cast<std::size_t>(b)], s.s_q, t, c.causal);
      for (int i = 0; i < d.topk; ++i) {
        const bool invalid = seen == 0 || next() % 4 == 0;
        d.indices.push_back(invalid
                                ? amla::invalid_index
                                : static_cast<std::int32_t>(next() % static_cast<unsigned>(seen)));
      }
      if (with_lengths) {
        d.lengths.push_back(static_cast<std::int32_t>(next() % static_cast<unsigned>(d.topk + 1)));
      }
    }
  }
  const float menu[8] = {-finf, finf, fnan, 0.0f, 2.5f, -4.0f, 1e30f, -1e30f};
  for (int h = 0; h < s.h_q; ++h) d.sink.push_back(menu[next() % 8]);
  return d;
}

/// The sparse mode of the file comment.
/// With several threads (c.threads > 1): `runs` of `in` under `o` are the runs on one thread, bit
/// for bit; `what` names the results in the failure message.
template <class T>
void check_thread_count(const Case& c, const at::DecodeInputs<T>& in, const at::DecodeOptions& o,
                        const std::vector<Run>& runs, const char* what) {
  if (c.threads <= 1) return;
  at::DecodeOptions one = o;
  one.threads = 1;
  const std::vector<Run> serial = run_all(c, in, one);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    FUZZ_REQUIRE(std::memcmp(runs[i].out.data(), serial[i].out.data(),
                             runs[i].out.size() * sizeof(double)) == 0 &&
                     std::memcmp(runs[i].lse.data(), serial[i].lse.data(),
                                 runs[i].lse.size() * sizeof(double)) == 0,
                 std::string(runs[i].name) + ": " + what + " depend on the thread count");
  }
}

template <class T>
void fuzz_sparse(const Case& c, const at::DecodeProblem<T>& p, const at::DecodeOptions& o) {
  const amla::DecodeShape& s = p.shape;
  SparseDraw d = draw_sparse(c, s, p.seqlens);
  at::DecodeInputs<T> in = p.inputs();
  in.sparse = {d.topk, d.indices, d.lengths};
  if (c.hostile) {
    std::vector<float> out(s.out_elems()), lse(s.lse_elems());
    at::DecodeOutputs<float, float> outs{out, lse};
    std::vector<float> long_sink(static_cast<std::size_t>(s.h_q) + 1);
    switch (c.hostile_choice % 3) {
      case 0: {  // an index one past the keys the token sees (or -2 for an empty sequence)
        const int b = c.hostile_choice % s.batch, t = c.hostile_choice % s.s_q;
        const int seen =
            amla::visible_keys(p.seqlens[static_cast<std::size_t>(b)], s.s_q, t, c.causal);
        d.indices[in.sparse.offset(s, b, t)] = seen > 0 ? seen : -2;
        if (!d.lengths.empty()) d.lengths[static_cast<std::size_t>(b * s.s_q + t)] = d.topk;
        break;
      }
      case 1:
        d.lengths.assign(static_cast<std::size_t>(s.batch * s.s_q), 0);
        d.lengths.back() = d.topk + 1;
        in.sparse.topk_length = d.lengths;
        break;
      default:
        in.sink = long_sink;
        break;
    }
    require_rejected("golden, sparse", out, lse, [&] { at::golden_decode(in, o, outs); });
    require_rejected("base, sparse", out, lse, [&] { at::base_decode(in, o, outs); });
    require_rejected("split-KV, sparse", out, lse, [&] { at::split_kv_decode(in, o, outs); });
    return;
  }
  const std::vector<Run> runs = run_all(c, in, o);
  check_between(runs);
  auto with_sink = in;
  with_sink.sink = d.sink;
  const std::vector<Run> sunk = run_all(c, with_sink, o);
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.s_q; ++t) {
      const std::int32_t* list = d.indices.data() + in.sparse.offset(s, b, t);
      const int counted = in.sparse.counted(s, b, t);
      const bool empty = std::all_of(list, list + counted,
                                     [](std::int32_t k) { return k == amla::invalid_index; });
      for (int h = 0; h < s.h_q; ++h) {
        const std::size_t li = s.lse_offset(b, t, h);
        const bool lost = std::isnan(runs[0].lse[li]);
        for (std::size_t i = 0; i < runs.size(); ++i) {
          const Run& r = runs[i];
          const Run& rs = sunk[i];
          const bool golden = i == 0;
          FUZZ_REQUIRE(same_value(r.lse[li], rs.lse[li]),
                       where(rs, b, t, h) + ": a sink moved lse");
          if (empty) {
            FUZZ_REQUIRE(r.lse[li] == -finf, where(r, b, t, h) + ": an all-invalid row's lse");
          } else {
            FUZZ_REQUIRE(!std::isinf(r.lse[li]), where(r, b, t, h) + ": an infinite lse");
          }
          if (lost) FUZZ_REQUIRE(std::isnan(r.lse[li]), where(r, b, t, h) + ": golden lost it");
          for (int dd = 0; dd < s.d_v; ++dd) {
            const std::size_t oi = s.out_offset(b, t, h) + static_cast<std::size_t>(dd);
            if (empty) FUZZ_REQUIRE(r.out[oi] == 0.0 && rs.out[oi] == 0.0, where(rs, b, t, h, dd));
            const float sink = d.sink[static_cast<std::size_t>(h)];
            const double want =
                golden
                    ? r.out[oi] / amla::sink_divisor(r.lse[li], static_cast<double>(sink))
                    : static_cast<double>(static_cast<float>(r.out[oi]) /
                                          amla::sink_divisor(static_cast<float>(r.lse[li]), sink));
            FUZZ_REQUIRE(same_value(rs.out[oi], want),
                         where(rs, b, t, h, dd) + ": out with the sink " + std::to_string(sink) +
                             " is not out / sink_divisor");
          }
        }
      }
    }
  }
  check_thread_count(c, with_sink, o, sunk, "sparse results");
}

template <class T>
void fuzz_one(const Case& c, Bytes& in) {
  const at::DecodeProblem<T> p = build<T>(c, in);
  at::DecodeOptions o;
  o.causal = c.causal;
  o.softmax_scale = c.scale;
  o.threads = c.threads;
  o.rows_per_task = 2;                 // several row chunks per head group
  if (c.sparse) fuzz_sparse(c, p, o);  // and then the dense checks of the same problem
  if (c.hostile) {
    check_hostile(c, p, o);
    return;
  }
  const std::vector<Run> runs = run_all(c, p.inputs(), o);
  check_against_golden(c, p, o, runs);
  check_between(runs);
  check_unseen_keys(c, p, o, runs);
  check_thread_count(c, p.inputs(), o, runs, "results");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  const Case c = read_case(in);
  if (c.bf16_storage) {
    fuzz_one<amla::bf16>(c, in);
  } else {
    fuzz_one<float>(c, in);
  }
  return 0;
}
