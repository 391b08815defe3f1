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

SplitScheduleOptions opts(int sms, int overhead, int num_splits = 0) {
  SplitScheduleOptions o;
  o.sms = sms;
  o.overhead_blocks = overhead;
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

TEST_CASE("a balanced schedule cuts a hand-computed varlen batch where the axis is cut",
          "[problem][split_schedule]") {
  // Blocks {0, 1, 10}, overhead 1: costs {1, 2, 11}, C = {0, 1, 3, 14}. One row block on 4 SMs:
  // parts = 4 - 3 + 1 = 2, W = 7.
  const std::vector<std::int32_t> lens{0, 64, 640};
  const SplitSchedule s = make_split_schedule(lens, 1, opts(4, 1));
  const SplitScheduleView v = s.view();
  CHECK(v.num_parts == 2);
  CHECK(v.part_cost == 7);
  CHECK(s.cost_prefix == std::vector<std::int64_t>{0, 1, 3, 14});
  CHECK(s.num_slots == 2);
  const std::vector<SplitPiece> pieces = pieces_of(v);
  REQUIRE(pieces.size() == 4);
  // Request 0 (empty) and request 1 whole; request 2's blocks sit at positions 4..13: [0, 3) in
  // the first interval, [3, 10) in the second.
  CHECK(pieces[0].request == 0);
  CHECK(pieces[0].block_end == 0);
  CHECK(pieces[1].request == 1);
  CHECK(pieces[1].block_end == 1);
  CHECK(pieces[1].slot == -1);
  CHECK(pieces[2].request == 2);
  CHECK(pieces[2].block_begin == 0);
  CHECK(pieces[2].block_end == 3);
  CHECK(pieces[2].slot == 0);
  CHECK(pieces[3].block_begin == 3);
  CHECK(pieces[3].block_end == 10);
  CHECK(pieces[3].slot == 1);
  // On 4 SMs each CTA has its own SM: costs 1, 2, 4 and 8.
  const SplitScheduleReplay r = replay_split_schedule(v, 1, 4);
  CHECK(r.pieces == 4);
  CHECK(r.sms[0].cost == 1);
  CHECK(r.sms[1].cost == 2);
  CHECK(r.sms[2].cost == 4);
  CHECK(r.sms[3].cost == 8);
  CHECK(r.makespan == 8);
  CHECK(r.mean_cost == 3.75);
  CHECK(r.total_blocks == 11);
  CHECK(r.split_requests == 1);
  check_cover(s);
}

TEST_CASE("one long request is cut into a wave of equal pieces after its overhead",
          "[problem][split_schedule]") {
  // b 1, s_q 2, h_q 128 (4 row blocks), s_k 16384: 256 blocks, 132 / 4 = 33 parts, W = 8.
  const SplitSchedule s = make_split_schedule(std::vector<std::int32_t>{16384}, 4, opts(132, 5));
  const SplitScheduleView v = s.view();
  CHECK(v.part_cost == 8);
  CHECK(v.num_parts == 33);
  const std::vector<SplitPiece> pieces = pieces_of(v);
  REQUIRE(pieces.size() == 33);
  CHECK(pieces[0].block_end == 3);  // positions 5..7 of the first interval
  CHECK(pieces[1].block_begin == 3);
  CHECK(pieces[1].block_end == 11);
  CHECK(pieces[32].block_begin == 251);
  CHECK(pieces[32].block_end == 256);
  CHECK(s.num_slots == 33);
  // 132 CTAs on 132 SMs, one each: the busiest does 8 blocks and the overhead.
  const SplitScheduleReplay r = replay_split_schedule(v, 4, 132);
  CHECK(r.makespan == 13);
  CHECK(r.imbalance < 1.05);
  check_cover(s);
}

TEST_CASE("a batch that fills a wave is not cut; a smaller one is cut to one wave",
          "[problem][split_schedule]") {
  // b 128, s_q 1, h_q 128 (2 row blocks), s_k 4096: 66 CTA pairs a wave, so no split at all.
  const std::vector<std::int32_t> full(128, 4096);
  const SplitSchedule s = make_split_schedule(full, 2, opts(132, 5));
  CHECK(s.view().num_parts == 1);
  CHECK(s.num_slots == 0);
  CHECK(split_schedule::piece_count(s.view()) == 128);
  check_cover(s);
  // b 16, s_q 2 (4 row blocks): 33 - 16 + 1 = 18 parts, at most 33 pieces: one wave of 132 CTAs.
  const std::vector<std::int32_t> small(16, 4096);
  const SplitSchedule t = make_split_schedule(small, 4, opts(132, 5));
  CHECK(t.view().num_parts == 18);
  CHECK(split_schedule::piece_count(t.view()) <= 33);
  const SplitScheduleReplay r = replay_split_schedule(t.view(), 4, 132);
  for (const SplitSmLoad& sm : r.sms) CHECK(sm.pieces.size() <= 1);
  check_cover(t);
}

TEST_CASE("fixed splits give every request k equal pieces", "[problem][split_schedule]") {
  const std::vector<std::int32_t> lens{130, 0, 64};  // 3, 0, 1 blocks
  const SplitSchedule s3 = make_split_schedule(lens, 2, opts(132, 5, 3));
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
  const SplitSchedule s1 = make_split_schedule(lens, 2, opts(132, 5, 1));
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
  const SplitSchedule s = make_split_schedule(lens, 1, opts(2, 1, 1));
  const SplitScheduleReplay r = replay_split_schedule(s.view(), 1, 2);
  REQUIRE(r.sms[0].pieces.size() == 1);
  CHECK(r.sms[0].cost == 5);
  REQUIRE(r.sms[1].pieces.size() == 3);
  CHECK(r.sms[1].cost == 6);
  CHECK(r.makespan == 6);
  CHECK(r.mean_cost == 5.5);
  CHECK(r.describe().find("SM 1: cost 6, r1[0,1) r2[0,1) r3[0,1)") != std::string::npos);
}

TEST_CASE("random batches are covered exactly, within the bounds, pieces no larger than W",
          "[problem][split_schedule]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int batch = std::uniform_int_distribution<int>(1, 200)(rng);
    const int row_blocks = std::uniform_int_distribution<int>(1, 8)(rng);
    const int sms = std::uniform_int_distribution<int>(1, 160)(rng);
    const int overhead = std::uniform_int_distribution<int>(1, 8)(rng);
    std::vector<std::int32_t> lens(static_cast<std::size_t>(batch));
    for (auto& l : lens) {
      const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
      l = kind == 0 ? 0 : std::uniform_int_distribution<int>(1, kind == 3 ? 20000 : 700)(rng);
    }
    const SplitSchedule s = make_split_schedule(lens, row_blocks, opts(sms, overhead));
    const SplitScheduleView v = s.view();
    const SplitScheduleBounds bounds =
        split_schedule_bounds(batch, row_blocks, opts(sms, overhead));
    CHECK(v.num_parts <= bounds.parts);
    CHECK(split_schedule::piece_count(v) <= bounds.pieces);
    CHECK(s.num_slots <= bounds.slots);
    // While the batch is below a wave, the pieces fill at most one wave.
    if (batch <= sms / row_blocks) CHECK(split_schedule::piece_count(v) <= sms / row_blocks);
    for (const SplitPiece& pc : pieces_of(v)) CHECK(pc.block_end - pc.block_begin <= v.part_cost);
    check_cover(s);
    const SplitScheduleReplay r = replay_split_schedule(v, row_blocks, sms);
    CHECK(r.pieces == split_schedule::piece_count(v));
    std::int64_t blocks = 0;
    for (const SplitPiece& pc : pieces_of(v)) blocks += pc.block_end - pc.block_begin;
    CHECK(r.total_blocks == blocks);
  }
}

TEST_CASE("split schedule arguments are validated by name", "[problem][split_schedule]") {
  using amla_test::error_of;
  using amla_test::names;
  const std::vector<std::int32_t> lens{5, -1};
  CHECK(names(error_of([&] { make_split_schedule(lens, 1, opts(4, 1)); }), "seqlens[1]"));
  const std::vector<std::int32_t> ok{5};
  CHECK(
      names(error_of([&] { make_split_schedule(ok, 1, opts(4, 0)); }), "options.overhead_blocks"));
  CHECK(names(error_of([&] { make_split_schedule(ok, 1, opts(0, 1)); }), "options.sms"));
  CHECK(names(error_of([&] { make_split_schedule(ok, 0, opts(4, 1)); }), "row_blocks"));
  CHECK(names(error_of([&] { make_split_schedule(ok, 1, opts(4, 1, -2)); }), "options.num_splits"));
  CHECK(names(error_of([&] { make_split_schedule({}, 1, opts(4, 1)); }), "seqlens"));
  const SplitSchedule s = make_split_schedule(ok, 1, opts(4, 1));
  CHECK(names(error_of([&] { replay_split_schedule(s.view(), 1, 0); }), "sms"));
}
