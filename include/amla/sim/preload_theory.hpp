// amla/sim/preload_theory.hpp: the Preload Pipeline of AMLA Section 4.1 and Appendix B as code:
// the preload count of an arrangement (Lemma B.1), the arrangement with preload count n built
// from the minimum partial sum (Theorem B.1) and its Vector-dominated mirror, an exact search over
// all arrangements for small n (Theorem 4.1, Lemma B.2), and the schedule of a whole pipeline
// (preload, steady Cycles, drain) as a Timeline.
//
// The theory produces arrangements; the simulator consumes them. Its timed Cycles (TimedCycle)
// convert to the simulator's one arrangement type (sim::Arrangement, sim/pipeline.hpp) with
// chain_arrangement, theorem_b1_arrangement(StageChain) and optimum_arrangement(StageChain), and
// its as-soon-as-possible pipelines and serial schedules are run by the simulator's one list
// scheduler, sim::simulate_schedule, on the chain stage_chain(d).
//
// ---- The timing model (our reading of Section 4.1 and Appendix B, written down) ----
//
// Work. One KV block b = 1..T runs the chain C_1 -> V_1 -> C_2 -> V_2 -> ... -> C_n -> V_n of
// n "CV pairs": C_i on the Cube unit, V_i on the Vector unit, durations [C_i], [V_i] >= 0 cycles.
// The chain has 2n stages and 2n - 1 dependency edges (the paper's "sequential dependency chain
// of length 2n - 1"). Chain position p = 0..2n-1 is C_{p/2+1} for even p and V_{(p+1)/2} for odd
// p; edge e = 0..2n-2 joins positions e and e + 1. Even edges are C_i -> V_i ("C->V"), odd edges
// V_i -> C_{i+1} ("V->C"). Each unit runs one stage at a time, without preemption.
//
// Cycle. The steady loop repeats one Cycle: a window [0, P) in which every one of the 2n stages
// runs exactly once, each inside the window (offset >= 0, offset + duration <= P; a stage never
// straddles two Cycles, as in Lemma B.2's "all Vector stages must be overlapped by the cumulative
// Cube execution (to avoid extending the Cycle)"), and the stages of one unit never overlap. A
// TimedCycle is the offset of each stage in the window; the orders of C's and V's follow from
// it. (The paper calls this placement an arrangement; here it is a TimedCycle, and
// chain_arrangement turns it into the simulator's sim::Arrangement - which stage of which block in
// which slot on which unit - so that sim/pipeline.hpp and sim/decode.hpp can run it.) Stall-free
// steady state means P = max(sum C, sum V); then the busier unit ("dominant") runs
// gap-free and its order alone fixes its offsets. Cycle k occupies [k P, (k + 1) P).
//
// Internal edge. Different stages of one Cycle may work on different KV blocks. Edge X -> Y is
// internal when Y can consume X's result in the same Cycle: offset(Y) >= offset(X) + [X]. Then
// both work on the same block. Otherwise it is external: Y works on the block X did one Cycle
// earlier (that is always on time: X ends by k P + P <= (k + 1) P + offset(Y)). An "internal
// dependency chain" of Lemma B.1 is one internal edge (not a maximal run of them: two consecutive
// internal edges save two preloaded blocks, not one; the tests check this on schedules).
//
// Lag and preload count. Let lag(X) be how many Cycles stage X runs ahead of V_n: lag(V_n) = 0
// and lag(X) = lag(Y) + (X -> Y external ? 1 : 0). In Cycle k, stage X works on block
// k + 1 - (lag(C_1) - lag(X)). Before the first full (steady) Cycle the pipeline must already have
// run lag(X) blocks of every stage X: that is the Preload phase, and it contains lag(C_1) C_1
// stages. Lag(C_1) = number of external edges = (2n - 1) - s, with s the internal edges: Lemma B.1.
// We call lag(C_1) the preload count (the paper: "the minimum number of C_1 stages executed in
// the Preload phase", "the number of operation blocks per Cycle that require external dependency
// resolution" - both readings give the same number), and sum_X lag(X) the preload stage count
// (the number of operation blocks of the Preload phase, what Figure 6's captions count). After
// the last steady Cycle the Drain phase runs the missing lag(C_1) - lag(X) blocks of each stage.
//
// Theorem B.1 (Cube-dominated, sum V <= sum C). With a_i = [V_i] - [C_{i+1}] (C_{n+1} = C_1),
// F(l) = a_1 + ... + a_l and m the first l in 1..n minimising F, the rotation layout for m puts
// the Cube in the order C_{m+2}, C_{m+3}, ..., C_{m+1} (indices mod n) back to back from 0, runs
// V_{m+1} first at offset 0 and packs V_{m+2}, ..., V_m as late as possible so that V_m ends at P.
// Its edges C_i -> V_i, i != m+1, are internal exactly when the paper's Eq. 20 holds for m
// (sum_{i<j} a_{m-i} <= 0 for j = 1..n-1), which the minimum partial sum guarantees: s = n - 1,
// preload count n. (Theorem B.1 states the same with k = n - m: the proof renames its k.)
//
// The paper contradicts itself on the form of these edges. Theorem 4.1(2) says all intra-Cycle
// dependencies are "[V] -> [C]"; Appendix B.3 ("enables [C1] -> [V1], [C2] -> [V2]") and the proof
// of Theorem B.1 build C_i -> V_i edges, and with V->C edges the theorem is false: Lemma B.2's
// adversarial durations (a V_k longer than sum C - min C, k < n) make V_k -> C_{k+1} external, so
// at most n - 2 of the n - 1 V->C edges can be internal. We implement the C->V form; the tests
// check both readings by exhaustive search (EdgeFilter).
//
// Vector-dominated case (sum V >= sum C), "by reversing roles". Reverse time and the chain: the
// mirrored problem C'_i = V_{n+1-i}, V'_i = C_{n+1-i} is Cube-dominated, and an arrangement of it
// read backwards in time (offset = P - offset' - duration) is an arrangement of the original with
// the same internal edges (C'_i -> V'_i is C_{n+1-i} -> V_{n+1-i}). So the construction is the
// rotation layout of the mirror, with a'_i = [C_{n+1-i}] - [V_{n-i}] (V_0 = V_n), mapped back.
//
// Zero durations. In a Cycle a zero-length stage sits between the others of its unit (at a
// boundary, never inside another stage), so the unit orders still say where it is. In a schedule
// it takes no unit time: it happens when its input is ready (or at its slot) and never holds up
// its unit's other stages. AMLA is n = 2 with [V_2] = 0 (Section 4.1.3); a zero-length V_n can
// always follow C_n, which makes this the same as reading AMLA as the 3-stage chain
// C_1 -> V_1 -> C_2.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/sim/pipeline.hpp"
#include "amla/sim/status.hpp"
#include "amla/sim/timeline.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim::preload {

/// Which unit runs a stage.
enum class Unit : std::uint8_t { cube, vector };

/// One stage of the chain, [C_i] or [V_i], with the paper's 1-based pair index i.
struct Stage {
  Unit unit = Unit::cube;
  int pair = 1;

  /// p = 0..2n-1 in C_1, V_1, C_2, ..., V_n.
  constexpr int chain_position() const { return 2 * (pair - 1) + (unit == Unit::vector ? 1 : 0); }
  static constexpr Stage at_chain_position(int p) {
    return Stage{p % 2 == 0 ? Unit::cube : Unit::vector, p / 2 + 1};
  }
  /// "C3", "V1": also the Timeline category of the stage.
  std::string label() const {
    std::string s(1, unit == Unit::cube ? 'C' : 'V');  // (not "C" + to_string: GCC 12 -Wrestrict)
    s += std::to_string(pair);
    return s;
  }
  friend constexpr bool operator==(const Stage&, const Stage&) = default;
};

/// The kind of a chain edge: C_i -> V_i or V_i -> C_{i+1}.
enum class EdgeKind : std::uint8_t { cube_to_vector, vector_to_cube };

/// Edge e of the chain (0-based): from chain position e to e + 1.
struct Edge {
  int index = 0;
  Stage from;
  Stage to;
  EdgeKind kind = EdgeKind::cube_to_vector;
};

/// Largest n accepted (the construction is O(n); the exhaustive search has its own, smaller limit).
inline constexpr int max_pairs = 1024;
/// Largest stage duration accepted, so that sums and schedules of many Cycles stay in int64
/// (the simulator's own limit, sim::max_stage_cycles).
inline constexpr std::int64_t max_stage_cycles = sim::max_stage_cycles;
/// Longest Cycle period accepted: max_pairs stages of max_stage_cycles each, so that an offset
/// plus a duration never overflows.
inline constexpr std::int64_t max_period_cycles = std::int64_t{1} << 50;
/// Largest n for exhaustive_optimum: it tries all n! * n! Cube/Vector orders.
inline constexpr int max_exhaustive_pairs = 6;

/// Durations of the n CV pairs of one KV block.
struct CvDurations {
  std::vector<Cycles> cube;    ///< [C_1], ..., [C_n]
  std::vector<Cycles> vector;  ///< [V_1], ..., [V_n]

  int n() const { return static_cast<int>(cube.size()); }
  Cycles of(Stage s) const {
    return (s.unit == Unit::cube ? cube : vector)[static_cast<std::size_t>(s.pair - 1)];
  }
  Cycles cube_total() const { return std::accumulate(cube.begin(), cube.end(), Cycles{0}); }
  Cycles vector_total() const { return std::accumulate(vector.begin(), vector.end(), Cycles{0}); }
  /// The stall-free Cycle length max(sum C, sum V).
  Cycles period() const { return std::max(cube_total(), vector_total()); }
  /// sum V <= sum C: the Cube is the busier (dominant) unit. Both hold when the sums are equal.
  bool cube_dominated() const { return vector_total() <= cube_total(); }
};

/// Throws amla::invalid_argument unless: 1 <= n <= max_pairs, as many V's as C's, every duration
/// in [0, max_stage_cycles], and at least one duration positive.
inline void validate_durations(const CvDurations& durations) {
  const auto n = durations.cube.size();
  AMLA_REQUIRE(n >= 1, "durations.cube.size()", n, "at least one CV pair");
  AMLA_REQUIRE(n <= static_cast<std::size_t>(max_pairs), "durations.cube.size()", n,
               "at most max_pairs (1024) CV pairs");
  AMLA_REQUIRE(durations.vector.size() == n, "durations.vector.size()", durations.vector.size(),
               "one Vector stage per Cube stage (n = " + std::to_string(n) + ")");
  bool any_positive = false;
  for (std::size_t i = 0; i < n; ++i) {
    for (const auto* v : {&durations.cube, &durations.vector}) {
      const std::int64_t c = (*v)[i].count;
      const char* name = v == &durations.cube ? "durations.cube[i]" : "durations.vector[i]";
      AMLA_REQUIRE(c >= 0 && c <= max_stage_cycles, name, c,
                   "a duration in [0, 2^40] cycles (i = " + std::to_string(i) + ")");
      any_positive = any_positive || c > 0;
    }
  }
  AMLA_REQUIRE(any_positive, "durations", "all zero", "at least one stage takes time");
}

/// Edge e of the chain of n pairs.
inline Edge chain_edge(int n, int e) {
  AMLA_REQUIRE(e >= 0 && e < 2 * n - 1, "e", e, "an edge index in [0, 2n - 2]");
  return Edge{e, Stage::at_chain_position(e), Stage::at_chain_position(e + 1),
              e % 2 == 0 ? EdgeKind::cube_to_vector : EdgeKind::vector_to_cube};
}

/// Where each stage sits in the Cycle window [0, period).
struct TimedCycle {
  Cycles period;
  std::vector<Cycles> cube_offset;    ///< start of C_i in the window
  std::vector<Cycles> vector_offset;  ///< start of V_i in the window

  Cycles offset(Stage s) const {
    return (s.unit == Unit::cube ? cube_offset
                                 : vector_offset)[static_cast<std::size_t>(s.pair - 1)];
  }
};

namespace detail {

inline std::string unit_name(Unit u) {
  return u == Unit::cube ? "Cube" : "Vector";
}

inline std::string span_text(Cycles start, Cycles end) {
  std::string t(1, '[');  // (not "[" + to_string: GCC 12 -Wrestrict)
  t += std::to_string(start.count);
  t += ", ";
  t += std::to_string(end.count);
  t += ')';
  return t;
}

/// 1-based cyclic index: cyc(0, n) == n, cyc(n + 1, n) == 1.
inline int cyc(int i, int n) {
  return ((i - 1) % n + n) % n + 1;
}

/// The stages of one unit in the order it runs them in the Cycle: by offset, a zero-length stage
/// before a positive one at the same offset, then by pair.
inline std::vector<Stage> unit_order(const CvDurations& d, const TimedCycle& a, Unit u) {
  std::vector<Stage> order;
  for (int i = 1; i <= d.n(); ++i) order.push_back(Stage{u, i});
  std::stable_sort(order.begin(), order.end(), [&](const Stage& x, const Stage& y) {
    const auto kx = std::make_tuple(a.offset(x).count, d.of(x).count, x.pair);
    const auto ky = std::make_tuple(a.offset(y).count, d.of(y).count, y.pair);
    return kx < ky;
  });
  return order;
}

inline void require_shape(const CvDurations& d, const TimedCycle& a) {
  validate_durations(d);
  const auto n = static_cast<std::size_t>(d.n());
  AMLA_REQUIRE(a.cube_offset.size() == n, "arrangement.cube_offset.size()", a.cube_offset.size(),
               "one offset per Cube stage (n = " + std::to_string(n) + ")");
  AMLA_REQUIRE(a.vector_offset.size() == n, "arrangement.vector_offset.size()",
               a.vector_offset.size(),
               "one offset per Vector stage (n = " + std::to_string(n) + ")");
}

}  // namespace detail

/// Whether `a` is a Cycle the units can run: period >= max(sum C, sum V), every stage inside
/// [0, period), no two stages of a unit overlapping. Throws only on malformed input (durations,
/// offset counts); an arrangement that does not fit comes back as a Status with the reason.
inline Status check_arrangement(const CvDurations& d, const TimedCycle& a) {
  detail::require_shape(d, a);
  if (a.period < d.period())
    return {false, "period " + std::to_string(a.period.count) +
                       " is shorter than max(sum C, sum V) = " + std::to_string(d.period().count)};
  if (a.period.count > max_period_cycles)
    return {false, "period " + std::to_string(a.period.count) +
                       " is longer than max_period_cycles = 2^50"};
  for (int p = 0; p < 2 * d.n(); ++p) {
    const Stage s = Stage::at_chain_position(p);
    const Cycles start = a.offset(s);
    if (start < Cycles{0} || start > a.period)
      return {false, s.label() + " starts at " + std::to_string(start.count) +
                         ", outside the Cycle window [0, " + std::to_string(a.period.count) + ")"};
    const Cycles end = start + d.of(s);  // <= 2^50 + 2^40: no overflow
    if (end > a.period)
      return {false, s.label() + " " + detail::span_text(start, end) +
                         " is not inside the Cycle window [0, " + std::to_string(a.period.count) +
                         ")"};
  }
  for (Unit u : {Unit::cube, Unit::vector}) {
    const auto order = detail::unit_order(d, a, u);
    for (std::size_t j = 1; j < order.size(); ++j) {
      const Cycles prev_end = a.offset(order[j - 1]) + d.of(order[j - 1]);
      if (a.offset(order[j]) < prev_end)
        return {false,
                order[j].label() + " " +
                    detail::span_text(a.offset(order[j]), a.offset(order[j]) + d.of(order[j])) +
                    " overlaps " + order[j - 1].label() + " " +
                    detail::span_text(a.offset(order[j - 1]), prev_end) + " on the " +
                    detail::unit_name(u)};
    }
  }
  return {};
}

/// Whether chain edge e is internal in `a`: offset(to) >= offset(from) + [from]. No validation.
inline bool edge_is_internal(const CvDurations& d, const TimedCycle& a, int e) {
  const Edge edge = chain_edge(d.n(), e);
  return a.offset(edge.to) >= a.offset(edge.from) + d.of(edge.from);
}

/// Everything Lemma B.1 derives from an arrangement.
struct PreloadAnalysis {
  std::vector<bool> internal;   ///< per chain edge (2n - 1): internal in the Cycle?
  int internal_edges = 0;       ///< s
  std::vector<int> lag;         ///< per chain position (2n): Cycles that stage runs ahead of V_n
  int preload_count = 0;        ///< lag(C_1) = (2n - 1) - s: C_1 stages in the Preload phase
  int preload_stage_count = 0;  ///< sum of lags: all stages in the Preload phase
};

/// Lemma B.1 for arrangement `a`: which edges are internal, the lags, the preload count. Throws
/// amla::invalid_argument if `a` is not a valid Cycle (check_arrangement's reason in the message).
inline PreloadAnalysis analyze(const CvDurations& d, const TimedCycle& a) {
  const Status v = check_arrangement(d, a);
  AMLA_REQUIRE(v.ok, "arrangement", "(offsets)", "a valid Cycle: " + v.reason);
  const int n = d.n();
  PreloadAnalysis r;
  r.internal.resize(static_cast<std::size_t>(2 * n - 1));
  r.lag.assign(static_cast<std::size_t>(2 * n), 0);
  for (int e = 0; e < 2 * n - 1; ++e) {
    r.internal[static_cast<std::size_t>(e)] = edge_is_internal(d, a, e);
    r.internal_edges += r.internal[static_cast<std::size_t>(e)] ? 1 : 0;
  }
  for (int p = 2 * n - 2; p >= 0; --p)
    r.lag[static_cast<std::size_t>(p)] =
        r.lag[static_cast<std::size_t>(p + 1)] + (r.internal[static_cast<std::size_t>(p)] ? 0 : 1);
  r.preload_count = r.lag[0];
  r.preload_stage_count = std::accumulate(r.lag.begin(), r.lag.end(), 0);
  AMLA_ASSERT(r.preload_count == 2 * n - 1 - r.internal_edges);
  return r;
}

/// The preload count of arrangement `a` (Lemma B.1): (2n - 1) - (number of internal edges).
inline int preload_count(const CvDurations& d, const TimedCycle& a) {
  return analyze(d, a).preload_count;
}

// ---------------------------------------------------------------------------------------------
// The theory's view and the simulator's: stage chains and arrangements.

/// The stage chain of the n CV pairs, C_1, V_1, ..., C_n, V_n (stage index = chain position),
/// for the simulator's scheduler: no tail, no stage carrying state (each unit runs one stage's
/// blocks in order, which is all a carried state would ask).
inline sim::StageChain stage_chain(const CvDurations& d) {
  validate_durations(d);
  sim::StageChain chain;
  for (int p = 0; p < 2 * d.n(); ++p) {
    const Stage st = Stage::at_chain_position(p);
    chain.stages.push_back({st.label(),
                            st.unit == Unit::cube ? sim::UnitKind::cube : sim::UnitKind::vector,
                            d.of(st), false});
  }
  return chain;
}

/// The CV pairs of a simulator stage chain (its tail, which runs after the loop, left out). The
/// chain must alternate Cube and Vector stages starting with a Cube stage; one that ends on a
/// Cube stage (AMLA's [C1] -> [V1] -> [C2]) gets a zero-length V_n (Section 4.1.3). Throws
/// amla::invalid_argument naming the first stage out of place.
inline CvDurations durations_of(const sim::StageChain& chain) {
  chain.validate();
  CvDurations d;
  for (int p = 0; p < chain.size(); ++p) {
    const sim::StageSpec& spec = chain.stages[static_cast<std::size_t>(p)];
    const bool cube = p % 2 == 0;
    if ((spec.kind == sim::UnitKind::cube) != cube) {
      amla::detail::throw_invalid(
          "amla::sim::preload::durations_of", "chain.stages",
          spec.name + " at position " + std::to_string(p),
          std::string("the preload theory's chain alternates Cube and Vector "
                      "stages from a Cube stage: position ") +
              std::to_string(p) + " must be a " + (cube ? "Cube" : "Vector") + " stage");
    }
    (cube ? d.cube : d.vector).push_back(spec.duration);
  }
  if (d.vector.size() < d.cube.size()) d.vector.push_back(Cycles{0});
  validate_durations(d);
  return d;
}

namespace detail {

/// The slots of timed Cycle `a` with the given lags: each unit's stages in their Cycle order,
/// stage X (chain position p) on block k + lag(X) in Cycle k.
inline sim::Arrangement slot_arrangement(const CvDurations& d, const TimedCycle& a,
                                         const std::vector<int>& lag) {
  sim::Arrangement r;
  for (const Stage& st : unit_order(d, a, Unit::cube))
    r.cube.push_back({st.chain_position(), lag[static_cast<std::size_t>(st.chain_position())]});
  for (const Stage& st : unit_order(d, a, Unit::vector))
    r.vector.push_back({st.chain_position(), lag[static_cast<std::size_t>(st.chain_position())]});
  return r;
}

}  // namespace detail

/// The simulator's arrangement of timed Cycle `a` of durations_of(chain): each unit's stages in
/// the Cycle's order, each on the block Lemma B.1's lags give it (AMLA's Figure 7: cube
/// [C1(k+2), C2(k)], vector [V1(k+1)]). A zero-length V_n that durations_of added is left out.
/// Throws amla::invalid_argument if `a` is not a valid Cycle of those durations.
inline sim::Arrangement chain_arrangement(const sim::StageChain& chain, const TimedCycle& a) {
  const CvDurations d = durations_of(chain);
  sim::Arrangement r = detail::slot_arrangement(d, a, analyze(d, a).lag);
  auto& v = r.vector;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const sim::ArrangementSlot& x) { return x.stage >= chain.size(); }),
          v.end());
  return r;
}

// ---------------------------------------------------------------------------------------------
// Theorem B.1: the arrangement with preload count n.

/// The mirrored problem of the Vector-dominated case: C'_i = V_{n+1-i}, V'_i = C_{n+1-i}.
inline CvDurations mirrored(const CvDurations& d) {
  validate_durations(d);
  CvDurations m;
  m.cube.assign(d.vector.rbegin(), d.vector.rend());
  m.vector.assign(d.cube.rbegin(), d.cube.rend());
  return m;
}

/// Maps an arrangement of mirrored(d) to one of d by reversing time in the window:
/// offset(C_j) = P - offset'(V'_{n+1-j}) - [C_j], offset(V_j) = P - offset'(C'_{n+1-j}) - [V_j].
/// Internal edges correspond one to one and keep their kind, so the preload count is the same.
/// Its own inverse: mirror_arrangement(mirrored(d), mirror_arrangement(d, a)) == a.
inline TimedCycle mirror_arrangement(const CvDurations& d, const TimedCycle& mirror) {
  const CvDurations md = mirrored(d);
  detail::require_shape(md, mirror);
  const auto n = static_cast<std::size_t>(d.n());
  TimedCycle a;
  a.period = mirror.period;
  a.cube_offset.resize(n);
  a.vector_offset.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    a.cube_offset[j] = mirror.period - mirror.vector_offset[n - 1 - j] - d.cube[j];
    a.vector_offset[j] = mirror.period - mirror.cube_offset[n - 1 - j] - d.vector[j];
  }
  return a;
}

/// Eq. 20 for index m (1-based, cyclic a): sum_{i=0}^{j-1} a_{m-i} <= 0 for every j = 1..n-1.
inline bool eq20_holds(const std::vector<Cycles>& a, int m) {
  const int n = static_cast<int>(a.size());
  AMLA_REQUIRE(n >= 1, "a.size()", n, "at least one term");
  AMLA_REQUIRE(m >= 1 && m <= n, "m", m, "an index in [1, n]");
  Cycles sum{0};
  for (int j = 1; j <= n - 1; ++j) {
    sum += a[static_cast<std::size_t>(detail::cyc(m - (j - 1), n) - 1)];
    if (sum > Cycles{0}) return false;
  }
  return true;
}

/// The bookkeeping of Theorem B.1's proof for d.
struct PartialSumChoice {
  bool cube_dominated = true;  ///< sum V <= sum C; otherwise the terms are the mirror's
  std::vector<Cycles> a;       ///< a_1..a_n: [V_i] - [C_{i+1}], or [C_{n+1-i}] - [V_{n-i}]
  std::vector<Cycles> F;       ///< F(0..n), F(l) = a_1 + ... + a_l; F(n) <= 0
  int m = 1;                   ///< the first l in 1..n with minimal F(l)
};

/// a_i, F and the index m of the minimum partial sum (Appendix B.4).
inline PartialSumChoice theorem_b1_choice(const CvDurations& d) {
  validate_durations(d);
  PartialSumChoice c;
  c.cube_dominated = d.cube_dominated();
  const CvDurations w = c.cube_dominated ? d : mirrored(d);
  const int n = d.n();
  c.F.assign(1, Cycles{0});
  for (int i = 1; i <= n; ++i) {
    c.a.push_back(w.vector[static_cast<std::size_t>(i - 1)] -
                  w.cube[static_cast<std::size_t>(detail::cyc(i + 1, n) - 1)]);
    c.F.push_back(c.F.back() + c.a.back());
  }
  AMLA_ASSERT(c.F.back() <= Cycles{0});
  for (int l = 2; l <= n; ++l)
    if (c.F[static_cast<std::size_t>(l)] < c.F[static_cast<std::size_t>(c.m)]) c.m = l;
  return c;
}

namespace detail {

/// The rotation layout for m of a Cube-dominated problem (see the header comment).
inline TimedCycle rotation_layout(const CvDurations& d, int m) {
  AMLA_ASSERT(d.cube_dominated());
  const int n = d.n();
  TimedCycle a;
  a.period = d.period();
  a.cube_offset.assign(static_cast<std::size_t>(n), Cycles{0});
  a.vector_offset.assign(static_cast<std::size_t>(n), Cycles{0});
  Cycles t{0};
  for (int j = 0; j < n; ++j) {
    const auto i = static_cast<std::size_t>(cyc(m + 2 + j, n) - 1);
    a.cube_offset[i] = t;
    t += d.cube[i];
  }
  a.vector_offset[static_cast<std::size_t>(cyc(m + 1, n) - 1)] = Cycles{0};
  t = a.period;
  for (int j = n; j >= 2; --j) {
    const auto i = static_cast<std::size_t>(cyc(m + j, n) - 1);
    t -= d.vector[i];
    a.vector_offset[i] = t;
  }
  return a;
}

}  // namespace detail

/// The rotation layout for index m in 1..n, in the form for d's dominant unit: for sum V <= sum C
/// the layout described in the header comment; otherwise the mirror's layout for m, mapped back.
/// Always a valid Cycle of period max(sum C, sum V); it has n - 1 internal C->V edges when Eq. 20
/// holds for m (of theorem_b1_choice(d).a), and for positive durations only then.
inline TimedCycle rotation_arrangement(const CvDurations& d, int m) {
  validate_durations(d);
  AMLA_REQUIRE(m >= 1 && m <= d.n(), "m", m, "an index in [1, n]");
  if (d.cube_dominated()) return detail::rotation_layout(d, m);
  return mirror_arrangement(d, detail::rotation_layout(mirrored(d), m));
}

/// Theorem B.1 (and its Vector-dominated mirror): an arrangement with period max(sum C, sum V)
/// and preload count at most n (exactly n when every duration is positive), whose internal edges
/// are C_i -> V_i.
inline TimedCycle theorem_b1_arrangement(const CvDurations& d) {
  return rotation_arrangement(d, theorem_b1_choice(d).m);
}

// ---------------------------------------------------------------------------------------------
// Exact search: the best placement for given unit orders, and over all orders (small n).

/// Which internal edges a search may count (EdgeFilter::vector_to_cube_only is the literal reading
/// of Theorem 4.1(2); the tests use it to show that reading is false).
enum class EdgeFilter : std::uint8_t { any, cube_to_vector_only, vector_to_cube_only };

/// A placement found by a search.
struct Placement {
  TimedCycle arrangement;
  int internal_edges = 0;         ///< internal edges of the kinds the filter allows (the objective)
  std::vector<int> cube_order;    ///< pair indices in the Cube's order in the Cycle
  std::vector<int> vector_order;  ///< pair indices in the Vector's order in the Cycle
  /// (2n - 1) - internal_edges: the preload count when only the allowed kinds count. With
  /// EdgeFilter::any it equals preload_count(d, arrangement).
  int preload_count = 0;
};

namespace detail {

inline bool kind_allowed(EdgeFilter f, EdgeKind k) {
  return f == EdgeFilter::any ||
         (f == EdgeFilter::cube_to_vector_only) == (k == EdgeKind::cube_to_vector);
}

inline void require_order(const std::vector<int>& order, int n, const char* name) {
  AMLA_REQUIRE(static_cast<int>(order.size()) == n, name, order.size(),
               "a permutation of 1..n (n = " + std::to_string(n) + ")");
  std::vector<bool> seen(static_cast<std::size_t>(n), false);
  for (int i : order) {
    AMLA_REQUIRE(i >= 1 && i <= n && !seen[static_cast<std::size_t>(i - 1)], name, i,
                 "a permutation of 1..n (n = " + std::to_string(n) + "): each index once");
    seen[static_cast<std::size_t>(i - 1)] = true;
  }
}

/// The best placement for fixed orders, on a Cube-dominated problem: the Cube runs gap-free in
/// its order; the Vector stages are placed in their order by a dynamic programme over "internal
/// edges so far -> earliest Vector finish", which is exact because an earlier finish never hurts
/// the stages after it. Each V_i may take its in-edge C_i -> V_i (start >= end of C_i) and its
/// out-edge V_i -> C_{i+1} (end <= start of C_{i+1}); every edge has one Vector end, so each is
/// counted once.
inline Placement place_cube_dominated(const CvDurations& d, const std::vector<int>& cube_order,
                                      const std::vector<int>& vector_order, EdgeFilter filter) {
  const int n = d.n();
  const auto un = static_cast<std::size_t>(n);
  Placement r;
  r.cube_order = cube_order;
  r.vector_order = vector_order;
  TimedCycle& a = r.arrangement;
  a.period = d.period();
  a.cube_offset.assign(un, Cycles{0});
  a.vector_offset.assign(un, Cycles{0});
  Cycles t{0};
  for (int i : cube_order) {
    a.cube_offset[static_cast<std::size_t>(i - 1)] = t;
    t += d.cube[static_cast<std::size_t>(i - 1)];
  }
  constexpr std::int64_t inf = std::numeric_limits<std::int64_t>::max();
  const std::size_t states = 2 * un;  // internal edges 0..2n-1
  // finish[step][count]; choice[step][count] = (previous count, start) for the reconstruction.
  std::vector<std::vector<std::int64_t>> finish(un + 1, std::vector<std::int64_t>(states, inf));
  std::vector<std::vector<std::pair<int, std::int64_t>>> choice(
      un + 1, std::vector<std::pair<int, std::int64_t>>(states, {-1, 0}));
  finish[0][0] = 0;
  const bool in_ok = kind_allowed(filter, EdgeKind::cube_to_vector);
  const bool out_ok = kind_allowed(filter, EdgeKind::vector_to_cube);
  for (std::size_t step = 0; step < un; ++step) {
    const int i = vector_order[step];
    const auto ui = static_cast<std::size_t>(i - 1);
    const std::int64_t dur = d.vector[ui].count;
    const std::int64_t c_end = (a.cube_offset[ui] + d.cube[ui]).count;
    const bool has_out = i < n;
    const std::int64_t next_c_start = has_out ? a.cube_offset[ui + 1].count : 0;
    for (std::size_t c = 0; c < states; ++c) {
      if (finish[step][c] == inf) continue;
      for (int in = 0; in <= (in_ok ? 1 : 0); ++in) {
        for (int out = 0; out <= (out_ok && has_out ? 1 : 0); ++out) {
          const std::int64_t start = std::max(finish[step][c], in ? c_end : std::int64_t{0});
          const std::int64_t end = start + dur;
          if (end > a.period.count || (out && end > next_c_start)) continue;
          const std::size_t nc = c + static_cast<std::size_t>(in + out);
          if (end < finish[step + 1][nc]) {
            finish[step + 1][nc] = end;
            choice[step + 1][nc] = {static_cast<int>(c), start};
          }
        }
      }
    }
  }
  std::size_t best = 0;
  for (std::size_t c = 0; c < states; ++c)
    if (finish[un][c] != inf) best = c;
  AMLA_ASSERT(finish[un][best] != inf);  // all-external back to back always fits
  r.internal_edges = static_cast<int>(best);
  for (std::size_t step = un, c = best; step > 0; --step) {
    const auto [prev, start] = choice[step][c];
    a.vector_offset[static_cast<std::size_t>(vector_order[step - 1] - 1)] = Cycles{start};
    c = static_cast<std::size_t>(prev);
  }
  r.preload_count = 2 * n - 1 - r.internal_edges;
  return r;
}

/// Reverses an order of pair indices and maps i -> n + 1 - i (orders of the mirrored problem).
inline std::vector<int> mirror_order(const std::vector<int>& order, int n) {
  std::vector<int> m;
  for (auto it = order.rbegin(); it != order.rend(); ++it) m.push_back(n + 1 - *it);
  return m;
}

}  // namespace detail

/// The placement of the given Cube and Vector orders (permutations of 1..n) with period
/// max(sum C, sum V) that has the most internal edges of the allowed kinds. Exact.
inline Placement best_placement(const CvDurations& d, const std::vector<int>& cube_order,
                                const std::vector<int>& vector_order,
                                EdgeFilter filter = EdgeFilter::any) {
  validate_durations(d);
  detail::require_order(cube_order, d.n(), "cube_order");
  detail::require_order(vector_order, d.n(), "vector_order");
  if (d.cube_dominated()) return detail::place_cube_dominated(d, cube_order, vector_order, filter);
  // Vector-dominated: place the mirror (its Cube is our Vector reversed), then map back.
  const int n = d.n();
  Placement m = detail::place_cube_dominated(mirrored(d), detail::mirror_order(vector_order, n),
                                             detail::mirror_order(cube_order, n), filter);
  Placement r;
  r.arrangement = mirror_arrangement(d, m.arrangement);
  r.internal_edges = m.internal_edges;
  r.preload_count = m.preload_count;
  r.cube_order = cube_order;
  r.vector_order = vector_order;
  return r;
}

/// The best arrangement over all n! * n! Cube/Vector orders (n <= max_exhaustive_pairs): the
/// minimum preload count any stall-free Cycle can reach. Ties go to the first orders found in
/// lexicographic order.
inline Placement exhaustive_optimum(const CvDurations& d, EdgeFilter filter = EdgeFilter::any) {
  validate_durations(d);
  const int n = d.n();
  AMLA_REQUIRE(n <= max_exhaustive_pairs, "durations.cube.size()", n,
               "at most max_exhaustive_pairs (6) pairs for the exhaustive search (n!^2 orders)");
  std::vector<int> co(static_cast<std::size_t>(n)), vo(static_cast<std::size_t>(n));
  std::iota(co.begin(), co.end(), 1);
  Placement best;
  best.internal_edges = -1;
  do {
    std::iota(vo.begin(), vo.end(), 1);
    do {
      Placement p = best_placement(d, co, vo, filter);
      if (p.internal_edges > best.internal_edges) best = std::move(p);
    } while (std::next_permutation(vo.begin(), vo.end()));
  } while (std::next_permutation(co.begin(), co.end()));
  return best;
}

/// The Cube and Vector orders of an arrangement (pair indices in Cycle order).
inline std::pair<std::vector<int>, std::vector<int>> unit_orders(const CvDurations& d,
                                                                 const TimedCycle& a) {
  detail::require_shape(d, a);
  std::pair<std::vector<int>, std::vector<int>> r;
  for (const Stage& s : detail::unit_order(d, a, Unit::cube)) r.first.push_back(s.pair);
  for (const Stage& s : detail::unit_order(d, a, Unit::vector)) r.second.push_back(s.pair);
  return r;
}

/// Theorem B.1's arrangement of a simulator stage chain (durations_of(chain)), as the simulator's
/// arrangement: what simulate_decode runs with DecodeSchedule::theorem_b1.
inline sim::Arrangement theorem_b1_arrangement(const sim::StageChain& chain) {
  return chain_arrangement(chain, theorem_b1_arrangement(durations_of(chain)));
}

/// The exhaustive optimum's arrangement of a simulator stage chain (at most max_exhaustive_pairs
/// CV pairs), as the simulator's arrangement.
inline sim::Arrangement optimum_arrangement(const sim::StageChain& chain) {
  return chain_arrangement(chain, exhaustive_optimum(durations_of(chain)).arrangement);
}

// ---------------------------------------------------------------------------------------------
// Whole pipelines: Preload, steady Cycles, Drain, for T KV blocks.

/// How a pipeline's stages are timed.
enum class Timing : std::uint8_t {
  asap,         ///< each unit runs its stages in Cycle order, each as soon as its input is ready
                ///< (sim::simulate_schedule)
  cycle_slots,  ///< every stage at its slot: Cycle k starts at k * P (the picture of Figure 5)
};

/// One stage of one KV block as the pipeline runs it.
struct StageRun {
  Stage stage;
  int block = 1;  ///< KV block, 1-based
  int cycle = 0;  ///< Cycle index, 0-based (the Preload phase is Cycles 0..lag(C_1)-1)
  Phase phase = Phase::none;
  Cycles start;
  Cycles end;
};

/// A whole pipeline run; not ok when the lags ask for an input before it exists (see reason).
struct PipelineSchedule : Status {
  int blocks = 0;
  std::vector<int> lag;  ///< per chain position (empty for the serial schedule)
  int preload_cycles = 0, steady_cycles = 0, drain_cycles = 0;
  Cycles period;                    ///< the Cycle length (0 for the serial schedule)
  std::vector<StageRun> runs;       ///< all stage runs, by start time (Cube first on ties)
  std::vector<Cycles> cycle_start;  ///< per Cycle: its first stage's start
  Cycles makespan;
};

namespace detail {

inline Phase phase_of_cycle(int cycle, int lead, int blocks) {
  if (cycle < lead) return Phase::preload;
  if (cycle <= blocks - 1) return Phase::steady;
  return Phase::drain;
}

inline void sort_runs(std::vector<StageRun>& runs) {
  std::stable_sort(runs.begin(), runs.end(), [](const StageRun& x, const StageRun& y) {
    return std::make_tuple(x.start.count, x.stage.unit == Unit::vector, x.end.count) <
           std::make_tuple(y.start.count, y.stage.unit == Unit::vector, y.end.count);
  });
}

inline std::string run_name(const StageRun& r) {
  return r.stage.label() + "[" + std::to_string(r.block) + "]";
}

}  // namespace detail

/// Checks a schedule without trusting how it was built: every stage of every block 1..blocks runs
/// exactly once for its duration, each stage starts after the previous stage of its block's chain
/// ends, and no two stages of a unit overlap (zero-length runs take no unit time).
inline Status verify_schedule(const CvDurations& d, const PipelineSchedule& s) {
  validate_durations(d);
  const int n = d.n();
  const auto positions = static_cast<std::size_t>(2 * n);
  std::vector<std::vector<const StageRun*>> by(
      positions, std::vector<const StageRun*>(static_cast<std::size_t>(s.blocks), nullptr));
  for (const StageRun& r : s.runs) {
    if (r.block < 1 || r.block > s.blocks || r.stage.pair < 1 || r.stage.pair > n)
      return {false, detail::run_name(r) + " is outside the " + std::to_string(s.blocks) +
                         " blocks / " + std::to_string(n) + " pairs"};
    if (r.end - r.start != d.of(r.stage))
      return {false, detail::run_name(r) + " lasts " + std::to_string((r.end - r.start).count) +
                         " cycles instead of " + std::to_string(d.of(r.stage).count)};
    auto& slot = by[static_cast<std::size_t>(r.stage.chain_position())]
                   [static_cast<std::size_t>(r.block - 1)];
    if (slot != nullptr) return {false, detail::run_name(r) + " runs twice"};
    slot = &r;
  }
  for (std::size_t p = 0; p < positions; ++p)
    for (std::size_t b = 0; b < by[p].size(); ++b) {
      const StageRun* r = by[p][b];
      if (r == nullptr)
        return {false, Stage::at_chain_position(static_cast<int>(p)).label() + "[" +
                           std::to_string(b + 1) + "] never runs"};
      if (p > 0 && r->start < by[p - 1][b]->end)
        return {false, detail::run_name(*r) + " starts at " + std::to_string(r->start.count) +
                           " before its input " + detail::run_name(*by[p - 1][b]) + " ends at " +
                           std::to_string(by[p - 1][b]->end.count)};
    }
  for (Unit u : {Unit::cube, Unit::vector}) {
    std::vector<const StageRun*> on;
    for (const StageRun& r : s.runs)
      if (r.stage.unit == u && r.end > r.start) on.push_back(&r);
    std::stable_sort(on.begin(), on.end(), [](const StageRun* x, const StageRun* y) {
      return std::make_pair(x->start.count, x->end.count) <
             std::make_pair(y->start.count, y->end.count);
    });
    for (std::size_t j = 1; j < on.size(); ++j)
      if (on[j]->start < on[j - 1]->end)
        return {false, detail::run_name(*on[j]) + " overlaps " + detail::run_name(*on[j - 1]) +
                           " on the " + detail::unit_name(u)};
  }
  return {};
}

/// The pipeline of `blocks` KV blocks for arrangement `a` with the given lags (one per chain
/// position, lag[2n-1] == 0, each lag[p] >= lag[p+1]). With lags smaller than Lemma B.1's an
/// input is asked for before it exists: the result is then not feasible and says which (a
/// dependency violated at its slot, or a deadlock under Timing::asap). Use pipeline_schedule for
/// the minimal valid lags.
inline PipelineSchedule pipeline_schedule_with_lags(const CvDurations& d, const TimedCycle& a,
                                                    const std::vector<int>& lag, int blocks,
                                                    Timing timing = Timing::asap) {
  const Status v = check_arrangement(d, a);
  AMLA_REQUIRE(v.ok, "arrangement", "(offsets)", "a valid Cycle: " + v.reason);
  const int n = d.n();
  AMLA_REQUIRE(blocks >= 1 && blocks <= 1000000, "blocks", blocks, "in [1, 10^6]");
  AMLA_REQUIRE(static_cast<std::int64_t>(blocks) * n <= 10000000, "blocks", blocks,
               "blocks * n <= 10^7 stage runs per unit");
  AMLA_REQUIRE(lag.size() == static_cast<std::size_t>(2 * n), "lag.size()", lag.size(),
               "one lag per chain position (2n = " + std::to_string(2 * n) + ")");
  AMLA_REQUIRE(lag.back() == 0, "lag[2n-1]", lag.back(), "V_n has lag 0");
  for (std::size_t p = 0; p + 1 < lag.size(); ++p)
    AMLA_REQUIRE(lag[p] >= lag[p + 1] && lag[p] <= 2 * n, "lag[p]", lag[p],
                 "non-increasing along the chain and <= 2n (p = " + std::to_string(p) + ")");
  AMLA_REQUIRE(static_cast<double>(a.period.count) * (blocks + lag[0]) < 0x1p62, "blocks", blocks,
               "(blocks + lag[0]) * period < 2^62 cycles");
  PipelineSchedule s;
  s.blocks = blocks;
  s.lag = lag;
  s.period = a.period;
  const int lead = lag[0];
  const int cycles = blocks + lead;
  s.preload_cycles = lead;
  s.steady_cycles = std::max(0, blocks - lead);
  s.drain_cycles = cycles - s.preload_cycles - s.steady_cycles;
  if (timing == Timing::cycle_slots) {
    // Every stage at its slot: Cycle k, stage X on block k + 1 - (lag(C_1) - lag(X)).
    for (Unit u : {Unit::cube, Unit::vector}) {
      const auto order = detail::unit_order(d, a, u);
      for (int k = 0; k < cycles; ++k)
        for (const Stage& st : order) {
          const int b = k + 1 - (lead - lag[static_cast<std::size_t>(st.chain_position())]);
          if (b < 1 || b > blocks) continue;
          StageRun r;
          r.stage = st;
          r.block = b;
          r.cycle = k;
          r.phase = detail::phase_of_cycle(k, lead, blocks);
          r.start = a.period * k + a.offset(st);
          r.end = r.start + d.of(st);
          s.runs.push_back(r);
        }
    }
  } else {
    // The simulator's list scheduler (sim::simulate_schedule) on the same unit programs: the
    // cyclic schedule of the chain_arrangement of `a` with these lags.
    const sim::StageChain chain = stage_chain(d);
    sim::Schedule sch =
        sim::cyclic_schedule(chain, blocks, detail::slot_arrangement(d, a, lag), "pipeline");
    sch.first_block_label = 1;
    const sim::ScheduleResult run = sim::simulate_schedule(chain, sch);
    if (!run.ok) {
      s.set_failed("deadlock: " + run.reason);
      return s;
    }
    for (const sim::TaskTiming& t : run.tasks) {
      StageRun r;
      r.stage = Stage::at_chain_position(t.task.stage);
      r.block = t.task.block + 1;
      r.cycle = t.task.block + lead - lag[static_cast<std::size_t>(t.task.stage)];
      r.phase = detail::phase_of_cycle(r.cycle, lead, blocks);
      r.start = t.start;
      r.end = t.end;
      s.runs.push_back(r);
    }
  }
  detail::sort_runs(s.runs);
  s.cycle_start.assign(static_cast<std::size_t>(cycles),
                       Cycles{std::numeric_limits<std::int64_t>::max()});
  for (const StageRun& r : s.runs) {
    auto& cs = s.cycle_start[static_cast<std::size_t>(r.cycle)];
    cs = std::min(cs, r.start);
    s.makespan = std::max(s.makespan, r.end);
  }
  if (timing == Timing::cycle_slots) {
    const Status ok = verify_schedule(d, s);
    if (!ok) s.set_failed(ok.reason);
  }
  return s;
}

/// The pipeline of `blocks` KV blocks for arrangement `a`, with Lemma B.1's lags: Preload
/// (lag(C_1) Cycles, partly filled), steady Cycles, Drain. Always feasible for a valid Cycle.
inline PipelineSchedule pipeline_schedule(const CvDurations& d, const TimedCycle& a, int blocks,
                                          Timing timing = Timing::asap) {
  PipelineSchedule s = pipeline_schedule_with_lags(d, a, analyze(d, a).lag, blocks, timing);
  AMLA_ASSERT(s.ok);
  return s;
}

/// The naive (Base) order without a pipeline: every stage waits for the one before it in the
/// chain, and block b + 1 starts when block b's V_n ends. Makespan T * (sum C + sum V).
inline PipelineSchedule serial_schedule(const CvDurations& d, int blocks) {
  validate_durations(d);
  AMLA_REQUIRE(blocks >= 1 && blocks <= 1000000, "blocks", blocks, "in [1, 10^6]");
  AMLA_REQUIRE(static_cast<std::int64_t>(blocks) * d.n() <= 10000000, "blocks", blocks,
               "blocks * n <= 10^7 stage runs per unit");
  AMLA_REQUIRE(static_cast<double>((d.cube_total() + d.vector_total()).count) * blocks < 0x1p62,
               "blocks", blocks, "blocks * (sum C + sum V) < 2^62 cycles");
  const sim::StageChain chain = stage_chain(d);
  sim::Schedule sch = sim::serial_schedule(chain, blocks);
  sch.first_block_label = 1;
  const sim::ScheduleResult run = sim::simulate_schedule(chain, sch);
  AMLA_ASSERT(run.ok);  // the serial order never deadlocks
  PipelineSchedule s;
  s.blocks = blocks;
  s.cycle_start.assign(static_cast<std::size_t>(blocks), Cycles{0});
  for (const sim::TaskTiming& t : run.tasks) {
    StageRun r;
    r.stage = Stage::at_chain_position(t.task.stage);
    r.block = t.task.block + 1;
    r.cycle = t.task.block;
    r.start = t.start;
    r.end = t.end;
    s.runs.push_back(r);
    if (t.task.stage == 0) s.cycle_start[static_cast<std::size_t>(t.task.block)] = t.start;
  }
  std::stable_sort(s.runs.begin(), s.runs.end(), [](const StageRun& x, const StageRun& y) {
    return std::make_pair(x.block, x.stage.chain_position()) <
           std::make_pair(y.block, y.stage.chain_position());
  });
  s.makespan = run.makespan;
  return s;
}

/// The stages of one phase in the order they start (Cube first on ties), e.g. AMLA's Preload
/// phase [C1, C1, V1].
inline std::vector<Stage> phase_sequence(const PipelineSchedule& s, Phase phase) {
  std::vector<Stage> r;
  for (const StageRun& run : s.runs)
    if (run.phase == phase) r.push_back(run.stage);
  return r;
}

/// Two lanes, "Cube" and "Vector", one interval per stage run named like "C2[5]" (block 5), with
/// category "C2" and the run's phase. Zero-length runs are left out unless keep_zero_length.
inline Timeline to_timeline(const PipelineSchedule& s, std::string title, Hertz clock = Hertz{0},
                            bool keep_zero_length = false) {
  Timeline t;
  t.title = std::move(title);
  t.clock = clock;
  t.lanes = {Lane{"Cube", {}}, Lane{"Vector", {}}};
  for (const StageRun& r : s.runs) {
    if (r.end == r.start && !keep_zero_length) continue;
    t.lanes[r.stage.unit == Unit::cube ? 0 : 1].intervals.push_back(
        Interval{r.start, r.end, detail::run_name(r), r.stage.label(), r.phase});
  }
  return t;
}

}  // namespace amla::sim::preload
