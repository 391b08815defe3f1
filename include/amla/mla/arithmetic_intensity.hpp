// amla/mla/arithmetic_intensity.hpp: FLOP per HBM byte of one decode attention step, and the
// query-row count at which it turns compute-bound on a chip.
//
// One request, N_1 query heads, N_2 KV heads, S_q query tokens, S_k cached tokens, head dims D_k
// and D_v, 16-bit elements. The two matrix products cost
//   FLOP = 2 N_1 S_q S_k (D_k + D_v)
// and the cache read is
//   MHA / GQA: 2 N_2 S_k (D_k + D_v) bytes (separate K and V per KV head),
//   MLA:       2 S_k D_k bytes (one latent head; the values are the first D_v columns of K).
// So the intensity is N_1 S_q / N_2 for MHA and GQA and N_1 S_q (D_k + D_v) / D_k for MLA
// (absorb form: D_k = 576, D_v = 512). These are the values of the AMLA paper's Table 2: 1 (MHA,
// 64 heads), 8 (GQA, 64 query heads over 8 KV heads), about 121 (MLA, 64 heads), 242 (128 heads)
// and 484 (128 heads, S_q = 2). The paper's text writes the MHA/GQA case as N_1 S_q, dropping the
// N_2 of the cache term; its own table (1 and 8, not 64 and 64) follows N_1 S_q / N_2, which is
// what the counts above give and what `kv_only_intensity` returns.
//
// The FlashMLA deep dive adds the query and output traffic, 2 (h_q s_q D_k + h_q s_q D_v) bytes,
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

namespace amla::mla {

/// The cache layout that sets the memory side of the intensity.
enum class kv_layout : std::uint8_t {
  separate_kv,  ///< MHA / GQA: each KV head stores its K (D_k) and V (D_v)
  latent,       ///< MLA absorb: one shared head, values are the first D_v columns of K
};

/// One decode attention step of one request.
struct AttentionShape {
  int q_heads = 1;   ///< N_1 (h_q)
  int kv_heads = 1;  ///< N_2 (h_kv); 1 for MLA
  int s_q = 1;       ///< query tokens (S_q)
  int d_k = 0;       ///< D_k (576 for MLA absorb)
  int d_v = 0;       ///< D_v (512 for MLA absorb)
  kv_layout layout = kv_layout::separate_kv;
  int bytes_per_element = 2;  ///< 2 for BF16
};

/// MLA's absorb-form decode attention: one latent head of D_k = 576, D_v = 512.
constexpr AttentionShape mla_decode_shape(int q_heads, int s_q = 1) {
  return {q_heads, 1, s_q, 576, 512, kv_layout::latent, 2};
}

/// Throws amla::invalid_argument for a shape that is not a decode attention step.
inline void validate(const AttentionShape& s) {
  AMLA_REQUIRE(s.q_heads >= 1, "shape.q_heads", s.q_heads, "must be >= 1");
  AMLA_REQUIRE(s.kv_heads >= 1, "shape.kv_heads", s.kv_heads, "must be >= 1");
  AMLA_REQUIRE(s.q_heads % s.kv_heads == 0, "shape.kv_heads", s.kv_heads,
               "must divide shape.q_heads = " + std::to_string(s.q_heads));
  AMLA_REQUIRE(s.layout == kv_layout::separate_kv || s.kv_heads == 1, "shape.kv_heads", s.kv_heads,
               "must be 1 for the latent layout");
  AMLA_REQUIRE(s.s_q >= 1, "shape.s_q", s.s_q, "must be >= 1");
  AMLA_REQUIRE(s.d_k >= 1, "shape.d_k", s.d_k, "must be >= 1");
  AMLA_REQUIRE(s.d_v >= 1, "shape.d_v", s.d_v, "must be >= 1");
  AMLA_REQUIRE(s.layout == kv_layout::separate_kv || s.d_v <= s.d_k, "shape.d_v", s.d_v,
               "must be <= shape.d_k = " + std::to_string(s.d_k) +
                   " for the latent layout (values are K's first d_v columns)");
  AMLA_REQUIRE(s.bytes_per_element >= 1, "shape.bytes_per_element", s.bytes_per_element,
               "must be >= 1");
}

/// FLOP of the step over `kv_len` cached tokens: 2 N_1 S_q S_k (D_k + D_v).
inline double decode_flops(const AttentionShape& s, std::int64_t kv_len) {
  validate(s);
  AMLA_REQUIRE(kv_len >= 0, "kv_len", kv_len, "must be >= 0");
  return 2.0 * s.q_heads * s.s_q * static_cast<double>(kv_len) * (s.d_k + s.d_v);
}

/// HBM bytes of the KV cache read over `kv_len` tokens.
inline double kv_bytes(const AttentionShape& s, std::int64_t kv_len) {
  validate(s);
  AMLA_REQUIRE(kv_len >= 0, "kv_len", kv_len, "must be >= 0");
  const double per_token = s.layout == kv_layout::latent
                               ? static_cast<double>(s.d_k)
                               : static_cast<double>(s.kv_heads) * (s.d_k + s.d_v);
  return s.bytes_per_element * per_token * static_cast<double>(kv_len);
}

/// The intensity counting the cache read only (the limit S_k -> infinity; AMLA Table 2):
/// N_1 S_q / N_2 for separate K and V, N_1 S_q (D_k + D_v) / D_k for the latent layout (times
/// 2 / bytes_per_element for elements other than 16-bit).
inline double kv_only_intensity(const AttentionShape& s) {
  return decode_flops(s, 1) / kv_bytes(s, 1);
}

/// The intensity over `kv_len` tokens with the query read and the output written as well (the
/// FlashMLA deep dive's count): FLOP / (cache + Q + O bytes). Throws for kv_len < 1.
inline double decode_intensity(const AttentionShape& s, std::int64_t kv_len) {
  AMLA_REQUIRE(kv_len >= 1, "kv_len", kv_len, "must be >= 1");
  const double q_and_o =
      static_cast<double>(s.bytes_per_element) * s.q_heads * s.s_q * (s.d_k + s.d_v);
  return decode_flops(s, kv_len) / (kv_bytes(s, kv_len) + q_and_o);
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
inline double compute_bound_rows(const Hardware& hw, int d_k = 576, int d_v = 512,
                                 intensity_reading reading = intensity_reading::exact,
                                 int bytes_per_element = 2) {
  validate(hw);
  AttentionShape s{1, 1, 1, d_k, d_v, kv_layout::latent, bytes_per_element};
  validate(s);
  const double per_row = reading == intensity_reading::exact
                             ? kv_only_intensity(s)
                             : 2.0 * 2.0 / bytes_per_element;  // (D_k + D_v) / D_k ~ 2
  return hw.ridge_flops_per_byte() / per_row;
}

}  // namespace amla::mla
