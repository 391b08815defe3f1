// amla/mla/cost.hpp: multiply-accumulates and HBM traffic of the three MLA decode formulations,
// their roofline times on a chip, and the choice TyphoonMLA makes between its mixed kernel and
// the absorb-only fall-back.
//
// Counting (the TyphoonMLA paper, Table 1). A decode step has B requests of S_q query tokens each;
// every request attends a shared prefix of L_s tokens and its own suffix of L_n tokens. Only the
// attention itself is counted (QK^T and PV; no projections), MACs exactly, HBM traffic as the KV
// cache read, in elements ("words"):
//
//                 MACs                                     HBM words
//   naive, prefix B S_q L_s H (D_qk + D_v)                 L_s H (D_qk + D_v)      (read once)
//   naive, suffix B S_q L_n H (D_qk + D_v)                 B L_n H (D_qk + D_v)
//   absorb,prefix B S_q L_s H (2 D_l + D_r)                L_s (D_l + D_r)         (read once)
//   absorb,suffix B S_q L_n H (2 D_l + D_r)                B L_n (D_l + D_r)
//
// Naive attends per head with d_qk = D_n + D_r and d_v = D_v, so a key costs D_qk + D_v MACs per
// query row; absorb attends the latent [C_N, C_R] (D_l + D_r) and takes C_N (D_l) as values,
// 2 D_l + D_r MACs per row, with one cache row serving all H heads. TyphoonMLA is naive on the
// prefix and absorb on the suffixes, plus the LSE combine of the two partial outputs, which the
// paper's text (Section 3.2) prices at 2 B S_q H D_v MACs and "2 B S_q H D_v bytes" read; those
// are the elements of the two partial outputs, so amla counts them as elements like the rest of
// the table (the output write and the lse values are left out, as the paper leaves them out).
// For DeepSeek-V3 the per-token factors are 40 x 1024 and 136 x 1024 MACs and 40 x 1024 and
// 576 = 0.5625 x 1024 words (the table prints 0.56).
//
// Time. A kernel's time is its roofline time (amla/mla/roofline.hpp) with MACs counted as 2 FLOP
// and a word as `bytes_per_element` bytes (2: BF16/FP16 caches). Naive and absorb are one kernel
// each over prefix and suffix; TyphoonMLA runs as three kernels in sequence (its naive stage, its
// absorb stage, the combine), as the paper's implementation does (its Figure 4), so its time is
// the sum of three roofline times.
//
// Equation 1. Equating the naive prefix's read time with the absorb prefix's compute time gives
// the batch size above which the mixed kernel wins:
//   B_theta = (D_qk + D_v) / (S_q (2 D_l + D_r)) * T / M.
// The paper divides MACs by T and words by M. Read literally, with T in operations/s (376 TOPS)
// and M in bytes/s (1.8 TB/s), that mixes MACs with FLOP and words with bytes; the two factors of
// 2 cancel exactly for 16-bit caches (a MAC is 2 FLOP, a word is 2 bytes), so the printed formula
// is right for them and gives 61.4 for DeepSeek-V3 on the paper's NPU. For other element sizes the
// unit-consistent form is B_theta = (D_qk + D_v) bytes_per_element / (2 S_q (2 D_l + D_r)) * T / M,
// which `typhoon_batch_threshold` implements.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/enum_name.hpp"
#include "amla/mla/presets.hpp"
#include "amla/mla/roofline.hpp"
#include "amla/problem/workload.hpp"

namespace amla::mla {

/// The three ways of computing MLA decode attention.
enum class formulation : std::uint8_t {
  naive,    ///< decompressed per-head K and V (MHA, d_qk = D_n + D_r, d_v = D_v)
  absorb,   ///< W_KVb1 folded into the query, attention on the latent cache, W_KVb2 after
  typhoon,  ///< TyphoonMLA's mixed kernel: naive on the shared prefix, absorb on the suffixes
};

/// "naive", "absorb" or "typhoon".
constexpr std::string_view to_string(formulation f) {
  return amla::detail::enum_name(f, {"naive", "absorb", "typhoon"});
}

/// The decode step the cost model prices: B requests of S_q query tokens; each request attends
/// the shared prefix (L_s tokens) and its own suffix of L_n tokens. A shared prefix is what a
/// problem-layer Workload does not describe; `step_workload` and `decode_step(Workload, L_s)`
/// convert between the two.
struct DecodeStep {
  std::int64_t batch = 1;       ///< B
  std::int64_t s_q = 1;         ///< S_q: query tokens per request (1, or more with MTP)
  std::int64_t prefix_len = 0;  ///< L_s: tokens of the prefix every request shares
  std::int64_t suffix_len = 0;  ///< L_n: tokens of each request's own (non-shared) context
};

namespace detail {
/// Throws amla::invalid_argument, attributed to `function`, unless B >= 1, S_q >= 1, L_s >= 0
/// and L_n >= 0.
inline void validate_step(const char* function, const DecodeStep& step) {
  const auto check = [function](std::int64_t value, std::int64_t min, const char* name) {
    if (value < min) {
      amla::detail::throw_invalid(function, name, std::to_string(value),
                                  "must be >= " + std::to_string(min));
    }
  };
  check(step.batch, 1, "step.batch");
  check(step.s_q, 1, "step.s_q");
  check(step.prefix_len, 0, "step.prefix_len");
  check(step.suffix_len, 0, "step.suffix_len");
}
}  // namespace detail

/// Throws amla::invalid_argument unless B >= 1, S_q >= 1, L_s >= 0 and L_n >= 0.
inline void validate(const DecodeStep& step) {
  detail::validate_step("amla::mla::validate", step);
}

/// Requests of `seqlens` keys and s_q query tokens as a problem-layer Workload in the view of
/// formulation `view`: naive is per-head attention (h_kv = H, d_qk = D_n + D_r, d_v = D_v,
/// separate V), absorb one latent head (h_kv = 1, d_qk = D_l + D_r, d_v = D_l, V in K). Not
/// validated (Workload::validate does that).
inline Workload view_workload(const MlaDims& dims, formulation view, int s_q,
                              std::vector<int> seqlens, bool causal) {
  AMLA_REQUIRE(view != formulation::typhoon, "view", to_string(view),
               "must be naive or absorb (typhoon mixes the two)");
  const bool naive = view == formulation::naive;
  Workload w;
  w.s_q = s_q;
  w.h_q = dims.heads;
  w.h_kv = naive ? dims.heads : 1;
  w.d_qk = naive ? dims.d_qk() : dims.absorb_d_qk();
  w.d_v = naive ? dims.d_v : dims.absorb_d_v();
  w.v_in_kv = !naive;
  w.causal = causal;
  w.seqlens = std::move(seqlens);
  return w;
}

/// The step's attention as a Workload in the view of formulation `view` (view_workload): every
/// request attends L_s + L_n keys. A Workload has no shared prefix: its kv_bytes read the prefix
/// once per request, where the formulations' costs (formulation_cost) read it once per step.
inline Workload step_workload(const MlaDims& dims, const DecodeStep& step, formulation view,
                              bool causal = false) {
  const char* fn = "amla::mla::step_workload";
  detail::validate_dims(fn, dims);
  detail::validate_step(fn, step);
  const std::int64_t context = step.prefix_len + step.suffix_len;
  AMLA_REQUIRE(
      step.batch <= 0x7FFFFFFF && step.s_q <= 0x7FFFFFFF && context <= 0x7FFFFFFF, "step",
      std::to_string(step.batch) + ", " + std::to_string(step.s_q) + ", " + std::to_string(context),
      "batch, s_q and prefix_len + suffix_len must fit in int");
  const Workload w = view_workload(
      dims, view, static_cast<int>(step.s_q),
      std::vector<int>(static_cast<std::size_t>(step.batch), static_cast<int>(context)), causal);
  w.validate(fn);
  return w;
}

/// The step the cost model prices for a workload whose requests' contexts each begin with the
/// same `prefix_len` shared tokens: B = w.batch(), S_q = w.s_q, L_s = prefix_len and L_n the mean
/// of seqlens[b] - prefix_len, rounded to the nearest token (halves up).
inline DecodeStep decode_step(const Workload& w, std::int64_t prefix_len) {
  const char* fn = "amla::mla::decode_step";
  w.validate(fn);
  AMLA_REQUIRE(prefix_len >= 0, "prefix_len", prefix_len, "must be >= 0");
  std::int64_t suffixes = 0;
  for (std::size_t b = 0; b < w.seqlens.size(); ++b) {
    if (w.seqlens[b] < prefix_len) {
      amla::detail::throw_invalid(
          fn, "workload.seqlens",
          "seqlens[" + std::to_string(b) + "] = " + std::to_string(w.seqlens[b]),
          "must be >= prefix_len = " + std::to_string(prefix_len));
    }
    suffixes += w.seqlens[b] - prefix_len;
  }
  const std::int64_t batch = w.batch();
  return {batch, w.s_q, prefix_len, (2 * suffixes + batch) / (2 * batch)};
}

/// Work of a kernel or of a part of one: multiply-accumulates and HBM elements moved.
struct Work {
  double macs = 0;       ///< multiply-accumulates (2 FLOP each)
  double hbm_words = 0;  ///< elements read from or written to HBM

  constexpr double flops() const { return 2.0 * macs; }
  constexpr double hbm_bytes(double bytes_per_element) const {
    return hbm_words * bytes_per_element;
  }
  friend constexpr Work operator+(Work a, Work b) {
    return {a.macs + b.macs, a.hbm_words + b.hbm_words};
  }
  constexpr bool operator==(const Work&) const = default;
};

/// Per-token factors of Table 1: the MACs one query row spends on one key, and the elements one
/// cached token occupies.
struct TokenFactors {
  double macs_per_row_key = 0;  ///< naive: H (D_qk + D_v); absorb: H (2 D_l + D_r)
  double words_per_token = 0;   ///< naive: H (D_qk + D_v); absorb: D_l + D_r
};

/// Table 1's per-token factors of the naive or the absorb formulation. TyphoonMLA has no factors
/// of its own: it uses naive's on the prefix and absorb's on the suffix.
inline TokenFactors token_factors(formulation f, const MlaDims& dims) {
  detail::validate_dims("amla::mla::token_factors", dims);
  AMLA_REQUIRE(f != formulation::typhoon, "f", to_string(f),
               "must be naive or absorb (typhoon uses naive's factors on the prefix and absorb's "
               "on the suffix)");
  const double h = dims.heads;
  if (f == formulation::naive) {
    const double per_head = static_cast<double>(dims.d_qk()) + dims.d_v;
    return {h * per_head, h * per_head};
  }
  return {h * (2.0 * dims.d_latent + dims.d_rope),
          static_cast<double>(dims.d_latent) + dims.d_rope};
}

/// A formulation's work split into the parts that scale differently (Table 1's two terms) and the
/// LSE combine (TyphoonMLA only; zero for naive and absorb).
struct FormulationCost {
  formulation f = formulation::naive;
  Work prefix;   ///< attention over the shared prefix
  Work suffix;   ///< attention over the requests' own suffixes
  Work combine;  ///< merging the two partial outputs (TyphoonMLA)

  /// Table 1's row: prefix + suffix (the table leaves the combine out).
  constexpr Work attention() const { return prefix + suffix; }
  /// Everything, combine included.
  constexpr Work total() const { return prefix + suffix + combine; }
};

namespace detail {

inline Work prefix_work(const TokenFactors& t, const DecodeStep& s) {
  const double rows = static_cast<double>(s.batch) * static_cast<double>(s.s_q);
  const double ls = static_cast<double>(s.prefix_len);
  return {rows * ls * t.macs_per_row_key, ls * t.words_per_token};  // prefix read once
}

inline Work suffix_work(const TokenFactors& t, const DecodeStep& s) {
  const double rows = static_cast<double>(s.batch) * static_cast<double>(s.s_q);
  const double ln = static_cast<double>(s.suffix_len);
  return {rows * ln * t.macs_per_row_key,
          static_cast<double>(s.batch) * ln * t.words_per_token};  // one suffix per request
}

}  // namespace detail

/// The TyphoonMLA paper's Table 1 for formulation `f`, plus the combine its Section 3.2 prices.
inline FormulationCost formulation_cost(formulation f, const MlaDims& dims,
                                        const DecodeStep& step) {
  detail::validate_dims("amla::mla::formulation_cost", dims);
  detail::validate_step("amla::mla::formulation_cost", step);
  const TokenFactors naive = token_factors(formulation::naive, dims);
  const TokenFactors absorb = token_factors(formulation::absorb, dims);
  FormulationCost c;
  c.f = f;
  switch (f) {
    case formulation::naive:
      c.prefix = detail::prefix_work(naive, step);
      c.suffix = detail::suffix_work(naive, step);
      break;
    case formulation::absorb:
      c.prefix = detail::prefix_work(absorb, step);
      c.suffix = detail::suffix_work(absorb, step);
      break;
    case formulation::typhoon: {
      c.prefix = detail::prefix_work(naive, step);
      c.suffix = detail::suffix_work(absorb, step);
      const double out = static_cast<double>(step.batch) * static_cast<double>(step.s_q) *
                         dims.heads * dims.d_v;  // elements of one partial output
      c.combine = {2.0 * out, 2.0 * out};
      break;
    }
  }
  return c;
}

/// Options of the roofline pricing.
struct CostOptions {
  double bytes_per_element = 2.0;  ///< size of a cached element: 2 for BF16/FP16, 1 for FP8
  bool include_combine = true;     ///< price TyphoonMLA's LSE combine (Table 1 omits it)
};

/// One kernel of a formulation with its work and roofline time.
struct KernelTime {
  std::string_view name;  ///< "naive", "absorb", "typhoon naive stage", ...
  Work work;
  RooflineTime time;
};

/// A formulation's kernels, run one after another.
struct FormulationTime {
  formulation f = formulation::naive;
  std::vector<KernelTime> kernels;

  /// Sum of the kernels' roofline times.
  double time_s() const {
    double t = 0;
    for (const KernelTime& k : kernels) t += k.time.time_s();
    return t;
  }
};

namespace detail {
inline void validate_options(const char* function, const CostOptions& opts) {
  amla::detail::require_finite_positive(function, "opts.bytes_per_element", opts.bytes_per_element);
}
inline KernelTime kernel_time(std::string_view name, Work w, const Hardware& hw,
                              const CostOptions& opts) {
  return {name, w, roofline(w.flops(), w.hbm_bytes(opts.bytes_per_element), hw)};
}
}  // namespace detail

/// Roofline time of formulation `f` for `step` on `hw`: one kernel for naive and for absorb, the
/// three kernels of TyphoonMLA's mixed plan for typhoon (no fall-back; see `typhoon_choice`).
inline FormulationTime roofline_time(formulation f, const MlaDims& dims, const DecodeStep& step,
                                     const Hardware& hw, const CostOptions& opts = {}) {
  detail::validate_hardware("amla::mla::roofline_time", hw);
  detail::validate_options("amla::mla::roofline_time", opts);
  const FormulationCost c = formulation_cost(f, dims, step);
  FormulationTime t;
  t.f = f;
  if (f == formulation::typhoon) {
    t.kernels.push_back(detail::kernel_time("typhoon naive stage", c.prefix, hw, opts));
    t.kernels.push_back(detail::kernel_time("typhoon absorb stage", c.suffix, hw, opts));
    if (opts.include_combine) {
      t.kernels.push_back(detail::kernel_time("typhoon combine", c.combine, hw, opts));
    }
  } else {
    t.kernels.push_back(detail::kernel_time(to_string(f), c.attention(), hw, opts));
  }
  return t;
}

/// Equation 1 of the TyphoonMLA paper, in consistent units: the batch size at which reading the
/// naive prefix from HBM takes as long as the absorb prefix's arithmetic,
///   B_theta = (D_qk + D_v) * bytes_per_element / (2 S_q (2 D_l + D_r)) * T / M
/// (a MAC is 2 FLOP, an element `bytes_per_element` bytes; for 16-bit caches the factors cancel
/// and this is the printed formula). Real-valued; 61.4 for DeepSeek-V3 on the paper's NPU.
inline double typhoon_batch_threshold(const MlaDims& dims, std::int64_t s_q, const Hardware& hw,
                                      double bytes_per_element = 2.0) {
  detail::validate_dims("amla::mla::typhoon_batch_threshold", dims);
  AMLA_REQUIRE(s_q >= 1, "s_q", s_q, "must be >= 1");
  detail::validate_hardware("amla::mla::typhoon_batch_threshold", hw);
  AMLA_REQUIRE(std::isfinite(bytes_per_element) && bytes_per_element > 0, "bytes_per_element",
               bytes_per_element, "must be finite and > 0");
  const TokenFactors naive = token_factors(formulation::naive, dims);
  const TokenFactors absorb = token_factors(formulation::absorb, dims);
  // naive prefix read:   L_s * naive.words * bytes / M
  // absorb prefix MACs:  B * S_q * L_s * absorb.macs * 2 / T
  return naive.words_per_token * bytes_per_element /
         (2.0 * static_cast<double>(s_q) * absorb.macs_per_row_key) * hw.ridge_flops_per_byte();
}

/// What TyphoonMLA runs for one decode step.
struct TyphoonChoice {
  bool mixed = false;    ///< true: naive prefix + absorb suffix + combine; false: absorb alone
  double mixed_s = 0;    ///< roofline time of the mixed plan
  double absorb_s = 0;   ///< roofline time of the absorb-only fall-back
  double threshold = 0;  ///< equation 1's B_theta for this model, S_q and chip (for reference)
  double time_s() const { return mixed ? mixed_s : absorb_s; }
};

/// The plan TyphoonMLA takes: the mixed kernel when the roofline model says it is strictly faster
/// than absorb alone, else the absorb fall-back. With no shared prefix the mixed plan only adds
/// the combine, so absorb is chosen. For long prefixes the switch happens at the first integer
/// batch size above equation 1's B_theta; short prefixes move it up, because the combine and (on
/// chips where the suffix stage is memory-bound) the lost overlap of prefix arithmetic with suffix
/// reads are then not negligible.
inline TyphoonChoice typhoon_choice(const MlaDims& dims, const DecodeStep& step, const Hardware& hw,
                                    const CostOptions& opts = {}) {
  TyphoonChoice c;
  c.mixed_s = roofline_time(formulation::typhoon, dims, step, hw, opts).time_s();
  c.absorb_s = roofline_time(formulation::absorb, dims, step, hw, opts).time_s();
  c.threshold = typhoon_batch_threshold(dims, step.s_q, hw, opts.bytes_per_element);
  c.mixed = step.prefix_len > 0 && c.mixed_s < c.absorb_s;
  return c;
}

/// The largest max_batch typhoon_min_batch searches (it prices every batch size in turn).
inline constexpr std::int64_t typhoon_max_search_batch = std::int64_t{1} << 20;

/// The smallest batch size in [1, max_batch] at which TyphoonMLA takes its mixed plan for these
/// S_q, L_s and L_n (step.batch is ignored), or nullopt when it never does there. This is the
/// batch threshold the cost model implies, the counterpart of equation 1 with every term priced.
/// max_batch is at most typhoon_max_search_batch (2^20), which bounds the search's work.
inline std::optional<std::int64_t> typhoon_min_batch(const MlaDims& dims, DecodeStep step,
                                                     const Hardware& hw,
                                                     const CostOptions& opts = {},
                                                     std::int64_t max_batch = 1 << 16) {
  AMLA_REQUIRE(max_batch >= 1 && max_batch <= typhoon_max_search_batch, "max_batch", max_batch,
               "must be in [1, 2^20] (the search prices every batch size up to it)");
  for (std::int64_t b = 1; b <= max_batch; ++b) {
    step.batch = b;
    if (typhoon_choice(dims, step, hw, opts).mixed) return b;
  }
  return std::nullopt;
}

}  // namespace amla::mla
