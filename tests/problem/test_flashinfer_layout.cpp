// Tests for amla/problem/flashinfer_layout.hpp: a hand-made FlashInfer cache mapped to the FlashMLA
// layout, exact round trips both ways (BF16 values and FP8 codes), and the validation rules.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "amla/numeric/bf16.hpp"
#include "amla/problem/flashinfer_layout.hpp"
#include "common/error_message.hpp"

using amla::bf16;

namespace {

// num_pages 6, page_size 4, d_ckv 3, d_kpe 2: every element is its own index, so a copy to the
// wrong place shows.
struct HandCache {
  std::vector<std::uint16_t> ckv, kpe;
  std::vector<std::int32_t> indptr{0, 2, 3, 3};  // requests own 2, 1 and 0 pages
  std::vector<std::int32_t> indices{5, 1, 0};
  std::vector<std::int32_t> last{3, 4, 0};
  HandCache() {
    for (std::uint16_t i = 0; i < 6 * 4 * 3; ++i) ckv.push_back(i);
    for (std::uint16_t i = 0; i < 6 * 4 * 2; ++i)
      kpe.push_back(static_cast<std::uint16_t>(1000 + i));
  }
  amla::FlashInferCache<std::uint16_t> view() const {
    return {6, 4, 3, 2, ckv, kpe, indptr, indices, last, {}};
  }
};

}  // namespace

TEST_CASE("a hand-made FlashInfer cache maps to the FlashMLA layout", "[flashinfer]") {
  const HandCache h;
  const auto c = h.view();
  CHECK(amla::validate_flashinfer_cache("probe", c) == 3);
  CHECK(amla::flashinfer_max_pages(c) == 2);
  CHECK(c.seqlen(0) == 7);  // (2 - 1) * 4 + 3
  CHECK(c.seqlen(1) == 4);
  CHECK(c.seqlen(2) == 0);
  CHECK(c.page_of(0, 6) == 1);  // key 6 of request 0: its second page
  std::vector<std::uint16_t> kv(6 * 4 * 5);
  std::vector<std::int32_t> table(3 * 3, -7), seqlens(3);
  amla::flashinfer_to_flashmla<std::uint16_t>(c, kv, table, seqlens, 3);
  CHECK(table == std::vector<std::int32_t>{5, 1, 0, 0, 0, 0, 0, 0, 0});
  CHECK(seqlens == std::vector<std::int32_t>{7, 4, 0});
  // Row (page 2, slot 1) = ckv[2][1] then kpe[2][1].
  const std::size_t row = (2 * 4 + 1) * 5;
  CHECK(kv[row + 0] == (2 * 4 + 1) * 3 + 0);
  CHECK(kv[row + 2] == (2 * 4 + 1) * 3 + 2);
  CHECK(kv[row + 3] == 1000 + (2 * 4 + 1) * 2 + 0);
  CHECK(kv[row + 4] == 1000 + (2 * 4 + 1) * 2 + 1);
  // kv_len instead of last_page_len gives the same.
  const std::vector<std::int32_t> kv_len{7, 4, 0};
  auto by_len = c;
  by_len.last_page_len = {};
  by_len.kv_len = kv_len;
  std::vector<std::uint16_t> kv2(kv.size());
  std::vector<std::int32_t> table2(6), seqlens2(3);
  amla::flashinfer_to_flashmla<std::uint16_t>(by_len, kv2, table2, seqlens2, 2);
  CHECK(kv2 == kv);
  CHECK(seqlens2 == seqlens);
}

TEST_CASE("FlashMLA -> FlashInfer -> FlashMLA is exact, for BF16 values and FP8 codes",
          "[flashinfer]") {
  amla::DecodeShape s;
  s.batch = 4;
  s.h_kv = 1;
  s.d_qk = 40;
  s.d_v = 32;
  s.page_size = 3;
  s.num_pages = 12;
  s.max_pages_per_seq = 5;
  const std::vector<std::int32_t> seqlens{7, 0, 15, 1};
  // Pages handed out shuffled; unused table entries hold garbage that must never be read.
  const std::vector<std::int32_t> table{4, 9,  2, 99, -1, -5, -5, -5, -5, -5,
                                        0, 11, 3, 7,  6,  10, 77, 77, 77, 77};
  std::mt19937 gen(3);
  std::vector<bf16> kv(s.kv_elems());
  for (auto& x : kv) x = bf16::from_bits(static_cast<std::uint16_t>(gen()));
  std::vector<bf16> ckv(12 * 3 * 32), kpe(12 * 3 * 8);
  std::vector<std::int32_t> indptr(5), last(4);
  std::vector<std::int32_t> indices(amla::flashinfer_index_count(s, seqlens));
  CHECK(indices.size() == 3 + 0 + 5 + 1);
  amla::flashmla_to_flashinfer<bf16>(s, kv, table, seqlens, ckv, kpe, indptr, indices, last);
  CHECK(indptr == std::vector<std::int32_t>{0, 3, 3, 8, 9});
  CHECK(indices == std::vector<std::int32_t>{4, 9, 2, 0, 11, 3, 7, 6, 10});
  CHECK(last == std::vector<std::int32_t>{1, 0, 3, 1});
  const amla::FlashInferCache<bf16> c{12, 3, 32, 8, ckv, kpe, indptr, indices, last, {}};
  std::vector<bf16> kv_back(kv.size());
  std::vector<std::int32_t> table_back(4 * 5), seqlens_back(4);
  amla::flashinfer_to_flashmla<bf16>(c, kv_back, table_back, seqlens_back, 5);
  CHECK(kv_back == kv);  // every page, bit for bit (NaN patterns included)
  CHECK(seqlens_back == seqlens);
  for (int b = 0; b < 4; ++b) {
    for (int i = 0; i < s.pages_for(seqlens[static_cast<std::size_t>(b)]); ++i) {
      CHECK(table_back[s.table_offset(b, i)] == table[s.table_offset(b, i)]);
    }
  }
  // FP8 codes travel the same way.
  std::vector<std::uint8_t> codes(s.kv_elems()), c_ckv(ckv.size()), c_kpe(kpe.size());
  for (auto& x : codes) x = static_cast<std::uint8_t>(gen());
  amla::flashmla_to_flashinfer<std::uint8_t>(s, codes, table, seqlens, c_ckv, c_kpe, indptr,
                                             indices, last);
  std::vector<std::uint8_t> codes_back(codes.size());
  amla::flashinfer_to_flashmla<std::uint8_t>(
      {12, 3, 32, 8, c_ckv, c_kpe, indptr, indices, last, {}}, codes_back, table_back, seqlens_back,
      5);
  CHECK(codes_back == codes);
}

TEST_CASE("concat_channels and split_channels are inverse copies", "[flashinfer]") {
  const std::vector<float> a{1, 2, 3, 4}, b{10, 20};  // rows 2: a [2, 2], b [2, 1]
  std::vector<float> out(6);
  amla::concat_channels<float>(a, b, out, 2, 2, 1);
  CHECK(out == std::vector<float>{1, 2, 10, 3, 4, 20});
  std::vector<float> a2(4), b2(2);
  amla::split_channels<float>(out, a2, b2, 2, 2, 1);
  CHECK(a2 == a);
  CHECK(b2 == b);
  const std::string m =
      amla_test::error_of([&] { amla::concat_channels<float>(a, b, out, 2, 2, 2); });
  CHECK(amla_test::names(m, "b"));
}

TEST_CASE("FlashInfer views are validated, naming the argument and the rule", "[flashinfer]") {
  using amla_test::error_of;
  using amla_test::names;
  const HandCache h;
  std::vector<std::uint16_t> kv(6 * 4 * 5);
  std::vector<std::int32_t> table(9), seqlens(3);
  auto run = [&](const amla::FlashInferCache<std::uint16_t>& c, int cols = 3) {
    return error_of([&] {
      amla::flashinfer_to_flashmla<std::uint16_t>(c, kv, std::span(table).first(3 * cols), seqlens,
                                                  cols);
    });
  };
  CHECK(run(h.view()).empty());
  auto c = h.view();
  std::vector<std::int32_t> bad_indptr{1, 2, 3, 3};
  c.kv_indptr = bad_indptr;
  CHECK(names(run(c), "kv_indptr"));
  std::vector<std::int32_t> decreasing{0, 2, 1, 3};
  c.kv_indptr = decreasing;
  std::string m = run(c);
  CHECK(names(m, "kv_indptr"));
  CHECK(m.find("kv_indptr[2] = 1") != std::string::npos);
  std::vector<std::int32_t> past_end{0, 2, 3, 4};
  c.kv_indptr = past_end;
  CHECK(names(run(c), "kv_indptr"));
  c = h.view();
  std::vector<std::int32_t> bad_index{5, 6, 0};
  c.kv_indices = bad_index;
  m = run(c);
  CHECK(names(m, "kv_indices"));
  CHECK(m.find("kv_indices[1] = 6") != std::string::npos);
  c = h.view();
  std::vector<std::int32_t> zero_last{0, 4, 0};
  c.last_page_len = zero_last;
  m = run(c);
  CHECK(names(m, "last_page_len"));
  CHECK(m.find("[1, 4]") != std::string::npos);
  c = h.view();
  std::vector<std::int32_t> long_len{7, 5, 0};  // request 1 owns one page of 4 keys
  c.last_page_len = {};
  c.kv_len = long_len;
  m = run(c);
  CHECK(names(m, "kv_len"));
  CHECK(m.find("kv_len[1] = 5") != std::string::npos);
  c.last_page_len = h.last;
  CHECK(names(run(c), "last_page_len"));  // both given
  c = h.view();
  CHECK(names(run(c, 1), "max_pages_per_seq"));
  c.kpe = std::span<const std::uint16_t>(h.kpe).first(10);
  CHECK(names(run(c), "kpe"));
}

TEST_CASE("flashmla_to_flashinfer checks the problem it converts", "[flashinfer]") {
  amla::DecodeShape s;
  s.batch = 1;
  s.h_kv = 2;
  s.h_q = 2;
  s.d_qk = 8;
  s.d_v = 4;
  s.page_size = 2;
  s.num_pages = 2;
  s.max_pages_per_seq = 2;
  std::vector<float> kv(s.kv_elems()), ckv(2 * 2 * 4), kpe(2 * 2 * 4);
  std::vector<std::int32_t> table{0, 1}, seqlens{3}, indptr(2), indices(2), last(1);
  auto run = [&] {
    return amla_test::error_of([&] {
      amla::flashmla_to_flashinfer<float>(s, kv, table, seqlens, ckv, kpe, indptr, indices, last);
    });
  };
  CHECK(amla_test::names(run(), "shape.h_kv"));
  s.h_kv = 1;
  s.h_q = 1;
  kv.resize(s.kv_elems());
  CHECK(run().empty());
  table[1] = 2;  // a used page out of range
  CHECK(amla_test::names(run(), "block_table"));
  table[1] = 1;
  s.d_v = 8;
  CHECK(amla_test::names(run(), "shape.d_v"));
}
