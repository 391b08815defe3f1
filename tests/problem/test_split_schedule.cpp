// Tests of problem/split_schedule.hpp: the split-KV tile schedule (balanced and fixed splits), the
// kernel's numbering of its pieces, the replay of a schedule on SMs, and validation. Hand-computed
// schedules first, then properties on random batches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "amla/problem/split_schedule.hpp"
#include "common/error_message.hpp"

using namespace amla;

namespace {

SplitScheduleOptions opts(int sms, int num_splits = 0) {
  SplitScheduleOptions o;
  o.sms = sms;
  o.num_splits = num_splits;
  return o;
}

std::vector<SplitPiece> pieces_of(const SplitScheduleView& v) {
  std::vector<SplitPiece> out;
  for (int i = 0; i < split_schedule::piece_count(v); ++i) {
    SplitPiece pc;
    REQUIRE(split_schedule::piece_at(v, i, pc));
    out.push_back(pc);
  }
  SplitPiece past;
  CHECK(!split_schedule::piece_at(v, split_schedule::piece_count(v), past));
  return out;
}

/// The pieces, in the kernel's order, cover every block of every request exactly once, request by
/// request and in block order; a request in one piece writes directly (slot -1) and a split one
/// uses distinct slots below num_slots.
void check_cover(const SplitSchedule& s) {
  const SplitScheduleView v = s.view();
  const std::vector<SplitPiece> pieces = pieces_of(v);
  std::vector<int> next_block(static_cast<std::size_t>(v.batch), 0), count(next_block);
  int last_request = 0;
  for (const SplitPiece& pc : pieces) {
    CHECK(pc.request >= last_request);
    last_request = pc.request;
    ++count[static_cast<std::size_t>(pc.request)];
  }
  std::set<int> slots;
  for (const SplitPiece& pc : pieces) {
    const auto b = static_cast<std::size_t>(pc.request);
    CHECK(pc.block_begin == next_block[b]);
    CHECK(pc.block_end >= pc.block_begin);
    next_block[b] = pc.block_end;
    if (count[b] == 1) {
      CHECK(pc.slot == -1);
    } else {
      CHECK(pc.slot >= 0);
      CHECK(pc.slot < s.num_slots);
      CHECK(slots.insert(pc.slot).second);
    }
  }
  for (int b = 0; b < v.batch; ++b) {
    const auto i = static_cast<std::size_t>(b);
    CHECK(next_block[i] == split_schedule::blocks_of(s.seqlens[i], v.block_keys));
    CHECK(count[i] >= 1);
  }
  CHECK(static_cast<int>(slots.size()) == s.num_slots);
}

}  // namespace

TEST_CASE("a sized schedule cuts the longest requests into the most pieces",
          "[problem][split_schedule]") {
  // Blocks {0, 1, 10}, one row block on 8 SMs (8 slots): T = 10 fits (3 pieces), 5 (4), 4 (5),
  // 3 (6: 1 + 1 + 4), 2 (7: 1 + 1 + 5); 10 / 6 = 2 again, 10 / 8 = 2, no shorter T fits.
  const std::vector<std::int32_t> lens{0, 64, 640};
  const SplitSchedule s = make_split_schedule(lens, 1, opts(8));
  const SplitScheduleView v = s.view();
  CHECK(v.piece_blocks == 2);
  CHECK(s.piece_prefix == std::vector<std::int32_t>{0, 1, 2, 7});
  CHECK(s.slot_prefix == std::vector<std::int32_t>{0, 0, 0, 5});
  CHECK(s.num_slots == 5);
  const std::vector<SplitPiece> pieces = pieces_of(v);
  REQUIRE(pieces.size() == 7);
  for (int i = 0; i < 2; ++i) {  // requests 0 and 1 (0 and 1 blocks): one piece each
    const SplitPiece& pc = pieces[static_cast<std::size_t>(i)];
    CHECK(pc.request == i);
    CHECK(pc.block_end == i);
  }
  CHECK(pieces[1].slot == -1);
  for (int i = 0; i < 5; ++i) {
    const SplitPiece& pc = pieces[static_cast<std::size_t>(2 + i)];
    CHECK(pc.request == 2);
    CHECK(pc.block_begin == 2 * i);
    CHECK(pc.block_end == 2 * i + 2);
    CHECK(pc.slot == i);
  }
  // On 8 SMs each CTA has its own SM: costs 0 + 1, 1 + 1 and five of 2 + 1 (overhead 1).
  const SplitScheduleReplay r = replay_split_schedule(v, 1, 8, 1);
  CHECK(r.pieces == 7);
  CHECK(r.sms[0].cost == 1);
  CHECK(r.sms[1].cost == 2);
  CHECK(r.sms[2].cost == 3);
  CHECK(r.sms[7].cost == 0);
  CHECK(r.makespan == 3);
  CHECK(r.total_blocks == 11);
  CHECK(r.split_requests == 1);
  check_cover(s);
}

TEST_CASE("one long request is cut into a wave of equal pieces", "[problem][split_schedule]") {
  // b 1, s_q 2, h_q 128 (4 row blocks), s_k 16384: 256 blocks, 132 / 4 = 33 slots, T = 8.
  const SplitSchedule s = make_split_schedule(std::vector<std::int32_t>{16384}, 4, opts(132));
  const SplitScheduleView v = s.view();
  CHECK(v.piece_blocks == 8);
  const std::vector<SplitPiece> pieces = pieces_of(v);
  REQUIRE(pieces.size() == 32);
  CHECK(pieces[0].block_end == 8);
  CHECK(pieces[31].block_begin == 248);
  CHECK(pieces[31].block_end == 256);
  CHECK(s.num_slots == 32);
  // 128 CTAs on 132 SMs, one each: the busiest does 8 blocks and the overhead.
  const SplitScheduleReplay r = replay_split_schedule(v, 4, 132);
  CHECK(r.makespan == 13);
  check_cover(s);
}

TEST_CASE("a batch that fills a wave is not cut, a smaller one is cut to one wave",
          "[problem][split_schedule]") {
  // b 128, s_q 1, h_q 128 (2 row blocks), s_k 4096: 66 slots, so no split at all.
  const std::vector<std::int32_t> full(128, 4096);
  const SplitSchedule s = make_split_schedule(full, 2, opts(132));
  CHECK(s.view().piece_blocks == 64);
  CHECK(s.num_slots == 0);
  CHECK(split_schedule::piece_count(s.view()) == 128);
  check_cover(s);
  // b 16, s_q 2 (4 row blocks, 33 slots), 64 blocks each: 2 pieces of 32 each, 128 CTAs.
  const std::vector<std::int32_t> small(16, 4096);
  const SplitSchedule t = make_split_schedule(small, 4, opts(132));
  CHECK(t.view().piece_blocks == 32);
  CHECK(split_schedule::piece_count(t.view()) == 32);
  const SplitScheduleReplay r = replay_split_schedule(t.view(), 4, 132);
  for (const SplitSmLoad& sm : r.sms) CHECK(sm.pieces.size() <= 1);
  check_cover(t);
}

TEST_CASE("fixed splits give every request k equal pieces", "[problem][split_schedule]") {
  const std::vector<std::int32_t> lens{130, 0, 64};  // 3, 0, 1 blocks
  const SplitSchedule s3 = make_split_schedule(lens, 2, opts(132, 3));
  CHECK(s3.num_slots == 9);
  const std::vector<SplitPiece> pieces = pieces_of(s3.view());
  REQUIRE(pieces.size() == 9);
  for (int i = 0; i < 9; ++i) {
    CHECK(pieces[static_cast<std::size_t>(i)].request == i / 3);
    CHECK(pieces[static_cast<std::size_t>(i)].slot == i);
  }
  // Request 2 has one block: split 0 takes it, splits 1 and 2 are empty (they write empty
  // partials the combine weighs 0).
  CHECK(pieces[6].block_end == 1);
  CHECK(pieces[7].block_begin == pieces[7].block_end);
  check_cover(s3);
  const SplitSchedule s1 = make_split_schedule(lens, 2, opts(132, 1));
  CHECK(s1.num_slots == 0);
  const std::vector<SplitPiece> whole = pieces_of(s1.view());
  REQUIRE(whole.size() == 3);
  CHECK(whole[0].block_end == 3);
  CHECK(whole[0].slot == -1);
  check_cover(s1);
}

TEST_CASE("the replay hands CTAs to the SM that is free first", "[problem][split_schedule]") {
  // Fixed splits of 1 (whole requests) of 4, 1, 1, 1 blocks, overhead 1, one row block, 2 SMs:
  // SM 0 takes request 0 (cost 5), SM 1 requests 1, 2 and 3 (2 each) as it frees first.
  const std::vector<std::int32_t> lens{256, 64, 64, 64};
  const SplitSchedule s = make_split_schedule(lens, 1, opts(2, 1));
  const SplitScheduleReplay r = replay_split_schedule(s.view(), 1, 2, 1);
  REQUIRE(r.sms[0].pieces.size() == 1);
  CHECK(r.sms[0].cost == 5);
  REQUIRE(r.sms[1].pieces.size() == 3);
  CHECK(r.sms[1].cost == 6);
  CHECK(r.makespan == 6);
  CHECK(r.mean_cost == 5.5);
  CHECK(r.describe().find("SM 1: cost 6, r1[0,1) r2[0,1) r3[0,1)") != std::string::npos);
}

TEST_CASE("random batches are covered exactly within the bounds, pieces no longer than T",
          "[problem][split_schedule]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int batch = std::uniform_int_distribution<int>(1, 200)(rng);
    const int row_blocks = std::uniform_int_distribution<int>(1, 8)(rng);
    const int sms = std::uniform_int_distribution<int>(1, 160)(rng);
    std::vector<std::int32_t> lens(static_cast<std::size_t>(batch));
    for (auto& l : lens) {
      const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
      l = kind == 0 ? 0 : std::uniform_int_distribution<int>(1, kind == 3 ? 20000 : 700)(rng);
    }
    const SplitSchedule s = make_split_schedule(lens, row_blocks, opts(sms));
    const SplitScheduleView v = s.view();
    const SplitScheduleBounds bounds = split_schedule_bounds(batch, row_blocks, opts(sms));
    const int pieces = split_schedule::piece_count(v);
    CHECK(pieces <= bounds.pieces);
    CHECK(s.num_slots <= bounds.partials);
    // A batch below a wave fills at most one; one of a wave or more is not cut.
    if (batch < bounds.slots) {
      CHECK(pieces <= bounds.slots);
    } else {
      CHECK(pieces == batch);
    }
    for (const SplitPiece& pc : pieces_of(v)) {
      CHECK(pc.block_end - pc.block_begin <= v.piece_blocks);
    }
    // T is the shortest candidate ceil(n_max / k) that fits: the next shorter one does not.
    if (batch < bounds.slots) {
      int n_max = 0;
      for (std::int32_t l : lens) n_max = std::max(n_max, split_schedule::blocks_of(l, 64));
      int next = v.piece_blocks;
      for (int k = 1; k <= bounds.slots && next >= v.piece_blocks; ++k) {
        next = split_schedule::candidate_blocks(n_max, k);
      }
      if (next < v.piece_blocks) {
        int over = 0;
        for (std::int32_t l : lens) {
          over += split_schedule::pieces_for(split_schedule::blocks_of(l, 64), next);
        }
        CHECK(over > bounds.slots);
      }
    }
    check_cover(s);
    const SplitScheduleReplay r = replay_split_schedule(v, row_blocks, sms);
    CHECK(r.pieces == pieces);
    std::int64_t blocks = 0;
    for (const SplitPiece& pc : pieces_of(v)) blocks += pc.block_end - pc.block_begin;
    CHECK(r.total_blocks == blocks);
  }
}

TEST_CASE("split schedule arguments are validated by name", "[problem][split_schedule]") {
  using amla_test::error_of;
  using amla_test::names;
  const std::vector<std::int32_t> lens{5, -1};
  CHECK(names(error_of([&] { make_split_schedule(lens, 1, opts(4)); }), "seqlens[1]"));
  const std::vector<std::int32_t> ok{5};
  CHECK(names(error_of([&] { make_split_schedule(ok, 1, opts(0)); }), "options.sms"));
  CHECK(names(error_of([&] { make_split_schedule(ok, 0, opts(4)); }), "row_blocks"));
  CHECK(names(error_of([&] { make_split_schedule(ok, 1, opts(4, -2)); }), "options.num_splits"));
  CHECK(names(error_of([&] { make_split_schedule({}, 1, opts(4)); }), "seqlens"));
  const SplitSchedule s = make_split_schedule(ok, 1, opts(4));
  CHECK(names(error_of([&] { replay_split_schedule(s.view(), 1, 0); }), "sms"));
  CHECK(names(error_of([&] { replay_split_schedule(s.view(), 1, 4, -1); }), "overhead_blocks"));
}
