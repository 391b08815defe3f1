// Tests of amla/sim/preload_theory.hpp: Lemma B.1, Theorem B.1, Lemma B.2 and Theorem 4.1 of the
// AMLA paper, checked against independent implementations in this file (a brute force over edge
// subsets with a difference-constraint solver, a schedule checker, a literal transcription of
// Eq. 17) rather than against the header's own formulas.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "amla/sim/preload_theory.hpp"
#include "common/reduced.hpp"

namespace {

using amla::sim::Cycles;
using amla::sim::Phase;
namespace pl = amla::sim::preload;

constexpr int kScale =
    amla_test::reduced ? 8 : 1;  // sanitizer builds: an eighth of the random cases

pl::CvDurations make(std::vector<std::int64_t> c, std::vector<std::int64_t> v) {
  pl::CvDurations d;
  for (auto x : c) d.cube.push_back(Cycles{x});
  for (auto x : v) d.vector.push_back(Cycles{x});
  return d;
}

std::string show(const pl::CvDurations& d) {
  std::string s = "C=(";
  for (auto c : d.cube) s += std::to_string(c.count) + " ";
  s += ") V=(";
  for (auto v : d.vector) s += std::to_string(v.count) + " ";
  return s + ")";
}

std::string show(const std::vector<pl::Stage>& stages) {
  std::string s;
  for (const auto& st : stages) {
    if (!s.empty()) s += ',';
    s += st.label();
  }
  return s;
}

/// Random durations: uniform, heavy-tailed, with zeros, or with one dominant stage; sometimes
/// Cube-dominated, sometimes Vector-dominated. Never all zero.
pl::CvDurations random_durations(std::mt19937_64& rng, int n) {
  std::uniform_int_distribution<int> style(0, 3);
  const int st = style(rng);
  auto draw = [&]() -> std::int64_t {
    switch (st) {
      case 0:
        return std::uniform_int_distribution<std::int64_t>(1, 20)(rng);
      case 1:
        return 1 + std::geometric_distribution<std::int64_t>(0.05)(rng);
      case 2:
        return std::uniform_int_distribution<std::int64_t>(0, 4)(rng);
      default:
        return std::uniform_int_distribution<std::int64_t>(1, 1000)(rng);
    }
  };
  pl::CvDurations d;
  for (int i = 0; i < n; ++i) {
    d.cube.push_back(Cycles{draw()});
    d.vector.push_back(Cycles{draw()});
  }
  if (st == 3 && n > 1) {  // one Vector (or Cube) stage much longer than the rest
    auto& target = std::bernoulli_distribution(0.5)(rng) ? d.vector : d.cube;
    target[std::uniform_int_distribution<std::size_t>(0, target.size() - 1)(rng)] += Cycles{3000};
  }
  if (d.period() == Cycles{0}) d.cube[0] = Cycles{1};
  return d;
}

pl::CvDurations random_positive_durations(std::mt19937_64& rng, int n) {
  pl::CvDurations d = random_durations(rng, n);
  for (auto* v : {&d.cube, &d.vector})
    for (auto& x : *v)
      if (x == Cycles{0}) x = Cycles{1};
  return d;
}

/// A random valid Cycle: random orders, the slack of each unit spread over random gaps, and a
/// period max(sum C, sum V) + extra.
pl::TimedCycle random_arrangement(std::mt19937_64& rng, const pl::CvDurations& d,
                                  std::int64_t extra) {
  const int n = d.n();
  pl::TimedCycle a;
  a.period = d.period() + Cycles{extra};
  a.cube_offset.resize(static_cast<std::size_t>(n));
  a.vector_offset.resize(static_cast<std::size_t>(n));
  for (int u = 0; u < 2; ++u) {
    const auto& dur = u == 0 ? d.cube : d.vector;
    auto& off = u == 0 ? a.cube_offset : a.vector_offset;
    std::vector<int> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::int64_t slack = a.period.count;
    for (auto x : dur) slack -= x.count;
    std::vector<std::int64_t> cuts;
    for (int g = 0; g < n; ++g)
      cuts.push_back(std::uniform_int_distribution<std::int64_t>(0, slack)(rng));
    std::sort(cuts.begin(), cuts.end());
    std::int64_t t = 0, prev_cut = 0;
    for (int j = 0; j < n; ++j) {
      t += cuts[static_cast<std::size_t>(j)] - prev_cut;
      prev_cut = cuts[static_cast<std::size_t>(j)];
      const auto i = static_cast<std::size_t>(order[static_cast<std::size_t>(j)]);
      off[i] = Cycles{t};
      t += dur[i].count;
    }
  }
  return a;
}

// ---- an independent optimum: edge subsets x unit orders, feasibility by Bellman-Ford ----

/// Whether the difference constraints of (orders, internal edge subset) have a solution in the
/// window [0, P). Variables: the 2n stage starts and an origin. No gap-free assumption.
bool subset_feasible(const pl::CvDurations& d, const std::vector<int>& co,
                     const std::vector<int>& vo, unsigned subset) {
  const int n = d.n();
  const int z = 2 * n;
  struct E {
    int u, v;
    std::int64_t w;  // x_v - x_u <= w
  };
  std::vector<E> edges;
  const std::int64_t P = d.period().count;
  auto dur = [&](int p) { return d.of(pl::Stage::at_chain_position(p)).count; };
  for (int p = 0; p < 2 * n; ++p) {
    edges.push_back({p, z, 0});           // x_z - x_p <= 0, i.e. x_p >= 0
    edges.push_back({z, p, P - dur(p)});  // x_p <= P - d_p
  }
  auto chain_pos = [](pl::Unit u, int pair) { return pl::Stage{u, pair}.chain_position(); };
  for (int u = 0; u < 2; ++u) {
    const auto& order = u == 0 ? co : vo;
    const pl::Unit unit = u == 0 ? pl::Unit::cube : pl::Unit::vector;
    for (std::size_t j = 0; j + 1 < order.size(); ++j) {
      const int a = chain_pos(unit, order[j]), b = chain_pos(unit, order[j + 1]);
      edges.push_back({b, a, -dur(a)});  // x_a - x_b <= -d_a, i.e. x_b >= x_a + d_a
    }
  }
  for (int e = 0; e < 2 * n - 1; ++e)
    if (subset & (1u << e)) edges.push_back({e + 1, e, -dur(e)});  // x_{e+1} >= x_e + d_e
  std::vector<std::int64_t> dist(static_cast<std::size_t>(2 * n + 1), 0);
  for (int it = 0; it <= 2 * n + 1; ++it) {
    bool changed = false;
    for (const E& e : edges)
      if (dist[static_cast<std::size_t>(e.u)] + e.w < dist[static_cast<std::size_t>(e.v)]) {
        dist[static_cast<std::size_t>(e.v)] = dist[static_cast<std::size_t>(e.u)] + e.w;
        changed = true;
      }
    if (!changed) return true;
  }
  return false;  // still relaxing after |V| rounds: a negative cycle
}

/// The largest number of internal edges (of the allowed kinds) over all orders and subsets.
int brute_force_max_internal(const pl::CvDurations& d, pl::EdgeFilter filter) {
  const int n = d.n();
  std::vector<int> co(static_cast<std::size_t>(n)), vo(static_cast<std::size_t>(n));
  std::iota(co.begin(), co.end(), 1);
  int best = 0;
  do {
    std::iota(vo.begin(), vo.end(), 1);
    do {
      for (unsigned subset = 0; subset < (1u << (2 * n - 1)); ++subset) {
        bool allowed = true;
        for (int e = 0; e < 2 * n - 1; ++e) {
          const bool cv = e % 2 == 0;
          if ((subset & (1u << e)) && ((filter == pl::EdgeFilter::cube_to_vector_only && !cv) ||
                                       (filter == pl::EdgeFilter::vector_to_cube_only && cv)))
            allowed = false;
        }
        const int size = __builtin_popcount(subset);
        if (!allowed || size <= best) continue;
        if (subset_feasible(d, co, vo, subset)) best = size;
      }
    } while (std::next_permutation(vo.begin(), vo.end()));
  } while (std::next_permutation(co.begin(), co.end()));
  return best;
}

/// Eq. 17 of Theorem B.1, transcribed literally: for all j in 1..n-1,
/// sum_{i=0}^{j-1} [V_{n-k-i}] <= sum_{i=0}^{j-1} [C_{n+1-k-i}], indices mod n.
bool eq17_literal(const pl::CvDurations& d, int k) {
  const int n = d.n();
  auto idx = [n](int i) { return static_cast<std::size_t>(((i - 1) % n + n) % n); };
  for (int j = 1; j <= n - 1; ++j) {
    std::int64_t sv = 0, sc = 0;
    for (int i = 0; i <= j - 1; ++i) {
      sv += d.vector[idx(n - k - i)].count;
      sc += d.cube[idx(n + 1 - k - i)].count;
    }
    if (sv > sc) return false;
  }
  return true;
}

/// Lemma B.2's adversarial durations, Cube-dominated: random C's, V_k = sum C - min C + 1 + extra
/// (so V_k + C_j > sum C for every j), the other V's sharing what is left of sum C.
pl::CvDurations adversarial_cube_dominated(std::mt19937_64& rng, int n, int k) {
  pl::CvDurations d;
  for (int i = 0; i < n; ++i)
    d.cube.push_back(Cycles{std::uniform_int_distribution<std::int64_t>(1, 12)(rng)});
  const std::int64_t sum_c = d.cube_total().count;
  std::int64_t min_c = sum_c;
  for (auto c : d.cube) min_c = std::min(min_c, c.count);
  const std::int64_t extra = std::uniform_int_distribution<std::int64_t>(0, min_c - 1)(rng);
  d.vector.assign(static_cast<std::size_t>(n), Cycles{0});
  d.vector[static_cast<std::size_t>(k - 1)] = Cycles{sum_c - min_c + 1 + extra};
  std::int64_t left = min_c - 1 - extra;  // sum V <= sum C
  for (int i = 0; i < n; ++i) {
    if (i == k - 1) continue;
    const std::int64_t x = std::uniform_int_distribution<std::int64_t>(0, left)(rng);
    d.vector[static_cast<std::size_t>(i)] = Cycles{x};
    left -= x;
  }
  return d;
}

/// The Vector-dominated mirror of the adversary: C_k + V_j > sum V for every j.
pl::CvDurations adversarial_vector_dominated(std::mt19937_64& rng, int n, int k) {
  pl::CvDurations c = adversarial_cube_dominated(rng, n, k);
  std::swap(c.cube, c.vector);
  return c;
}

bool all_positive(const pl::CvDurations& d) {
  for (auto* v : {&d.cube, &d.vector})
    for (auto x : *v)
      if (x <= Cycles{0}) return false;
  return true;
}

}  // namespace

TEST_CASE("validate_durations rejects malformed durations, naming the argument", "[sim][preload]") {
  CHECK_THROWS_WITH(pl::validate_durations(make({}, {})),
                    Catch::Contains("durations.cube.size()") && Catch::Contains("at least one"));
  CHECK_THROWS_WITH(pl::validate_durations(make({1, 2}, {1})),
                    Catch::Contains("durations.vector.size()"));
  CHECK_THROWS_WITH(
      pl::validate_durations(make({1, -3}, {1, 1})),
      Catch::Contains("durations.cube[i]") && Catch::Contains("-3") && Catch::Contains("i = 1"));
  CHECK_THROWS_WITH(pl::validate_durations(make({1}, {(std::int64_t{1} << 40) + 1})),
                    Catch::Contains("durations.vector[i]"));
  CHECK_THROWS_WITH(pl::validate_durations(make({0, 0}, {0, 0})),
                    Catch::Contains("at least one stage takes time"));
  CHECK_THROWS_AS(pl::validate_durations(make({}, {})), amla::invalid_argument);
  CHECK_NOTHROW(pl::validate_durations(make({0, 5}, {0, 0})));
  CHECK_THROWS_WITH(pl::chain_edge(2, 3), Catch::Contains("'e' = 3"));
}

TEST_CASE("chain edges alternate C->V and V->C in chain order", "[sim][preload]") {
  const int n = 3;
  for (int e = 0; e < 2 * n - 1; ++e) {
    const pl::Edge edge = pl::chain_edge(n, e);
    CHECK(edge.from.chain_position() == e);
    CHECK(edge.to.chain_position() == e + 1);
    CHECK((edge.kind == pl::EdgeKind::cube_to_vector) == (e % 2 == 0));
  }
  CHECK(pl::chain_edge(n, 0).from.label() == "C1");
  CHECK(pl::chain_edge(n, 3).from.label() == "V2");
  CHECK(pl::chain_edge(n, 3).to.label() == "C3");
  CHECK(pl::chain_edge(n, 4).to.label() == "V3");
}

TEST_CASE("check_arrangement says why a Cycle does not fit", "[sim][preload]") {
  const auto d = make({4, 2}, {3, 0});
  pl::TimedCycle a{Cycles{6}, {Cycles{0}, Cycles{4}}, {Cycles{1}, Cycles{6}}};
  CHECK(pl::check_arrangement(d, a).ok);

  auto short_period = a;
  short_period.period = Cycles{5};
  const auto v1 = pl::check_arrangement(d, short_period);
  CHECK_FALSE(v1.ok);
  CHECK_THAT(v1.reason, Catch::Contains("period 5") && Catch::Contains("max(sum C, sum V) = 6"));

  auto outside = a;
  outside.vector_offset[0] = Cycles{4};  // [4, 7) leaves [0, 6)
  const auto v2 = pl::check_arrangement(d, outside);
  CHECK_FALSE(v2.ok);
  CHECK_THAT(v2.reason, Catch::Contains("V1 [4, 7)") && Catch::Contains("window"));

  auto overlap = a;
  overlap.cube_offset[1] = Cycles{3};  // C2 [3, 5) overlaps C1 [0, 4)
  overlap.period = Cycles{8};
  const auto v3 = pl::check_arrangement(d, overlap);
  CHECK_FALSE(v3.ok);
  CHECK_THAT(v3.reason, Catch::Contains("C2 [3, 5) overlaps C1 [0, 4) on the Cube"));

  auto zero_inside = a;
  zero_inside.vector_offset[1] = Cycles{2};  // zero-length V2 inside V1 [1, 4)
  const auto v4 = pl::check_arrangement(d, zero_inside);
  CHECK_FALSE(v4.ok);
  CHECK_THAT(v4.reason, Catch::Contains("V2 [2, 2) overlaps V1"));

  auto zero_at_boundary = a;
  zero_at_boundary.vector_offset[1] = Cycles{4};  // at V1's end: fine
  CHECK(pl::check_arrangement(d, zero_at_boundary).ok);

  auto wrong_size = a;
  wrong_size.cube_offset.pop_back();
  CHECK_THROWS_WITH(pl::check_arrangement(d, wrong_size),
                    Catch::Contains("arrangement.cube_offset.size()"));
  CHECK_THROWS_WITH(pl::analyze(d, overlap), Catch::Contains("a valid Cycle: C2"));

  // Offsets and periods near int64's end come back as reasons, never as an overflow.
  auto far = a;
  far.vector_offset[0] = Cycles{INT64_MAX - 1};
  const auto v5 = pl::check_arrangement(d, far);
  CHECK_FALSE(v5.ok);
  CHECK(v5.reason == "V1 starts at 9223372036854775806, outside the Cycle window [0, 6)");
  auto negative = a;
  negative.cube_offset[1] = Cycles{INT64_MIN};
  CHECK_FALSE(pl::check_arrangement(d, negative).ok);
  auto endless = a;
  endless.period = Cycles{INT64_MAX};
  endless.vector_offset[0] = Cycles{INT64_MAX - 1};
  const auto v6 = pl::check_arrangement(d, endless);
  CHECK_FALSE(v6.ok);
  CHECK(v6.reason == "period 9223372036854775807 is longer than max_period_cycles = 2^50");
  auto longest = a;
  longest.period = Cycles{pl::max_period_cycles};
  CHECK(pl::check_arrangement(d, longest).ok);
}

TEST_CASE("Lemma B.1 on the paper's Figures 5, 6 and 7 (hand-derived)", "[sim][preload]") {
  auto preload_multiset = [](const pl::CvDurations& d, const pl::TimedCycle& a, Phase ph) {
    auto seq = pl::phase_sequence(pl::pipeline_schedule(d, a, 8), ph);
    std::vector<std::string> labels;
    for (const auto& s : seq) labels.push_back(s.label());
    std::sort(labels.begin(), labels.end());
    return labels;
  };
  using V = std::vector<std::string>;
  const auto d = make({2, 2}, {1, 1});
  // What Lemma B.1 derives for arrangement `a` of `dd`: the internal edges, the preload count,
  // the preload stage count and the stages of the preload phase.
  const auto lemma = [&](const pl::CvDurations& dd, const pl::TimedCycle& a,
                         const std::vector<bool>& internal, int count, int stages,
                         const V& preloaded) {
    const auto r = pl::analyze(dd, a);
    CHECK(r.internal == internal);
    CHECK(r.preload_count == count);
    CHECK(r.preload_stage_count == stages);
    CHECK(preload_multiset(dd, a, Phase::preload) == preloaded);
    return r;
  };

  SECTION("Figure 5: no internal edge, preload count 2n - 1 = 3, six blocks preloaded") {
    // Cube [C2, C1], Vector [V2, V1]: C2 [0,2) C1 [2,4) V2 [0,1) V1 [1,2).
    const auto r = lemma(d, {Cycles{4}, {Cycles{2}, Cycles{0}}, {Cycles{1}, Cycles{0}}},
                         {false, false, false}, 3, 6, V{"C1", "C1", "C1", "C2", "V1", "V1"});
    CHECK(r.internal_edges == 0);
    CHECK(r.lag == std::vector<int>{3, 2, 1, 0});
  }
  SECTION("Figure 6a: C1 -> V1 internal saves one C1: count 2, five blocks") {
    // Cube [C1, C2]: C1 [0,2) C2 [2,4); V1 [2,3) after C1, V2 [3,4) before C2 ends.
    lemma(d, {Cycles{4}, {Cycles{0}, Cycles{2}}, {Cycles{2}, Cycles{3}}}, {true, false, false}, 2,
          5, V{"C1", "C1", "C2", "V1", "V1"});
  }
  SECTION("Figure 6b, reading 1: only C2 -> V2 internal: three blocks fewer than Figure 5") {
    // Cube [C2, C1]: C2 [0,2) C1 [2,4); V2 [2,3) after C2, V1 [3,4). 6 - 3 preloaded stages:
    // C1, V1 and C2 gone.
    lemma(d, {Cycles{4}, {Cycles{2}, Cycles{0}}, {Cycles{3}, Cycles{2}}}, {false, false, true}, 2,
          3, V{"C1", "C1", "V1"});
  }
  SECTION("Figure 6b, reading 2: C1 -> V1 and C2 -> V2 internal: three blocks fewer than 6a") {
    // Needs a zero-length V2 (proved impossible otherwise in a test below). 5 - 3 preloaded
    // stages: C1, V1 and C2 gone.
    lemma(make({2, 2}, {1, 0}), {Cycles{4}, {Cycles{0}, Cycles{2}}, {Cycles{2}, Cycles{4}}},
          {true, false, true}, 1, 2, V{"C1", "V1"});
  }
  SECTION("Figure 7 (AMLA): Cycle [C1, C2, V1], V2 = 0: preload [C1, C1, V1], drain C2, C2, V1") {
    // C1 [0,9) C2 [9,17); V1 [0,12) straddles the C1/C2 boundary: neither C1 -> V1 nor
    // V1 -> C2 is internal; the zero-length V2 at 17 follows C2.
    const auto amla = make({9, 8}, {12, 0});
    const pl::TimedCycle a{Cycles{17}, {Cycles{0}, Cycles{9}}, {Cycles{0}, Cycles{17}}};
    const auto r = pl::analyze(amla, a);
    CHECK(r.internal == std::vector<bool>{false, false, true});
    CHECK(r.preload_count == 2);
    const auto s = pl::pipeline_schedule(amla, a, 6);
    CHECK(show(pl::phase_sequence(s, Phase::preload)) == "C1,C1,V1");
    auto drain = pl::phase_sequence(s, Phase::drain);
    drain.erase(std::remove_if(drain.begin(), drain.end(),
                               [](const pl::Stage& x) { return x.label() == "V2"; }),
                drain.end());
    std::vector<std::string> drained;
    for (const auto& x : drain) drained.push_back(x.label());
    std::sort(drained.begin(), drained.end());
    CHECK(drained == V{"C2", "C2", "V1"});
    CHECK(s.preload_cycles == 2);
    CHECK(s.steady_cycles == 4);
    CHECK(s.drain_cycles == 2);
  }
}

TEST_CASE("Lemma B.1: the preload count is the fewest C1 a valid periodic schedule preloads",
          "[sim][preload]") {
  // For random valid Cycles (periods at or above the minimum), try every lag vector with steps
  // 0/1 along the chain, build the slot schedule and check it independently. The smallest
  // lag(C_1) that works must be (2n - 1) - s, and a lag vector must work exactly when each step
  // of 0 is on an internal edge.
  std::mt19937_64 rng(20250101);
  int consecutive_seen = 0;
  for (int trial = 0; trial < 600 / kScale; ++trial) {
    const int n = 1 + trial % 3;
    const auto d = random_durations(rng, n);
    const auto a = random_arrangement(rng, d, trial % 2 == 0 ? 0 : trial % 7);
    REQUIRE(pl::check_arrangement(d, a).ok);
    const auto r = pl::analyze(d, a);
    INFO(show(d) << " trial " << trial);
    int best = 1 << 20;
    for (unsigned steps = 0; steps < (1u << (2 * n - 1)); ++steps) {
      std::vector<int> lag(static_cast<std::size_t>(2 * n), 0);
      bool zero_steps_internal = true;
      for (int p = 2 * n - 2; p >= 0; --p) {
        const int step = (steps >> p) & 1u;
        lag[static_cast<std::size_t>(p)] = lag[static_cast<std::size_t>(p + 1)] + step;
        if (step == 0 && !r.internal[static_cast<std::size_t>(p)]) zero_steps_internal = false;
      }
      const auto s = pl::pipeline_schedule_with_lags(d, a, lag, 2 * n + 2, pl::Timing::cycle_slots);
      const bool ok = s.ok && pl::verify_schedule(d, s).ok;
      CHECK(ok == zero_steps_internal);
      if (ok) best = std::min(best, lag[0]);
    }
    CHECK(best == r.preload_count);
    CHECK(r.preload_count == 2 * n - 1 - r.internal_edges);
    // The other reading of "internal dependency chain" (a maximal run of internal edges) would
    // give (2n - 1) - runs, which is larger than the minimum whenever two internal edges touch.
    int runs = 0;
    for (int e = 0; e < 2 * n - 1; ++e)
      if (r.internal[static_cast<std::size_t>(e)] &&
          (e == 0 || !r.internal[static_cast<std::size_t>(e - 1)]))
        ++runs;
    if (runs < r.internal_edges) {
      ++consecutive_seen;
      CHECK(2 * n - 1 - runs > best);
    }
  }
  CHECK(consecutive_seen > 0);  // the sample did contain touching internal edges
}

namespace {
/// Calls check(d, theorem_b1_choice(d), n, trial) for `trials` duration sets make(rng, n) with
/// n = first_n + trial % n_span, from a generator seeded with `seed`; failures show d.
template <class Make, class Check>
void for_random_durations(std::uint64_t seed, int trials, int first_n, int n_span, Make make,
                          Check check) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const int n = first_n + trial % n_span;
    const auto d = make(rng, n);
    INFO(show(d));
    check(d, pl::theorem_b1_choice(d), n, trial);
  }
}
}  // namespace

TEST_CASE("Theorem B.1: the construction on thousands of random duration sets", "[sim][preload]") {
  int cube_dominated = 0, vector_dominated = 0;
  for_random_durations(
      4141, 4000 / kScale, 1, 12, random_durations,
      [&](const pl::CvDurations& d, const pl::PartialSumChoice& choice, int n, int trial) {
        const auto a = pl::theorem_b1_arrangement(d);
        (d.cube_dominated() ? cube_dominated : vector_dominated) += 1;

        // Timing constraints, checked by the independent checker: inside the window, no overlaps,
        // and the period is the stall-free max(sum C, sum V).
        const auto v = pl::check_arrangement(d, a);
        REQUIRE(v.ok);
        CHECK(a.period == std::max(d.cube_total(), d.vector_total()));

        // Preload count n (at most n with zero-length stages), all internal edges C_i -> V_i.
        const auto r = pl::analyze(d, a);
        CHECK(r.preload_count <= n);
        if (all_positive(d)) {
          CHECK(r.preload_count == n);
          for (int e = 1; e < 2 * n - 1; e += 2)
            CHECK_FALSE(r.internal[static_cast<std::size_t>(e)]);
        }
        int cv_internal = 0;
        for (int e = 0; e < 2 * n - 1; e += 2)
          cv_internal += r.internal[static_cast<std::size_t>(e)];
        CHECK(cv_internal >= n - 1);

        // The proof's bookkeeping: F(n) <= 0, m minimises F, Eq. 20 holds for m, and Eq. 17 (as
        // printed in the theorem) holds for k = n - m.
        CHECK(choice.F.back() <= Cycles{0});
        for (int l = 1; l <= n; ++l)
          CHECK(choice.F[static_cast<std::size_t>(choice.m)] <=
                choice.F[static_cast<std::size_t>(l)]);
        CHECK(pl::eq20_holds(choice.a, choice.m));
        if (d.cube_dominated()) CHECK(eq17_literal(d, n - choice.m == 0 ? n : n - choice.m));

        // Every stage of every block runs, in chain order, without unit conflicts; the steady state
        // has period P.
        if (trial % 4 == 0) {
          const int blocks = 1 + trial % 9;
          for (auto timing : {pl::Timing::asap, pl::Timing::cycle_slots}) {
            const auto s = pl::pipeline_schedule(d, a, blocks, timing);
            CHECK(s.ok);
            const auto ok = pl::verify_schedule(d, s);
            INFO(ok.reason);
            CHECK(ok.ok);
            CHECK(s.preload_cycles == r.preload_count);
            CHECK(s.steady_cycles == std::max(0, blocks - r.preload_count));
            CHECK(s.makespan <= a.period * (blocks + r.preload_count));
            CHECK(s.makespan >= d.period() * blocks);
          }
        }
      });
  CHECK(cube_dominated > 500 / kScale);
  CHECK(vector_dominated > 500 / kScale);
}

TEST_CASE("Theorem B.1: every minimiser of F works, and the layout for m works iff Eq. 20",
          "[sim][preload]") {
  int holds = 0, fails = 0;
  for_random_durations(
      99, 2000 / kScale, 2, 7, random_positive_durations,
      [&](const pl::CvDurations& d, const pl::PartialSumChoice& choice, int n, int) {
        for (int m = 1; m <= n; ++m) {
          const auto a = pl::rotation_arrangement(d, m);
          REQUIRE(pl::check_arrangement(d, a).ok);
          const bool eq20 = pl::eq20_holds(choice.a, m);
          const bool n_minus_1 = pl::analyze(d, a).internal_edges == n - 1;
          CHECK(eq20 == n_minus_1);
          (eq20 ? holds : fails) += 1;
          if (choice.F[static_cast<std::size_t>(m)] == choice.F[static_cast<std::size_t>(choice.m)])
            CHECK(eq20);
        }
      });
  CHECK(holds > 0);
  CHECK(fails > 0);  // the sample exercised both sides of the equivalence
}

TEST_CASE("Theorem B.1 for n = 3: one of the three Group-1 conditions of Appendix B.3 holds",
          "[sim][preload]") {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 2000 / kScale; ++trial) {
    auto d = random_positive_durations(rng, 3);
    if (!d.cube_dominated()) std::swap(d.cube, d.vector);
    const auto C = [&](int i) { return d.cube[static_cast<std::size_t>(i - 1)].count; };
    const auto V = [&](int i) { return d.vector[static_cast<std::size_t>(i - 1)].count; };
    const bool g1 = V(1) + V(2) <= C(2) + C(3) && V(2) <= C(3);
    const bool g2 = V(2) + V(3) <= C(3) + C(1) && V(3) <= C(1);
    const bool g3 = V(3) + V(1) <= C(1) + C(2) && V(1) <= C(2);
    INFO(show(d));
    CHECK((g1 || g2 || g3));
    // Each Group-1 condition is exactly "the rotation layout for m has two internal edges":
    // m = 2 is [C1][C2][C3], m = 3 is [C2][C3][C1], m = 1 is [C3][C1][C2].
    CHECK(g1 == (pl::analyze(d, pl::rotation_arrangement(d, 2)).internal_edges == 2));
    CHECK(g2 == (pl::analyze(d, pl::rotation_arrangement(d, 3)).internal_edges == 2));
    CHECK(g3 == (pl::analyze(d, pl::rotation_arrangement(d, 1)).internal_edges == 2));
  }
  const auto d = make({1, 2, 3}, {1, 1, 1});
  CHECK(pl::unit_orders(d, pl::rotation_arrangement(d, 2)).first == std::vector<int>{1, 2, 3});
  CHECK(pl::unit_orders(d, pl::rotation_arrangement(d, 3)).first == std::vector<int>{2, 3, 1});
  CHECK(pl::unit_orders(d, pl::rotation_arrangement(d, 1)).first == std::vector<int>{3, 1, 2});
}

TEST_CASE("mirror_arrangement is an involution that keeps the internal edges", "[sim][preload]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 1000 / kScale; ++trial) {
    const int n = 1 + trial % 6;
    const auto d = random_durations(rng, n);
    const auto a = random_arrangement(rng, d, trial % 3);
    const auto md = pl::mirrored(d);
    const auto ma = pl::mirror_arrangement(md, a);  // an arrangement of md (mirror of a mirror)
    REQUIRE(pl::check_arrangement(md, ma).ok);
    const auto back = pl::mirror_arrangement(d, ma);
    CHECK(back.cube_offset == a.cube_offset);
    CHECK(back.vector_offset == a.vector_offset);
    const auto r = pl::analyze(d, a), mr = pl::analyze(md, ma);
    CHECK(r.preload_count == mr.preload_count);
    // C_i -> V_i (edge 2(i-1)) corresponds to C'_{n+1-i} -> V'_{n+1-i} (edge 2(n-i)), and
    // V_i -> C_{i+1} (edge 2i-1) to V'_{n-i} -> C'_{n+1-i} (edge 2(n-i)-1).
    for (int e = 0; e < 2 * n - 1; ++e)
      CHECK(r.internal[static_cast<std::size_t>(e)] ==
            mr.internal[static_cast<std::size_t>(2 * n - 2 - e)]);
  }
}

TEST_CASE("best_placement's dynamic programme matches a brute force over edge subsets",
          "[sim][preload]") {
  std::mt19937_64 rng(11);
  const int trials = 160 / kScale;
  for (int trial = 0; trial < trials; ++trial) {
    const int n = 1 + trial % 3;
    const auto d = random_durations(rng, n);
    INFO(show(d));
    for (auto filter : {pl::EdgeFilter::any, pl::EdgeFilter::cube_to_vector_only,
                        pl::EdgeFilter::vector_to_cube_only}) {
      const auto best = pl::exhaustive_optimum(d, filter);
      CHECK(best.internal_edges == brute_force_max_internal(d, filter));
      REQUIRE(pl::check_arrangement(d, best.arrangement).ok);
      CHECK(best.arrangement.period == d.period());
      if (filter == pl::EdgeFilter::any)
        CHECK(pl::preload_count(d, best.arrangement) == best.preload_count);
    }
  }
  // A few n = 4 cases (the brute force is 576 order pairs x 128 subsets each).
  for (int trial = 0; trial < 4 / kScale + 1; ++trial) {
    const auto d = random_durations(rng, 4);
    INFO(show(d));
    CHECK(pl::exhaustive_optimum(d).internal_edges ==
          brute_force_max_internal(d, pl::EdgeFilter::any));
  }
}

TEST_CASE("Theorem 4.1(2): preload count n is always reachable (exhaustive, n <= 5)",
          "[sim][preload]") {
  std::mt19937_64 rng(17);
  int below_n = 0;
  for (int n = 1; n <= 5; ++n) {
    const int trials = (n <= 3 ? 300 : n == 4 ? 60 : 12) / kScale + 1;
    for (int trial = 0; trial < trials; ++trial) {
      const auto d = random_durations(rng, n);
      INFO(show(d));
      const auto opt = pl::exhaustive_optimum(d);
      const int thm = pl::preload_count(d, pl::theorem_b1_arrangement(d));
      CHECK(opt.preload_count <= n);
      CHECK(opt.preload_count <= thm);
      CHECK(pl::exhaustive_optimum(d, pl::EdgeFilter::cube_to_vector_only).preload_count <= n);
      below_n += opt.preload_count < n;
    }
  }
  CHECK(below_n > 0);  // easier durations do better than the guarantee
}

TEST_CASE("Lemma B.2 / Theorem 4.1(1): the adversarial durations force preload count n",
          "[sim][preload]") {
  std::mt19937_64 rng(23);
  for (int n = 1; n <= 5; ++n) {
    for (int k = 1; k <= n; ++k) {
      const int reps = (n <= 3 ? 20 : n == 4 ? 3 : 1);
      for (int rep = 0; rep < std::max(1, reps / kScale); ++rep) {
        for (int side = 0; side < 2; ++side) {
          const auto d = side == 0 ? adversarial_cube_dominated(rng, n, k)
                                   : adversarial_vector_dominated(rng, n, k);
          INFO(show(d) << " k = " << k << (side == 0 ? " (V_k long)" : " (C_k long)"));
          // The lemma's hypothesis, Eq. 16 (or its mirror), holds.
          const auto& big = side == 0 ? d.vector : d.cube;
          const auto& other = side == 0 ? d.cube : d.vector;
          const auto other_total = side == 0 ? d.cube_total() : d.vector_total();
          for (auto x : other) REQUIRE(big[static_cast<std::size_t>(k - 1)] + x > other_total);
          REQUIRE((side == 0 ? d.cube_dominated() : d.vector_total() >= d.cube_total()));
          const auto opt = pl::exhaustive_optimum(d);
          CHECK(opt.preload_count == n);  // n - 1 is out of reach, n is reached
          CHECK(pl::preload_count(d, pl::theorem_b1_arrangement(d)) == n);
        }
      }
    }
  }
}

TEST_CASE("Theorem 4.1(2)'s two readings: C->V edges suffice, V->C edges do not",
          "[sim][preload]") {
  // The theorem says the intra-Cycle dependencies are "[V] -> [C]"; its proof builds C_i -> V_i.
  std::mt19937_64 rng(29);
  int vc_failures = 0;
  for (int n = 2; n <= 4; ++n) {
    for (int rep = 0; rep < 6 / kScale + 1; ++rep) {
      // V_k long with k < n: no V_k -> C_{k+1}, so V->C edges alone give fewer than n - 1.
      const int k = 1 + rep % (n - 1);
      const auto d = adversarial_cube_dominated(rng, n, k);
      INFO(show(d) << " k = " << k);
      const auto cv = pl::exhaustive_optimum(d, pl::EdgeFilter::cube_to_vector_only);
      const auto vc = pl::exhaustive_optimum(d, pl::EdgeFilter::vector_to_cube_only);
      CHECK(cv.preload_count == n);
      CHECK(vc.preload_count > n);
      vc_failures += vc.preload_count > n;
      // Mirror: C_k long with k >= 2: no V_{k-1} -> C_k.
      const auto dm = adversarial_vector_dominated(rng, n, k + 1);
      CHECK(pl::exhaustive_optimum(dm, pl::EdgeFilter::cube_to_vector_only).preload_count == n);
      CHECK(pl::exhaustive_optimum(dm, pl::EdgeFilter::vector_to_cube_only).preload_count > n);
    }
  }
  CHECK(vc_failures > 0);
  // The smallest counterexample, by hand: C = (1, 1), V = (3/2, 1/2) in half-cycles.
  const auto d = make({2, 2}, {3, 1});
  CHECK(pl::exhaustive_optimum(d, pl::EdgeFilter::vector_to_cube_only).preload_count == 3);
  CHECK(pl::exhaustive_optimum(d).preload_count == 2);
}

TEST_CASE("Figure 6b: two C->V edges of n = 2 need a zero-length V2", "[sim][preload]") {
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 400 / kScale; ++trial) {
    const auto d = random_positive_durations(rng, 2);
    INFO(show(d));
    CHECK(pl::exhaustive_optimum(d, pl::EdgeFilter::cube_to_vector_only).internal_edges == 1);
  }
  // AMLA's V2 = 0 with V1 <= C2: both internal, preload count 1.
  const auto amla = make({9, 8}, {6, 0});
  const auto best = pl::exhaustive_optimum(amla, pl::EdgeFilter::cube_to_vector_only);
  CHECK(best.internal_edges == 2);
  CHECK(pl::exhaustive_optimum(amla).preload_count == 1);
  // With V1 > C2 it is back to the theorem's n = 2.
  CHECK(pl::exhaustive_optimum(make({9, 8}, {12, 0})).preload_count == 2);
}

TEST_CASE("AMLA's V2 = 0: n = 2 and the 3-stage chain C1 -> V1 -> C2 agree", "[sim][preload]") {
  // A zero-length V_n can always follow C_n, so the best arrangement makes C_n -> V_n internal
  // and the count equals the 3-stage chain's (2n - 2) - (internal edges among the first 2n - 2).
  std::mt19937_64 rng(37);
  for (int trial = 0; trial < 300 / kScale; ++trial) {
    const int n = 2 + trial % 2;
    auto d = random_positive_durations(rng, n);
    d.vector.back() = Cycles{0};
    INFO(show(d));
    const auto opt = pl::exhaustive_optimum(d);
    const auto r = pl::analyze(d, opt.arrangement);
    CHECK(r.internal.back());
    int first = 0;
    for (int e = 0; e < 2 * n - 2; ++e) first += r.internal[static_cast<std::size_t>(e)];
    CHECK(r.preload_count == (2 * n - 2) - first);
  }
}

TEST_CASE("pipeline_schedule: hand-computed AMLA makespans", "[sim][preload]") {
  // C = (9, 8), V = (12, 0), Figure 7's Cycle, T = 4 KV blocks; worked by hand:
  //  slots: Cycles 0..5 at 17 k; the last is C2[4] at 85 + 9 = 94..102.
  //  asap:  Cube C1[1] 0-9, C1[2] 9-18, C1[3] 18-27, C2[1] 27-35, C1[4] 35-44, C2[2] 44-52,
  //         C2[3] 52-60, C2[4] 60-68; Vector V1[1] 9-21, V1[2] 21-33, V1[3] 33-45, V1[4] 45-57;
  //         each zero-length V2[b] at C2[b]'s end. Makespan 68 = 4 * 17: Cube-bound.
  //  serial: 4 * (9 + 12 + 8 + 0) = 116.
  const auto d = make({9, 8}, {12, 0});
  const pl::TimedCycle a{Cycles{17}, {Cycles{0}, Cycles{9}}, {Cycles{0}, Cycles{17}}};
  const auto slots = pl::pipeline_schedule(d, a, 4, pl::Timing::cycle_slots);
  CHECK(slots.makespan == Cycles{102});
  CHECK(slots.cycle_start.size() == 6);
  CHECK(slots.cycle_start[3] == Cycles{51});
  const auto asap = pl::pipeline_schedule(d, a, 4, pl::Timing::asap);
  CHECK(asap.makespan == Cycles{68});
  auto find = [&](const std::string& stage, int block) {
    for (const auto& r : asap.runs)
      if (r.stage.label() == stage && r.block == block) return r;
    FAIL("missing run");
    return asap.runs.front();
  };
  CHECK(find("V1", 4).start == Cycles{45});
  CHECK(find("C2", 4).start == Cycles{60});
  CHECK(find("V2", 3).start == Cycles{60});
  CHECK(find("C2", 1).start == Cycles{27});
  CHECK(find("C1", 3).phase == Phase::steady);
  CHECK(find("C2", 3).phase == Phase::drain);
  CHECK(find("V1", 1).phase == Phase::preload);
  const auto serial = pl::serial_schedule(d, 4);
  CHECK(serial.makespan == Cycles{116});
  CHECK(pl::verify_schedule(d, serial).ok);
  CHECK(serial.runs.size() == 16);
}

TEST_CASE("pipeline_schedule with fewer blocks than the preload count", "[sim][preload]") {
  const auto d = make({2, 2, 2}, {1, 1, 1});
  // C3 [0,2) C2 [2,4) C1 [4,6); V3 [0,1) V1 [2,3) V2 [3,4): nothing internal, count 5.
  const pl::TimedCycle a{
      Cycles{6}, {Cycles{4}, Cycles{2}, Cycles{0}}, {Cycles{2}, Cycles{3}, Cycles{0}}};
  REQUIRE(pl::preload_count(d, a) == 5);
  for (int blocks = 1; blocks <= 7; ++blocks) {
    for (auto timing : {pl::Timing::asap, pl::Timing::cycle_slots}) {
      const auto s = pl::pipeline_schedule(d, a, blocks, timing);
      CHECK(pl::verify_schedule(d, s).ok);
      CHECK(s.preload_cycles + s.steady_cycles + s.drain_cycles == blocks + 5);
      CHECK(s.steady_cycles == std::max(0, blocks - 5));
    }
  }
}

TEST_CASE("lags below Lemma B.1's are reported, naming the tasks", "[sim][preload]") {
  const auto d = make({2, 2}, {1, 1});
  // Cube [C2, C1], Vector [V2, V1], nothing internal (Figure 5); claim C1 -> V1 internal.
  const pl::TimedCycle a{Cycles{4}, {Cycles{2}, Cycles{0}}, {Cycles{1}, Cycles{0}}};
  const std::vector<int> too_small{2, 2, 1, 0};
  const auto slots = pl::pipeline_schedule_with_lags(d, a, too_small, 4, pl::Timing::cycle_slots);
  CHECK_FALSE(slots.ok);
  CHECK_THAT(slots.reason, Catch::Contains("V1[1]") && Catch::Contains("before its input C1[1]"));
  // Under asap the Vector runs V1[1] late instead, which is legal but stalls; claim everything
  // internal and order the Cube against the chain to get a true deadlock.
  const auto none = pl::pipeline_schedule_with_lags(d, a, {0, 0, 0, 0}, 3, pl::Timing::asap);
  CHECK_FALSE(none.ok);
  CHECK_THAT(none.reason, Catch::Contains("deadlock") && Catch::Contains("C2[1]"));
  CHECK_THROWS_WITH(pl::pipeline_schedule_with_lags(d, a, {1, 2, 1, 0}, 3),
                    Catch::Contains("non-increasing"));
  CHECK_THROWS_WITH(pl::pipeline_schedule_with_lags(d, a, {3, 2, 1, 1}, 3),
                    Catch::Contains("V_n has lag 0"));
  CHECK_THROWS_WITH(pl::pipeline_schedule(d, a, 0), Catch::Contains("'blocks' = 0"));
  // Schedules that would overflow 64-bit cycle counts are refused.
  std::vector<std::int64_t> big(1000, std::int64_t{1} << 40);
  const auto huge = make(big, big);
  CHECK_THROWS_WITH(pl::pipeline_schedule(huge, pl::theorem_b1_arrangement(huge), 9000),
                    Catch::Contains("< 2^62 cycles"));
  CHECK_THROWS_WITH(pl::serial_schedule(huge, 9000), Catch::Contains("< 2^62 cycles"));
}

TEST_CASE("search arguments are validated", "[sim][preload]") {
  const auto d = make({1, 2}, {1, 1});
  CHECK_THROWS_WITH(pl::best_placement(d, {1, 1}, {1, 2}),
                    Catch::Contains("cube_order") && Catch::Contains("each index once"));
  CHECK_THROWS_WITH(pl::best_placement(d, {1, 2}, {1, 2, 3}), Catch::Contains("vector_order"));
  CHECK_THROWS_WITH(pl::exhaustive_optimum(make({1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1})),
                    Catch::Contains("max_exhaustive_pairs"));
  CHECK_THROWS_WITH(pl::rotation_arrangement(d, 3), Catch::Contains("'m' = 3"));
  CHECK_THROWS_WITH(pl::eq20_holds({Cycles{1}}, 0), Catch::Contains("'m' = 0"));
}

TEST_CASE("to_timeline: two lanes, one interval per non-empty run", "[sim][preload]") {
  const auto d = make({9, 8}, {12, 0});
  const auto a = pl::theorem_b1_arrangement(d);
  const auto s = pl::pipeline_schedule(d, a, 5);
  const auto t = pl::to_timeline(s, "amla", amla::sim::Hertz{1.8e9});
  REQUIRE(t.lanes.size() == 2);
  CHECK(t.lanes[0].name == "Cube");
  CHECK(t.lanes[1].name == "Vector");
  CHECK(t.lanes[0].intervals.size() == 10);  // C1, C2 for 5 blocks
  CHECK(t.lanes[1].intervals.size() == 5);   // V1; the zero-length V2 left out
  CHECK(pl::to_timeline(s, "amla", amla::sim::Hertz{0}, true).lanes[1].intervals.size() == 10);
  CHECK(t.makespan() == s.makespan);
  for (const auto& lane : t.lanes)
    for (const auto& iv : lane.intervals) {
      CHECK(iv.name.rfind(iv.category + "[", 0) == 0);
      CHECK(iv.phase != Phase::none);
    }
}

TEST_CASE("the theory's arrangements run in the simulator's one scheduler", "[sim][preload]") {
  using amla::sim::Arrangement;
  using amla::sim::StageChain;
  // AMLA's chain C1 -> V1 -> C2 is the theory's n = 2 with a zero-length V_2.
  const auto amla_chain = StageChain::amla(Cycles{10}, Cycles{6}, Cycles{8}, Cycles{3});
  const pl::CvDurations d = pl::durations_of(amla_chain);
  CHECK(d.cube == std::vector<Cycles>{Cycles{10}, Cycles{8}});
  CHECK(d.vector == std::vector<Cycles>{Cycles{6}, Cycles{0}});
  CHECK(pl::theorem_b1_arrangement(amla_chain) == Arrangement{{{2, 0}, {0, 2}}, {{1, 1}}});
  // A timed Cycle with nothing internal but C2 -> V2 (C1 [0, 10), C2 [10, 18), V1 [5, 11)
  // straddling both, V2 at 18) is Figure 7's arrangement, the simulator's default.
  const pl::TimedCycle fig7{Cycles{18}, {Cycles{0}, Cycles{10}}, {Cycles{5}, Cycles{18}}};
  CHECK(pl::chain_arrangement(amla_chain, fig7) == amla::sim::preload_arrangement(amla_chain));

  // Base, C = (4, 4), V = (2, 2), last V 3, no hand-over cost, 3 blocks. Theorem B.1: a = (-2,
  // -2), m = 2: Cube C2 [0, 4), C1 [4, 8); V1 at 0, V2 [6, 8): only C2 -> V2 internal, lags C1 2,
  // V1 1, C2 0, V2 0, i.e. cube [C2(k), C1(k+2)], vector [V1(k+1), V2(k)] (preload count 2);
  // Figure 5's arrangement has count 3.
  const auto base = StageChain::base(Cycles{4}, Cycles{2}, Cycles{4}, Cycles{2}, Cycles{3});
  const Arrangement b1 = pl::theorem_b1_arrangement(base);
  const Arrangement fig5 = amla::sim::preload_arrangement(base);
  CHECK(b1 == Arrangement{{{2, 0}, {0, 2}}, {{1, 1}, {3, 0}}});
  CHECK(b1.lead() == 2);
  CHECK(fig5.lead() == 3);
  CHECK(pl::optimum_arrangement(base).lead() == 2);
  // By hand. Figure 5: Cube C1[0..2] 0-12, C2[0] 12-16, C2[1] 16-20, C2[2] 20-24; Vector V1[0]
  // 4-6, V1[1] 8-10, V1[2] 12-14, V2[0] 16-18, V2[1] 20-22, V2[2] 24-26, last V 26-29.
  // Theorem B.1: Cube C1[0] 0-4, C1[1] 4-8, C2[0] 8-12, C1[2] 12-16, C2[1] 16-20, C2[2] 20-24;
  // Vector V1[0] 4-6, V1[1] 8-10, V2[0] 12-14, V1[2] 16-18, V2[1] 20-22, V2[2] 24-26, last V
  // 26-29. Both end at 29 (the Cube is busy 24 of it either way).
  const auto r5 = amla::sim::simulate_schedule(base, amla::sim::cyclic_schedule(base, 3, fig5));
  const auto rb = amla::sim::simulate_schedule(base, amla::sim::cyclic_schedule(base, 3, b1));
  REQUIRE(r5.ok);
  REQUIRE(rb.ok);
  CHECK(r5.makespan == Cycles{29});
  CHECK(rb.makespan == Cycles{29});
  CHECK(r5.at({2, 0}).start == Cycles{12});
  CHECK(rb.at({2, 0}).start == Cycles{8});
  CHECK(r5.at({3, 0}).start == Cycles{16});
  CHECK(rb.at({3, 0}).start == Cycles{12});
  CHECK(rb.at({0, 2}).start == Cycles{12});
  CHECK(rb.at({1, 2}).start == Cycles{16});

  // A chain the theory does not describe is refused, naming the stage.
  StageChain cc;
  cc.stages = {{"C1", amla::sim::UnitKind::cube, Cycles{1}, false},
               {"C2", amla::sim::UnitKind::cube, Cycles{1}, false}};
  CHECK_THROWS_WITH(pl::durations_of(cc), Catch::Contains("C2 at position 1") &&
                                              Catch::Contains("must be a Vector stage"));
}
