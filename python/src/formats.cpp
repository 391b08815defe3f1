// python/src/formats.cpp: the number formats and cache layouts of numeric/ and problem/ on numpy
// arrays: FP16 / FP8 / e8m0 casts, FlashMLA's and the scaled FP8 caches (quantize, dequantize, the
// quantization error), FlashInfer's split cache and Ascend's NZ layout.
//
// Arrays arrive C-contiguous on the CPU and leave as new numpy arrays. The layout converters copy
// elements without looking at them, so they take unsigned integer arrays of the element's width
// (amla/formats.py and amla/flashinfer.py view any dtype as such and view the result back).
// Everything is validated by the library's own functions; their messages reach Python as
// ValueError.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "amla/numeric/fp16.hpp"
#include "amla/numeric/fp8.hpp"
#include "amla/problem/flashinfer_layout.hpp"
#include "amla/problem/fp8_cache.hpp"
#include "amla/problem/nz_layout.hpp"
#include "common.hpp"

namespace amla::python {
namespace {

std::vector<std::size_t> shape_of(const InArray& a) {
  std::vector<std::size_t> s(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) s[i] = a.shape(i);
  return s;
}

template <class T>
std::span<const T> view(const InArray& a) {
  return {static_cast<const T*>(a.data()), a.size()};
}

/// The unsigned integer type of a width in bytes, for element copies.
template <int Bytes>
using raw_t = std::conditional_t<
    Bytes == 1, std::uint8_t,
    std::conditional_t<Bytes == 2, std::uint16_t,
                       std::conditional_t<Bytes == 4, std::uint32_t, std::uint64_t>>>;

/// Calls f(raw_t<width>{}) for an array of unsigned integers of 1, 2, 4 or 8 bytes.
template <class F>
auto with_raw(const char* fn, const char* arg, const InArray& a, F&& f) {
  const nb::dlpack::dtype d = a.dtype();
  if (d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt) && d.lanes == 1) {
    switch (d.bits) {
      case 8:
        return f(raw_t<1>{});
      case 16:
        return f(raw_t<2>{});
      case 32:
        return f(raw_t<4>{});
      case 64:
        return f(raw_t<8>{});
      default:
        break;
    }
  }
  invalid(fn, arg, "dtype of " + std::to_string(d.bits) + " bits, code " + std::to_string(d.code),
          "must be an unsigned integer view of 8, 16, 32 or 64 bits");
}

void require(const char* fn, const char* arg, const InArray& a, elem want, const char* name) {
  if (elem_of(a) != want) {
    invalid(fn, arg, std::string("dtype ") + elem_name(elem_of(a)), std::string("must be ") + name);
  }
}

void require_u8(const char* fn, const char* arg, const InArray& a) {
  if (a.dtype() != nb::dtype<std::uint8_t>()) {
    invalid(fn, arg, "dtype of " + std::to_string(a.dtype().bits) + " bits",
            "must be uint8 (FP8 / e8m0 codes)");
  }
}

void require_rank(const char* fn, const char* arg, const InArray& a, std::size_t rank,
                  const char* layout) {
  if (a.ndim() != rank) {
    invalid(fn, arg, "rank " + std::to_string(a.ndim()),
            "must be " + std::to_string(rank) + ": " + layout);
  }
}

int dim_of(const char* fn, const char* arg, std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX)) {
    invalid(fn, arg, std::to_string(n), "a dimension must be at most " + std::to_string(INT_MAX));
  }
  return static_cast<int>(n);
}

fp8_kind parse_fp8(const char* fn, const std::string& s) {
  return parse_choice<fp8_kind>(fn, "fp8", s, {{"e4m3", fp8_kind::e4m3}, {"e5m2", fp8_kind::e5m2}});
}

flashmla_fp8_layout parse_layout(const char* fn, const std::string& s) {
  return parse_choice<flashmla_fp8_layout>(
      fn, "layout", s,
      {{"v32", flashmla_fp8_layout::v32}, {"model1", flashmla_fp8_layout::model1}});
}

// ---- casts ------------------------------------------------------------------------------------

enum class cast_format : std::uint8_t { fp16, e4m3, e5m2, e8m0 };

cast_format parse_format(const char* fn, const std::string& fmt) {
  return parse_choice<cast_format>(fn, "fmt", fmt,
                                   {{"fp16", cast_format::fp16},
                                    {"e4m3", cast_format::e4m3},
                                    {"e5m2", cast_format::e5m2},
                                    {"e8m0", cast_format::e8m0}});
}

/// float32 x -> codes of format `fmt` ("fp16" -> uint16, "e4m3" / "e5m2" / "e8m0" -> uint8).
nb::object cast_to(const std::string& fmt, InArray x, bool saturate, const std::string& rounding) {
  const char* fn = "amla.formats.cast";
  const cast_format f = parse_format(fn, fmt);
  require(fn, "x", x, elem::f32, "float32");
  const std::span<const float> in = view<float>(x);
  const saturation sat = saturate ? saturation::finite : saturation::none;
  const e8m0_rounding r = parse_choice<e8m0_rounding>(fn, "rounding", rounding,
                                                      {{"nearest", e8m0_rounding::nearest},
                                                       {"up", e8m0_rounding::up},
                                                       {"down", e8m0_rounding::down}});
  if (f != cast_format::e8m0 && r != e8m0_rounding::nearest) {
    invalid(fn, "rounding", "'" + rounding + "'", "only e8m0 rounds other than to nearest even");
  }
  if (f == cast_format::fp16) {
    if (saturate) invalid(fn, "saturate", "True", "FP16 narrowing follows IEEE (overflow to Inf)");
    std::vector<std::uint16_t> out(in.size());
    {
      nb::gil_scoped_release release;
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = fp16::from_float(in[i]).bits;
    }
    return nb::cast(owned_array(std::move(out), shape_of(x)));
  }
  std::vector<std::uint8_t> out(in.size());
  {
    nb::gil_scoped_release release;
    if (f == cast_format::e8m0) {
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = e8m0::from_float(in[i], r, sat).bits;
    } else {
      const fp8_kind k = f == cast_format::e4m3 ? fp8_kind::e4m3 : fp8_kind::e5m2;
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = fp8_from_float(k, in[i], sat);
    }
  }
  return nb::cast(owned_array(std::move(out), shape_of(x)));
}

/// codes of format `fmt` -> float32 (exact).
nb::ndarray<nb::numpy, float> cast_from(const std::string& fmt, InArray codes) {
  const char* fn = "amla.formats.widen";
  const cast_format f = parse_format(fn, fmt);
  std::vector<float> out(codes.size());
  if (f == cast_format::fp16) {
    if (codes.dtype() != nb::dtype<std::uint16_t>()) {
      invalid(fn, "codes", "dtype of " + std::to_string(codes.dtype().bits) + " bits",
              "must be uint16 (FP16 bits)");
    }
    const auto in = view<std::uint16_t>(codes);
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = fp16::from_bits(in[i]).to_float();
    return owned_array(std::move(out), shape_of(codes));
  }
  require_u8(fn, "codes", codes);
  const auto in = view<std::uint8_t>(codes);
  for (std::size_t i = 0; i < in.size(); ++i) {
    out[i] = f == cast_format::e8m0
                 ? e8m0::from_bits(in[i]).to_float()
                 : fp8_to_float(f == cast_format::e4m3 ? fp8_kind::e4m3 : fp8_kind::e5m2, in[i]);
  }
  return owned_array(std::move(out), shape_of(codes));
}

// ---- FlashMLA FP8 caches ------------------------------------------------------------------------

/// kv [num_pages, page_size, 1, d_qk] (BF16 bits) -> bytes [num_pages, stride].
nb::ndarray<nb::numpy, std::uint8_t> quantize_flashmla(const std::string& layout, InArray kv,
                                                       std::int64_t page_stride_bytes) {
  const char* fn = "amla.formats.quantize_flashmla";
  const flashmla_fp8_layout l = parse_layout(fn, layout);
  require(fn, "kv", kv, elem::bf16, "bfloat16 (ml_dtypes, DLPack or uint16 bits)");
  require_rank(fn, "kv", kv, 4, "[num_pages, page_size, 1, d_qk]");
  const int pages = dim_of(fn, "kv.shape[0]", kv.shape(0));
  const int page_size = dim_of(fn, "kv.shape[1]", kv.shape(1));
  if (kv.shape(2) != 1) {
    invalid(fn, "kv.shape[2]", std::to_string(kv.shape(2)),
            "must be 1: FlashMLA's FP8 caches have one KV head");
  }
  std::vector<std::uint8_t> bytes(
      detail::flashmla_fp8_bytes(fn, l, pages, page_size, page_stride_bytes));
  {
    nb::gil_scoped_release release;
    quantize_flashmla_fp8(l, pages, page_size, view<bf16>(kv), bytes, page_stride_bytes);
  }
  const std::size_t stride = bytes.size() / static_cast<std::size_t>(pages);
  return owned_array(std::move(bytes), {static_cast<std::size_t>(pages), stride});
}

/// bytes (uint8, num_pages * stride) -> kv [num_pages, page_size, 1, d_qk] as BF16 bits or float32.
nb::object dequantize_flashmla(const std::string& layout, InArray bytes, int num_pages,
                               int page_size, std::int64_t page_stride_bytes,
                               const std::string& dtype) {
  const char* fn = "amla.formats.dequantize_flashmla";
  require_u8(fn, "cache", bytes);
  const FlashMlaFp8Cache c{parse_layout(fn, layout), num_pages, page_size, page_stride_bytes,
                           view<std::uint8_t>(bytes)};
  validate_flashmla_fp8_cache(fn, c);
  const DecodeShape s = c.dense_shape();
  const std::initializer_list<std::size_t> shape = {static_cast<std::size_t>(num_pages),
                                                    static_cast<std::size_t>(page_size), 1,
                                                    static_cast<std::size_t>(s.d_qk)};
  if (dtype == "bfloat16") {
    std::vector<bf16> kv(s.kv_elems());
    {
      nb::gil_scoped_release release;
      dequantize_flashmla_fp8<bf16>(c, kv);
    }
    std::vector<std::uint16_t> bits(kv.size());
    for (std::size_t i = 0; i < kv.size(); ++i) bits[i] = kv[i].bits;
    return nb::cast(owned_array(std::move(bits), shape));
  }
  if (dtype != "float32")
    invalid(fn, "dtype", "'" + dtype + "'", "must be 'bfloat16' or 'float32'");
  std::vector<float> kv(s.kv_elems());
  {
    nb::gil_scoped_release release;
    dequantize_flashmla_fp8<float>(c, kv);
  }
  return nb::cast(owned_array(std::move(kv), shape));
}

// ---- scaled FP8 caches --------------------------------------------------------------------------

struct CacheDims {
  int pages, page_size, h_kv, d;
};

CacheDims dims4(const char* fn, const char* arg, const InArray& a) {
  require_rank(fn, arg, a, 4, "[num_pages, page_size, h_kv, d]");
  return {dim_of(fn, arg, a.shape(0)), dim_of(fn, arg, a.shape(1)), dim_of(fn, arg, a.shape(2)),
          dim_of(fn, arg, a.shape(3))};
}

std::vector<std::size_t> scales_shape(const CacheDims& c, int group_size) {
  if (group_size == 0) return {1};
  return {static_cast<std::size_t>(c.pages), static_cast<std::size_t>(c.page_size),
          static_cast<std::size_t>(c.h_kv), static_cast<std::size_t>(c.d / group_size)};
}

std::tuple<nb::ndarray<nb::numpy, std::uint8_t>, nb::ndarray<nb::numpy, float>> quantize_scaled(
    const std::string& fp8, InArray kv, int group_size, std::optional<float> tensor_scale) {
  const char* fn = "amla.formats.quantize_scaled";
  const fp8_kind k = parse_fp8(fn, fp8);
  const CacheDims c = dims4(fn, "kv", kv);
  const auto [n_codes, n_scales] =
      detail::scaled_fp8_counts(fn, k, c.pages, c.page_size, c.h_kv, c.d, group_size);
  std::vector<std::uint8_t> codes(n_codes);
  std::vector<float> scales(n_scales);
  const elem e = elem_of(kv);
  if (e != elem::f32 && e != elem::bf16) {
    invalid(fn, "kv", std::string("dtype ") + elem_name(e), "must be float32 or bfloat16");
  }
  {
    nb::gil_scoped_release release;
    if (e == elem::f32) {
      quantize_scaled_fp8<float>(k, c.pages, c.page_size, c.h_kv, c.d, group_size, view<float>(kv),
                                 codes, scales, tensor_scale);
    } else {
      quantize_scaled_fp8<bf16>(k, c.pages, c.page_size, c.h_kv, c.d, group_size, view<bf16>(kv),
                                codes, scales, tensor_scale);
    }
  }
  return {owned_array(std::move(codes), shape_of(kv)),
          owned_array(std::move(scales), scales_shape(c, group_size))};
}

nb::object dequantize_scaled(const std::string& fp8, InArray codes, InArray scales, int group_size,
                             const std::string& dtype) {
  const char* fn = "amla.formats.dequantize_scaled";
  require_u8(fn, "codes", codes);
  require(fn, "scales", scales, elem::f32, "float32");
  const CacheDims d = dims4(fn, "codes", codes);
  const ScaledFp8Cache c{
      parse_fp8(fn, fp8), d.pages, d.page_size, d.h_kv, d.d, group_size, view<std::uint8_t>(codes),
      view<float>(scales)};
  if (dtype == "bfloat16") {
    std::vector<bf16> kv(c.codes.size());
    {
      nb::gil_scoped_release release;
      dequantize_scaled_fp8<bf16>(c, kv);
    }
    std::vector<std::uint16_t> bits(kv.size());
    for (std::size_t i = 0; i < kv.size(); ++i) bits[i] = kv[i].bits;
    return nb::cast(owned_array(std::move(bits), shape_of(codes)));
  }
  if (dtype != "float32")
    invalid(fn, "dtype", "'" + dtype + "'", "must be 'bfloat16' or 'float32'");
  std::vector<float> kv(c.codes.size());
  {
    nb::gil_scoped_release release;
    dequantize_scaled_fp8<float>(c, kv);
  }
  return nb::cast(owned_array(std::move(kv), shape_of(codes)));
}

float tensor_scale(InArray x, const std::string& fp8) {
  const char* fn = "amla.formats.tensor_scale";
  const fp8_kind k = parse_fp8(fn, fp8);
  if (elem_of(x) == elem::f32) return fp8_tensor_scale<float>(view<float>(x), k);
  require(fn, "x", x, elem::bf16, "float32 or bfloat16");
  return fp8_tensor_scale<bf16>(view<bf16>(x), k);
}

nb::dict quantization_error_dict(InArray reference, InArray dequantized) {
  const char* fn = "amla.formats.quantization_error";
  QuantizationError e;
  auto run = [&](auto r) {
    using R = decltype(r);
    if (elem_of(dequantized) == elem::f32) {
      e = quantization_error<R, float>(view<R>(reference), view<float>(dequantized));
    } else {
      require(fn, "dequantized", dequantized, elem::bf16, "float32 or bfloat16");
      e = quantization_error<R, bf16>(view<R>(reference), view<bf16>(dequantized));
    }
  };
  if (elem_of(reference) == elem::f32) {
    run(float{});
  } else {
    require(fn, "reference", reference, elem::bf16, "float32 or bfloat16");
    run(bf16{});
  }
  using E = QuantizationError;
  return fields(
      e, std::pair{"compared", &E::compared}, std::pair{"skipped", &E::skipped},
      std::pair{"nonfinite", &E::nonfinite}, std::pair{"max_abs_error", &E::max_abs_error},
      std::pair{"worst_index", &E::worst_index}, std::pair{"rms_error", &E::rms_error},
      std::pair{"reference_rms", &E::reference_rms}, std::pair{"relative_rms", &E::relative_rms},
      std::pair{"max_rel_error", &E::max_rel_error});
}

// ---- layouts ------------------------------------------------------------------------------------

/// out[..., :] = concat(a[..., :], b[..., :]) over the last dim (any element width).
nb::object concat(InArray a, InArray b) {
  const char* fn = "amla.formats.concat_channels";
  if (a.ndim() < 1 || b.ndim() != a.ndim() || a.dtype() != b.dtype()) {
    invalid(fn, "b", "rank " + std::to_string(b.ndim()),
            "must have a's rank (>= 1) and dtype: [..., da] and [..., db]");
  }
  std::vector<std::size_t> shape = shape_of(a);
  const int da = dim_of(fn, "a.shape[-1]", shape.back());
  const int db = dim_of(fn, "b.shape[-1]", b.shape(b.ndim() - 1));
  const int rows = da == 0 ? 0 : dim_of(fn, "a.shape[:-1]", a.size() / shape.back());
  shape.back() = static_cast<std::size_t>(da + db);
  return with_raw(fn, "a", a, [&](auto u) {
    using U = decltype(u);
    std::vector<U> out(a.size() + b.size());
    concat_channels<U>(view<U>(a), view<U>(b), out, rows, da, db);
    return nb::cast(owned_array(std::move(out), shape));
  });
}

/// (x[..., :da], x[..., da:]) (any element width).
nb::object split(InArray x, int da) {
  const char* fn = "amla.formats.split_channels";
  if (x.ndim() < 1) invalid(fn, "x", "rank 0", "must be [..., d]");
  const std::vector<std::size_t> shape = shape_of(x);
  const int d = dim_of(fn, "x.shape[-1]", shape.back());
  if (da < 1 || da >= d) {
    invalid(fn, "da", std::to_string(da),
            "must lie in [1, x.shape[-1] = " + std::to_string(d) + ")");
  }
  const int rows = dim_of(fn, "x.shape[:-1]", x.size() / shape.back());
  std::vector<std::size_t> sa = shape, sb = shape;
  sa.back() = static_cast<std::size_t>(da);
  sb.back() = static_cast<std::size_t>(d - da);
  return with_raw(fn, "x", x, [&](auto u) {
    using U = decltype(u);
    std::vector<U> a(static_cast<std::size_t>(rows) * sa.back()),
        b(static_cast<std::size_t>(rows) * sb.back());
    split_channels<U>(view<U>(x), a, b, rows, da, d - da);
    return nb::make_tuple(owned_array(std::move(a), sa), owned_array(std::move(b), sb));
  });
}

std::span<const std::int32_t> i32_or_empty(const char* fn, const char* arg,
                                           const std::optional<InArray>& a) {
  if (!a) return {};
  require(fn, arg, *a, elem::i32, "int32");
  return view<std::int32_t>(*a);
}

/// FlashInfer's ckv, kpe and tables -> (kv [P, ps, 1, d_ckv + d_kpe], block_table, seqlens).
nb::object flashinfer_to_flashmla_arrays(InArray ckv, InArray kpe, InArray kv_indptr,
                                         InArray kv_indices, std::optional<InArray> last_page_len,
                                         std::optional<InArray> kv_len) {
  const char* fn = "amla.flashinfer.to_flashmla";
  require_rank(fn, "ckv", ckv, 3, "[num_pages, page_size, d_ckv]");
  require_rank(fn, "kpe", kpe, 3, "[num_pages, page_size, d_kpe]");
  if (kpe.dtype() != ckv.dtype()) invalid(fn, "kpe", "its dtype", "must be ckv's");
  require(fn, "kv_indptr", kv_indptr, elem::i32, "int32");
  require(fn, "kv_indices", kv_indices, elem::i32, "int32");
  return with_raw(fn, "ckv", ckv, [&](auto u) {
    using U = decltype(u);
    const FlashInferCache<U> c{dim_of(fn, "ckv.shape[0]", ckv.shape(0)),
                               dim_of(fn, "ckv.shape[1]", ckv.shape(1)),
                               dim_of(fn, "ckv.shape[2]", ckv.shape(2)),
                               dim_of(fn, "kpe.shape[2]", kpe.shape(2)),
                               view<U>(ckv),
                               view<U>(kpe),
                               view<std::int32_t>(kv_indptr),
                               view<std::int32_t>(kv_indices),
                               i32_or_empty(fn, "last_page_len", last_page_len),
                               i32_or_empty(fn, "kv_len", kv_len)};
    const int batch = validate_flashinfer_cache(fn, c);
    const int cols = flashinfer_max_pages(c);
    std::vector<U> kv(ckv.size() + kpe.size());
    std::vector<std::int32_t> table(static_cast<std::size_t>(batch) * cols),
        seqlens(static_cast<std::size_t>(batch));
    flashinfer_to_flashmla<U>(c, kv, table, seqlens, cols);
    const auto z = [](int n) { return static_cast<std::size_t>(n); };
    return nb::make_tuple(
        owned_array(std::move(kv), {z(c.num_pages), z(c.page_size), 1, z(c.d_ckv + c.d_kpe)}),
        owned_array(std::move(table), {z(batch), z(cols)}),
        owned_array(std::move(seqlens), {z(batch)}));
  });
}

/// kv [P, ps, 1, d_qk], block_table, seqlens -> (ckv, kpe, kv_indptr, kv_indices, last_page_len).
nb::object flashmla_to_flashinfer_arrays(InArray kv, InArray block_table, InArray seqlens,
                                         int d_v) {
  const char* fn = "amla.flashinfer.from_flashmla";
  require_rank(fn, "kv", kv, 4, "[num_pages, page_size, 1, d_qk]");
  require(fn, "block_table", block_table, elem::i32, "int32");
  require(fn, "seqlens", seqlens, elem::i32, "int32");
  require_rank(fn, "block_table", block_table, 2, "[batch, max_pages_per_seq]");
  DecodeShape s;
  s.num_pages = dim_of(fn, "kv.shape[0]", kv.shape(0));
  s.page_size = dim_of(fn, "kv.shape[1]", kv.shape(1));
  s.h_kv = dim_of(fn, "kv.shape[2]", kv.shape(2));
  s.h_q = s.h_kv;
  s.d_qk = dim_of(fn, "kv.shape[3]", kv.shape(3));
  s.d_v = d_v;
  s.batch = dim_of(fn, "block_table.shape[0]", block_table.shape(0));
  s.max_pages_per_seq = dim_of(fn, "block_table.shape[1]", block_table.shape(1));
  return with_raw(fn, "kv", kv, [&](auto u) {
    using U = decltype(u);
    const auto lens = view<std::int32_t>(seqlens);
    // The shape and tables are validated by the converter before anything is read past them.
    detail::check_span(fn, "seqlens", lens, s.seqlens_elems(), "[batch]");
    validate_shape(fn, s, true);
    validate_tables(fn, s, view<std::int32_t>(block_table), lens);
    const std::size_t rows = static_cast<std::size_t>(s.num_pages) * s.page_size;
    const int d_kpe = s.d_qk - s.d_v;
    std::vector<U> ckv(rows * static_cast<std::size_t>(s.d_v)),
        kpe(rows * static_cast<std::size_t>(d_kpe > 0 ? d_kpe : 0));
    std::vector<std::int32_t> indptr(static_cast<std::size_t>(s.batch) + 1),
        indices(flashinfer_index_count(s, lens)), last(static_cast<std::size_t>(s.batch));
    flashmla_to_flashinfer<U>(s, view<U>(kv), view<std::int32_t>(block_table), lens, ckv, kpe,
                              indptr, indices, last);
    const auto z = [](int n) { return static_cast<std::size_t>(n); };
    const std::size_t nnz = indices.size();
    return nb::make_tuple(owned_array(std::move(ckv), {z(s.num_pages), z(s.page_size), z(s.d_v)}),
                          owned_array(std::move(kpe), {z(s.num_pages), z(s.page_size), z(d_kpe)}),
                          owned_array(std::move(indptr), {z(s.batch) + 1}),
                          owned_array(std::move(indices), {nnz}),
                          owned_array(std::move(last), {z(s.batch)}));
  });
}

/// ND [P, ps, h_kv, d] -> NZ [P, h_kv, d / c0, ps, c0] (c0 = 0: 32 bytes' worth of elements).
nb::object to_nz(InArray nd, int c0) {
  const char* fn = "amla.formats.to_nz";
  const CacheDims d = dims4(fn, "kv", nd);
  return with_raw(fn, "kv", nd, [&](auto u) {
    using U = decltype(u);
    const NzLayout l{d.pages, d.page_size, d.h_kv, d.d, c0 != 0 ? c0 : nz_c0(sizeof(U))};
    std::vector<U> out(validate_nz_layout(fn, l));
    nd_to_nz<U>(l, view<U>(nd), out);
    const auto z = [](int n) { return static_cast<std::size_t>(n); };
    return nb::cast(owned_array(
        std::move(out), {z(l.num_pages), z(l.h_kv), z(l.d / l.c0), z(l.page_size), z(l.c0)}));
  });
}

/// NZ [P, h_kv, d / c0, ps, c0] -> ND [P, ps, h_kv, d].
nb::object from_nz(InArray nz) {
  const char* fn = "amla.formats.from_nz";
  require_rank(fn, "nz", nz, 5, "[num_pages, h_kv, d / c0, page_size, c0]");
  const int c0 = dim_of(fn, "nz.shape[4]", nz.shape(4));
  const NzLayout l{dim_of(fn, "nz.shape[0]", nz.shape(0)), dim_of(fn, "nz.shape[3]", nz.shape(3)),
                   dim_of(fn, "nz.shape[1]", nz.shape(1)),
                   dim_of(fn, "nz.shape[2] * nz.shape[4]", nz.shape(2) * nz.shape(4)), c0};
  return with_raw(fn, "nz", nz, [&](auto u) {
    using U = decltype(u);
    std::vector<U> out(validate_nz_layout(fn, l));
    nz_to_nd<U>({l, view<U>(nz)}, out);
    const auto z = [](int n) { return static_cast<std::size_t>(n); };
    return nb::cast(
        owned_array(std::move(out), {z(l.num_pages), z(l.page_size), z(l.h_kv), z(l.d)}));
  });
}

}  // namespace

void bind_formats(nb::module_& m) {
  m.def("_cast_to", &cast_to, nb::arg("fmt"), nb::arg("x"), nb::arg("saturate"),
        nb::arg("rounding"));
  m.def("_cast_from", &cast_from, nb::arg("fmt"), nb::arg("codes"));
  m.def("_quantize_flashmla", &quantize_flashmla, nb::arg("layout"), nb::arg("kv"),
        nb::arg("page_stride_bytes"));
  m.def("_dequantize_flashmla", &dequantize_flashmla, nb::arg("layout"), nb::arg("cache"),
        nb::arg("num_pages"), nb::arg("page_size"), nb::arg("page_stride_bytes"), nb::arg("dtype"));
  m.def("_quantize_scaled", &quantize_scaled, nb::arg("fp8"), nb::arg("kv"), nb::arg("group_size"),
        nb::arg("tensor_scale").none());
  m.def("_dequantize_scaled", &dequantize_scaled, nb::arg("fp8"), nb::arg("codes"),
        nb::arg("scales"), nb::arg("group_size"), nb::arg("dtype"));
  m.def("_tensor_scale", &tensor_scale, nb::arg("x"), nb::arg("fp8"));
  m.def("_quantization_error", &quantization_error_dict, nb::arg("reference"),
        nb::arg("dequantized"));
  m.def("_concat_channels", &concat, nb::arg("a"), nb::arg("b"));
  m.def("_split_channels", &split, nb::arg("x"), nb::arg("da"));
  m.def("_flashinfer_to_flashmla", &flashinfer_to_flashmla_arrays, nb::arg("ckv"), nb::arg("kpe"),
        nb::arg("kv_indptr"), nb::arg("kv_indices"), nb::arg("last_page_len").none(),
        nb::arg("kv_len").none());
  m.def("_flashmla_to_flashinfer", &flashmla_to_flashinfer_arrays, nb::arg("kv"),
        nb::arg("block_table"), nb::arg("seqlens"), nb::arg("d_v"));
  m.def("_to_nz", &to_nz, nb::arg("kv"), nb::arg("c0"));
  m.def("_from_nz", &from_nz, nb::arg("nz"));
}

}  // namespace amla::python
