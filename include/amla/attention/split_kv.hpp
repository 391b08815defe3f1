// amla/attention/split_kv.hpp: split-KV decoding with the log-sum-exp combine (Flash-Decoding;
// FlashMLA's splitkv kernel followed by its combine kernel).
//
// The keys of a head group are cut into num_splits contiguous ranges of whole KV blocks (the
// split kernel hands each SM a run of blocks). Each split runs Base (bf16 or float32 mode) over
// its range alone and yields a normalised partial output O_s (FP32, not cast to BF16: the split
// kernel keeps its accumulators in float) and lse_s. The combine is exact softmax algebra:
//   M = max_s lse_s,  L = log(sum_s exp(lse_s - M)) + M,
//   out = sum_s exp(lse_s - L) O_s,  lse = L
// computed in this order (FlashMLA's combine order), in FP32 for the kernel emulation or in any
// Scalar (combine_splits is a template; float64 partials combine to float64 rounding). Each term
// is a multiply then an add, no FMA. A split in which a row sees no key (an empty range, or one
// past the row's causal window) has lse_s = -inf and weight exp(-inf) = 0: it is skipped, never
// turned into NaN. When every split is empty the row gets out = 0 and lse = -inf. A split that lost
// the row (lse NaN: a NaN score, a score past FP32's range; problem/conventions.hpp) makes the
// whole row NaN, as golden's row would be; a NaN or Inf in a partial's out reaches the combined
// out element through its weight.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "amla/attention/detail/recurrence.hpp"
#include "amla/attention/driver.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/config.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::attention {

/// Options of split-KV decoding: the number of splits and the Base options inside each split.
struct SplitKvOptions {
  int num_splits = 4;  ///< >= 1; splits beyond the number of KV blocks are empty
  BaseOptions split;   ///< the recurrence inside each split (mode and KV block size)
};

namespace detail {

/// Checks the split count and the options inside each split (named `<prefix>.num_splits` and
/// `<prefix>.split.<field>`).
inline void validate_split_kv_options(const char* fn, std::string_view prefix,
                                      const SplitKvOptions& o) {
  validate_recurrence_options(fn, std::string(prefix) + ".split", o.split);
  if (o.num_splits < 1) {
    amla::detail::throw_invalid(fn, (std::string(prefix) + ".num_splits").c_str(),
                                std::to_string(o.num_splits), "must be >= 1");
  }
}

}  // namespace detail

/// A half-open range of keys [begin, end).
struct KeyRange {
  Eigen::Index begin = 0;
  Eigen::Index end = 0;
  Eigen::Index size() const { return end - begin; }
  friend bool operator==(const KeyRange&, const KeyRange&) = default;
};

namespace detail {

/// The key ranges of splits [0, count) of split_key_ranges(n_keys, block_size, num_splits), for
/// valid arguments; the splits from nonempty_splits(...) on are all empty.
inline std::vector<KeyRange> first_split_ranges(Eigen::Index n_keys, int block_size, int num_splits,
                                                Eigen::Index count) {
  const Eigen::Index blocks = (n_keys + block_size - 1) / block_size;
  const Eigen::Index per_split = (blocks + num_splits - 1) / num_splits;
  std::vector<KeyRange> ranges = amla::detail::allocate<KeyRange>("split_key_ranges", "num_splits",
                                                                  static_cast<std::size_t>(count));
  for (Eigen::Index s = 0; s < count; ++s) {
    const Eigen::Index b0 = std::min(blocks, s * per_split);
    const Eigen::Index b1 = std::min(blocks, (s + 1) * per_split);
    ranges[static_cast<std::size_t>(s)] = {std::min(n_keys, b0 * block_size),
                                           std::min(n_keys, b1 * block_size)};
  }
  return ranges;
}

/// How many leading splits of split_key_ranges(n_keys, block_size, num_splits) hold keys: at most
/// the block count, whatever num_splits is.
inline Eigen::Index nonempty_splits(Eigen::Index n_keys, int block_size, int num_splits) {
  const Eigen::Index blocks = (n_keys + block_size - 1) / block_size;
  const Eigen::Index per_split = (blocks + num_splits - 1) / num_splits;
  return per_split == 0 ? 0 : (blocks + per_split - 1) / per_split;
}

}  // namespace detail

/// The key ranges of the splits: ceil(n_keys / block_size) blocks dealt in runs of
/// ceil(blocks / num_splits) consecutive blocks; trailing splits may be empty (begin = end =
/// n_keys). Throws amla::invalid_argument for n_keys < 0, block_size < 1 or num_splits < 1, or
/// when the num_splits ranges cannot be allocated.
inline std::vector<KeyRange> split_key_ranges(Eigen::Index n_keys, int block_size, int num_splits) {
  AMLA_REQUIRE(n_keys >= 0, "n_keys", n_keys, "must be >= 0");
  AMLA_REQUIRE(block_size >= 1, "block_size", block_size, "must be >= 1");
  AMLA_REQUIRE(num_splits >= 1, "num_splits", num_splits, "must be >= 1");
  return detail::first_split_ranges(n_keys, block_size, num_splits, num_splits);
}

/// One split's result: normalised out [rows, d_v] and lse [rows] over `keys`.
template <class Scalar>
struct SplitPartial {
  Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> out;
  Eigen::Matrix<Scalar, Eigen::Dynamic, 1> lse;
  KeyRange keys;
};

/// The LSE combine of split partials into out [rows, d_v] and lse [rows] (see the file comment).
/// Throws amla::invalid_argument when there are no partials or their shapes disagree.
template <class Scalar>
void combine_splits(
    std::span<const SplitPartial<Scalar>> parts,
    Eigen::Ref<Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> out,
    std::span<Scalar> lse) {
  AMLA_REQUIRE(!parts.empty(), "parts", "0 partials", "must hold at least one split");
  const Eigen::Index rows = out.rows();
  for (std::size_t s = 0; s < parts.size(); ++s) {
    const auto& p = parts[s];
    if (p.out.rows() != rows || p.out.cols() != out.cols() || p.lse.size() != rows) {
      amla::detail::throw_invalid("combine_splits", "parts",
                                  "parts[" + std::to_string(s) + "] with out " +
                                      amla::detail::shape_text(p.out.rows(), p.out.cols()) +
                                      " and " + std::to_string(p.lse.size()) + " lse values",
                                  "every partial must match out " +
                                      amla::detail::shape_text(rows, out.cols()) +
                                      " with one lse per row");
    }
  }
  AMLA_REQUIRE(lse.size() == static_cast<std::size_t>(rows), "lse", lse.size(),
               "must hold one value per row of out");
  constexpr Scalar neg_inf = -std::numeric_limits<Scalar>::infinity();
  for (Eigen::Index r = 0; r < rows; ++r) {
    Scalar max_lse = neg_inf;
    for (const auto& p : parts) max_lse = detail::max_propagating_nan(max_lse, p.lse(r));
    auto o = out.row(r);
    o.setZero();
    if (max_lse == neg_inf) {
      lse[static_cast<std::size_t>(r)] = neg_inf;
      continue;
    }
    if (std::isnan(max_lse)) {  // a split lost the row (problem/conventions.hpp): so is the whole
      o.setConstant(std::numeric_limits<Scalar>::quiet_NaN());
      lse[static_cast<std::size_t>(r)] = std::numeric_limits<Scalar>::quiet_NaN();
      continue;
    }
    Scalar sum = 0;
    for (const auto& p : parts) {
      if (p.lse(r) != neg_inf) sum += std::exp(p.lse(r) - max_lse);
    }
    const Scalar global = std::log(sum) + max_lse;
    for (const auto& p : parts) {
      if (p.lse(r) == neg_inf) continue;
      const Scalar w = std::exp(p.lse(r) - global);
      o += w * p.out.row(r);
    }
    lse[static_cast<std::size_t>(r)] = global;
  }
}

/// The rows' view of one key range: keys [range.begin, range.end) of g, with each row's visible
/// count cut to the range (visible_out is the storage the returned group points into).
inline HeadGroup restrict_keys(const HeadGroup& g, KeyRange range, std::vector<int>& visible_out) {
  visible_out.resize(static_cast<std::size_t>(g.rows()));
  for (Eigen::Index r = 0; r < g.rows(); ++r) {
    visible_out[static_cast<std::size_t>(r)] = static_cast<int>(
        std::clamp<Eigen::Index>(g.visible_keys(r) - range.begin, 0, range.size()));
  }
  return HeadGroup{g.q, g.k.middleRows(range.begin, range.size()),
                   g.v.middleRows(range.begin, range.size()), visible_out, g.scale};
}

namespace detail {

/// Which splits split_kv_partials_core computes.
enum class split_set : std::uint8_t {
  all,   ///< every one of num_splits (split_kv_partials returns them all)
  seen,  ///< only those in which some row sees a key: the combine skips the others anyway
};

/// The splits' partial results on validated arguments whose operands are as the matrix unit sees
/// them (detail/recurrence.hpp). Memory is a partial of rows * d_v floats per split kept, so with
/// split_set::seen at most one per KV block whatever num_splits is; a count the system cannot
/// provide is an amla::invalid_argument naming `<prefix>.num_splits`.
template <class = void>
std::vector<SplitPartial<float>> split_kv_partials_core(const char* fn, const char* splits_arg,
                                                        const HeadGroup& g,
                                                        const SplitKvOptions& options,
                                                        split_set which) {
  const Eigen::Index n = g.n_keys();
  const int bs = options.split.block_size;
  const Eigen::Index count =
      which == split_set::all ? options.num_splits : nonempty_splits(n, bs, options.num_splits);
  amla::detail::require_allocatable(
      fn, splits_arg,
      static_cast<std::uint64_t>(amla::detail::checked_product(
          fn, splits_arg, "partial outputs [splits, rows, d_v]", count, g.rows(), g.d_v())),
      sizeof(float));
  auto ranges = first_split_ranges(n, bs, options.num_splits, count);
  if (which == split_set::seen) {
    const Eigen::Index seen = max_visible_keys(g);
    std::erase_if(ranges, [seen](const KeyRange& k) { return k.begin >= seen; });
  }
  std::vector<SplitPartial<float>> parts;
  std::vector<int> visible;
  try {
    parts.resize(ranges.size());
    for (auto& p : parts) {
      p.out.resize(g.rows(), g.d_v());
      p.lse.resize(g.rows());
    }
  } catch (const std::bad_alloc&) {
    amla::detail::throw_invalid(fn, splits_arg,
                                std::to_string(ranges.size()) + " splits of " +
                                    amla::detail::shape_text(g.rows(), g.d_v()) + " partials",
                                "must fit in memory (the allocation failed)");
  }
  for (std::size_t s = 0; s < ranges.size(); ++s) {
    const HeadGroup sub = restrict_keys(g, ranges[s], visible);
    auto& p = parts[s];
    p.keys = ranges[s];
    base_core(sub, options.split, p.out,
              std::span<float>(p.lse.data(), static_cast<std::size_t>(g.rows())));
  }
  return parts;
}

/// Split-KV attention on validated arguments whose operands are as the matrix unit sees them,
/// named `fn` in errors. Splits no row sees (past the keys, or past every row's window) are not
/// computed: their partials would have lse -inf, which the combine skips. A group in which no row
/// sees a key gets out = 0 and lse = -inf.
template <class = void>
void split_kv_core_named(const char* fn, const char* splits_arg, const HeadGroup& g,
                         const SplitKvOptions& options, Eigen::Ref<MatrixF> out,
                         std::span<float> lse) {
  const auto parts = split_kv_partials_core(fn, splits_arg, g, options, split_set::seen);
  if (parts.empty()) {
    out.setZero();
    std::fill(lse.begin(), lse.end(), empty_row_lse);
    return;
  }
  combine_splits<float>(parts, out, lse);
}

/// Split-KV as the decode entry point sees it (detail/recurrence.hpp).
struct SplitKvRecurrence : Recurrence<SplitKvOptions> {
  template <class = void>
  static void core(const HeadGroup& g, const SplitKvOptions& o, Eigen::Ref<MatrixF> out,
                   std::span<float> lse) {
    split_kv_core_named("split_kv_decode", "split.num_splits", g, o, out, lse);
  }
  static constexpr const char* decode_name = "split_kv_decode";
  static constexpr const char* options_name = "split";
  static void validate(const char* fn, std::string_view prefix, const SplitKvOptions& o) {
    validate_split_kv_options(fn, prefix, o);
  }
  static operand_gather gather(const SplitKvOptions& o) { return gather_for(o.split.mode); }
};

}  // namespace detail

/// Every split's partial result for one head group (Base inside each split; in bf16 mode the
/// operands are rounded to BF16 first).
template <class = void>
std::vector<SplitPartial<float>> split_kv_partials(const HeadGroup& g,
                                                   const SplitKvOptions& options) {
  return detail::run_dense<detail::SplitKvRecurrence>(
      "split_kv_partials", g, options, g.rows(), g.d_v(), static_cast<std::size_t>(g.rows()),
      [&](const HeadGroup& operands) {
        return detail::split_kv_partials_core("split_kv_partials", "options.num_splits", operands,
                                              options, detail::split_set::all);
      });
}

/// Split-KV attention of one head group into out [rows, d_v] and lse [rows].
template <class = void>
void split_kv_attention(const HeadGroup& g, const SplitKvOptions& options, Eigen::Ref<MatrixF> out,
                        std::span<float> lse) {
  detail::run_dense<detail::SplitKvRecurrence>(
      "split_kv_attention", g, options, out.rows(), out.cols(), lse.size(),
      [&](const HeadGroup& operands) {
        detail::split_kv_core_named("split_kv_attention", "options.num_splits", operands, options,
                                    out, lse);
      });
}

/// Split-KV attention of one head group, into owned outputs.
template <class = void>
BaseResult split_kv_attention(const HeadGroup& g, const SplitKvOptions& options = {}) {
  return detail::owned_result<float>(g, [&](Eigen::Ref<MatrixF> out, std::span<float> lse) {
    split_kv_attention(g, options, out, lse);
  });
}

/// Split-KV attention over a paged decode problem: split_kv_decode(inputs, options, outputs,
/// split = {}) into caller buffers, or split_kv_decode(inputs, options = {}, split = {}) into an
/// owned ReportedDecodeResult<float>. Every sequence is cut into split.num_splits ranges of its
/// own length. In bf16 mode a float cache is rounded to BF16 once, while gathering. Validates
/// everything before writing.
inline constexpr detail::DecodeEntry<detail::SplitKvRecurrence> split_kv_decode{};

}  // namespace amla::attention
