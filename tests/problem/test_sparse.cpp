// Tests of problem/sparse.hpp: the index-list view of a sparse top-k problem and its rules in the
// one validator (validate_sparse, called by validate_decode).
#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "amla/problem/sparse.hpp"
#include "amla/problem/validate.hpp"
#include "common/error_message.hpp"

using namespace amla;

namespace {

using amla_test::error_of;
using amla_test::names;

DecodeShape small_shape() {
  DecodeShape s;
  s.batch = 2;
  s.s_q = 2;
  s.h_q = 2;
  s.d_qk = 4;
  s.d_v = 4;
  s.page_size = 3;
  s.max_pages_per_seq = 3;
  s.num_pages = 6;
  return s;
}

std::string sparse_error(const DecodeShape& s, const std::vector<std::int32_t>& seqlens,
                         bool causal, const SparseTopk& sp) {
  return error_of([&] { validate_sparse("probe", s, seqlens, causal, sp); });
}

}  // namespace

TEST_CASE("the index-list view: offsets, counted entries, enabled", "[problem][sparse]") {
  const DecodeShape s = small_shape();
  SparseTopk sp;
  CHECK_FALSE(sp.enabled());
  sp.topk = 5;
  CHECK(sp.enabled());
  CHECK(sp.offset(s, 0, 0) == 0);
  CHECK(sp.offset(s, 0, 1) == 5);
  CHECK(sp.offset(s, 1, 0) == 10);
  CHECK(sp.offset(s, 1, 1) == 15);
  CHECK(sp.counted(s, 1, 1) == 5);  // no topk_length: every entry counts
  const std::vector<std::int32_t> lengths = {5, 4, 0, 2};
  sp.topk_length = lengths;
  CHECK(sp.counted(s, 0, 0) == 5);
  CHECK(sp.counted(s, 0, 1) == 4);
  CHECK(sp.counted(s, 1, 0) == 0);
  CHECK(sp.counted(s, 1, 1) == 2);
  SparseTopk only_indices;
  const std::vector<std::int32_t> one = {0};
  only_indices.indices = one;
  CHECK(only_indices.enabled());  // indices without topk is a sparse problem (and an error)
}

TEST_CASE("validate_sparse accepts -1, keys the token sees, duplicates and topk > seqlen",
          "[problem][sparse][validation]") {
  const DecodeShape s = small_shape();
  const std::vector<std::int32_t> seqlens = {5, 0};
  // topk 8 > seqlen 5: every key once, a duplicate, -1s. Sequence 1 is empty: only -1.
  std::vector<std::int32_t> idx = {0,  1,  2,  3,  4,  4,  -1, -1, 0,  -1, 3,  -1, -1, 2,  1,  -1,
                                   -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  SparseTopk sp{8, idx, {}};
  CHECK(sparse_error(s, seqlens, false, sp).empty());
  CHECK(sparse_error(s, seqlens, false, SparseTopk{}).empty());  // dense
  // Causal, s_q 2: token 0 sees keys [0, 4), token 1 all 5. Key 4 in token 0's list is refused.
  const std::string m = sparse_error(s, seqlens, true, sp);
  CHECK(names(m, "sparse.indices"));
  CHECK(m.find("indices[0][0][4] = 4") != std::string::npos);
  CHECK(m.find("[0, 4)") != std::string::npos);
  CHECK(m.find("causal") != std::string::npos);
  // With topk_length 4 for token 0 the entry holding 4 is not counted, and not checked.
  const std::vector<std::int32_t> lengths = {4, 8, 0, 8};
  sp.topk_length = lengths;
  CHECK(sparse_error(s, seqlens, true, sp).empty());
}

TEST_CASE("validate_sparse names the entry, its value and the rule",
          "[problem][sparse][validation]") {
  const DecodeShape s = small_shape();
  const std::vector<std::int32_t> seqlens = {5, 2};
  std::vector<std::int32_t> idx(2 * 2 * 3, -1);
  SparseTopk sp{3, idx, {}};
  REQUIRE(sparse_error(s, seqlens, false, sp).empty());

  SECTION("past the sequence") {
    idx[s.s_q * 3 + 2] = 2;  // indices[1][0][2] = 2, sequence 1 has 2 keys
    const std::string m = sparse_error(s, seqlens, false, sp);
    CHECK(names(m, "sparse.indices"));
    CHECK(m.find("indices[1][0][2] = 2") != std::string::npos);
    CHECK(m.find("must be -1 (invalid)") != std::string::npos);
    CHECK(m.find("seqlen 2") != std::string::npos);
  }
  SECTION("below -1") {
    idx[1] = -2;
    CHECK(sparse_error(s, seqlens, false, sp).find("indices[0][0][1] = -2") != std::string::npos);
    idx[1] = INT_MIN;
    CHECK(names(sparse_error(s, seqlens, false, sp), "sparse.indices"));
  }
  SECTION("topk_length out of [0, topk]") {
    std::vector<std::int32_t> lengths = {3, 3, 4, 0};
    sp.topk_length = lengths;
    std::string m = sparse_error(s, seqlens, false, sp);
    CHECK(names(m, "sparse.topk_length"));
    CHECK(m.find("topk_length[1][0] = 4") != std::string::npos);
    CHECK(m.find("[0, topk = 3]") != std::string::npos);
    lengths[2] = -1;
    CHECK(sparse_error(s, seqlens, false, sp).find("= -1") != std::string::npos);
  }
  SECTION("sizes") {
    const std::vector<std::int32_t> short_idx(11, -1);
    std::string m = sparse_error(s, seqlens, false, SparseTopk{3, short_idx, {}});
    CHECK(names(m, "sparse.indices"));
    CHECK(m.find("[batch, s_q, topk] = 12") != std::string::npos);
    const std::vector<std::int32_t> lengths(3, 0);
    m = sparse_error(s, seqlens, false, SparseTopk{3, idx, lengths});
    CHECK(names(m, "sparse.topk_length"));
    CHECK(m.find("[batch, s_q] (or empty) = 4") != std::string::npos);
  }
  SECTION("topk") {
    std::string m = sparse_error(s, seqlens, false, SparseTopk{0, idx, {}});
    CHECK(names(m, "sparse.topk"));
    CHECK(m.find("must be >= 1") != std::string::npos);
    m = sparse_error(s, seqlens, false, SparseTopk{-3, {}, {}});
    CHECK(names(m, "sparse.topk"));
    CHECK(m.find("-3") != std::string::npos);
    DecodeShape big = s;
    big.batch = INT_MAX;
    big.s_q = INT_MAX;
    m = sparse_error(big, seqlens, false, SparseTopk{INT_MAX, idx, {}});
    CHECK(names(m, "sparse.indices"));
    CHECK(m.find("overflows") != std::string::npos);
  }
}

TEST_CASE("validate_decode checks the index lists and the sink's size", "[problem][sparse]") {
  DecodeShape s = small_shape();
  const std::vector<float> q(s.q_elems()), kv(s.kv_elems());
  const std::vector<std::int32_t> table = {0, 1, 2, 3, 4, 5};
  const std::vector<std::int32_t> seqlens = {5, 2};
  std::vector<std::int32_t> idx(12, -1);
  DecodeInputs<float> in{s, q, kv, {}, table, seqlens};
  in.sparse = SparseTopk{3, idx, {}};
  CHECK(error_of([&] { validate_decode("probe", in, {}); }).empty());
  idx[0] = 5;
  CHECK(names(error_of([&] { validate_decode("probe", in, {}); }), "sparse.indices"));
  idx[0] = 4;
  const std::vector<float> sink = {0.5f, -1.0f};
  in.sink = sink;
  CHECK(error_of([&] { validate_decode("probe", in, {}); }).empty());
  const std::vector<float> three(3);
  in.sink = three;
  const std::string m = error_of([&] { validate_decode("probe", in, {}); });
  CHECK(names(m, "sink"));
  CHECK(m.find("[h_q] (or empty) = 2") != std::string::npos);
}
