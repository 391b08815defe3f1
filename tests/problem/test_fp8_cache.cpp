// Tests for amla/problem/fp8_cache.hpp: FlashMLA's two FP8 layouts against bytes derived by hand,
// quantize / dequantize round trips byte for byte, the scaled FP8 caches, validation messages and
// the quantization error report.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "amla/problem/fp8_cache.hpp"
#include "common/error_message.hpp"

using amla::bf16;
using amla::flashmla_fp8_layout;
using amla::fp8_kind;

namespace {

// The value of an e4m3 code from its fields, independent of the header (NaN for S.1111.111).
double e4m3_value(std::uint8_t c) {
  const int e = (c >> 3) & 0xF;
  const int m = c & 7;
  if (e == 15 && m == 7) return std::nan("");
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (c & 0x80) != 0 ? -mag : mag;
}

float f32_at(const std::uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);  // the test machine is little-endian, as the layout is
  return f;
}

std::vector<bf16> random_cache(std::size_t n, std::uint32_t seed, double spread) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> exponent(-spread, spread);
  std::vector<bf16> v(n);
  // Per-element magnitudes spread over 2^(+-spread), so tiles have very different scales.
  for (auto& x : v)
    x = bf16::from_float(static_cast<float>(normal(gen) * std::exp2(exponent(gen))));
  return v;
}

}  // namespace

TEST_CASE("FlashMLA FP8 geometries match the published layouts", "[fp8_cache]") {
  const auto v32 = amla::flashmla_fp8_geometry(flashmla_fp8_layout::v32);
  CHECK(v32.token_bytes == 512 + 4 * 4 + 64 * 2);  // 656
  CHECK(v32.d_qk == 576);
  CHECK(v32.tiles * v32.tile == v32.d_nope);
  CHECK(v32.nope_offset(64, 3) == 3 * 656);
  CHECK(v32.scale_offset(64, 3) == 3 * 656 + 512);
  CHECK(v32.rope_offset(64, 3) == 3 * 656 + 528);
  CHECK(v32.default_page_stride(64) == 64 * 656);
  const auto m1 = amla::flashmla_fp8_geometry(flashmla_fp8_layout::model1);
  CHECK(m1.token_bytes == 448 + 64 * 2 + 7 + 1);  // 584
  CHECK(m1.d_qk == 512);
  CHECK(m1.tiles * m1.tile == m1.d_nope);
  CHECK(m1.nope_offset(64, 3) == 3 * 576);
  CHECK(m1.rope_offset(64, 3) == 3 * 576 + 448);
  CHECK(m1.scale_offset(64, 3) == 64 * 576 + 3 * 8);
  CHECK(m1.default_page_stride(64) == 65 * 576);  // 64 * 584 = 37376 bytes, padded to 576
  CHECK(m1.default_page_stride(72) == 73 * 576);  // 72 * 584 = 42048 = 73 * 576 exactly
}

TEST_CASE("v32 quantization of a hand-made token gives the bytes derived by hand", "[fp8_cache]") {
  std::vector<bf16> kv(576, bf16::from_float(0.0f));
  auto set = [&](int i, float v) { kv[static_cast<std::size_t>(i)] = bf16::from_float(v); };
  // Tile 0: amax 3.5, so s = 3.5 / 448 = 2^-7 exactly and the scale is 2^-7. 1.0 / 2^-7 = 128 =
  // 2^7 (exponent field 14: 0x70), 3.5 -> 448 (0x7E), -0.75 -> -96 = -1.5 * 2^6 (0xEC).
  set(0, 1.0f);
  set(1, 3.5f);
  set(2, -0.75f);
  // Tile 1: all zero: s = 0 is clamped to 1e-4, whose power of two above is 2^-13.
  // Tile 2: amax 1: s = 1 / 448 = 2^-8.8, scale 2^-8. 1 -> 256 (0x78); BF16(0.3) = 0.30078125
  // -> 77, between 72 and 80: 80 = 1.25 * 2^6 (0x6A).
  set(256, 1.0f);
  set(257, 0.3f);
  // Tile 3: amax 448: scale 1. 2^-10 is a tie between 0 and 2^-9: even 0; 3 * 2^-10 a tie
  // between 2^-9 and 2^-8: even code 2.
  set(384, 448.0f);
  set(385, 0x1p-10f);
  set(386, 0x1.8p-9f);
  // RoPE: copied as BF16.
  set(512, 1.0f);
  set(575, -2.0f);
  const std::vector<std::uint8_t> b =
      amla::quantize_flashmla_fp8(flashmla_fp8_layout::v32, 1, 1, kv);
  REQUIRE(b.size() == 656);
  const std::uint8_t nope_want[] = {0x70, 0x7E, 0xEC};
  for (int i = 0; i < 3; ++i) CHECK(b[static_cast<std::size_t>(i)] == nope_want[i]);
  CHECK(b[3] == 0x00);
  CHECK(b[256] == 0x78);
  CHECK(b[257] == 0x6A);
  CHECK(b[384] == 0x7E);
  CHECK(b[385] == 0x00);
  CHECK(b[386] == 0x02);
  const std::uint8_t scales_want[16] = {0x00, 0x00, 0x00, 0x3C,   // 2^-7
                                        0x00, 0x00, 0x00, 0x39,   // 2^-13
                                        0x00, 0x00, 0x80, 0x3B,   // 2^-8
                                        0x00, 0x00, 0x80, 0x3F};  // 1
  for (int i = 0; i < 16; ++i) CHECK(b[static_cast<std::size_t>(512 + i)] == scales_want[i]);
  CHECK(b[528] == 0x80);  // 1.0 = 0x3F80, little-endian
  CHECK(b[529] == 0x3F);
  CHECK(b[654] == 0x00);  // -2.0 = 0xC000
  CHECK(b[655] == 0xC0);

  std::vector<bf16> back(576);
  amla::dequantize_flashmla_fp8<bf16>({flashmla_fp8_layout::v32, 1, 1, 0, b}, back);
  CHECK(back[0].to_float() == 1.0f);
  CHECK(back[2].to_float() == -0.75f);
  CHECK(back[257].to_float() == 0.3125f);  // 80 * 2^-8
  CHECK(back[386].to_float() == 0x1p-8f);  // 2 * 2^-9
  CHECK(back[385].to_float() == 0.0f);
  CHECK(back[575].to_float() == -2.0f);
}

TEST_CASE("model1 places codes, RoPE and e8m0 scales where FlashMLA does", "[fp8_cache]") {
  // Two tokens in one page; token 1's first tile has amax 3.5 (scale 2^-7: e8m0 code 120).
  std::vector<bf16> kv(2 * 512, bf16::from_float(0.0f));
  kv[512 + 0] = bf16::from_float(3.5f);
  kv[512 + 1] = bf16::from_float(-1.0f);
  kv[512 + 448] = bf16::from_float(1.0f);  // token 1's first RoPE value
  const std::vector<std::uint8_t> b =
      amla::quantize_flashmla_fp8(flashmla_fp8_layout::model1, 1, 2, kv);
  REQUIRE(b.size() == 3 * 576);  // 2 * 584 = 1168 bytes, padded to 1728
  CHECK(b[576 + 0] == 0x7E);     // 448
  CHECK(b[576 + 1] == 0xF0);     // -128 = -2^7: exponent field 14, sign
  CHECK(b[576 + 448] == 0x80);   // BF16 1.0, little-endian
  CHECK(b[576 + 449] == 0x3F);
  CHECK(b[2 * 576 + 8 + 0] == 120);  // token 1's scales: 2^-7 then six all-zero tiles (2^-13)
  for (int t = 1; t < 7; ++t) CHECK(b[2 * 576 + 8 + static_cast<std::size_t>(t)] == 127 - 13);
  CHECK(b[2 * 576 + 8 + 7] == 0);  // pad byte
  for (int t = 0; t < 7; ++t) CHECK(b[2 * 576 + static_cast<std::size_t>(t)] == 127 - 13);
  std::vector<float> back(2 * 512);
  amla::dequantize_flashmla_fp8<float>({flashmla_fp8_layout::model1, 1, 2, 0, b}, back);
  CHECK(back[512] == 3.5f);
  CHECK(back[513] == -1.0f);
  CHECK(back[512 + 448] == 1.0f);
}

TEST_CASE("FlashMLA quantize / dequantize round trips byte for byte", "[fp8_cache]") {
  for (const auto layout : {flashmla_fp8_layout::v32, flashmla_fp8_layout::model1}) {
    const auto g = amla::flashmla_fp8_geometry(layout);
    CAPTURE(g.d_qk);
    const int pages = 3, page_size = 5;
    const auto d = static_cast<std::size_t>(g.d_qk);
    const std::vector<bf16> x = random_cache(pages * page_size * d, 7u + g.d_qk, 12.0);
    // A non-default (padded) page stride, as FlashMLA's own test allocates v32.
    const std::int64_t stride = g.default_page_stride(page_size) + 2 * g.token_bytes;
    std::vector<std::uint8_t> b1(static_cast<std::size_t>(pages * stride), 0xAB);
    amla::quantize_flashmla_fp8(layout, pages, page_size, x, b1, stride);
    const amla::FlashMlaFp8Cache c1{layout, pages, page_size, stride, b1};
    std::vector<bf16> d1(x.size());
    amla::dequantize_flashmla_fp8<bf16>(c1, d1);
    // Every dequantized value is its code's exact value times its tile's power-of-two scale.
    for (int p = 0; p < pages; ++p) {
      for (int s = 0; s < page_size; ++s) {
        const std::uint8_t* page = b1.data() + p * stride;
        const bf16* row = d1.data() + (static_cast<std::size_t>(p) * page_size + s) * d;
        for (int i = 0; i < g.d_nope; ++i) {
          const std::uint8_t* sc = page + g.scale_offset(page_size, s);
          const double scale = layout == flashmla_fp8_layout::v32
                                   ? static_cast<double>(f32_at(sc + 4 * (i / g.tile)))
                                   : std::ldexp(1.0, sc[i / g.tile] - 127);
          const double want = e4m3_value(page[g.nope_offset(page_size, s) + i]) * scale;
          REQUIRE(static_cast<double>(row[i].to_float()) == want);
        }
        for (int i = 0; i < g.d_rope; ++i) {
          REQUIRE(row[g.d_nope + i] == x[(static_cast<std::size_t>(p) * page_size + s) * d +
                                         static_cast<std::size_t>(g.d_nope + i)]);
        }
      }
    }
    // Requantizing the dequantized cache reproduces the bytes, except on tiles whose largest
    // code is 224: there the largest magnitude is exactly 224 scales, so FlashMLA's rule picks
    // half the scale and doubles every code; the values are unchanged.
    std::vector<std::uint8_t> b2(b1.size());
    amla::quantize_flashmla_fp8(layout, pages, page_size, d1, b2, stride);
    for (int p = 0; p < pages; ++p) {
      for (int s = 0; s < page_size; ++s) {
        const std::size_t base = static_cast<std::size_t>(p * stride);
        for (int t = 0; t < g.tiles; ++t) {
          const std::size_t n0 =
              base + g.nope_offset(page_size, s) + static_cast<std::size_t>(t * g.tile);
          double top = 0;
          for (int i = 0; i < g.tile; ++i) top = std::max(top, std::fabs(e4m3_value(b1[n0 + i])));
          const std::size_t s0 = base + g.scale_offset(page_size, s);
          if (top == 224.0) {
            if (layout == flashmla_fp8_layout::v32) {
              CHECK(f32_at(&b2[s0 + 4 * t]) == f32_at(&b1[s0 + 4 * t]) / 2);
            } else {
              CHECK(b2[s0 + t] == b1[s0 + t] - 1);
            }
            for (int i = 0; i < g.tile; ++i)
              CHECK(e4m3_value(b2[n0 + i]) == 2 * e4m3_value(b1[n0 + i]));
          } else {
            for (int i = 0; i < g.tile; ++i) REQUIRE(b2[n0 + i] == b1[n0 + i]);
            const int w = layout == flashmla_fp8_layout::v32 ? 4 : 1;
            for (int i = 0; i < w; ++i) REQUIRE(b2[s0 + w * t + i] == b1[s0 + w * t + i]);
          }
        }
        const std::size_t r0 = base + g.rope_offset(page_size, s);
        for (int i = 0; i < 2 * g.d_rope; ++i) REQUIRE(b2[r0 + i] == b1[r0 + i]);
      }
    }
    std::vector<bf16> d2(x.size());
    amla::dequantize_flashmla_fp8<bf16>({layout, pages, page_size, stride, b2}, d2);
    CHECK(d2 == d1);
  }
  // The exception on purpose: 230 has scale 1 (230 / 448 rounds up to 2^0) and rounds to the code
  // of 224; dequantized, the tile's largest magnitude is 224, whose scale is 0.5.
  std::vector<bf16> one(576, bf16::from_float(0.0f));
  one[0] = bf16::from_float(230.0f);
  one[1] = bf16::from_float(-16.0f);
  const auto b = amla::quantize_flashmla_fp8(flashmla_fp8_layout::v32, 1, 1, one);
  CHECK(f32_at(&b[512]) == 1.0f);
  CHECK(e4m3_value(b[0]) == 224.0);
  std::vector<bf16> back(576);
  amla::dequantize_flashmla_fp8<bf16>({flashmla_fp8_layout::v32, 1, 1, 0, b}, back);
  const auto b2 = amla::quantize_flashmla_fp8(flashmla_fp8_layout::v32, 1, 1, back);
  CHECK(f32_at(&b2[512]) == 0.5f);
  CHECK(e4m3_value(b2[0]) == 448.0);
  CHECK(e4m3_value(b2[1]) == -32.0);
  std::vector<bf16> back2(576);
  amla::dequantize_flashmla_fp8<bf16>({flashmla_fp8_layout::v32, 1, 1, 0, b2}, back2);
  CHECK(back2 == back);
}

TEST_CASE("a tile holding a NaN or an Inf quantizes to NaN and dequantizes to NaN", "[fp8_cache]") {
  std::vector<bf16> kv(2 * 576, bf16::from_float(1.0f));
  kv[5] = bf16::from_bits(0x7FC0);             // NaN in token 0, tile 0 (a poisoned slot)
  kv[576 + 300] = bf16::from_float(INFINITY);  // Inf in token 1, tile 2
  const auto b = amla::quantize_flashmla_fp8(flashmla_fp8_layout::v32, 1, 2, kv);
  CHECK(std::isnan(f32_at(&b[512])));
  CHECK(f32_at(&b[512 + 4]) == 0x1p-8f);  // other tiles are untouched
  CHECK(std::isnan(f32_at(&b[656 + 512 + 8])));
  std::vector<float> back(kv.size());
  amla::dequantize_flashmla_fp8<float>({flashmla_fp8_layout::v32, 1, 2, 0, b}, back);
  for (int i = 0; i < 128; ++i) CHECK(std::isnan(back[static_cast<std::size_t>(i)]));
  for (int i = 256; i < 384; ++i) CHECK(std::isnan(back[576 + static_cast<std::size_t>(i)]));
  CHECK(back[128] == 1.0f);
  const auto m = amla::quantize_flashmla_fp8(flashmla_fp8_layout::model1, 1, 1,
                                             std::span<const bf16>(kv).first(512));
  CHECK(m[576 + 0] == 0xFF);  // the e8m0 NaN
}

TEST_CASE("FlashMLA FP8 views and quantizers reject bad sizes, naming them", "[fp8_cache]") {
  using amla_test::error_of;
  using amla_test::names;
  std::vector<std::uint8_t> bytes(656 * 4);
  std::vector<bf16> kv(576 * 4);
  std::string m = error_of([&] {
    amla::dequantize_flashmla_fp8<bf16>(
        {flashmla_fp8_layout::v32, 1, 4, 0, std::span<const std::uint8_t>(bytes).first(100)}, kv);
  });
  CHECK(names(m, "bytes"));
  CHECK(m.find("2624") != std::string::npos);  // the size it must have
  m = error_of([&] {
    amla::dequantize_flashmla_fp8<bf16>({flashmla_fp8_layout::v32, 1, 4, 100, bytes}, kv);
  });
  CHECK(names(m, "page_stride_bytes"));
  CHECK(m.find("100") != std::string::npos);
  m = error_of([&] {
    amla::dequantize_flashmla_fp8<bf16>({flashmla_fp8_layout::v32, 0, 4, 0, bytes}, kv);
  });
  CHECK(names(m, "num_pages"));
  m = error_of([&] {
    amla::dequantize_flashmla_fp8<bf16>({flashmla_fp8_layout::v32, 1, 4, 0, bytes},
                                        std::span<bf16>(kv).first(10));
  });
  CHECK(names(m, "kv"));
  m = error_of([&] {
    amla::quantize_flashmla_fp8(flashmla_fp8_layout::model1, 1, 4, kv);  // 576 wide, needs 512
  });
  CHECK(names(m, "kv"));
  CHECK(m.find("512") != std::string::npos);
  m = error_of(
      [&] { amla::quantize_flashmla_fp8(flashmla_fp8_layout::v32, 1, 4, kv, bytes, 656); });
  CHECK(names(m, "page_stride_bytes"));
}

TEST_CASE("scaled FP8 caches quantize as vLLM does and round trip their codes", "[fp8_cache]") {
  const int pages = 2, ps = 3, h = 2, d = 16;
  const std::size_t n = static_cast<std::size_t>(pages * ps * h * d);
  std::vector<float> x(n);
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (auto& v : x) v = normal(gen);
  for (const fp8_kind kind : {fp8_kind::e4m3, fp8_kind::e5m2}) {
    for (const int group : {0, 4, 16}) {
      CAPTURE(static_cast<int>(kind), group);
      const std::size_t n_scales = group == 0 ? 1 : n / static_cast<std::size_t>(group);
      std::vector<std::uint8_t> codes(n);
      std::vector<float> scales(n_scales);
      amla::quantize_scaled_fp8<float>(kind, pages, ps, h, d, group, x, codes, scales);
      const float fmax = amla::fp8_max_finite(kind);
      // Each scale is amax / the FP8 maximum of its group (the tensor's for group 0).
      const std::size_t gs = group == 0 ? n : static_cast<std::size_t>(group);
      for (std::size_t g = 0; g < n_scales; ++g) {
        float amax = 0;
        for (std::size_t i = g * gs; i < (g + 1) * gs; ++i) amax = std::max(amax, std::fabs(x[i]));
        CHECK(scales[g] == amax / fmax);
      }
      // Codes are the nearest FP8 values of x / scale (saturating), checked against the exact
      // values in double.
      for (std::size_t i = 0; i < n; ++i) {
        const float q = x[i] / scales[i / gs];
        const double got = amla::fp8_to_float(kind, codes[i]);
        CHECK(std::fabs(got) <= fmax);
        const float step = kind == fp8_kind::e4m3 ? 0x1p-3f : 0x1p-2f;
        CHECK(std::fabs(got - q) <= std::max(std::fabs(q) * step / 2, 0x1p-10f));
      }
      const amla::ScaledFp8Cache c{kind, pages, ps, h, d, group, codes, scales};
      std::vector<bf16> back(n);
      amla::dequantize_scaled_fp8<bf16>(c, back);
      for (std::size_t i = 0; i < n; ++i) {
        CHECK(back[i] == bf16::from_float(amla::fp8_to_float(kind, codes[i]) * scales[i / gs]));
      }
      std::vector<float> backf(n);
      amla::dequantize_scaled_fp8<float>(c, backf);
      // Requantizing the dequantized values with the same scale gives the same codes.
      if (group == 0) {
        std::vector<std::uint8_t> codes2(n), codes3(n);
        std::vector<float> scales2(1);
        amla::quantize_scaled_fp8<float>(kind, pages, ps, h, d, 0, backf, codes2, scales2,
                                         scales[0]);
        CHECK(codes2 == codes);
        amla::quantize_scaled_fp8<bf16>(kind, pages, ps, h, d, 0, back, codes3, scales2, scales[0]);
        CHECK(codes3 == codes);
      }
      const amla::QuantizationError e = amla::quantization_error<float, float>(x, backf);
      CHECK(e.compared == n);
      // Rounding to nearest loses at most half a step: 2^-4 (e4m3) or 2^-3 (e5m2) relative, plus
      // the subnormal floor.
      CHECK(e.max_abs_error > 0.0);
      CHECK(e.relative_rms() < (kind == fp8_kind::e4m3 ? 0.0625 : 0.125));
    }
  }
}

TEST_CASE("scaled FP8 quantization saturates, keeps NaN and checks its scale", "[fp8_cache]") {
  using amla_test::error_of;
  using amla_test::names;
  const std::vector<float> x = {1000.0f, -1000.0f, NAN, 0.5f};
  std::vector<std::uint8_t> codes(4);
  std::vector<float> scales(1);
  amla::quantize_scaled_fp8<float>(fp8_kind::e4m3, 1, 1, 1, 4, 0, x, codes, scales, 1.0f);
  CHECK(codes[0] == 0x7E);  // saturated to 448
  CHECK(codes[1] == 0xFE);
  CHECK(codes[2] == 0x7F);  // NaN
  CHECK(codes[3] == 0x30);  // 0.5
  // Without a scale: amax of the non-NaN values.
  amla::quantize_scaled_fp8<float>(fp8_kind::e4m3, 1, 1, 1, 4, 0, x, codes, scales);
  CHECK(scales[0] == 1000.0f / 448.0f);
  CHECK(amla::fp8_tensor_scale<float>(std::vector<float>{0.0f, NAN}, fp8_kind::e5m2) == 1.0f);
  // A group with a NaN gets a NaN scale and NaN codes; the other groups are untouched.
  std::vector<float> g2(2);
  amla::quantize_scaled_fp8<float>(fp8_kind::e5m2, 1, 1, 1, 4, 2, x, codes, g2);
  CHECK(g2[0] == 1000.0f / 57344.0f);
  CHECK(std::isnan(g2[1]));
  CHECK((codes[2] & 0x7F) > 0x7C);
  CHECK((codes[3] & 0x7F) > 0x7C);
  std::string m = error_of([&] {
    amla::quantize_scaled_fp8<float>(fp8_kind::e4m3, 1, 1, 1, 4, 0, x, codes, scales, -1.0f);
  });
  CHECK(names(m, "tensor_scale"));
  m = error_of(
      [&] { amla::quantize_scaled_fp8<float>(fp8_kind::e4m3, 1, 1, 1, 4, 3, x, codes, scales); });
  CHECK(names(m, "group_size"));
  CHECK(m.find("divisor of d = 4") != std::string::npos);
  m = error_of(
      [&] { amla::quantize_scaled_fp8<float>(fp8_kind::e4m3, 1, 1, 1, 4, 2, x, codes, scales); });
  CHECK(names(m, "scales"));
  m = error_of(
      [&] { amla::quantize_scaled_fp8<float>(fp8_kind::e4m3, 1, 1, 1, 4, 2, x, codes, g2, 2.0f); });
  CHECK(names(m, "tensor_scale"));
  m = error_of([&] {
    (void)amla::fp8_tensor_scale<float>(std::vector<float>{1.0f, -INFINITY}, fp8_kind::e4m3);
  });
  CHECK(names(m, "values"));
  CHECK(m.find("values[1]") != std::string::npos);
  m = error_of([&] {
    std::vector<float> out(4);
    amla::dequantize_scaled_fp8<float>({fp8_kind::e4m3, 1, 1, 1, 4, 0, codes, {}}, out);
  });
  CHECK(names(m, "scales"));
}

TEST_CASE("the quantization error report on a hand-computed case", "[fp8_cache]") {
  const std::vector<float> ref = {1.0f, 2.0f, NAN, 4.0f, 0.0f};
  const std::vector<float> deq = {1.5f, 2.0f, 0.0f, INFINITY, 0.25f};
  const amla::QuantizationError e = amla::quantization_error<float, float>(ref, deq);
  CHECK(e.compared == 3);   // 1, 2 and 0
  CHECK(e.skipped == 1);    // the NaN reference
  CHECK(e.nonfinite == 1);  // Inf against 4
  CHECK(e.max_abs_error == 0.5);
  CHECK(e.worst_index == 0);
  CHECK(e.max_rel_error == 0.5);  // 0.5 / 1; the zero reference has no relative error
  CHECK(e.rms_error == Approx(std::sqrt((0.25 + 0.0625) / 3)));
  CHECK(e.reference_rms == Approx(std::sqrt(5.0 / 3)));
  CHECK(e.relative_rms() == Approx(std::sqrt((0.25 + 0.0625) / 5.0)));
  const std::string m = amla_test::error_of([&] {
    (void)amla::quantization_error<float, float>(ref, std::span<const float>(deq).first(2));
  });
  CHECK(amla_test::names(m, "dequantized"));
}
