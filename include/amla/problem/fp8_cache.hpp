// amla/problem/fp8_cache.hpp: FP8 KV caches as decode kernels store them: views, validation,
// quantizers that produce the kernels' own bytes, dequantizers into the dense cache of
// problem/shape.hpp, and a float64 report of the quantization error.
//
// ---- FlashMLA (DeepSeek-V3.2 sparse decode; FlashMLA's tests/quant.py) ------------------------
// One KV head (h_kv = 1). The latent ("NoPE") channels are e4m3 with one power-of-two scale per
// tile of channels; the RoPE channels stay BF16. Two layouts:
//   v32     d_qk 576 = 512 NoPE + 64 RoPE, tiles of 128 (4 scales), 656 bytes per token:
//             [0, 512)    512 e4m3 codes
//             [512, 528)  4 float32 scales (little-endian), scale t for channels [128 t, 128 t +
//             128) [528, 656)  64 BF16 RoPE values
//           Page p starts at p * page_stride_bytes (page_size * 656 when dense).
//   model1  d_qk 512 = 448 NoPE + 64 RoPE, tiles of 64 (7 scales), 584 bytes per token, split
//           in two regions of the page:
//             [576 s, 576 s + 448)        token s's 448 e4m3 codes
//             [576 s + 448, 576 s + 576)  its 64 BF16 RoPE values
//             [576 P + 8 s, +7)           its 7 e8m0 scales (P = page_size), then one pad byte
//           A page holds P * 584 bytes, padded up to a multiple of 576 (its default stride).
// Quantizing a token (bit for bit what FlashMLA's quantizer computes for finite inputs): for each
// tile, amax = max |x| (in float), s = max(amax / 448, 1e-4) in float, and the scale is the
// smallest power of two >= s (e8m0 rounding up: FlashMLA's pow(2, ceil(log2 s)), which equals it
// for every s, and for BF16 inputs s is either a power of two or far from one). The codes are
// e4m3(x / scale) rounded to nearest even without saturation (|x| / scale <= 448 always). The
// RoPE values are copied. A tile holding a NaN or an Inf gets a NaN scale and NaN codes (torch
// stores Inf as the scale of an Inf tile); its values dequantize to NaN either way, so a cache
// poisoned with NaN in unused slots stays poisoned. Pad bytes are written as 0.
// Dequantizing (as FlashMLA's dequantizer and kernels do): value = round_bf16(e4m3 value * scale)
// with the product in float (exact for power-of-two scales, unless it underflows BF16).
//
// ---- Scaled FP8 caches (vLLM, FlashInfer) -------------------------------------------------------
// A dense cache [num_pages, page_size, h_kv, d] of e4m3 or e5m2 codes with float32 scales: one
// for the whole tensor (group_size 0: vLLM's k_scale / v_scale, FlashInfer's scales), or one per
// group of group_size consecutive channels of a token and head ([num_pages, page_size, h_kv,
// d / group_size]; group_size d is one scale per token and head). Quantizing is vLLM's:
// code = fp8(x / scale) with saturation (CUDA's __NV_SATFINITE), a NaN staying NaN; a group's
// scale is amax / fp8 max (1 for an all-zero group, NaN for a group holding a NaN or an Inf, whose
// codes are then NaN). A whole-tensor scale is given by the caller, or taken from the amax of the
// tensor's non-NaN values (fp8_tensor_scale). Dequantizing: value = fp8 value * scale in float,
// narrowed once to the output element type (vLLM's __float2bfloat16(x * scale)).
//
// ---- Errors
// --------------------------------------------------------------------------------------- Host
// entry points validate every size with checked arithmetic and throw amla::invalid_argument naming
// the entry point, the argument, its value and the rule. The per-slot functions are host-device and
// do no checks: they take a layout that has been validated.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/checked.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/bits.hpp"
#include "amla/numeric/fp16.hpp"
#include "amla/numeric/fp8.hpp"
#include "amla/problem/inputs.hpp"
#include "amla/problem/validate.hpp"

namespace amla {

// ---- shared arithmetic
// ----------------------------------------------------------------------------

/// The value FP8 code `code` of format k stands for under `scale`: its exact value times the
/// scale, rounded once to float. Every dequantizer here computes this.
AMLA_HOST_DEVICE constexpr float fp8_scaled_value(fp8_kind k, std::uint8_t code,
                                                  float scale) noexcept {
  return fp8_to_float(k, code) * scale;
}

namespace detail {

/// A float narrowed to a dense-cache element: as it is, or rounded to nearest-even BF16 / FP16.
template <class T>
AMLA_HOST_DEVICE constexpr T element_from_float(float x) noexcept {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16::from_float(x);
  } else if constexpr (std::is_same_v<T, fp16>) {
    return fp16::from_float(x);
  } else {
    return x;
  }
}

/// An element widened to double (exact for every decode_element and for double).
template <class T>
AMLA_HOST_DEVICE constexpr double element_to_double(T x) noexcept {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    return static_cast<double>(x);
  } else {
    return static_cast<double>(x.to_float());
  }
}

/// Throws amla::invalid_argument naming `arg` when a field of a view's shape differs from the
/// cache's (`cache_arg`).
inline void require_same(const char* fn, const char* arg, long long value, const char* cache_arg,
                         long long cache_value) {
  if (value != cache_value) {
    throw_invalid(fn, arg, std::to_string(value),
                  std::string("must equal ") + cache_arg + " = " + std::to_string(cache_value));
  }
}

/// Little-endian 32-bit loads and stores on bytes (the caches' byte order).
AMLA_HOST_DEVICE constexpr std::uint32_t load_u32_le(const std::uint8_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
AMLA_HOST_DEVICE constexpr void store_u32_le(std::uint8_t* p, std::uint32_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v >> 16);
  p[3] = static_cast<std::uint8_t>(v >> 24);
}

}  // namespace detail

// ---- FlashMLA FP8 layouts
// ---------------------------------------------------------------------------

/// FlashMLA's FP8 KV cache layouts (file comment).
enum class flashmla_fp8_layout : std::uint8_t {
  v32,     ///< DeepSeek-V3.2: 656 bytes per token, float32 scales per 128 channels
  model1,  ///< FlashMLA's MODEL1: 584 bytes per token, e8m0 scales per 64 channels
};

/// The fixed geometry of a FlashMLA FP8 layout and the byte offsets within one page.
struct FlashMlaFp8Geometry {
  flashmla_fp8_layout layout = flashmla_fp8_layout::v32;
  int d_qk = 576;         ///< channels of a dequantized token
  int d_nope = 512;       ///< quantized channels (the latent)
  int d_rope = 64;        ///< BF16 channels after them
  int tile = 128;         ///< channels per scale
  int tiles = 4;          ///< scales per token
  int token_bytes = 656;  ///< bytes a token occupies (scales and padding included)

  /// Bytes page_size tokens need, before padding.
  AMLA_HOST_DEVICE constexpr std::int64_t page_bytes(int page_size) const {
    return static_cast<std::int64_t>(page_size) * token_bytes;
  }
  /// The stride of a dense page: page_bytes, rounded up to a multiple of 576 for model1.
  AMLA_HOST_DEVICE constexpr std::int64_t default_page_stride(int page_size) const {
    const std::int64_t b = page_bytes(page_size);
    return layout == flashmla_fp8_layout::model1 ? (b + 575) / 576 * 576 : b;
  }
  /// Offset of slot s's e4m3 codes within its page.
  AMLA_HOST_DEVICE constexpr std::size_t nope_offset(int /*page_size*/, int s) const {
    return layout == flashmla_fp8_layout::v32 ? static_cast<std::size_t>(s) * 656u
                                              : static_cast<std::size_t>(s) * 576u;
  }
  /// Offset of slot s's BF16 RoPE values within its page.
  AMLA_HOST_DEVICE constexpr std::size_t rope_offset(int page_size, int s) const {
    return layout == flashmla_fp8_layout::v32 ? nope_offset(page_size, s) + 528u
                                              : nope_offset(page_size, s) + 448u;
  }
  /// Offset of slot s's scales (4 float32 for v32, 7 e8m0 bytes for model1) within its page.
  AMLA_HOST_DEVICE constexpr std::size_t scale_offset(int page_size, int s) const {
    return layout == flashmla_fp8_layout::v32
               ? nope_offset(page_size, s) + 512u
               : static_cast<std::size_t>(page_size) * 576u + static_cast<std::size_t>(s) * 8u;
  }
  /// The scale of tile t of the token whose scales start at p.
  AMLA_HOST_DEVICE constexpr float scale_at(const std::uint8_t* p, int t) const {
    return layout == flashmla_fp8_layout::v32 ? as_fp32(detail::load_u32_le(p + 4 * t))
                                              : e8m0::from_bits(p[t]).to_float();
  }
};

/// The geometry of a layout (file comment).
AMLA_HOST_DEVICE constexpr FlashMlaFp8Geometry flashmla_fp8_geometry(flashmla_fp8_layout l) {
  if (l == flashmla_fp8_layout::model1) return {l, 512, 448, 64, 64, 7, 584};
  return {l, 576, 512, 64, 128, 4, 656};
}

/// The smallest power of two >= max(amax / 448, 1e-4): the scale FlashMLA's quantizer gives a
/// tile whose largest magnitude is amax (NaN for a NaN or Inf amax).
AMLA_HOST_DEVICE constexpr float flashmla_tile_scale(float amax) noexcept {
  const float s = amax / fp8_e4m3::max_finite;
  const float clamped = s < 1e-4f ? 1e-4f : s;  // a NaN s stays NaN
  return e8m0::from_float(clamped, e8m0_rounding::up).to_float();
}

/// Dequantizes slot `slot` of the page at `page` into out[0, d_qk): NoPE values
/// round_bf16(e4m3 * scale) (as T: the float product, narrowed once), then the RoPE values.
template <class T>
AMLA_HOST_DEVICE void dequantize_flashmla_fp8_slot(const FlashMlaFp8Geometry& g,
                                                   const std::uint8_t* page, int page_size,
                                                   int slot, T* out) {
  const std::uint8_t* nope = page + g.nope_offset(page_size, slot);
  const std::uint8_t* scales = page + g.scale_offset(page_size, slot);
  const std::uint8_t* rope = page + g.rope_offset(page_size, slot);
  for (int t = 0; t < g.tiles; ++t) {
    const float scale = g.scale_at(scales, t);
    for (int i = t * g.tile; i < (t + 1) * g.tile; ++i) {
      out[i] = detail::element_from_float<T>(
          round_bf16(fp8_scaled_value(fp8_kind::e4m3, nope[i], scale)));
    }
  }
  for (int i = 0; i < g.d_rope; ++i) {
    const auto bits = static_cast<std::uint16_t>(rope[2 * i] | (rope[2 * i + 1] << 8));
    out[g.d_nope + i] = detail::element_from_float<T>(bf16::from_bits(bits).to_float());
  }
}

/// A FlashMLA FP8 cache in the caller's memory.
struct FlashMlaFp8Cache {
  flashmla_fp8_layout layout = flashmla_fp8_layout::v32;
  int num_pages = 1;
  int page_size = 64;
  std::int64_t page_stride_bytes = 0;  ///< 0: the layout's default_page_stride
  std::span<const std::uint8_t> bytes;

  FlashMlaFp8Geometry geometry() const { return flashmla_fp8_geometry(layout); }
  std::int64_t stride() const {
    return page_stride_bytes != 0 ? page_stride_bytes : geometry().default_page_stride(page_size);
  }
  /// The dense cache this one dequantizes to: [num_pages, page_size, 1, d_qk].
  DecodeShape dense_shape() const {
    DecodeShape s;
    s.num_pages = num_pages;
    s.page_size = page_size;
    s.h_kv = 1;
    s.d_qk = geometry().d_qk;
    s.d_v = geometry().d_nope;
    return s;
  }
};

namespace detail {

inline const char* layout_name(flashmla_fp8_layout l) {
  return l == flashmla_fp8_layout::v32 ? "v32" : "model1";
}

/// The byte count of a FlashMLA FP8 cache (checked), after validating its fields.
inline std::size_t flashmla_fp8_bytes(const char* fn, flashmla_fp8_layout layout, int num_pages,
                                      int page_size, std::int64_t page_stride_bytes) {
  if (layout != flashmla_fp8_layout::v32 && layout != flashmla_fp8_layout::model1) {
    throw_invalid(fn, "layout", std::to_string(static_cast<int>(layout)), "must be v32 or model1");
  }
  check_dim(fn, "num_pages", num_pages);
  check_dim(fn, "page_size", page_size);
  const FlashMlaFp8Geometry g = flashmla_fp8_geometry(layout);
  const std::int64_t need =
      checked_product(fn, "page_size", "page_size * token bytes", page_size, g.token_bytes);
  if (page_stride_bytes != 0 && page_stride_bytes < need) {
    throw_invalid(fn, "page_stride_bytes", std::to_string(page_stride_bytes),
                  std::string("must be 0 (the default) or at least page_size * ") +
                      std::to_string(g.token_bytes) + " = " + std::to_string(need) +
                      " for layout " + layout_name(layout));
  }
  const std::int64_t stride =
      page_stride_bytes != 0 ? page_stride_bytes : g.default_page_stride(page_size);
  return static_cast<std::size_t>(
      checked_product(fn, "bytes", "num_pages * page_stride_bytes", num_pages, stride));
}

}  // namespace detail

/// Validates a FlashMLA FP8 cache view: layout, num_pages and page_size >= 1, the page stride,
/// and bytes holding exactly num_pages * stride bytes.
inline void validate_flashmla_fp8_cache(const char* fn, const FlashMlaFp8Cache& c) {
  const std::size_t n =
      detail::flashmla_fp8_bytes(fn, c.layout, c.num_pages, c.page_size, c.page_stride_bytes);
  detail::check_span(fn, "bytes", c.bytes, n, "num_pages * page_stride_bytes");
}

/// Dequantizes every slot of a FlashMLA FP8 cache into the dense cache kv
/// [num_pages, page_size, 1, d_qk] (T float or bf16; bf16 is what FlashMLA produces).
template <decode_element T>
void dequantize_flashmla_fp8(const FlashMlaFp8Cache& c, std::span<T> kv) {
  const char* fn = "amla::dequantize_flashmla_fp8";
  validate_flashmla_fp8_cache(fn, c);
  const FlashMlaFp8Geometry g = c.geometry();
  const DecodeShape s = c.dense_shape();
  detail::check_span(fn, "kv", kv, s.kv_elems(), "[num_pages, page_size, 1, d_qk]");
  const auto stride = static_cast<std::size_t>(c.stride());
  for (int p = 0; p < c.num_pages; ++p) {
    const std::uint8_t* page = c.bytes.data() + static_cast<std::size_t>(p) * stride;
    for (int slot = 0; slot < c.page_size; ++slot) {
      dequantize_flashmla_fp8_slot(g, page, c.page_size, slot,
                                   kv.data() + s.slot_index(p, slot, 0) * s.d_qk);
    }
  }
}

/// Quantizes the dense BF16 cache kv [num_pages, page_size, 1, d_qk] (d_qk 576 for v32, 512 for
/// model1) into `bytes` (num_pages * stride bytes), as FlashMLA's quantizer does (file comment).
inline void quantize_flashmla_fp8(flashmla_fp8_layout layout, int num_pages, int page_size,
                                  std::span<const bf16> kv, std::span<std::uint8_t> bytes,
                                  std::int64_t page_stride_bytes = 0) {
  const char* fn = "amla::quantize_flashmla_fp8";
  const std::size_t n =
      detail::flashmla_fp8_bytes(fn, layout, num_pages, page_size, page_stride_bytes);
  const FlashMlaFp8Geometry g = flashmla_fp8_geometry(layout);
  const std::size_t d = static_cast<std::size_t>(g.d_qk);
  const auto per_page = static_cast<std::size_t>(page_size);
  detail::check_span(fn, "kv", kv,
                     static_cast<std::size_t>(detail::checked_product(
                         fn, "kv", "[num_pages, page_size, 1, d_qk]", num_pages, page_size, d)),
                     "[num_pages, page_size, 1, " + std::to_string(g.d_qk) + "] for layout " +
                         detail::layout_name(layout));
  detail::check_span(fn, "bytes", std::span<const std::uint8_t>(bytes), n,
                     "num_pages * page_stride_bytes");
  std::fill(bytes.begin(), bytes.end(), std::uint8_t{0});
  const std::size_t stride = n / static_cast<std::size_t>(num_pages);
  for (int p = 0; p < num_pages; ++p) {
    std::uint8_t* page = bytes.data() + static_cast<std::size_t>(p) * stride;
    for (int slot = 0; slot < page_size; ++slot) {
      const bf16* x = kv.data() + (static_cast<std::size_t>(p) * per_page + slot) * d;
      std::uint8_t* nope = page + g.nope_offset(page_size, slot);
      std::uint8_t* scales = page + g.scale_offset(page_size, slot);
      std::uint8_t* rope = page + g.rope_offset(page_size, slot);
      for (int t = 0; t < g.tiles; ++t) {
        float amax = 0.0f;
        bool finite = true;
        for (int i = t * g.tile; i < (t + 1) * g.tile; ++i) {
          const float v = x[i].to_float();
          finite = finite && std::isfinite(v);
          amax = std::max(amax, std::fabs(v));
        }
        const float scale =
            finite ? flashmla_tile_scale(amax) : std::numeric_limits<float>::quiet_NaN();
        if (layout == flashmla_fp8_layout::v32) {
          detail::store_u32_le(scales + 4 * t, as_uint32(scale));
        } else {
          scales[t] = e8m0::from_float(scale).bits;  // an exact power of two (or NaN)
        }
        for (int i = t * g.tile; i < (t + 1) * g.tile; ++i) {
          nope[i] = fp8_e4m3::from_float(x[i].to_float() / scale).bits;
        }
      }
      for (int i = 0; i < g.d_rope; ++i) {
        const std::uint16_t b = x[g.d_nope + i].bits;
        rope[2 * i] = static_cast<std::uint8_t>(b);
        rope[2 * i + 1] = static_cast<std::uint8_t>(b >> 8);
      }
    }
  }
}

/// quantize_flashmla_fp8 into a new buffer of num_pages * default stride bytes.
inline std::vector<std::uint8_t> quantize_flashmla_fp8(flashmla_fp8_layout layout, int num_pages,
                                                       int page_size, std::span<const bf16> kv) {
  std::vector<std::uint8_t> bytes(
      detail::flashmla_fp8_bytes("amla::quantize_flashmla_fp8", layout, num_pages, page_size, 0));
  quantize_flashmla_fp8(layout, num_pages, page_size, kv, bytes);
  return bytes;
}

// ---- scaled FP8 caches
// ----------------------------------------------------------------------------

/// A dense FP8 cache with float32 scales (file comment).
struct ScaledFp8Cache {
  fp8_kind kind = fp8_kind::e4m3;
  int num_pages = 1;
  int page_size = 64;
  int h_kv = 1;
  int d = 576;
  int group_size = 0;                   ///< 0: one scale for the tensor; else channels per scale
  std::span<const std::uint8_t> codes;  ///< [num_pages, page_size, h_kv, d]
  std::span<const float> scales;        ///< [1], or [num_pages, page_size, h_kv, d / group_size]

  /// The scale of channel j of (page, slot, head g), for a validated view.
  AMLA_HOST_DEVICE float scale_of(std::size_t token_head, int j) const {
    if (group_size == 0) return scales[0];
    return scales[token_head * static_cast<std::size_t>(d / group_size) +
                  static_cast<std::size_t>(j / group_size)];
  }
  /// The dense cache this one dequantizes to: [num_pages, page_size, h_kv, d].
  DecodeShape dense_shape() const {
    return DecodeShape{
        .h_kv = h_kv, .d_qk = d, .d_v = d, .num_pages = num_pages, .page_size = page_size};
  }
};

namespace detail {

/// Validates the fields of a scaled cache; returns {code count, scale count}. Errors name the
/// fields with `prefix` before them ("v." for a view's V cache).
inline std::pair<std::size_t, std::size_t> scaled_fp8_counts(const char* fn, fp8_kind kind,
                                                             int num_pages, int page_size, int h_kv,
                                                             int d, int group_size,
                                                             const std::string& prefix = {}) {
  const auto name = [&prefix](const char* field) { return prefix + field; };
  if (kind != fp8_kind::e4m3 && kind != fp8_kind::e5m2) {
    throw_invalid(fn, name("kind").c_str(), std::to_string(static_cast<int>(kind)),
                  "must be e4m3 or e5m2");
  }
  check_dim(fn, name("num_pages").c_str(), num_pages);
  check_dim(fn, name("page_size").c_str(), page_size);
  check_dim(fn, name("h_kv").c_str(), h_kv);
  check_dim(fn, name("d").c_str(), d);
  if (group_size < 0 || (group_size > 0 && d % group_size != 0)) {
    throw_invalid(fn, name("group_size").c_str(), std::to_string(group_size),
                  "must be 0 (one scale for the tensor) or a divisor of d = " + std::to_string(d));
  }
  const auto codes = static_cast<std::size_t>(checked_product(
      fn, name("codes").c_str(), "[num_pages, page_size, h_kv, d]", num_pages, page_size, h_kv, d));
  const std::size_t scales = group_size == 0 ? 1u : codes / static_cast<std::size_t>(group_size);
  return {codes, scales};
}

inline std::string scales_layout(int group_size) {
  return group_size == 0 ? std::string("[1] (one scale for the tensor)")
                         : std::string("[num_pages, page_size, h_kv, d / group_size]");
}

}  // namespace detail

/// Validates a scaled FP8 cache view: kind, dims >= 1, group_size 0 or a divisor of d, codes and
/// scales of exactly their layouts' sizes. Errors name the fields with `prefix` before them.
inline void validate_scaled_fp8_cache(const char* fn, const ScaledFp8Cache& c,
                                      const std::string& prefix = {}) {
  const auto [codes, scales] = detail::scaled_fp8_counts(fn, c.kind, c.num_pages, c.page_size,
                                                         c.h_kv, c.d, c.group_size, prefix);
  detail::check_span(fn, (prefix + "codes").c_str(), c.codes, codes,
                     "[num_pages, page_size, h_kv, d]");
  detail::check_span(fn, (prefix + "scales").c_str(), c.scales, scales,
                     detail::scales_layout(c.group_size));
}

/// Dequantizes the d channels of token-and-head `token_head` ((page * page_size + slot) * h_kv +
/// head) of a validated scaled FP8 cache into out: fp8_scaled_value, narrowed once to T.
template <class T>
AMLA_HOST_DEVICE void dequantize_scaled_fp8_slot(const ScaledFp8Cache& c, std::size_t token_head,
                                                 T* out) {
  const std::uint8_t* codes = c.codes.data() + token_head * static_cast<std::size_t>(c.d);
  for (int j = 0; j < c.d; ++j) {
    out[j] = detail::element_from_float<T>(
        fp8_scaled_value(c.kind, codes[j], c.scale_of(token_head, j)));
  }
}

/// Dequantizes a scaled FP8 cache into the dense cache kv [num_pages, page_size, h_kv, d]:
/// fp8_scaled_value, narrowed once to T.
template <decode_element T>
void dequantize_scaled_fp8(const ScaledFp8Cache& c, std::span<T> kv) {
  const char* fn = "amla::dequantize_scaled_fp8";
  validate_scaled_fp8_cache(fn, c);
  detail::check_span(fn, "kv", kv, c.codes.size(), "[num_pages, page_size, h_kv, d]");
  const auto d = static_cast<std::size_t>(c.d);
  const std::size_t token_heads = c.codes.size() / d;
  for (std::size_t th = 0; th < token_heads; ++th)
    dequantize_scaled_fp8_slot(c, th, kv.data() + th * d);
}

/// The scale of a group (or tensor) whose largest magnitude is amax: amax / the FP8 maximum, or 1
/// for amax = 0 (file comment).
AMLA_HOST_DEVICE constexpr float fp8_scale_for_amax(float amax, fp8_kind k) noexcept {
  return amax == 0.0f ? 1.0f : amax / fp8_max_finite(k);
}

/// A whole-tensor scale for `values`: fp8_scale_for_amax of the largest magnitude among the
/// values that are not NaN (unused cache slots may hold NaN). Throws when a value is infinite.
template <decode_element T>
float fp8_tensor_scale(std::span<const T> values, fp8_kind k) {
  float amax = 0.0f;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float v = detail::widen(values[i]);
    if (fp32::is_inf(v)) {
      detail::throw_invalid("amla::fp8_tensor_scale", "values",
                            "values[" + std::to_string(i) + "] = " + detail::to_text(v),
                            "must not be infinite (no finite scale covers it)");
    }
    if (!fp32::is_nan(v)) amax = std::max(amax, std::fabs(v));
  }
  return fp8_scale_for_amax(amax, k);
}

/// Quantizes the dense cache kv [num_pages, page_size, h_kv, d] into `codes` and `scales` (the
/// layouts of ScaledFp8Cache). With group_size 0 the one scale is tensor_scale (finite and > 0),
/// or fp8_tensor_scale(kv) when it is absent; otherwise each group's scale is computed (file
/// comment) and tensor_scale must be absent.
template <decode_element T>
void quantize_scaled_fp8(fp8_kind kind, int num_pages, int page_size, int h_kv, int d,
                         int group_size, std::span<const T> kv, std::span<std::uint8_t> codes,
                         std::span<float> scales,
                         std::optional<float> tensor_scale = std::nullopt) {
  const char* fn = "amla::quantize_scaled_fp8";
  const auto [n_codes, n_scales] =
      detail::scaled_fp8_counts(fn, kind, num_pages, page_size, h_kv, d, group_size);
  detail::check_span(fn, "kv", kv, n_codes, "[num_pages, page_size, h_kv, d]");
  detail::check_span(fn, "codes", std::span<const std::uint8_t>(codes), n_codes,
                     "[num_pages, page_size, h_kv, d]");
  detail::check_span(fn, "scales", std::span<const float>(scales), n_scales,
                     detail::scales_layout(group_size));
  if (group_size == 0) {
    if (tensor_scale) detail::require_finite_positive(fn, "tensor_scale", *tensor_scale);
    const float scale = tensor_scale ? *tensor_scale : fp8_tensor_scale(kv, kind);
    scales[0] = scale;
    for (std::size_t i = 0; i < n_codes; ++i) {
      codes[i] = fp8_from_float(kind, detail::widen(kv[i]) / scale, saturation::finite);
    }
    return;
  }
  if (tensor_scale) {
    detail::throw_invalid(fn, "tensor_scale", detail::to_text(*tensor_scale),
                          "must be absent when group_size = " + std::to_string(group_size) +
                              " (each group's scale is computed)");
  }
  const auto gs = static_cast<std::size_t>(group_size);
  for (std::size_t g = 0; g < n_scales; ++g) {
    float amax = 0.0f;
    bool finite = true;
    for (std::size_t i = g * gs; i < (g + 1) * gs; ++i) {
      const float v = detail::widen(kv[i]);
      finite = finite && std::isfinite(v);
      amax = std::max(amax, std::fabs(v));
    }
    const float scale =
        finite ? fp8_scale_for_amax(amax, kind) : std::numeric_limits<float>::quiet_NaN();
    scales[g] = scale;
    for (std::size_t i = g * gs; i < (g + 1) * gs; ++i) {
      codes[i] = fp8_from_float(kind, detail::widen(kv[i]) / scale, saturation::finite);
    }
  }
}

// ---- decode problems read from FP8 caches -----------------------------------------------------

namespace detail {

/// Checks the query and table spans of a problem in the FlashMLA layout, the tables and the
/// options; returns the softmax scale (validate_decode's checks for everything but the cache).
template <decode_element T>
float validate_queries_and_tables(const char* fn, const DecodeShape& s, std::span<const T> q,
                                  std::span<const std::int32_t> block_table,
                                  std::span<const std::int32_t> seqlens,
                                  const DecodeOptions& options) {
  check_span(fn, "q", q, s.q_elems(), "[batch, s_q, h_q, d_qk]");
  check_span(fn, "block_table", block_table, s.block_table_elems(), "[batch, max_pages_per_seq]");
  check_span(fn, "seqlens", seqlens, s.seqlens_elems(), "[batch]");
  validate_tables(fn, s, block_table, seqlens);
  return validate_options(fn, options, s);
}

}  // namespace detail

/// A decode problem whose K cache is a FlashMLA FP8 cache (V: its first d_v channels), read as
/// FlashMLA's kernels read it: every token dequantized by dequantize_flashmla_fp8_slot (BF16
/// values), the queries and tables in the FlashMLA layout of problem/shape.hpp. shape is the
/// dense problem the cache stands for: h_kv 1, and num_pages, page_size and d_qk those of the
/// cache (kv.dense_shape() holds them; set batch, s_q, h_q, d_v and max_pages_per_seq on it).
template <decode_element T>
struct FlashMlaFp8Inputs {
  DecodeShape shape;
  std::span<const T> q;  ///< [batch, s_q, h_q, d_qk]
  FlashMlaFp8Cache kv;
  std::span<const std::int32_t> block_table;
  std::span<const std::int32_t> seqlens;

  static constexpr value_format query_format = format_of<T>;
  static constexpr value_format cache_format = value_format::bf16;

  bool v_in_kv() const { return true; }
  int seqlen(int b) const { return seqlens[static_cast<std::size_t>(b)]; }
  int page_of(int b, int key) const { return detail::table_page(shape, block_table, b, key); }
  void read_query(int b, int t, int h, float* dst) const {
    detail::read_flashmla_query(shape, q, b, t, h, dst);
  }
  void read_key(int page, int slot, int /*g*/, float* dst) const {
    dequantize_flashmla_fp8_slot(
        kv.geometry(),
        kv.bytes.data() + static_cast<std::size_t>(page) * static_cast<std::size_t>(kv.stride()),
        kv.page_size, slot, dst);
  }
  /// V lives in K: never called by the driver (v_in_kv()); reads V's channels all the same.
  void read_value(int page, int slot, int g, float* dst) const {
    float row[1024];  // d_qk is 576 or 512
    read_key(page, slot, g, row);
    std::copy_n(row, shape.d_v, dst);
  }
};

/// Validates a decode problem read from a FlashMLA FP8 cache: the cache (validate_flashmla_fp8_
/// cache), the shape and its agreement with the cache, the spans, the tables and the options.
/// Returns the softmax scale.
template <decode_element T>
float validate_decode(const char* fn, const FlashMlaFp8Inputs<T>& in,
                      const DecodeOptions& options) {
  validate_flashmla_fp8_cache(fn, in.kv);
  const DecodeShape& s = in.shape;
  validate_shape(fn, s, true);
  const FlashMlaFp8Geometry g = in.kv.geometry();
  detail::require_same(fn, "shape.h_kv", s.h_kv, "the KV heads of a FlashMLA FP8 cache", 1);
  detail::require_same(fn, "shape.num_pages", s.num_pages, "kv.num_pages", in.kv.num_pages);
  detail::require_same(fn, "shape.page_size", s.page_size, "kv.page_size", in.kv.page_size);
  detail::require_same(fn, "shape.d_qk", s.d_qk, "the channels of a token of kv.layout", g.d_qk);
  return detail::validate_queries_and_tables(fn, s, in.q, in.block_table, in.seqlens, options);
}

/// A decode problem whose K (and optionally V) cache is a scaled FP8 cache (vLLM's, FlashInfer's),
/// read as those kernels read it: every value fp8_scaled_value in float (dequantize_scaled_fp8_
/// slot), which the driver then casts to the recurrence's operand format as the kernel's
/// conversion does (BF16: vLLM's __float2bfloat16(x * scale)). The queries and tables are in the
/// FlashMLA layout. shape is the dense problem: kv's num_pages, page_size, h_kv and d = d_qk, and
/// a separate V cache's d = d_v.
template <decode_element T>
struct ScaledFp8Inputs {
  DecodeShape shape;
  std::span<const T> q;  ///< [batch, s_q, h_q, d_qk]
  ScaledFp8Cache kv;     ///< [num_pages, page_size, h_kv, d_qk] codes and their scales
  ScaledFp8Cache v;      ///< no codes: V is the first d_v channels of kv; else d = d_v
  std::span<const std::int32_t> block_table;
  std::span<const std::int32_t> seqlens;

  static constexpr value_format query_format = format_of<T>;
  static constexpr value_format cache_format = value_format::fp32;

  bool v_in_kv() const { return v.codes.empty(); }
  int seqlen(int b) const { return seqlens[static_cast<std::size_t>(b)]; }
  int page_of(int b, int key) const { return detail::table_page(shape, block_table, b, key); }
  void read_query(int b, int t, int h, float* dst) const {
    detail::read_flashmla_query(shape, q, b, t, h, dst);
  }
  void read_key(int page, int slot, int g, float* dst) const {
    dequantize_scaled_fp8_slot(kv, shape.slot_index(page, slot, g), dst);
  }
  void read_value(int page, int slot, int g, float* dst) const {
    dequantize_scaled_fp8_slot(v, shape.slot_index(page, slot, g), dst);
  }
};

/// Validates a decode problem read from scaled FP8 caches: each cache (validate_scaled_fp8_cache),
/// the shape and its agreement with them, the spans, the tables and the options. Returns the
/// softmax scale.
template <decode_element T>
float validate_decode(const char* fn, const ScaledFp8Inputs<T>& in, const DecodeOptions& options) {
  const DecodeShape& s = in.shape;
  validate_shape(fn, s, in.v_in_kv());
  validate_scaled_fp8_cache(fn, in.kv, "kv.");
  const auto agree = [&](const ScaledFp8Cache& c, const char* d_arg, int d, const char* names[4]) {
    detail::require_same(fn, "shape.num_pages", s.num_pages, names[0], c.num_pages);
    detail::require_same(fn, "shape.page_size", s.page_size, names[1], c.page_size);
    detail::require_same(fn, "shape.h_kv", s.h_kv, names[2], c.h_kv);
    detail::require_same(fn, d_arg, d, names[3], c.d);
  };
  const char* kv_names[4] = {"kv.num_pages", "kv.page_size", "kv.h_kv", "kv.d"};
  agree(in.kv, "shape.d_qk", s.d_qk, kv_names);
  if (!in.v_in_kv()) {
    validate_scaled_fp8_cache(fn, in.v, "v.");
    const char* v_names[4] = {"v.num_pages", "v.page_size", "v.h_kv", "v.d"};
    agree(in.v, "shape.d_v", s.d_v, v_names);
  }
  return detail::validate_queries_and_tables(fn, s, in.q, in.block_table, in.seqlens, options);
}

// ---- the quantization error -------------------------------------------------------------------

/// Elementwise error of a dequantized tensor against the values it was quantized from, in
/// float64. Positions where the reference is not finite (poisoned unused slots) are skipped and
/// counted; a finite reference with a non-finite dequantized value is counted in `nonfinite` and
/// left out of the norms.
struct QuantizationError {
  std::size_t compared = 0;     ///< positions in the norms
  std::size_t skipped = 0;      ///< reference not finite
  std::size_t nonfinite = 0;    ///< reference finite, dequantized not
  double max_abs_error = 0.0;   ///< max |dequantized - reference|
  std::size_t worst_index = 0;  ///< where it occurs (0 when nothing was compared)
  double rms_error = 0.0;       ///< sqrt(mean (dequantized - reference)^2)
  double reference_rms = 0.0;   ///< sqrt(mean reference^2)
  double max_rel_error = 0.0;   ///< max |dequantized - reference| / |reference| over reference != 0

  /// rms_error / reference_rms (0 for an all-zero reference).
  double relative_rms() const { return reference_rms > 0.0 ? rms_error / reference_rms : 0.0; }
};

/// Element types quantization_error compares: the inputs' and float64 results.
template <class T>
concept error_element = decode_element<T> || std::is_same_v<T, double>;

/// The QuantizationError of `dequantized` against `reference` (equal sizes).
template <error_element R, error_element D>
QuantizationError quantization_error(std::span<const R> reference, std::span<const D> dequantized) {
  const char* fn = "amla::quantization_error";
  detail::check_span(fn, "dequantized", dequantized, reference.size(),
                     "as many elements as reference");
  QuantizationError e;
  double sum_sq = 0.0, ref_sq = 0.0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double r = detail::element_to_double(reference[i]);
    const double q = detail::element_to_double(dequantized[i]);
    if (!std::isfinite(r)) {
      ++e.skipped;
      continue;
    }
    if (!std::isfinite(q)) {
      ++e.nonfinite;
      continue;
    }
    const double err = std::fabs(q - r);
    if (err > e.max_abs_error) {
      e.max_abs_error = err;
      e.worst_index = i;
    }
    if (r != 0.0) e.max_rel_error = std::max(e.max_rel_error, err / std::fabs(r));
    sum_sq += err * err;
    ref_sq += r * r;
    ++e.compared;
  }
  if (e.compared > 0) {
    e.rms_error = std::sqrt(sum_sq / static_cast<double>(e.compared));
    e.reference_rms = std::sqrt(ref_sq / static_cast<double>(e.compared));
  }
  return e;
}

}  // namespace amla
