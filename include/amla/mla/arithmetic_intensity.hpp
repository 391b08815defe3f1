// amla/mla/arithmetic_intensity.hpp: FLOP per HBM byte of one decode attention step, and the
// query-row count at which it turns compute-bound on a chip.
//
// The step is an amla::Workload (problem/workload.hpp): N_1 = h_q query heads, N_2 = h_kv KV
// heads, S_q = s_q query tokens, S_k = seqlens[b] cached tokens, head dims D_k = d_qk and
// D_v = d_v, with V in the K cache (v_in_kv, MLA's latent layout) or separate. At 16-bit elements
// the two matrix products of one request cost
//   FLOP = 2 N_1 S_q S_k (D_k + D_v)
// and the cache read is
//   MHA / GQA: 2 N_2 S_k (D_k + D_v) bytes (separate K and V per KV head; v_in_kv = false),
//   MLA:       2 S_k D_k bytes (one latent head; the values are the first D_v columns of K).
// So the intensity is N_1 S_q / N_2 for MHA and GQA and N_1 S_q (D_k + D_v) / D_k for MLA
// (absorb form: D_k = 576, D_v = 512). The workload's flops() and kv_bytes() are these counts
// summed over its requests (and over a causal mask's visible keys). These are the values of the
// AMLA paper's Table 2: 1 (MHA, 64 heads), 8 (GQA, 64 query heads over 8 KV heads), about 121 (MLA,
// 64 heads), 242 (128 heads) and 484 (128 heads, S_q = 2). The paper's text writes the MHA/GQA case
// as N_1 S_q, dropping the N_2 of the cache term; its own table (1 and 8, not 64 and 64) follows
// N_1 S_q / N_2, which is what the counts above give and what `kv_only_intensity` returns.
//
// The FlashMLA deep dive adds the query and output traffic, 2 (h_q s_q D_k + h_q s_q D_v) bytes
// per request,
// which vanishes for S_k >> h_q s_q (`decode_intensity` keeps it), and approximates
// (D_k + D_v) / D_k = 1088 / 576 = 1.89 by 2, so that MLA decode is compute-bound once
// 2 h_q s_q >= peak / bandwidth: h_q s_q >= 865 / 3.35 / 2 = 129, which it states as 128. Without
// the approximation the bound is 865 / 3.35 * 576 / 1088 = 136.7. `compute_bound_rows` returns
// either reading.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "amla/config.hpp"
#include "amla/mla/roofline.hpp"
#include "amla/problem/workload.hpp"

namespace amla::mla {

/// MLA's absorb-form decode attention as a Workload: `batch` requests of s_k cached tokens, one
/// latent head of d_qk = 576 whose first d_v = 512 columns are the values.
inline Workload mla_decode_workload(int h_q, int s_q = 1, std::int64_t s_k = 1, int batch = 1) {
  AMLA_REQUIRE(s_k >= 0 && s_k <= 0x7FFFFFFF, "s_k", s_k, "must lie in [0, 2^31 - 1]");
  return Workload::uniform(batch, s_q, h_q, static_cast<int>(s_k), 576, 512, 1);
}

namespace detail {
/// Throws amla::invalid_argument unless `w` is a valid workload whose latent layout (v_in_kv) has
/// one KV head, and bytes_per_element >= 1.
inline void validate_intensity(const char* fn, const Workload& w, int bytes_per_element) {
  w.validate(fn);
  if (w.v_in_kv && w.h_kv != 1) {
    amla::detail::throw_invalid(fn, "workload.h_kv", std::to_string(w.h_kv),
                                "must be 1 for the latent layout (v_in_kv)");
  }
  if (bytes_per_element < 1) {
    amla::detail::throw_invalid(fn, "bytes_per_element", std::to_string(bytes_per_element),
                                "must be >= 1");
  }
}
}  // namespace detail

/// The intensity counting the cache read only (the limit S_k -> infinity; AMLA Table 2):
/// N_1 S_q / N_2 for separate K and V, N_1 S_q (D_k + D_v) / D_k for the latent layout (times
/// 2 / bytes_per_element for elements other than 16-bit). The workload's seqlens and mask do not
/// enter it.
inline double kv_only_intensity(const Workload& w, int bytes_per_element = 2) {
  detail::validate_intensity("amla::mla::kv_only_intensity", w, bytes_per_element);
  Workload one_key = w;  // one request of one key, no mask: FLOP and bytes per cached token
  one_key.seqlens = {1};
  one_key.causal = false;
  return one_key.flops() / one_key.kv_bytes(bytes_per_element);
}

/// The intensity of the workload with each request's query read and output written as well (the
/// FlashMLA deep dive's count): FLOP / (cache + Q + O bytes). Throws unless some request has a
/// cached token.
inline double decode_intensity(const Workload& w, int bytes_per_element = 2) {
  const char* fn = "amla::mla::decode_intensity";
  detail::validate_intensity(fn, w, bytes_per_element);
  if (w.total_keys() < 1) {
    amla::detail::throw_invalid(fn, "workload.seqlens", "0 keys in all",
                                "must hold at least one cached token");
  }
  const double q_and_o = static_cast<double>(bytes_per_element) * w.batch() * w.h_q * w.s_q *
                         static_cast<double>(w.d_qk + w.d_v);
  return w.flops() / (w.kv_bytes(bytes_per_element) + q_and_o);
}

/// How `compute_bound_rows` treats the factor (D_k + D_v) / D_k of the MLA intensity.
enum class intensity_reading : std::uint8_t {
  exact,            ///< (D_k + D_v) / D_k as it is (1.89 for 576 / 512)
  flashmla_approx,  ///< the deep dive's approximation by 2
};

/// The number of query rows h_q * s_q at and above which MLA decode (latent layout, S_k large) is
/// compute-bound on `hw`: peak / bandwidth divided by the intensity per row. For the FlashMLA deep
/// dive's H800 (865 TFLOPS, 3.35 TB/s) it is 129.1 with the approximation (the blog's "128") and
/// 136.7 exactly.
inline double compute_bound_rows(const Hardware& hw, int d_qk = 576, int d_v = 512,
                                 intensity_reading reading = intensity_reading::exact,
                                 int bytes_per_element = 2) {
  validate(hw);
  const Workload row = Workload::uniform(1, 1, 1, 1, d_qk, d_v, 1);  // one query row, latent
  const double per_row = reading == intensity_reading::exact
                             ? kv_only_intensity(row, bytes_per_element)
                             : 2.0 * 2.0 / bytes_per_element;  // (D_k + D_v) / D_k ~ 2
  return hw.ridge_flops_per_byte() / per_row;
}

}  // namespace amla::mla
