// amla/sim/tiling.hpp: hierarchical tiling of a Cube stage (AMLA Section 4.2, Figure 8) and of a
// Vector stage, and whether a tiling fits a chip's buffers.
//
// A Cube stage computes C[M x N] = A[M x K] * B[N x K]^T (BF16 operands, FP32 accumulation): for
// [C1] A = Q (or the rows of Q of this task), B = the KV block, N = 512 (KV rows), K = 576; for
// [C2] A = P, B = V^T, N = d_v = 512, K = 512 (KV rows).
//
// The data path, and what the tiling fields mean here:
//   GM -> L1 (MTE2)     A moves in singleM x singleK stripes into the A region of L1 (the paper's
//                       four 72 KB Q/P buffers) and stays there for the whole stage; B moves in
//                       baseN x singleK stripes through a ring of `b_slots` K/V buffers (the
//                       paper's three 72 KB buffers), each freed once MTE1 has read it.
//                       singleN is the N extent of one L1 tile of B (two stripes in the preset),
//                       which must fit the K/V region.
//   L1 -> L0A/L0B (MTE1) one baseM x baseK piece of A and one baseN x baseK piece of B per MMAD
//                       step, into `l0_buffers`-deep (double) buffers.
//   MMAD                baseM x baseN x baseK, accumulating over all of K into one L0C tile.
//   L0C -> GM (FixP)    each finished baseM x baseN FP32 tile; L0C holds `l0c_tiles()` tiles.
// Loop order (B-stationary, so B crosses MTE2 once per stage, as the paper's bandwidth analysis
// assumes): for each baseN block of N, for each singleK stripe of K, for each baseM block of M,
// for each baseK step: MTE1, MMAD. The accumulators of all M / baseM row blocks of one column
// block are live together; their FixP overlaps the next column block's MMADs when L0C has room.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "amla/config.hpp"
#include "amla/sim/chip.hpp"
#include "amla/sim/status.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

namespace detail {
/// "72 KB", "13.5 KB": bytes as KiB for messages.
inline std::string kib_text(double bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g KB", bytes / 1024.0);
  return buf;
}
}  // namespace detail

/// Tiling of one Cube stage (see the header comment for the meaning of each field).
struct Tiling {
  std::int64_t M = 0, N = 0, K = 0;
  std::int64_t single_m = 0, single_n = 0, single_k = 0;
  std::int64_t base_m = 0, base_n = 0, base_k = 0;
  // L1 partition: `a_slots` + `b_slots` buffers of `l1_slot` bytes (the paper: 4 + 3 of 72 KB).
  int a_slots = 4;
  int b_slots = 3;
  Bytes l1_slot{72.0 * 1024};
  int l0_buffers = 2;    ///< L0A / L0B depth (2 = double buffering)
  double in_bytes = 2;   ///< operand element size (BF16)
  double acc_bytes = 4;  ///< accumulator / output element size (FP32)

  Bytes a_stripe_bytes() const {
    return Bytes{static_cast<double>(single_m * single_k) * in_bytes};
  }
  Bytes b_stripe_bytes() const { return Bytes{static_cast<double>(base_n * single_k) * in_bytes}; }
  Bytes l0c_tile_bytes() const { return Bytes{static_cast<double>(base_m * base_n) * acc_bytes}; }
  /// Number of A stripes (all resident in L1 during the stage).
  std::int64_t a_stripes() const { return ceil_div(M, single_m) * ceil_div(K, single_k); }
  /// FLOPs of the stage (2 per MAC).
  double flops() const { return 2.0 * static_cast<double>(M) * N * K; }

  static constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

  /// Throws amla::invalid_argument for malformed values: a size or count that is not positive or
  /// exceeds its bound (tiling_limits), an element size outside [1/8, 64] bytes. A tiling that
  /// is well formed but does not fit or nest is reported by check_fit, not here.
  void validate() const;
};

/// The bounds Tiling::validate enforces, so that no product of two tiling fields overflows and
/// no stage asks for more operations than simulate_cube_stage accepts.
namespace tiling_limits {
inline constexpr std::int64_t max_dim = std::int64_t{1} << 20;  // M, N, K, single_*, base_*
inline constexpr int max_slots = 1024;                          // a_slots, b_slots, l0_buffers
inline constexpr double max_slot_bytes = 0x1p32;                // l1_slot
inline constexpr double min_element_bytes = 0.125, max_element_bytes = 64;
}  // namespace tiling_limits

inline void Tiling::validate() const {
  namespace L = tiling_limits;
  const char* fn = "amla::sim::Tiling::validate";
  auto dim = [&](std::int64_t v, const char* field, const char* rule) {
    if (v <= 0 || v > L::max_dim)
      amla::detail::throw_invalid(fn, field, std::to_string(v),
                                  std::string(rule) + " in [1, 2^20]");
  };
  auto slots = [&](int v, const char* field, const char* rule) {
    if (v <= 0 || v > L::max_slots)
      amla::detail::throw_invalid(fn, field, std::to_string(v),
                                  std::string(rule) + " in [1, 1024]");
  };
  auto element = [&](double v, const char* field) {
    if (!(v >= L::min_element_bytes && v <= L::max_element_bytes))
      amla::detail::throw_invalid(fn, field, amla::detail::to_text(v),
                                  "an element size in [0.125, 64] bytes");
  };
  dim(M, "tiling.M", "a positive matrix dimension");
  dim(N, "tiling.N", "a positive matrix dimension");
  dim(K, "tiling.K", "a positive matrix dimension");
  dim(single_m, "tiling.single_m", "a positive L1 tile dimension");
  dim(single_n, "tiling.single_n", "a positive L1 tile dimension");
  dim(single_k, "tiling.single_k", "a positive L1 tile dimension");
  dim(base_m, "tiling.base_m", "a positive L0 tile dimension");
  dim(base_n, "tiling.base_n", "a positive L0 tile dimension");
  dim(base_k, "tiling.base_k", "a positive L0 tile dimension");
  slots(a_slots, "tiling.a_slots", "L1 buffers");
  slots(b_slots, "tiling.b_slots", "L1 buffers");
  if (!(l1_slot.count > 0 && l1_slot.count <= L::max_slot_bytes))
    amla::detail::throw_invalid(fn, "tiling.l1_slot", amla::detail::to_text(l1_slot.count),
                                "a buffer size in (0, 2^32] bytes");
  slots(l0_buffers, "tiling.l0_buffers", "L0A / L0B depth");
  element(in_bytes, "tiling.in_bytes");
  element(acc_bytes, "tiling.acc_bytes");
}

/// How many L0C tiles fit (the accumulators the MMAD pipe may fill while FixP drains others):
/// with a valid chip and tiling at most 2^32 / 2^-3 = 2^35.
inline std::int64_t l0c_tiles(const Tiling& t, const Chip& chip) {
  return static_cast<std::int64_t>(chip.l0c.count / t.l0c_tile_bytes().count);
}

/// Does `t` nest and fit `chip`'s L1 / L0A / L0B / L0C? The first violation is the reason.
inline Status check_fit(const Tiling& t, const Chip& chip) {
  t.validate();
  const auto kb = [](double b) { return detail::kib_text(b); };
  if (t.single_k % t.base_k != 0)
    return Status::fail("singleK " + std::to_string(t.single_k) + " is not a multiple of baseK " +
                        std::to_string(t.base_k));
  if (t.single_n % t.base_n != 0)
    return Status::fail("singleN " + std::to_string(t.single_n) + " is not a multiple of baseN " +
                        std::to_string(t.base_n));
  if (t.single_m % t.base_m != 0)
    return Status::fail("singleM " + std::to_string(t.single_m) + " is not a multiple of baseM " +
                        std::to_string(t.base_m));
  const double l0a_need = t.l0_buffers * static_cast<double>(t.base_m * t.base_k) * t.in_bytes;
  if (l0a_need > chip.l0a.count)
    return Status::fail("L0A overflow: " + std::to_string(t.l0_buffers) + " x baseM " +
                        std::to_string(t.base_m) + " x baseK " + std::to_string(t.base_k) + " = " +
                        kb(l0a_need) + " > " + kb(chip.l0a.count));
  const double l0b_need = t.l0_buffers * static_cast<double>(t.base_n * t.base_k) * t.in_bytes;
  if (l0b_need > chip.l0b.count)
    return Status::fail("L0B overflow: " + std::to_string(t.l0_buffers) + " x baseN " +
                        std::to_string(t.base_n) + " x baseK " + std::to_string(t.base_k) + " = " +
                        kb(l0b_need) + " > " + kb(chip.l0b.count));
  const std::int64_t live = Tiling::ceil_div(t.M, t.base_m);
  const double l0c_need = static_cast<double>(live) * t.l0c_tile_bytes().count;
  if (l0c_need > chip.l0c.count)
    return Status::fail("L0C overflow: the " + std::to_string(live) + " live accumulators of one " +
                        "column block (M / baseM) x baseM " + std::to_string(t.base_m) +
                        " x baseN " + std::to_string(t.base_n) + " FP32 = " + kb(l0c_need) + " > " +
                        kb(chip.l0c.count));
  const double l1_need = (t.a_slots + t.b_slots) * t.l1_slot.count;
  if (l1_need > chip.l1.count)
    return Status::fail("L1 overflow: (" + std::to_string(t.a_slots) + " + " +
                        std::to_string(t.b_slots) + ") buffers x " + kb(t.l1_slot.count) + " = " +
                        kb(l1_need) + " > " + kb(chip.l1.count));
  if (t.a_stripe_bytes().count > t.l1_slot.count)
    return Status::fail("L1 A stripe singleM x singleK = " + kb(t.a_stripe_bytes().count) +
                        " does not fit one " + kb(t.l1_slot.count) + " buffer");
  if (t.a_stripes() > t.a_slots)
    return Status::fail("L1 A region: the stage's A operand needs " +
                        std::to_string(t.a_stripes()) + " stripes of singleM x singleK but only " +
                        std::to_string(t.a_slots) + " buffers are reserved for Q/P");
  if (t.b_stripe_bytes().count > t.l1_slot.count)
    return Status::fail("L1 B stripe baseN x singleK = " + kb(t.b_stripe_bytes().count) +
                        " does not fit one " + kb(t.l1_slot.count) + " buffer");
  const double b_tile = static_cast<double>(t.single_n * t.single_k) * t.in_bytes;
  if (b_tile > t.b_slots * t.l1_slot.count)
    return Status::fail("L1 K/V region: one singleN x singleK tile of B = " + kb(b_tile) + " > " +
                        std::to_string(t.b_slots) + " buffers x " + kb(t.l1_slot.count));
  return Status::success();
}

/// AMLA's [C1] tiling (Section 4.2): N = 512, K = 576, singleM 128, singleN 256, singleK 288,
/// baseM = baseN = 128, baseK 96. `m` is the rows per task: 128 heads x S_q (256 for S_q = 2).
inline Tiling amla_c1_tiling(std::int64_t m = 256, std::int64_t n = 512, std::int64_t k = 576) {
  return Tiling{.M = m,
                .N = n,
                .K = k,
                .single_m = 128,
                .single_n = 256,
                .single_k = 288,
                .base_m = 128,
                .base_n = 128,
                .base_k = 96};
}

/// AMLA's [C2] tiling: N = K = 512, singleM 128, singleN 256, singleK 256, baseM = baseN = 128,
/// baseK 128.
inline Tiling amla_c2_tiling(std::int64_t m = 256, std::int64_t n = 512, std::int64_t k = 512) {
  Tiling t = amla_c1_tiling(m, n, k);
  t.single_k = 256;
  t.base_k = 128;
  return t;
}

/// One Vector stage's use of a Vector core's UB: per chunk of `rows` rows it holds
/// `in_bytes_per_row` of input, `out_bytes_per_row` of output and `scratch_bytes_per_row`,
/// `buffers` deep, plus `resident` bytes kept for the whole stage (e.g. O kept in UB instead of
/// GM).
struct VectorTiling {
  std::int64_t rows = 0;
  double in_bytes_per_row = 0;
  double out_bytes_per_row = 0;
  double scratch_bytes_per_row = 0;
  int buffers = 2;
  Bytes resident{0};

  Bytes ub_bytes() const {
    return Bytes{buffers * static_cast<double>(rows) *
                     (in_bytes_per_row + out_bytes_per_row + scratch_bytes_per_row) +
                 resident.count};
  }
};

/// Does the Vector stage fit the UB?
inline Status check_fit(const VectorTiling& v, const Chip& chip) {
  AMLA_REQUIRE(v.rows > 0, "rows", v.rows, "positive");
  AMLA_REQUIRE(v.buffers >= 1, "buffers", v.buffers, ">= 1");
  AMLA_REQUIRE(v.in_bytes_per_row >= 0, "in_bytes_per_row", v.in_bytes_per_row, "non-negative");
  AMLA_REQUIRE(v.out_bytes_per_row >= 0, "out_bytes_per_row", v.out_bytes_per_row, "non-negative");
  AMLA_REQUIRE(v.scratch_bytes_per_row >= 0, "scratch_bytes_per_row", v.scratch_bytes_per_row,
               "non-negative");
  AMLA_REQUIRE(v.resident.count >= 0, "resident", v.resident.count, "non-negative");
  if (v.ub_bytes().count > chip.ub.count)
    return Status::fail("UB overflow: " + detail::kib_text(v.ub_bytes().count) + " > " +
                        detail::kib_text(chip.ub.count) + " (" + std::to_string(v.buffers) + " x " +
                        std::to_string(v.rows) + " rows + " + detail::kib_text(v.resident.count) +
                        " resident)");
  return Status::success();
}

}  // namespace amla::sim
