// Tests for amla/problem/nz_layout.hpp: the NZ offset formula on a hand-computed element, the map
// being a permutation, exact ND <-> NZ round trips for 1-, 2- and 4-byte elements, and validation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "amla/numeric/bf16.hpp"
#include "amla/problem/nz_layout.hpp"
#include "common/error_message.hpp"

namespace {

template <class T>
void check_round_trip(const amla::NzLayout& l, std::uint32_t seed) {
  const std::size_t n = amla::validate_nz_layout("probe", l);
  std::mt19937 gen(seed);
  std::vector<T> nd(n);
  std::vector<std::uint8_t> raw(n * sizeof(T));
  for (auto& x : raw) x = static_cast<std::uint8_t>(gen());
  std::memcpy(static_cast<void*>(nd.data()), raw.data(), raw.size());
  std::vector<T> nz(n), back(n);
  amla::nd_to_nz<T>(l, nd, nz);
  amla::nz_to_nd<T>({l, nz}, back);
  CHECK(std::memcmp(static_cast<const void*>(back.data()), raw.data(), raw.size()) == 0);
  // NZ element (p, s, g, j) is ND element ((p * page_size + s) * h_kv + g) * d + j.
  const amla::NzCache<T> view{l, nz};
  for (int p = 0; p < l.num_pages; ++p) {
    for (int s = 0; s < l.page_size; ++s) {
      for (int g = 0; g < l.h_kv; ++g) {
        for (int j = 0; j < l.d; j += 7) {
          const std::size_t i =
              ((static_cast<std::size_t>(p) * l.page_size + s) * l.h_kv + g) * l.d + j;
          CHECK(std::memcmp(static_cast<const void*>(&view.at(p, s, g, j)), &raw[i * sizeof(T)],
                            sizeof(T)) == 0);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("NZ offsets follow [pages, heads, d / c0, page_size, c0]", "[nz]") {
  const amla::NzLayout l{2, 3, 2, 32, 16};
  // (page 1, slot 2, head 1, channel 17): column (1 * 2 + 1) * 2 + 1 = 7, then slot 2, lane 1.
  CHECK(l.offset(1, 2, 1, 17) == (7 * 3 + 2) * 16 + 1);
  CHECK(l.offset(0, 0, 0, 0) == 0);
  CHECK(l.offset(0, 1, 0, 0) == 16);  // the next token of a column is c0 elements on
  CHECK(l.offset(0, 0, 0, 16) == l.column_stride());
  CHECK(amla::nz_c0(2) == 16);
  CHECK(amla::nz_c0(1) == 32);
  CHECK(amla::nz_c0(4) == 8);
  // The map is a permutation of [0, elements).
  std::vector<int> seen(l.elements("probe"), 0);
  for (int p = 0; p < 2; ++p)
    for (int s = 0; s < 3; ++s)
      for (int g = 0; g < 2; ++g)
        for (int j = 0; j < 32; ++j) ++seen[l.offset(p, s, g, j)];
  CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
}

TEST_CASE("ND -> NZ -> ND is exact for BF16, INT8/FP8 and FP32 elements", "[nz]") {
  amla::DecodeShape s;
  s.num_pages = 3;
  s.page_size = 5;
  s.h_kv = 2;
  s.d_qk = 576;
  check_round_trip<amla::bf16>(amla::nz_layout_of(s, amla::nz_c0(2)), 1);
  check_round_trip<std::uint8_t>(amla::nz_layout_of(s, amla::nz_c0(1)), 2);
  check_round_trip<float>(amla::nz_layout_of(s, amla::nz_c0(4)), 3);
  check_round_trip<std::int8_t>({1, 128, 1, 512, 32}, 4);  // CANN's block size 128
}

TEST_CASE("NZ layouts are validated, naming the field", "[nz]") {
  using amla_test::error_of;
  using amla_test::names;
  std::string m = error_of([] { (void)amla::validate_nz_layout("probe", {1, 4, 1, 40, 16}); });
  CHECK(names(m, "layout.d"));
  CHECK(m.find("multiple of layout.c0 = 16") != std::string::npos);
  m = error_of([] { (void)amla::validate_nz_layout("probe", {1, 4, 0, 32, 16}); });
  CHECK(names(m, "layout.h_kv"));
  std::vector<float> nd(64), nz(63);
  m = error_of([&] { amla::nd_to_nz<float>({1, 2, 1, 32, 8}, nd, nz); });
  CHECK(names(m, "nz"));
}
