// amla/attention/decode_problem.hpp: the inputs and outputs of an MLA/GQA decode kernel, their
// validation, and the driver that turns a paged problem into dense head groups.
//
// Tensors (row-major, last index fastest), all views over the caller's memory:
//   q            [batch, s_q, h_q, d_qk]                      element T (float or amla::bf16)
//   kv           [num_pages, page_size, h_kv, d_qk]           element T: the paged K cache
//   v            [num_pages, page_size, h_kv, d_v] or empty   element T: a separate V cache; when
//                empty, V is the first d_v columns of kv (MLA: d_qk 576 = 512 latent + 64 RoPE,
//                d_v 512), as FlashMLA and AMLA read it
//   block_table  [batch, max_pages_per_seq]                   int32: page of the i-th page_size
//                keys of sequence b
//   seqlens      [batch]                                      int32: keys of sequence b
//   out          [batch, s_q, h_q, d_v]                       float, double or amla::bf16
//   lse          [batch, h_q, s_q]                            float or double, natural log
// Key s of sequence b lives in page block_table[b, s / page_size], slot s % page_size. Only the
// first ceil(seqlens[b] / page_size) entries of a block_table row are read (and validated); the
// rest may hold anything, and cache pages and slots past a sequence's length are never read.
//
// Query head h uses KV head g = h / (h_q / h_kv). With causal = true the mask is aligned to the
// end: query token t of s_q sees keys [0, seqlen - s_q + t], i.e. seqlen - s_q + t + 1 keys
// clamped to [0, seqlen] (the last token sees the whole sequence).
//
// Empty rows. A sequence of length 0, or a row whose causal window is empty, attends no key:
// amla writes out = 0 and lse = -inf, the log of the empty sum. FlashMLA (like FlashAttention,
// whose softmax epilogue it shares) writes lse = +inf for a row whose sum is 0 (or NaN) in its
// final output, and -inf only in split-KV partials so that the combine gives them weight 0; compare
// such rows by their meaning, not their bits (out is 0 in every case).
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
#include <type_traits>
#include <vector>

#include "amla/attention/detail/convert.hpp"
#include "amla/attention/detail/parallel.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::attention {

/// The sizes of a decode problem. Every field must be >= 1, h_kv must divide h_q, and a
/// sequence holds at most max_pages_per_seq * page_size keys.
struct DecodeShape {
  int batch = 1;
  int s_q = 1;                ///< query tokens per sequence (1, or more with MTP/speculation)
  int h_q = 128;              ///< query heads
  int h_kv = 1;               ///< KV heads (MLA: 1)
  int d_qk = 576;             ///< head dim of Q and K
  int d_v = 512;              ///< head dim of V and of the output
  int num_pages = 1;          ///< pages in the cache
  int page_size = 64;         ///< keys per page (FlashMLA 64, CANN 128, SGLang 1)
  int max_pages_per_seq = 1;  ///< columns of block_table

  int heads_per_group() const { return h_q / h_kv; }
  /// Query rows of one head group: s_q * h_q / h_kv.
  int rows_per_group() const { return s_q * heads_per_group(); }
  std::int64_t max_seqlen() const {
    return static_cast<std::int64_t>(max_pages_per_seq) * page_size;
  }

  std::size_t q_elems() const { return prod(batch, s_q, h_q, d_qk); }
  std::size_t kv_elems() const { return prod(num_pages, page_size, h_kv, d_qk); }
  std::size_t v_elems() const { return prod(num_pages, page_size, h_kv, d_v); }
  std::size_t block_table_elems() const { return prod(batch, max_pages_per_seq, 1, 1); }
  std::size_t seqlens_elems() const { return static_cast<std::size_t>(batch); }
  std::size_t out_elems() const { return prod(batch, s_q, h_q, d_v); }
  std::size_t lse_elems() const { return prod(batch, h_q, s_q, 1); }

  /// Offsets of elements (no bounds checks).
  std::size_t q_offset(int b, int t, int h) const {
    return ((static_cast<std::size_t>(b) * s_q + t) * h_q + h) * d_qk;
  }
  std::size_t out_offset(int b, int t, int h) const {
    return ((static_cast<std::size_t>(b) * s_q + t) * h_q + h) * d_v;
  }
  std::size_t lse_offset(int b, int t, int h) const {
    return (static_cast<std::size_t>(b) * h_q + h) * s_q + t;
  }
  /// Offset of (page, slot, kv head) in kv (times d_qk) or v (times d_v) before the head dim.
  std::size_t slot_index(int page, int slot, int g) const {
    return (static_cast<std::size_t>(page) * page_size + slot) * h_kv + g;
  }

 private:
  static std::size_t prod(int a, int b, int c, int d) {
    return static_cast<std::size_t>(a) * static_cast<std::size_t>(b) * static_cast<std::size_t>(c) *
           static_cast<std::size_t>(d);
  }
};

/// Element types of the inputs: float, or amla::bf16 as a kernel stores them.
template <class T>
concept decode_element = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

/// Read-only views of a decode problem's inputs (see the file comment for layouts).
template <decode_element T>
struct DecodeInputs {
  DecodeShape shape;
  std::span<const T> q;
  std::span<const T> kv;
  std::span<const T> v;  ///< empty: V is the first d_v columns of kv
  std::span<const std::int32_t> block_table;
  std::span<const std::int32_t> seqlens;

  /// Whether V is read from the K cache (MLA) rather than a separate V cache.
  bool v_in_kv() const { return v.empty(); }
};

/// What the problem means (mask, scale, output cast) and how the host runs it (threads).
struct DecodeOptions {
  bool causal = false;                 ///< mask aligned to the end (see the file comment)
  std::optional<float> softmax_scale;  ///< default 1 / sqrt(d_qk); must be finite and > 0
  /// Round the final output to BF16 as a kernel's output cast does (a bf16 `out` always is).
  bool round_output_bf16 = false;
  int threads = 0;  ///< host threads; 0 = std::thread::hardware_concurrency()
  /// Query rows per task within a head group (0 = the whole group). Part of the result's
  /// definition (a GEMM's low bits may depend on how rows are blocked), independent of `threads`.
  int rows_per_task = 64;
};

/// Writable views of the outputs. lse may be empty when the caller does not want it.
template <class OutT = float, class LseT = float>
struct DecodeOutputs {
  static_assert(std::is_same_v<OutT, float> || std::is_same_v<OutT, double> ||
                    std::is_same_v<OutT, bf16>,
                "out elements are float, double or amla::bf16");
  static_assert(std::is_same_v<LseT, float> || std::is_same_v<LseT, double>,
                "lse elements are float or double");
  std::span<OutT> out;  ///< [batch, s_q, h_q, d_v]
  std::span<LseT> lse;  ///< [batch, h_q, s_q], natural log; may be empty
};

/// Owning outputs, for callers that do not bring their own memory.
template <class OutT = float, class LseT = float>
struct DecodeResult {
  DecodeShape shape;
  std::vector<OutT> out;
  std::vector<LseT> lse;

  explicit DecodeResult(const DecodeShape& s) : shape(s), out(s.out_elems()), lse(s.lse_elems()) {}
  DecodeOutputs<OutT, LseT> view() { return {out, lse}; }
  const OutT* out_row(int b, int t, int h) const { return out.data() + shape.out_offset(b, t, h); }
  LseT lse_at(int b, int t, int h) const { return lse[shape.lse_offset(b, t, h)]; }
};

/// log2(e): multiply a natural-log lse by it for base-2 consumers (kernels that use exp2 with a
/// scale folded by log2(e), as FlashAttention and FlashMLA do internally).
inline constexpr double log2_e = std::numbers::log2e;
/// lse in base 2: lse * log2(e). -inf stays -inf.
template <class S>
S lse_to_log2(S lse) noexcept {
  return lse * static_cast<S>(log2_e);
}

/// The softmax scale a problem uses: options.softmax_scale, or 1 / sqrt(d_qk).
inline float resolved_scale(const DecodeOptions& options, const DecodeShape& shape) {
  return options.softmax_scale
             ? *options.softmax_scale
             : static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.d_qk)));
}

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

/// Where a dense chunk handed to a core sits in the problem.
struct GroupLocation {
  int batch = 0;
  int kv_head = 0;
  int row_begin = 0;  ///< first row of the chunk within the head group's rows
};

namespace detail {

template <class T>
std::string span_text(std::span<T> s) {
  if (s.data() == nullptr && !s.empty())
    return "null pointer with size " + std::to_string(s.size());
  return "span of " + std::to_string(s.size()) + " elements";
}

template <class T>
void check_span(const char* fn, const char* arg, std::span<T> s, std::size_t expected,
                const std::string& layout) {
  if (s.data() == nullptr && expected != 0) {
    amla::detail::throw_invalid(
        fn, arg, "null pointer",
        "must point to " + layout + " = " + std::to_string(expected) + " elements");
  }
  if (s.size() != expected) {
    amla::detail::throw_invalid(
        fn, arg, span_text(s),
        "must hold " + layout + " = " + std::to_string(expected) + " elements");
  }
}

inline void check_dim(const char* fn, const char* name, int value) {
  if (value < 1) amla::detail::throw_invalid(fn, name, std::to_string(value), "must be >= 1");
}

}  // namespace detail

/// Validates a shape alone (every dim >= 1, h_kv divides h_q, d_v <= d_qk when V is read from
/// the kv cache); throws amla::invalid_argument naming `fn`.
inline void validate_shape(const char* fn, const DecodeShape& s, bool v_in_kv) {
  detail::check_dim(fn, "shape.batch", s.batch);
  detail::check_dim(fn, "shape.s_q", s.s_q);
  detail::check_dim(fn, "shape.h_q", s.h_q);
  detail::check_dim(fn, "shape.h_kv", s.h_kv);
  detail::check_dim(fn, "shape.d_qk", s.d_qk);
  detail::check_dim(fn, "shape.d_v", s.d_v);
  detail::check_dim(fn, "shape.num_pages", s.num_pages);
  detail::check_dim(fn, "shape.page_size", s.page_size);
  detail::check_dim(fn, "shape.max_pages_per_seq", s.max_pages_per_seq);
  if (s.h_q % s.h_kv != 0) {
    amla::detail::throw_invalid(fn, "shape.h_kv", std::to_string(s.h_kv),
                                "must divide shape.h_q = " + std::to_string(s.h_q));
  }
  if (v_in_kv && s.d_v > s.d_qk) {
    amla::detail::throw_invalid(fn, "shape.d_v", std::to_string(s.d_v),
                                "must be <= shape.d_qk = " + std::to_string(s.d_qk) +
                                    " when V is read from the kv cache (v is empty)");
  }
}

/// Validates a decode problem; throws amla::invalid_argument naming `fn`, the argument, its value
/// and the rule. Returns the softmax scale to use.
template <decode_element T>
float validate_decode(const char* fn, const DecodeInputs<T>& in, const DecodeOptions& options) {
  const DecodeShape& s = in.shape;
  validate_shape(fn, s, in.v_in_kv());
  detail::check_span(fn, "q", in.q, s.q_elems(), "[batch, s_q, h_q, d_qk]");
  detail::check_span(fn, "kv", in.kv, s.kv_elems(), "[num_pages, page_size, h_kv, d_qk]");
  if (!in.v_in_kv()) {
    detail::check_span(fn, "v", in.v, s.v_elems(), "[num_pages, page_size, h_kv, d_v] (or empty)");
  }
  detail::check_span(fn, "block_table", in.block_table, s.block_table_elems(),
                     "[batch, max_pages_per_seq]");
  detail::check_span(fn, "seqlens", in.seqlens, s.seqlens_elems(), "[batch]");
  for (int b = 0; b < s.batch; ++b) {
    const std::int32_t len = in.seqlens[static_cast<std::size_t>(b)];
    if (len < 0 || len > s.max_seqlen()) {
      amla::detail::throw_invalid(
          fn, "seqlens", "seqlens[" + std::to_string(b) + "] = " + std::to_string(len),
          "must lie in [0, max_pages_per_seq * page_size = " + std::to_string(s.max_seqlen()) +
              "]");
    }
    const int pages = (len + s.page_size - 1) / s.page_size;
    for (int i = 0; i < pages; ++i) {
      const std::int32_t page =
          in.block_table[static_cast<std::size_t>(b) * s.max_pages_per_seq + i];
      if (page < 0 || page >= s.num_pages) {
        amla::detail::throw_invalid(
            fn, "block_table",
            "block_table[" + std::to_string(b) + "][" + std::to_string(i) +
                "] = " + std::to_string(page),
            "a page holding keys of sequence " + std::to_string(b) + " (seqlen " +
                std::to_string(len) +
                ") must lie in [0, num_pages = " + std::to_string(s.num_pages) + ")");
      }
    }
  }
  if (options.softmax_scale) {
    const float sc = *options.softmax_scale;
    if (!std::isfinite(sc) || !(sc > 0.0f)) {
      amla::detail::throw_invalid(fn, "options.softmax_scale", amla::detail::to_text(sc),
                                  "must be finite and > 0");
    }
  }
  if (options.threads < 0) {
    amla::detail::throw_invalid(fn, "options.threads", std::to_string(options.threads),
                                "must be >= 0 (0 = hardware concurrency)");
  }
  if (options.rows_per_task < 0) {
    amla::detail::throw_invalid(fn, "options.rows_per_task", std::to_string(options.rows_per_task),
                                "must be >= 0 (0 = whole head group)");
  }
  return resolved_scale(options, s);
}

/// Validates the outputs against a shape (out must be [batch, s_q, h_q, d_v]; lse [batch, h_q,
/// s_q] or empty).
template <class OutT, class LseT>
void validate_outputs(const char* fn, const DecodeShape& s, const DecodeOutputs<OutT, LseT>& out) {
  detail::check_span(fn, "out", out.out, s.out_elems(), "[batch, s_q, h_q, d_v]");
  if (!out.lse.empty()) detail::check_span(fn, "lse", out.lse, s.lse_elems(), "[batch, h_q, s_q]");
}

/// Validates a dense head group and the shapes of the buffers a core writes (out [rows, d_v],
/// lse [rows]); throws amla::invalid_argument naming `fn`. Keys a row cannot see may hold
/// anything only past the largest visible count of the group: cores multiply P = 0 by keys inside
/// it, so they must be finite there.
inline void validate_head_group(const char* fn, const HeadGroup& g, Eigen::Index out_rows,
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
  if (!std::isfinite(g.scale) || !(g.scale > 0.0f)) {
    amla::detail::throw_invalid(fn, "group.scale", amla::detail::to_text(g.scale),
                                "must be finite and > 0");
  }
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
inline Eigen::Index max_visible_keys(const HeadGroup& g) {
  if (g.visible.empty()) return g.n_keys();
  Eigen::Index m = 0;
  for (const int v : g.visible) m = std::max<Eigen::Index>(m, v);
  return m;
}

/// Visible key count of query token t (of s_q) in a sequence of seqlen keys.
inline int visible_keys(int seqlen, int s_q, int t, bool causal) {
  if (!causal) return seqlen;
  return std::clamp(seqlen - s_q + t + 1, 0, seqlen);
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
  const std::int32_t* table =
      in.block_table.data() + static_cast<std::size_t>(b) * s.max_pages_per_seq;
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
        outputs.lse[s.lse_offset(b, t, h)] = static_cast<LseT>(l[static_cast<std::size_t>(i)]);
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
