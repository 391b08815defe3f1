// amla/attention/problem_builder.hpp: random, valid, reproducible decode problems that own their
// memory, for tests, examples and benchmarks.
//
//   auto p = amla::attention::ProblemBuilder()
//                .batch(2).heads(16, 1).dims(576, 512).page_size(64)
//                .seqlens({1000, 0}).distribution(ValueDistribution::normal(1.0)).seed(7)
//                .build<amla::bf16>();
//   amla::attention::golden_decode(p.inputs());
//
// Values. Q, K and V are drawn from N(0, s^2) or U(-a, a) (AMLA Tables 3 and 4) and rounded once
// to the problem's element type: BF16 for a bf16 problem, FP16 for an fp16 one, and for a float
// problem BF16 too unless round_to_bf16(false) (no rounding) or round_to_fp16() (FP16 values). The
// draws come from std::mt19937_64 through amla's own Box-Muller and 53-bit uniform transforms (the
// standard distributions are implementation-defined), so a seed gives the same problem with every
// compiler. The values are drawn in logical order (q[b, t, h, :], then for each sequence its keys
// 0..seqlen-1 and KV heads, then V likewise) from a stream of their own: the page size, the page
// shuffle and the spare pages never change them, so two problems that differ only in paging have
// the same attention result.
//
// Paging. Each sequence takes ceil(seqlen / page_size) pages; page ids are shuffled (by default)
// with a second stream, and spare_pages unused pages are added. With poison_unused (default on)
// every unused page, every slot past a sequence's end in its last page, and every block_table
// entry past a sequence's pages hold garbage: NaN in the caches and an out-of-range page id in the
// table, so a kernel that reads or validates them is caught.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "amla/attention/driver.hpp"
#include "amla/config.hpp"
#include "amla/detail/convert.hpp"
#include "amla/detail/fluent_setter.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/fp16.hpp"

namespace amla::attention {

/// The distribution of generated Q, K and V values.
struct ValueDistribution {
  enum class kind : std::uint8_t { normal, uniform };
  kind type = kind::normal;
  double param = 1.0;  ///< s of N(0, s^2), or a of U(-a, a)

  static ValueDistribution normal(double s) { return {kind::normal, s}; }
  static ValueDistribution uniform(double a) { return {kind::uniform, a}; }
  std::string name() const {
    const std::string p = amla::detail::to_text(param);
    return type == kind::normal ? "N(0, " + p + "^2)" : "U(-" + p + ", " + p + ")";
  }
};

/// A decode problem that owns its tensors (layouts in problem/shape.hpp).
template <decode_element T>
struct DecodeProblem {
  DecodeShape shape;
  std::vector<T> q;
  std::vector<T> kv;
  std::vector<T> v;  ///< empty: V is the first d_v columns of kv
  std::vector<std::int32_t> block_table;
  std::vector<std::int32_t> seqlens;

  DecodeInputs<T> inputs() const { return {shape, q, kv, v, block_table, seqlens}; }
  bool v_in_kv() const { return v.empty(); }
  /// Pointer to key s (of sequence b) of KV head g in kv, through the block table.
  const T* key(int b, int s, int g) const { return kv.data() + slot(b, s, g) * shape.d_qk; }
  /// Pointer to value s of KV head g (in v, or in kv when V is shared).
  const T* value(int b, int s, int g) const {
    return v_in_kv() ? key(b, s, g) : v.data() + slot(b, s, g) * shape.d_v;
  }
  const T* query(int b, int t, int h) const { return q.data() + shape.q_offset(b, t, h); }

 private:
  std::size_t slot(int b, int s, int g) const;
};

namespace detail {

/// Compiler-independent N(0, 1) and U[0, 1) draws from std::mt19937_64 (whose output sequence
/// the standard fixes).
class ValueStream {
 public:
  explicit ValueStream(std::uint64_t seed) : rng_(seed) {}
  /// Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  /// Standard normal by Box-Muller (both outputs of a pair are used).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(rng_() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = uniform01();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }
  double draw(const ValueDistribution& d) {
    return d.type == ValueDistribution::kind::normal ? d.param * normal()
                                                     : d.param * (2.0 * uniform01() - 1.0);
  }
  std::mt19937_64& engine() { return rng_; }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

/// x rounded once to element type T; a float element to the format `round` (fp32: unrounded).
template <class T>
T element_from(double x, value_format round) {
  if constexpr (std::is_same_v<T, bf16>) {
    return amla::detail::bf16_from_double(x);
  } else if constexpr (std::is_same_v<T, fp16>) {
    return amla::detail::fp16_from_double(x);
  } else {
    switch (round) {
      case value_format::bf16:
        return amla::detail::bf16_from_double(x).to_float();
      case value_format::fp16:
        return amla::detail::fp16_from_double(x).to_float();
      default:
        return static_cast<float>(x);
    }
  }
}

template <class T>
T poison_value() {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16::from_bits(0x7FC0u);
  } else if constexpr (std::is_same_v<T, fp16>) {
    return fp16::from_bits(0x7E00u);
  } else {
    return std::numeric_limits<float>::quiet_NaN();
  }
}

/// n values drawn from `dist` into dst (element_from with `round`).
template <class T>
void draw_into(T* dst, std::size_t n, ValueStream& values, const ValueDistribution& dist,
               value_format round) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = element_from<T>(values.draw(dist), round);
}

/// A length drawn uniformly from [min_len, max_len] (0 <= min_len <= max_len). The span
/// max_len - min_len + 1 may exceed INT_MAX (random_seqlens(0, INT_MAX)): it is taken in 64 bits.
inline std::int32_t draw_length(ValueStream& layout, int min_len, int max_len) {
  const std::int64_t span = std::int64_t{max_len} - min_len + 1;
  const auto off = static_cast<std::int64_t>(layout.uniform01() * static_cast<double>(span));
  return static_cast<std::int32_t>(min_len + std::min(off, span - 1));
}

/// Lengths of `batch` sequences from `lens`: one length for every sequence, or one per sequence.
/// Throws amla::invalid_argument naming `fn` and `arg` for another count or a negative length.
inline std::vector<std::int32_t> batch_lengths(const char* fn, const char* arg,
                                               const std::vector<int>& lens, int batch) {
  if (lens.size() != 1 && lens.size() != static_cast<std::size_t>(batch)) {
    amla::detail::throw_invalid(
        fn, arg, std::to_string(lens.size()) + " lengths",
        "must hold one length (used for every sequence) or batch = " + std::to_string(batch));
  }
  for (const int len : lens) {
    if (len < 0) amla::detail::throw_invalid(fn, arg, std::to_string(len), "must be >= 0");
  }
  if (lens.size() == 1) {
    return std::vector<std::int32_t>(static_cast<std::size_t>(std::max(batch, 0)), lens[0]);
  }
  return std::vector<std::int32_t>(lens.begin(), lens.end());
}

/// The builder settings size_pages names in its errors.
struct PageSettingNames {
  const char* lens = "seqlens";  ///< the sequence lengths (the pages they use)
  const char* spare = "spare_pages";
  const char* extra = "extra_table_columns";
};

/// Sets s.max_pages_per_seq and s.num_pages for sequences of `seqlens` keys: the pages they use
/// (ceil(seqlen / page_size) each) plus `spare_pages`, and the widest sequence's pages plus
/// `extra_columns` (each at least 1). s.page_size must be >= 1, the counts >= 0. Both results are
/// ints: a total past INT_MAX throws amla::invalid_argument naming `fn` and the setting that
/// brought it there.
inline void size_pages(const char* fn, const PageSettingNames& names, DecodeShape& s,
                       const std::vector<std::int32_t>& seqlens, int spare_pages,
                       int extra_columns) {
  std::int64_t used = 0;
  int widest = 0;
  for (const std::int32_t len : seqlens) {
    const int n = s.pages_for(len);
    used = amla::detail::checked_sum(fn, names.lens, "pages the sequences use", used, n, INT_MAX);
    widest = std::max(widest, n);
  }
  const std::int64_t columns = amla::detail::checked_sum(fn, names.extra, "block_table columns",
                                                         widest, extra_columns, INT_MAX);
  const std::int64_t pages =
      amla::detail::checked_sum(fn, names.spare, "cache pages", used, spare_pages, INT_MAX);
  s.max_pages_per_seq = static_cast<int>(std::max<std::int64_t>(columns, 1));
  s.num_pages = static_cast<int>(std::max<std::int64_t>(pages, 1));
}

/// The block table of a shape sized by size_pages: a permutation of the page ids (shuffled by
/// Fisher-Yates on `layout` when `shuffle`) handed out in sequence order; with `poison`, entries
/// past a sequence's pages hold out-of-range ids (-1 and num_pages + 1000 + i alternately) that
/// must never be read, otherwise 0.
inline std::vector<std::int32_t> assign_pages(const DecodeShape& s,
                                              const std::vector<std::int32_t>& seqlens,
                                              bool shuffle, bool poison, ValueStream& layout) {
  std::vector<std::int32_t> ids = amla::detail::allocate<std::int32_t>(
      "ProblemBuilder::build", "num_pages", static_cast<std::size_t>(s.num_pages));
  for (int i = 0; i < s.num_pages; ++i) ids[static_cast<std::size_t>(i)] = i;
  if (shuffle) {
    for (std::size_t i = ids.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(layout.uniform01() * static_cast<double>(i));
      std::swap(ids[i - 1], ids[j]);
    }
  }
  std::vector<std::int32_t> table = amla::detail::allocate<std::int32_t>(
      "ProblemBuilder::build", "block_table", s.block_table_elems());
  std::size_t next = 0;
  for (int b = 0; b < s.batch; ++b) {
    const int pages = s.pages_for(seqlens[static_cast<std::size_t>(b)]);
    for (int i = 0; i < s.max_pages_per_seq; ++i) {
      auto& e = table[s.table_offset(b, i)];
      if (i < pages) {
        e = ids[next++];
      } else if (poison) {
        e = (i % 2 == 0) ? -1 : s.num_pages + 1000 + i;
      }
    }
  }
  return table;
}

/// Slot (before the head dim) of key `key` of sequence b, KV head g, through the block table.
inline std::size_t key_slot(const DecodeShape& s, std::span<const std::int32_t> block_table, int b,
                            int key, int g) {
  return s.slot_index(amla::detail::table_page(s, block_table, b, key), key % s.page_size, g);
}

}  // namespace detail

template <decode_element T>
std::size_t DecodeProblem<T>::slot(int b, int s, int g) const {
  return detail::key_slot(shape, block_table, b, s, g);
}

/// Builds random valid decode problems; every setter returns *this. Invalid settings throw
/// amla::invalid_argument from build().
class ProblemBuilder : public amla::detail::FluentSetter<ProblemBuilder> {
 public:
  /// DeepSeek-V3 MLA decode: h_q 128, h_kv 1, d_qk 576, d_v 512 (V in the K cache), page 64.
  static ProblemBuilder deepseek_mla(int batch, int seqlen) {
    ProblemBuilder b;
    b.batch(batch).heads(128, 1).dims(576, 512).page_size(64).seqlens(
        std::vector<int>(static_cast<std::size_t>(batch), seqlen));
    return b;
  }

  ProblemBuilder& batch(int n) { return set(shape_.batch, n); }
  ProblemBuilder& s_q(int n) { return set(shape_.s_q, n); }
  ProblemBuilder& heads(int h_q, int h_kv = 1) {
    shape_.h_q = h_q;
    shape_.h_kv = h_kv;
    return *this;
  }
  ProblemBuilder& dims(int d_qk, int d_v) {
    shape_.d_qk = d_qk;
    shape_.d_v = d_v;
    return *this;
  }
  ProblemBuilder& page_size(int n) { return set(shape_.page_size, n); }
  /// Explicit sequence lengths. Several lengths set the batch to their count; a single length is
  /// used for every sequence of the batch (set with batch(), before or after).
  ProblemBuilder& seqlens(std::vector<int> lens) {
    seqlens_ = std::move(lens);
    if (seqlens_.size() > 1) shape_.batch = static_cast<int>(seqlens_.size());
    random_lens_ = false;
    return *this;
  }
  /// Lengths drawn uniformly from [min_len, max_len] per sequence (from the layout stream).
  ProblemBuilder& random_seqlens(int min_len, int max_len) {
    min_len_ = min_len;
    max_len_ = max_len;
    random_lens_ = true;
    return *this;
  }
  /// Use a separate V cache [num_pages, page_size, h_kv, d_v] instead of kv's first d_v columns.
  ProblemBuilder& separate_v(bool on = true) { return set(separate_v_, on); }
  /// Distribution of Q, K and V.
  ProblemBuilder& distribution(ValueDistribution d) {
    q_dist_ = kv_dist_ = d;
    return *this;
  }
  ProblemBuilder& q_distribution(ValueDistribution d) { return set(q_dist_, d); }
  ProblemBuilder& kv_distribution(ValueDistribution d) { return set(kv_dist_, d); }
  ProblemBuilder& seed(std::uint64_t s) { return set(seed_, s); }
  ProblemBuilder& shuffle_pages(bool on = true) { return set(shuffle_, on); }
  /// Unused pages added to the cache (poisoned when poison_unused is on).
  ProblemBuilder& spare_pages(int n) { return set(spare_pages_, n); }
  /// block_table columns beyond the longest sequence's need.
  ProblemBuilder& extra_table_columns(int n) { return set(extra_columns_, n); }
  ProblemBuilder& poison_unused(bool on = true) { return set(poison_, on); }
  /// Round generated values to BF16 in float problems too (bf16 problems always are); off:
  /// float problems hold the draws rounded to float only.
  ProblemBuilder& round_to_bf16(bool on = true) {
    round_ = on ? value_format::bf16 : value_format::fp32;
    return *this;
  }
  /// Round generated values to FP16 in float problems (fp16 problems always are); off: to float
  /// only.
  ProblemBuilder& round_to_fp16(bool on = true) {
    round_ = on ? value_format::fp16 : value_format::fp32;
    return *this;
  }

  const DecodeShape& shape() const { return shape_; }

  template <decode_element T = bf16>
  DecodeProblem<T> build() const {
    constexpr const char* fn = "ProblemBuilder::build";
    if (!(q_dist_.param > 0.0) || !(kv_dist_.param > 0.0) || !std::isfinite(q_dist_.param) ||
        !std::isfinite(kv_dist_.param)) {
      amla::detail::throw_invalid(fn, "distribution", q_dist_.name() + " / " + kv_dist_.name(),
                                  "the parameter must be finite and > 0");
    }
    if (spare_pages_ < 0) {
      amla::detail::throw_invalid(fn, "spare_pages", std::to_string(spare_pages_), "must be >= 0");
    }
    if (extra_columns_ < 0) {
      amla::detail::throw_invalid(fn, "extra_table_columns", std::to_string(extra_columns_),
                                  "must be >= 0");
    }
    if (shape_.page_size < 1) {
      amla::detail::throw_invalid(fn, "page_size", std::to_string(shape_.page_size),
                                  "must be >= 1");
    }
    detail::ValueStream layout(seed_ ^ 0x9E3779B97F4A7C15ull);
    detail::ValueStream values(seed_);

    DecodeProblem<T> p;
    p.shape = shape_;
    DecodeShape& s = p.shape;
    if (random_lens_) {
      if (min_len_ < 0 || max_len_ < min_len_) {
        amla::detail::throw_invalid(
            fn, "random_seqlens",
            "[" + std::to_string(min_len_) + ", " + std::to_string(max_len_) + "]",
            "must satisfy 0 <= min <= max");
      }
      if (s.batch < 1) {
        amla::detail::throw_invalid(fn, "batch", std::to_string(s.batch), "must be >= 1");
      }
      p.seqlens.resize(static_cast<std::size_t>(s.batch));
      for (auto& len : p.seqlens) len = detail::draw_length(layout, min_len_, max_len_);
    } else {
      p.seqlens = detail::batch_lengths(fn, "seqlens", seqlens_, s.batch);
    }
    detail::size_pages(fn, {random_lens_ ? "random_seqlens" : "seqlens"}, s, p.seqlens,
                       spare_pages_, extra_columns_);
    // Validates every dimension, and that every tensor can be allocated, before anything large is.
    validate_shape(fn, s, !separate_v_);
    amla::detail::require_allocatable(fn, "q", s.q_elems(), sizeof(T));
    amla::detail::require_allocatable(fn, "kv", s.kv_elems(), sizeof(T));
    if (separate_v_) amla::detail::require_allocatable(fn, "v", s.v_elems(), sizeof(T));
    // Page assignment: a (shuffled) permutation of page ids, handed out in sequence order.
    p.block_table = detail::assign_pages(s, p.seqlens, shuffle_, poison_, layout);

    const T fill = poison_ ? detail::poison_value<T>() : T{};
    p.q = amla::detail::allocate<T>(fn, "q", s.q_elems());
    p.kv = amla::detail::allocate<T>(fn, "kv", s.kv_elems(), fill);
    if (separate_v_) p.v = amla::detail::allocate<T>(fn, "v", s.v_elems(), fill);
    detail::draw_into(p.q.data(), p.q.size(), values, q_dist_, round_);
    for (int b = 0; b < s.batch; ++b) {
      for (int key = 0; key < p.seqlens[static_cast<std::size_t>(b)]; ++key) {
        for (int g = 0; g < s.h_kv; ++g) {
          T* dst = p.kv.data() + detail::key_slot(s, p.block_table, b, key, g) * s.d_qk;
          detail::draw_into(dst, static_cast<std::size_t>(s.d_qk), values, kv_dist_, round_);
        }
      }
    }
    if (separate_v_) {
      for (int b = 0; b < s.batch; ++b) {
        for (int key = 0; key < p.seqlens[static_cast<std::size_t>(b)]; ++key) {
          for (int g = 0; g < s.h_kv; ++g) {
            T* dst = p.v.data() + detail::key_slot(s, p.block_table, b, key, g) * s.d_v;
            detail::draw_into(dst, static_cast<std::size_t>(s.d_v), values, kv_dist_, round_);
          }
        }
      }
    }
    return p;
  }

 private:
  DecodeShape shape_{1, 1, 128, 1, 576, 512, 1, 64, 1};
  std::vector<int> seqlens_{1024};
  bool random_lens_ = false;
  int min_len_ = 0, max_len_ = 0;
  bool separate_v_ = false;
  ValueDistribution q_dist_{}, kv_dist_{};
  std::uint64_t seed_ = 0x5EEDull;
  bool shuffle_ = true;
  int spare_pages_ = 1;
  int extra_columns_ = 1;
  bool poison_ = true;
  value_format round_ = value_format::bf16;
};

}  // namespace amla::attention
