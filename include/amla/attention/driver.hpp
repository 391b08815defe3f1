// amla/attention/driver.hpp: the driver that runs a dense recurrence over a paged decode problem,
// the dense head group it hands to each recurrence, and the conventions every recurrence shares:
// its options (RecurrenceOptions: precision mode and block size, one validator) and its owned
// results (AttentionResult for one head group, ReportedDecodeResult for a decode, each carrying
// the recurrence's report). Every recurrence's paged entry point xxx_decode is written once, in
// attention/detail/recurrence.hpp.
//
// The problem itself (shape, layouts, mask, inputs, options, outputs, validation, lse
// conventions) is described once, in include/amla/problem/; this header brings those names into
// amla::attention for the recurrences' callers.
//
// The driver (run_decode) visits every (batch, KV head) pair: it gathers that group's keys and
// values from the used pages into dense matrices (converting to float, rounding to BF16 when the
// recurrence emulates BF16 operands and the cache holds floats), builds the group's query rows in
// the HeadGroup order r = t * (h_q / h_kv) + j and the per-row visible key counts, calls the
// recurrence's dense core on chunks of rows, and scatters out and lse back. Work runs on
// std::threads, over groups, or over row chunks and key ranges when there are fewer groups than
// threads. Row chunks have a fixed size (DecodeOptions::rows_per_task) that does not depend on the
// thread count, so results never depend on it.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/detail/convert.hpp"
#include "amla/detail/parallel.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"
#include "amla/problem/conventions.hpp"
#include "amla/problem/inputs.hpp"
#include "amla/problem/options.hpp"
#include "amla/problem/outputs.hpp"
#include "amla/problem/shape.hpp"
#include "amla/problem/validate.hpp"

namespace amla::attention {

using amla::decode_element;
using amla::DecodeInputs;
using amla::DecodeOptions;
using amla::DecodeOutputs;
using amla::DecodeResult;
using amla::DecodeShape;
using amla::empty_row_lse;
using amla::log2_e;
using amla::lse_to_log2;
using amla::resolved_scale;
using amla::validate_decode;
using amla::validate_outputs;
using amla::validate_shape;
using amla::visible_keys;

/// The arithmetic a recurrence emulates. bf16: what the kernel does (BF16 operands of every
/// matrix product, including P, with FP32 accumulation and FP32 vector math). float32: the same
/// recurrence with no BF16 cast anywhere (operands used as given, P kept in FP32), which agrees
/// with the float64 golden to about 1e-6 relative and isolates the error the BF16 casts cause.
enum class precision : std::uint8_t { bf16, float32 };

/// Whether the recurrence wants its operands rounded to BF16 when gathered (BF16-emulating
/// modes) or as stored (float32 modes). bf16 caches are exact either way.
enum class operand_gather : std::uint8_t { as_stored, round_bf16 };

/// The gather a recurrence running in `mode` needs.
constexpr operand_gather gather_for(precision mode) noexcept {
  return mode == precision::bf16 ? operand_gather::round_bf16 : operand_gather::as_stored;
}

/// The options every recurrence shares. Each recurrence's options are (or extend) the
/// RecurrenceOptions of its documented block size: Base and AMLA 512 (AMLA's kernel), seesaw and
/// transposed 64 (FlashMLA's and ETAP's page block); split-KV embeds Base's. Checked by
/// validate_recurrence_options.
template <int DefaultBlockSize>
struct RecurrenceOptions {
  static constexpr int default_block_size = DefaultBlockSize;
  /// precision::bf16: the kernel's arithmetic; precision::float32: no BF16 cast anywhere.
  precision mode = precision::bf16;
  int block_size = DefaultBlockSize;  ///< keys per KV block; >= 1
};

/// Checks a recurrence's shared options; throws amla::invalid_argument from `fn` naming
/// `<prefix>.mode` (not a precision enumerator) or `<prefix>.block_size` (< 1). `prefix` names the
/// options argument: "options" for a dense entry point, the recurrence ("seesaw", "amla", ...) for
/// a decode.
template <int DefaultBlockSize>
void validate_recurrence_options(const char* fn, std::string_view prefix,
                                 const RecurrenceOptions<DefaultBlockSize>& options) {
  const auto field = [prefix](const char* name) { return std::string(prefix) + "." + name; };
  if (options.mode != precision::bf16 && options.mode != precision::float32) {
    amla::detail::throw_invalid(fn, field("mode").c_str(),
                                std::to_string(static_cast<int>(options.mode)),
                                "must be precision::bf16 or precision::float32");
  }
  if (options.block_size < 1) {
    amla::detail::throw_invalid(fn, field("block_size").c_str(), std::to_string(options.block_size),
                                "must be >= 1");
  }
}

/// The report of a recurrence that has none (every result type carries a `report`; AMLA's is an
/// AmlaReport).
struct NoReport {};

/// Owned outputs of a recurrence over one head group: out [rows, d_v], lse [rows] (natural log;
/// -inf for rows that see no key), and the recurrence's report.
template <class Scalar, class Report = NoReport>
struct AttentionResult {
  Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> out;
  Eigen::Matrix<Scalar, Eigen::Dynamic, 1> lse;
  [[no_unique_address]] Report report{};

  MatrixF out_float() const { return out.template cast<float>(); }
  Eigen::VectorXf lse_float() const { return lse.template cast<float>(); }
};

/// Owned outputs of a recurrence over a paged decode problem (a DecodeResult) and its report.
template <class Scalar, class Report = NoReport>
struct ReportedDecodeResult : DecodeResult<Scalar, Scalar> {
  [[no_unique_address]] Report report{};
  explicit ReportedDecodeResult(const DecodeShape& s) : DecodeResult<Scalar, Scalar>(s) {}
};

/// Where a dense chunk handed to a core sits in the problem.
struct GroupLocation {
  int batch = 0;
  int kv_head = 0;
  int row_begin = 0;  ///< first row of the chunk within the head group's rows
};

/// Validates a dense head group and the shapes of the buffers a core writes (out [rows, d_v],
/// lse [rows]); throws amla::invalid_argument naming `fn`. Keys a row cannot see may hold
/// anything: past the largest visible count of the group they are never read, and inside it the
/// cores keep them out of that row's output (problem/conventions.hpp, rule 1).
template <class S>
void validate_head_group(const char* fn, const BasicHeadGroup<S>& g, Eigen::Index out_rows,
                         Eigen::Index out_cols, std::size_t lse_size) {
  using amla::detail::shape_text;
  if (g.k.cols() != g.q.cols()) {
    amla::detail::throw_invalid(fn, "group.k", "shape " + shape_text(g.k.rows(), g.k.cols()),
                                "must have q.cols() = " + std::to_string(g.q.cols()) + " columns");
  }
  if (g.v.rows() != g.k.rows()) {
    amla::detail::throw_invalid(fn, "group.v", "shape " + shape_text(g.v.rows(), g.v.cols()),
                                "must have k.rows() = " + std::to_string(g.k.rows()) + " rows");
  }
  if (!g.visible.empty()) {
    if (g.visible.size() != static_cast<std::size_t>(g.rows())) {
      amla::detail::throw_invalid(
          fn, "group.visible", std::to_string(g.visible.size()) + " entries",
          "must be empty or hold one count per query row (" + std::to_string(g.rows()) + ")");
    }
    for (std::size_t r = 0; r < g.visible.size(); ++r) {
      if (g.visible[r] < 0 || g.visible[r] > g.n_keys()) {
        amla::detail::throw_invalid(
            fn, "group.visible",
            "visible[" + std::to_string(r) + "] = " + std::to_string(g.visible[r]),
            "must lie in [0, n_keys = " + std::to_string(g.n_keys()) + "]");
      }
    }
  }
  amla::detail::require_finite_positive(fn, "group.scale", g.scale);
  if (out_rows != g.rows() || out_cols != g.d_v()) {
    amla::detail::throw_invalid(fn, "out", "shape " + shape_text(out_rows, out_cols),
                                "must be [rows, d_v] = " + shape_text(g.rows(), g.d_v()));
  }
  if (lse_size != static_cast<std::size_t>(g.rows())) {
    amla::detail::throw_invalid(
        fn, "lse", std::to_string(lse_size) + " entries",
        "must hold one value per query row (" + std::to_string(g.rows()) + ")");
  }
}

/// The largest visible key count over a group's rows (n_keys when visible is empty).
template <class S>
Eigen::Index max_visible_keys(const BasicHeadGroup<S>& g) {
  if (g.visible.empty()) return g.n_keys();
  Eigen::Index m = 0;
  for (const int v : g.visible) m = std::max<Eigen::Index>(m, v);
  return m;
}

namespace detail {

/// Copies n elements widening to float, optionally rounding to BF16 (float caches only).
template <class T>
void widen_row(const T* src, float* dst, int n, bool round) {
  if constexpr (std::is_same_v<T, bf16>) {
    for (int i = 0; i < n; ++i) dst[i] = src[i].to_float();
  } else {
    if (round) {
      for (int i = 0; i < n; ++i) dst[i] = round_bf16(src[i]);
    } else {
      std::copy(src, src + n, dst);
    }
  }
}

/// The dense inputs of one head group.
struct GatheredGroup {
  MatrixF q;                 ///< [rows, d_qk]
  MatrixF k;                 ///< [seqlen, d_qk]
  MatrixF v;                 ///< [seqlen, d_v] for a separate V cache; empty when V lives in k
  std::vector<int> visible;  ///< [rows]
};

/// Keys handled by one gather task (a few MB per task).
inline constexpr int gather_keys_per_task = 1024;

template <class T>
void gather_queries(const DecodeInputs<T>& in, const DecodeOptions& opt, int b, int g, bool round,
                    GatheredGroup& out) {
  const DecodeShape& s = in.shape;
  const int hpg = s.heads_per_group();
  const int rows = s.rows_per_group();
  const int len = in.seqlens[static_cast<std::size_t>(b)];
  out.q.resize(rows, s.d_qk);
  out.visible.resize(static_cast<std::size_t>(rows));
  for (int t = 0; t < s.s_q; ++t) {
    for (int j = 0; j < hpg; ++j) {
      const int r = t * hpg + j;
      widen_row(in.q.data() + s.q_offset(b, t, g * hpg + j), out.q.row(r).data(), s.d_qk, round);
      out.visible[static_cast<std::size_t>(r)] = visible_keys(len, s.s_q, t, opt.causal);
    }
  }
  out.k.resize(len, s.d_qk);
  if (in.v_in_kv()) {
    out.v.resize(0, s.d_v);
  } else {
    out.v.resize(len, s.d_v);
  }
}

/// Copies keys [k0, k1) of group (b, g) into out.k (and out.v); only used pages are touched.
template <class T>
void gather_keys(const DecodeInputs<T>& in, int b, int g, int k0, int k1, bool round,
                 GatheredGroup& out) {
  const DecodeShape& s = in.shape;
  const std::int32_t* table = in.block_table.data() + s.table_offset(b, 0);
  for (int key = k0; key < k1; ++key) {
    const int page = table[key / s.page_size];
    const std::size_t slot = s.slot_index(page, key % s.page_size, g);
    widen_row(in.kv.data() + slot * s.d_qk, out.k.row(key).data(), s.d_qk, round);
    if (!in.v_in_kv()) widen_row(in.v.data() + slot * s.d_v, out.v.row(key).data(), s.d_v, round);
  }
}

}  // namespace detail

/// Runs a dense recurrence over a paged decode problem (see the file comment).
///
/// `core(const HeadGroup& group, const GroupLocation& where, Eigen::Ref<RowMatrix> out,
/// std::span<Scalar> lse)` computes a chunk of one head group: out is [chunk rows, d_v] and lse
/// [chunk rows], in Scalar (float for the kernel emulations, double for golden). It is called
/// concurrently from several threads on different chunks, so it must not share mutable state
/// without synchronisation. `fn` names the entry point in error messages. Validates everything
/// first (nothing is written on a throw).
template <class Scalar, decode_element T, class OutT, class LseT, class Core>
void run_decode(const char* fn, const DecodeInputs<T>& in, const DecodeOptions& options,
                const DecodeOutputs<OutT, LseT>& outputs, operand_gather gather, Core&& core) {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>);
  using RowMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const float scale = validate_decode(fn, in, options);
  validate_outputs(fn, in.shape, outputs);

  const DecodeShape& s = in.shape;
  const bool round = gather == operand_gather::round_bf16 && std::is_same_v<T, float>;
  const int rows = s.rows_per_group();
  const int chunk_rows = options.rows_per_task == 0 ? rows : std::min(options.rows_per_task, rows);
  const int chunks = (rows + chunk_rows - 1) / chunk_rows;
  const int groups = s.batch * s.h_kv;
  const unsigned threads = amla::detail::resolve_threads(options.threads);

  auto run_chunk = [&](const detail::GatheredGroup& gg, int b, int g, int c) {
    const int r0 = c * chunk_rows;
    const int n = std::min(chunk_rows, rows - r0);
    const auto v_view = in.v_in_kv() ? Eigen::Ref<const MatrixF>(gg.k.leftCols(s.d_v))
                                     : Eigen::Ref<const MatrixF>(gg.v);
    const HeadGroup hg{gg.q.middleRows(r0, n), gg.k, v_view,
                       std::span<const int>(gg.visible)
                           .subspan(static_cast<std::size_t>(r0), static_cast<std::size_t>(n)),
                       scale};
    RowMatrix o(n, s.d_v);
    std::vector<Scalar> l(static_cast<std::size_t>(n));
    core(hg, GroupLocation{b, g, r0}, Eigen::Ref<RowMatrix>(o), std::span<Scalar>(l));
    const int hpg = s.heads_per_group();
    for (int i = 0; i < n; ++i) {
      const int r = r0 + i;
      const int t = r / hpg;
      const int h = g * hpg + r % hpg;
      OutT* dst = outputs.out.data() + s.out_offset(b, t, h);
      for (int d = 0; d < s.d_v; ++d) {
        dst[d] = amla::detail::store_as<OutT>(o(i, d), options.round_output_bf16);
      }
      if (!outputs.lse.empty()) {
        outputs.lse[s.lse_offset(b, t, h)] =
            amla::detail::store_lse<LseT>(l[static_cast<std::size_t>(i)]);
      }
    }
  };

  if (static_cast<unsigned>(groups) >= threads || threads == 1) {
    // Enough groups to keep every thread busy: one task per group.
    amla::detail::parallel_for(static_cast<std::size_t>(groups), threads, [&](std::size_t task) {
      const int b = static_cast<int>(task) / s.h_kv;
      const int g = static_cast<int>(task) % s.h_kv;
      detail::GatheredGroup gg;
      detail::gather_queries(in, options, b, g, round, gg);
      detail::gather_keys(in, b, g, 0, static_cast<int>(gg.k.rows()), round, gg);
      for (int c = 0; c < chunks; ++c) run_chunk(gg, b, g, c);
    });
    return;
  }
  // Fewer groups than threads: gather every group with key ranges spread over the threads, then
  // spread (group, row chunk) tasks.
  std::vector<detail::GatheredGroup> gathered(static_cast<std::size_t>(groups));
  std::vector<std::pair<int, int>> key_tasks;  // (group, first key)
  for (int gi = 0; gi < groups; ++gi) {
    const int b = gi / s.h_kv;
    const int g = gi % s.h_kv;
    detail::gather_queries(in, options, b, g, round, gathered[static_cast<std::size_t>(gi)]);
    const int len = in.seqlens[static_cast<std::size_t>(b)];
    for (int k0 = 0; k0 < len; k0 += detail::gather_keys_per_task) key_tasks.emplace_back(gi, k0);
  }
  amla::detail::parallel_for(key_tasks.size(), threads, [&](std::size_t task) {
    const auto [gi, k0] = key_tasks[task];
    const int b = gi / s.h_kv;
    const int len = in.seqlens[static_cast<std::size_t>(b)];
    detail::gather_keys(in, b, gi % s.h_kv, k0, std::min(len, k0 + detail::gather_keys_per_task),
                        round, gathered[static_cast<std::size_t>(gi)]);
  });
  amla::detail::parallel_for(
      static_cast<std::size_t>(groups) * chunks, threads, [&](std::size_t task) {
        const int gi = static_cast<int>(task) / chunks;
        const int c = static_cast<int>(task) % chunks;
        run_chunk(gathered[static_cast<std::size_t>(gi)], gi / s.h_kv, gi % s.h_kv, c);
      });
}

}  // namespace amla::attention
