// amla/sim/cube_stage.hpp: one Cube stage ([C1] or [C2]) at tile level (AMLA Section 4.2,
// Figures 8-9): every stripe, L0 piece, MMAD step and FixP write is an operation on the Cube
// core's MTE2 / MTE1 / MMAD / FixP pipe, in the order the tiling (sim/tiling.hpp) describes, with
// the L1 K/V ring, the double-buffered L0A/L0B and the L0C tiles as pools that limit run-ahead.
//
// emit_cube_stage() appends a stage to a core inside a larger simulation (sim/decode.hpp chains
// thousands of them over 48 cores); simulate_cube_stage() runs one stage on its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/sim/chip.hpp"
#include "amla/sim/engine.hpp"
#include "amla/sim/tiling.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

/// The pipes and on-core buffers of one Cube core inside an Engine.
struct CubeCore {
  UnitId mte2, mte1, mmad, fixp;
  PoolId b_ring;  ///< L1 K/V buffers
  PoolId l0a, l0b, l0c;
  LinkId hbm;  ///< the die's HBM (shared with the other cores of the die)
  std::string name;
  std::uint64_t jitter_state = 0;  ///< seeds the HBM latency jitter of this core's loads
};

namespace detail {
/// FNV-1a of a name: a platform-independent seed.
inline std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  return h;
}
/// splitmix64: a tiny, fixed, platform-independent pseudo-random step (deterministic jitter).
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace detail

/// Adds a Cube core's four pipes and its buffer pools. The pools are sized from `t` (its b_slots,
/// l0_buffers and L0C tile); every stage later emitted on this core must agree (Remark 4.1: [C1]
/// and [C2] share one L1 / L0 arrangement). `multiplicity` > 1 makes the core stand for that many
/// identical cores (their HBM traffic weighs that much on `hbm`).
inline CubeCore add_cube_core(Engine& e, const Chip& chip, const Tiling& t, LinkId hbm,
                              std::string name, double multiplicity = 1) {
  CubeCore c;
  c.name = name;
  c.mte2 = e.add_unit(name + "/MTE2", multiplicity);
  c.mte1 = e.add_unit(name + "/MTE1", multiplicity);
  c.mmad = e.add_unit(name + "/MMAD", multiplicity);
  c.fixp = e.add_unit(name + "/FixP", multiplicity);
  c.b_ring = e.add_pool(name + " L1 K/V buffers", t.b_slots);
  c.l0a = e.add_pool(name + " L0A", t.l0_buffers);
  c.l0b = e.add_pool(name + " L0B", t.l0_buffers);
  // More L0C tiles than a stage can ever hold at once change nothing: the pool is capped there.
  const std::int64_t tiles =
      std::clamp<std::int64_t>(l0c_tiles(t, chip), 1, tiling_limits::max_dim);
  c.l0c = e.add_pool(name + " L0C", static_cast<int>(tiles));
  c.hbm = hbm;
  c.jitter_state = detail::fnv1a(name);
  return c;
}

/// Where a stage's A operand (Q or P) comes from.
struct AOperand {
  bool load = true;       ///< MTE2 brings it; false: it is already in L1 (loaded by `resident`)
  bool from_hbm = false;  ///< first touch (HBM) or an L2 hit
  PoolId pool{};          ///< L1 buffers its stripes occupy (required when load)
  bool release_at_end = true;  ///< free the buffers after the stage's last read of each stripe
  std::vector<OpId> resident;  ///< when !load: the loads that put each stripe in L1
  std::vector<OpId> after;     ///< every A load waits for these (e.g. the [V1] that wrote P)
  Cycles after_delay{0};       ///< ... plus this (the Cube <-> Vector hand-over)
};

/// Where a stage's B operand (K or V) comes from.
struct BOperand {
  bool from_hbm = true;
  std::vector<OpId> after;
  Cycles after_delay{0};
};

/// What emit_cube_stage created, for wiring the stage into a schedule.
struct CubeStageOps {
  std::int32_t op_begin = 0, op_end = 0;  ///< the stage's operations are [op_begin, op_end)
  std::vector<OpId> a_loads;              ///< per A stripe (m stripe major, k stripe minor)
  std::vector<OpId> a_last_reads;         ///< per A stripe: the last MTE1 that read it
  std::vector<OpId> fixps;                ///< FixP writes, in order (the stage's output)
  std::vector<OpId> loads;                ///< every MTE2 load (A and B), in order
  OpId first_mmad, last_mmad;             ///< the stage's span on the MMAD pipe
  double flops = 0;
  Bytes hbm_bytes{0}, l2_bytes{0};
};

/// The number of engine operations emit_cube_stage creates for tiling `t` (A stripes loaded or
/// not): B stripe loads, one MTE1 and one MMAD per L0 step, one FixP per output tile, A loads.
/// In double, since a valid tiling's count can exceed int64's range only by being absurd.
inline double cube_stage_operations(const Tiling& t, bool a_load = true) {
  t.validate();
  const auto n_blocks = static_cast<double>(Tiling::ceil_div(t.N, t.base_n));
  const std::int64_t k_stripes = Tiling::ceil_div(t.K, t.single_k);
  const auto m_blocks = static_cast<double>(Tiling::ceil_div(t.M, t.base_m));
  const std::int64_t last_k = t.K - (k_stripes - 1) * t.single_k;
  const double steps = static_cast<double>(k_stripes - 1) *
                           static_cast<double>(Tiling::ceil_div(t.single_k, t.base_k)) +
                       static_cast<double>(Tiling::ceil_div(last_k, t.base_k));
  const double a_loads =
      a_load ? static_cast<double>(Tiling::ceil_div(t.M, t.single_m) * k_stripes) : 0.0;
  return n_blocks * (static_cast<double>(k_stripes) + 2 * m_blocks * steps + m_blocks) + a_loads;
}

/// The most operations simulate_cube_stage builds (about half a gigabyte of engine state); a
/// larger stage comes back not ok with the count in the reason.
inline constexpr double max_stage_operations = 0x1p22;

/// Appends one Cube stage with tiling `t` to `core`. `label` names it ("C1[b3,k5]") and gives its
/// colour category ("C1") and phase. `t` must fit the chip (check_fit) and agree with the pools.
inline CubeStageOps emit_cube_stage(Engine& e, CubeCore& core, const Chip& chip, const Tiling& t,
                                    const AOperand& a, const BOperand& b, const Label& label) {
  using I = std::int64_t;
  const I n_blocks = Tiling::ceil_div(t.N, t.base_n);
  const I k_stripes = Tiling::ceil_div(t.K, t.single_k);
  const I m_blocks = Tiling::ceil_div(t.M, t.base_m);
  const I a_m_stripes = Tiling::ceil_div(t.M, t.single_m);
  const auto n_a = static_cast<std::size_t>(a_m_stripes * k_stripes);
  AMLA_REQUIRE(a.load || a.resident.size() == n_a, "a.resident", a.resident.size(),
               "one producing load per A stripe when A is already in L1");
  const bool rec = e.recording();
  const CategoryId cat = e.category(label.category);
  auto add = [&](UnitId unit, const Work& work, const char* what, I i0, I i1, I i2) {
    std::string name;
    if (rec)
      name = label.name + " " + what + " " + std::to_string(i0) + "." + std::to_string(i1) + "." +
             std::to_string(i2);
    return e.add_op(unit, work, cat, label.phase, std::move(name));
  };
  auto cycles_of = [&](I bm, I bn, I bk) {  // fractal steps plus the per-instruction cost
    return Cycles{Tiling::ceil_div(bm, chip.cube_m) * Tiling::ceil_div(bn, chip.cube_n) *
                  Tiling::ceil_div(bk, chip.cube_k)} +
           chip.mmad_overhead;
  };
  auto mte2_work = [&](double bytes, bool hbm) {
    Cycles lat = hbm ? chip.hbm_latency : chip.l2_latency;
    if (hbm && chip.hbm_latency_jitter.count > 0)
      lat += Cycles{
          static_cast<std::int64_t>(detail::splitmix64(core.jitter_state) %
                                    static_cast<std::uint64_t>(chip.hbm_latency_jitter.count + 1))};
    return Work::transfer(Bytes{bytes}, chip.mte2, lat, hbm ? core.hbm : LinkId{});
  };

  CubeStageOps out;
  out.op_begin = static_cast<std::int32_t>(e.op_count());
  out.flops = t.flops();
  out.a_loads.assign(n_a, OpId{});
  out.a_last_reads.assign(n_a, OpId{});
  if (!a.load) out.a_loads = a.resident;
  auto a_index = [&](I am, I k) { return static_cast<std::size_t>(am * k_stripes + k); };

  for (I n = 0; n < n_blocks; ++n) {
    const I bn = std::min(t.base_n, t.N - n * t.base_n);
    for (I k = 0; k < k_stripes; ++k) {
      const I sk = std::min(t.single_k, t.K - k * t.single_k);
      if (n == 0 && a.load) {  // A stripes of this k, just before the first B stripe needing them
        for (I am = 0; am < a_m_stripes; ++am) {
          const I sm = std::min(t.single_m, t.M - am * t.single_m);
          const double bytes = static_cast<double>(sm * sk) * t.in_bytes;
          const OpId ld = add(core.mte2, mte2_work(bytes, a.from_hbm), "MTE2 A", am, k, 0);
          e.acquire(ld, a.pool);
          for (const OpId p : a.after) e.depend(ld, p, a.after_delay);
          out.a_loads[a_index(am, k)] = ld;
          out.loads.push_back(ld);
          Bytes& moved = a.from_hbm ? out.hbm_bytes : out.l2_bytes;
          moved = moved + Bytes{bytes};
        }
      }
      const double b_bytes = static_cast<double>(bn * sk) * t.in_bytes;
      const OpId bld = add(core.mte2, mte2_work(b_bytes, b.from_hbm), "MTE2 B", n, k, 0);
      e.acquire(bld, core.b_ring);
      for (const OpId p : b.after) e.depend(bld, p, b.after_delay);
      out.loads.push_back(bld);
      Bytes& moved = b.from_hbm ? out.hbm_bytes : out.l2_bytes;
      moved = moved + Bytes{b_bytes};
      OpId last_b_read{};
      const I kbs = Tiling::ceil_div(sk, t.base_k);
      for (I m = 0; m < m_blocks; ++m) {
        const I bm = std::min(t.base_m, t.M - m * t.base_m);
        const I am = (m * t.base_m) / t.single_m;
        for (I kb = 0; kb < kbs; ++kb) {
          const I bk = std::min(t.base_k, sk - kb * t.base_k);
          // One A piece into L0A and one B piece into L0B, one after the other on MTE1.
          const double a0 = static_cast<double>(bm * bk) * t.in_bytes;
          const double b0 = static_cast<double>(bn * bk) * t.in_bytes;
          const Cycles mv_cycles{static_cast<std::int64_t>(
              std::ceil(a0 / chip.mte1.count + b0 / chip.mte1_l0b.count - 1e-9))};
          const OpId mv = add(core.mte1, Work::compute(mv_cycles, chip.mte1_latency), "MTE1", m, n,
                              k * kbs + kb);
          e.acquire(mv, core.l0a);
          e.acquire(mv, core.l0b);
          e.depend(mv, out.a_loads[a_index(am, k)]);
          e.depend(mv, bld);
          out.a_last_reads[a_index(am, k)] = mv;
          last_b_read = mv;
          const OpId mm =
              add(core.mmad, Work::compute(cycles_of(bm, bn, bk)), "MMAD", m, n, k * kbs + kb);
          e.depend(mm, mv);
          if (!out.first_mmad.valid()) out.first_mmad = mm;
          out.last_mmad = mm;
          e.release(mm, core.l0a);
          e.release(mm, core.l0b);
          if (k == 0 && kb == 0) e.acquire(mm, core.l0c);
          if (k == k_stripes - 1 && kb == kbs - 1) {
            const double out_bytes = static_cast<double>(bm * bn) * t.acc_bytes;
            const OpId fx =
                add(core.fixp, Work::transfer(Bytes{out_bytes}, chip.fixp), "FixP", m, n, 0);
            e.depend(fx, mm);
            e.release(fx, core.l0c);
            out.fixps.push_back(fx);
          }
        }
      }
      e.release(last_b_read, core.b_ring);
    }
  }
  if (a.load && a.release_at_end)
    for (const OpId r : out.a_last_reads) e.release(r, a.pool);
  out.op_end = static_cast<std::int32_t>(e.op_count());
  return out;
}

/// Options of a stand-alone stage simulation.
struct CubeStageOptions {
  bool a_from_hbm = false;  ///< Q / P: L2 hits by default (the paper's assumption)
  bool b_from_hbm = true;   ///< K: streamed from HBM; set false for V (an L2 hit after [C1])
  /// Cores of the die running the same stage at the same time (they share its HBM); 0 = all.
  int concurrent_cores = 0;
  bool record = true;  ///< keep a Timeline with one lane per pipe
};

/// The outcome: infeasible with a reason (the tiling's check_fit), or the stage's cycles and what
/// each pipe did.
struct CubeStageResult : Status {
  Cycles cycles{0};
  double flops = 0;
  double mmad_utilization = 0;  ///< MMAD busy / stage cycles
  Cycles mmad_cycles{0};        ///< the MMAD pipe's busy time (the compute floor)
  UnitStats mte2, mte1, mmad, fixp;
  Bytes hbm_bytes{0}, l2_bytes{0};
  Timeline timeline;
};

/// Simulates one Cube stage on one core, alone (the pipeline fills and drains inside it),
/// with `concurrent_cores` cores of the die streaming the same way.
inline CubeStageResult simulate_cube_stage(const Chip& chip, const Tiling& t,
                                           const CubeStageOptions& opt = {}) {
  chip.validate();
  AMLA_REQUIRE(opt.concurrent_cores >= 0 && opt.concurrent_cores <= chip.cube_cores_per_die,
               "concurrent_cores", opt.concurrent_cores, "0 (all) up to the Cube cores of one die");
  CubeStageResult r;
  static_cast<Status&>(r) = check_fit(t, chip);
  if (!r.ok) return r;
  if (const double ops = cube_stage_operations(t); ops > max_stage_operations) {
    r.set_failed("the stage needs " + amla::detail::to_text(ops) +
                 " operations, more than max_stage_operations = 2^22");
    return r;
  }
  const int cores = opt.concurrent_cores == 0 ? chip.cube_cores_per_die : opt.concurrent_cores;
  Engine e(opt.record);
  const LinkId hbm = e.add_link("HBM die 0", chip.hbm_per_die());
  CubeCore core = add_cube_core(e, chip, t, hbm, "cube0", cores);
  AOperand a;
  a.from_hbm = opt.a_from_hbm;
  a.pool = e.add_pool("cube0 L1 Q/P buffers", t.a_slots);
  BOperand b;
  b.from_hbm = opt.b_from_hbm;
  Label l;
  l.name = "stage";
  l.category = "C";
  const CubeStageOps ops = emit_cube_stage(e, core, chip, t, a, b, l);
  const RunResult run = e.run();
  AMLA_ASSERT(run.ok);  // a fitting tiling cannot deadlock: every pool is released downstream
  r.cycles = run.makespan;
  r.flops = ops.flops;
  r.hbm_bytes = ops.hbm_bytes;
  r.l2_bytes = ops.l2_bytes;
  r.mte2 = e.unit_stats(core.mte2);
  r.mte1 = e.unit_stats(core.mte1);
  r.mmad = e.unit_stats(core.mmad);
  r.fixp = e.unit_stats(core.fixp);
  r.mmad_cycles = r.mmad.busy;
  r.mmad_utilization =
      r.cycles.count > 0 ? static_cast<double>(r.mmad.busy.count) / r.cycles.count : 0;
  if (opt.record) r.timeline = e.timeline("Cube stage", chip.clock);
  return r;
}

}  // namespace amla::sim
