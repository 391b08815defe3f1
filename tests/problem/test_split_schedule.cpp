// Tests of problem/split_schedule.hpp: the split-KV tile schedule (balanced and fixed splits), its
// replay, and its validation. Hand-computed schedules first, then properties on random batches.
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

/// Every block of every request is covered exactly once, each request's pieces are contiguous in
/// part order, a request in one piece writes directly (slot -1) and a split one uses distinct
/// slots below num_slots.
void check_cover(const SplitSchedule& s, const SplitScheduleReplay& r) {
  const SplitScheduleView v = s.view();
  std::vector<int> next_block(static_cast<std::size_t>(v.batch), 0);
  std::set<int> slots;
  for (const SplitPartLoad& part : r.parts) {
    for (const SplitPiece& pc : part.pieces) {
      const auto b = static_cast<std::size_t>(pc.request);
      CHECK(pc.block_begin == next_block[b]);
      CHECK(pc.block_end >= pc.block_begin);
      next_block[b] = pc.block_end;
      if (r.pieces_per_request[b] == 1) {
        CHECK(pc.slot == -1);
      } else {
        CHECK(pc.slot >= 0);
        CHECK(pc.slot < s.num_slots);
        CHECK(slots.insert(pc.slot).second);
      }
    }
  }
  for (int b = 0; b < v.batch; ++b) {
    const auto i = static_cast<std::size_t>(b);
    CHECK(next_block[i] == split_schedule::blocks_of(s.seqlens[i], v.block_keys));
    CHECK(r.pieces_per_request[i] >= 1);
  }
  CHECK(static_cast<int>(slots.size()) == s.num_slots);
  // The kernel's flat numbering (piece_at) lists the same pieces, request by request.
  std::vector<SplitPiece> by_request;
  for (const SplitPartLoad& part : r.parts) {
    by_request.insert(by_request.end(), part.pieces.begin(), part.pieces.end());
  }
  std::stable_sort(by_request.begin(), by_request.end(),
                   [](const SplitPiece& a, const SplitPiece& b) { return a.request < b.request; });
  const int count = split_schedule::piece_count(v);
  REQUIRE(count == static_cast<int>(by_request.size()));
  for (int i = 0; i < count; ++i) {
    SplitPiece pc;
    REQUIRE(split_schedule::piece_at(v, i, pc));
    const SplitPiece& want = by_request[static_cast<std::size_t>(i)];
    CHECK(pc.request == want.request);
    CHECK(pc.block_begin == want.block_begin);
    CHECK(pc.block_end == want.block_end);
    CHECK(pc.slot == want.slot);
  }
  SplitPiece past;
  CHECK(!split_schedule::piece_at(v, count, past));
}

}  // namespace

TEST_CASE("a balanced schedule cuts a hand-computed varlen batch where the parts fall",
          "[problem][split_schedule]") {
  // Blocks {0, 1, 10}, overhead 1: costs {1, 2, 11}, C = {0, 1, 3, 14}; 4 parts of W = 4.
  const std::vector<std::int32_t> lens{0, 64, 640};
  const SplitSchedule s = make_split_schedule(lens, 1, opts(4, 1));
  const SplitScheduleView v = s.view();
  CHECK(v.num_parts == 4);
  CHECK(v.part_cost == 4);
  CHECK(s.cost_prefix == std::vector<std::int64_t>{0, 1, 3, 14});
  CHECK(s.num_slots == 3);
  const SplitScheduleReplay r = replay_split_schedule(v);
  REQUIRE(r.parts.size() == 4);
  // Part 0 [0, 4): request 0 (empty, starts at 0) and request 1's block (position 2); request
  // 2's overhead sits at 3 but its first block at 4, so it starts in part 1.
  REQUIRE(r.parts[0].pieces.size() == 2);
  CHECK(r.parts[0].pieces[0].request == 0);
  CHECK(r.parts[0].pieces[0].block_end == 0);
  CHECK(r.parts[0].pieces[1].request == 1);
  CHECK(r.parts[0].pieces[1].block_end == 1);
  CHECK(r.parts[0].pieces[1].slot == -1);
  const int ends[4] = {0, 4, 8, 10};
  for (int p = 1; p < 4; ++p) {
    REQUIRE(r.parts[static_cast<std::size_t>(p)].pieces.size() == 1);
    const SplitPiece& pc = r.parts[static_cast<std::size_t>(p)].pieces[0];
    CHECK(pc.request == 2);
    CHECK(pc.block_begin == (p == 1 ? 0 : ends[p - 1]));
    CHECK(pc.block_end == ends[p]);
    CHECK(pc.slot == p - 1);
  }
  CHECK(r.parts[0].cost == 3);
  CHECK(r.parts[1].cost == 5);
  CHECK(r.parts[3].cost == 3);
  CHECK(r.max_cost == 5);
  CHECK(r.mean_cost == 4.0);
  CHECK(r.imbalance == 1.25);
  CHECK(r.split_requests == 1);
  check_cover(s, r);
}

TEST_CASE("one long request is cut into equal pieces after its overhead",
          "[problem][split_schedule]") {
  // b 1, s_q 2, h_q 128 (4 row blocks), s_k 16384: 256 blocks on 132 / 4 = 33 parts, W = 8.
  const SplitSchedule s = make_split_schedule(std::vector<std::int32_t>{16384}, 4, opts(132, 5));
  const SplitScheduleView v = s.view();
  CHECK(v.part_cost == 8);
  CHECK(v.num_parts == 33);
  const SplitScheduleReplay r = replay_split_schedule(v);
  CHECK(r.parts[0].pieces[0].block_end == 3);  // positions 5..7 of part 0
  CHECK(r.parts[1].pieces[0].block_begin == 3);
  CHECK(r.parts[1].pieces[0].block_end == 11);
  CHECK(r.parts[32].pieces[0].block_begin == 251);
  CHECK(r.parts[32].pieces[0].block_end == 256);
  CHECK(r.pieces_per_request[0] == 33);
  CHECK(s.num_slots == 33);
  check_cover(s, r);
}

TEST_CASE("a batch that fills the GPU keeps most requests whole", "[problem][split_schedule]") {
  // b 128, s_q 1, h_q 128 (2 row blocks), s_k 4096: 66 parts of W = ceil(128 * 69 / 66) = 134.
  const std::vector<std::int32_t> lens(128, 4096);
  const SplitSchedule s = make_split_schedule(lens, 2, opts(132, 5));
  const SplitScheduleReplay r = replay_split_schedule(s.view());
  CHECK(s.view().num_parts == 66);
  CHECK(r.imbalance < 1.05);
  CHECK(r.split_requests <= 65);
  CHECK(s.num_slots <= split_schedule_bounds(128, 2, opts(132, 5)).slots);
  check_cover(s, r);
}

TEST_CASE("fixed splits give every request k equal pieces, one part each",
          "[problem][split_schedule]") {
  const std::vector<std::int32_t> lens{130, 0, 64};  // 3, 0, 1 blocks
  const SplitSchedule s3 = make_split_schedule(lens, 2, opts(132, 5, 3));
  CHECK(s3.view().num_parts == 9);
  CHECK(s3.num_slots == 9);
  const SplitScheduleReplay r3 = replay_split_schedule(s3.view());
  for (int p = 0; p < 9; ++p) {
    REQUIRE(r3.parts[static_cast<std::size_t>(p)].pieces.size() == 1);
    const SplitPiece& pc = r3.parts[static_cast<std::size_t>(p)].pieces[0];
    CHECK(pc.request == p / 3);
    CHECK(pc.slot == p);
  }
  // Request 2 has one block: split 0 takes it, splits 1 and 2 are empty (they write empty
  // partials the combine weighs 0).
  CHECK(r3.parts[6].pieces[0].block_end == 1);
  CHECK(r3.parts[7].pieces[0].block_begin == r3.parts[7].pieces[0].block_end);
  CHECK(r3.split_requests == 3);
  const SplitSchedule s1 = make_split_schedule(lens, 2, opts(132, 5, 1));
  CHECK(s1.view().num_parts == 3);
  CHECK(s1.num_slots == 0);
  const SplitScheduleReplay r1 = replay_split_schedule(s1.view());
  CHECK(r1.parts[0].pieces[0].block_end == 3);
  CHECK(r1.parts[0].pieces[0].slot == -1);
  check_cover(s1, r1);
}

TEST_CASE("random batches are covered exactly, within the bounds, balanced to two overheads",
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
    const SplitScheduleReplay r = replay_split_schedule(v);
    check_cover(s, r);
    // A part's cost is its share W of the axis plus the overheads the axis charges elsewhere:
    // at most one at its start (the request that crosses p W: a continued piece, or one whose
    // overhead straddles it) and one at its end (an empty request whose overhead straddles
    // (p + 1) W).
    for (const SplitPartLoad& part : r.parts) {
      CHECK(part.cost <= v.part_cost + 2 * overhead);
    }
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
}
