// 03_preload_explorer: the Preload Pipeline of AMLA Section 4.1 / Appendix B for any n CV pairs.
//
// Give the durations of C_1..C_n (Cube) and V_1..V_n (Vector) of one KV block; the explorer
// prints Theorem B.1's partial sums, the preload count of several arrangements (nothing internal
// as in Figure 5, the natural order, Theorem B.1's construction, the exhaustive optimum, your own
// order), the chosen Cycle stage by stage, what the Preload and Drain phases run, and the
// pipeline's time for T KV blocks against the serial Base order. It writes a Gantt chart (SVG)
// and a Chrome trace (open in https://ui.perfetto.dev) to the current directory.
//
//   example_03_preload_explorer --cube 4,3,5 --vector 2,6,1 --blocks 8
//   example_03_preload_explorer --demo
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "amla/sim/preload_theory.hpp"
#include "amla/sim/trace.hpp"

namespace {

namespace pl = amla::sim::preload;
using amla::sim::Cycles;
using amla::sim::Hertz;
using amla::sim::Phase;

constexpr const char* kUsage =
    R"(Preload explorer: AMLA's Preload Pipeline (Section 4.1, Appendix B) for n CV pairs.

Usage:
  example_03_preload_explorer --cube C1,C2,...,Cn --vector V1,V2,...,Vn [options]
  example_03_preload_explorer --demo
  example_03_preload_explorer --help

Each KV block runs the chain C1 -> V1 -> C2 -> V2 -> ... -> Cn -> Vn, the C's on the Cube, the
V's on the Vector. A steady Cycle runs every stage once (on different blocks) in a window of
P = max(sum C, sum V) cycles; the preload count is the number of C1 stages that must run before
the first Cycle: (2n - 1) - (number of dependencies met inside the Cycle) (Lemma B.1).

Options:
  --cube LIST          durations of C1..Cn in cycles: non-negative integers, comma-separated
  --vector LIST        durations of V1..Vn in cycles (as many as --cube; zeros allowed, e.g.
                       AMLA's V2 = 0; not all durations zero)
  --blocks T           KV blocks to run through the pipeline, 1..100000 (default 8)
  --timing MODE        asap: each unit starts a stage as soon as its input is ready (default);
                       slots: every stage at its place in the Cycle, Cycle k at k * P
  --cube-order LIST    also evaluate your own Cycle order, a permutation of 1..n for the Cube ...
  --vector-order LIST  ... and one for the Vector (both needed; placed as well as possible)
  --draw WHICH         arrangement to draw: optimum (default; theorem when n > 6), theorem,
                       natural, user
  --clock-ghz F        clock for microsecond times, 0 <= F <= 10 (default 1.8, Ascend 910;
                       0: cycles only)
  --out NAME           output stem: NAME.svg and NAME.trace.json (default preload_explorer)
  --demo               the paper's AMLA case (C1, V1, C2, V2 = 0) and a Lemma B.2 adversarial
                       case, writing preload_amla.* and preload_adversarial.*
  --help               this text

Example:
  example_03_preload_explorer --cube 4,3,5 --vector 2,6,1 --blocks 8
)";

struct UsageError {
  std::string message;
};

struct Options {
  pl::CvDurations durations;
  int blocks = 8;
  pl::Timing timing = pl::Timing::asap;
  std::vector<int> cube_order, vector_order;
  std::string draw = "optimum";
  double clock_ghz = 1.8;
  std::string out = "preload_explorer";
  std::string title;
  std::string user_label = "your order";  ///< what the --cube-order/--vector-order Cycle is called
};

std::vector<std::int64_t> parse_list(const std::string& option, const std::string& text,
                                     std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> values;
  std::stringstream ss(text);
  std::string item;
  if (text.empty()) throw UsageError{option + " needs a comma-separated list, got an empty one"};
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
      throw UsageError{option + ": '" + item + "' is not an integer in [" + std::to_string(lo) +
                       ", " + std::to_string(hi) + "]"};
    values.push_back(v);
  }
  if (!text.empty() && text.back() == ',')
    throw UsageError{option + ": trailing comma in '" + text + "'"};
  return values;
}

std::int64_t parse_int(const std::string& option, const std::string& text, std::int64_t lo,
                       std::int64_t hi) {
  const auto v = parse_list(option, text, lo, hi);
  if (v.size() != 1) throw UsageError{option + " takes one integer, got '" + text + "'"};
  return v[0];
}

std::string stage_list(const std::vector<pl::Stage>& stages, bool drop_zero,
                       const pl::CvDurations& d) {
  std::string s = "[";
  for (const auto& st : stages) {
    if (drop_zero && d.of(st) == Cycles{0}) continue;
    if (s.size() > 1) s += ", ";
    s += st.label();
  }
  return s + "]";
}

std::string order_text(const std::vector<int>& order, char unit) {
  std::string s;
  for (int i : order) {
    if (!s.empty()) s += ' ';
    s += unit + std::to_string(i);
  }
  return s;
}

std::string internal_text(const pl::CvDurations& d, const pl::PreloadAnalysis& r) {
  std::string s;
  for (int e = 0; e < 2 * d.n() - 1; ++e) {
    if (!r.internal[static_cast<std::size_t>(e)]) continue;
    const auto edge = pl::chain_edge(d.n(), e);
    if (!s.empty()) s += ", ";
    s += edge.from.label() + "->" + edge.to.label();
  }
  return s.empty() ? "none" : s;
}

struct Candidate {
  std::string name;
  pl::TimedCycle arrangement;
};

void print_durations(const pl::CvDurations& d) {
  std::printf("  stage   ");
  for (int p = 0; p < 2 * d.n(); ++p)
    std::printf("%9s", pl::Stage::at_chain_position(p).label().c_str());
  std::printf("\n  cycles  ");
  for (int p = 0; p < 2 * d.n(); ++p)
    std::printf("%9lld", static_cast<long long>(d.of(pl::Stage::at_chain_position(p)).count));
  std::printf("\n  sum C = %lld, sum V = %lld: %s, stall-free Cycle P = %lld cycles\n",
              static_cast<long long>(d.cube_total().count),
              static_cast<long long>(d.vector_total().count),
              d.cube_total() == d.vector_total() ? "balanced"
              : d.cube_dominated()               ? "Cube-dominated"
                                                 : "Vector-dominated",
              static_cast<long long>(d.period().count));
}

void print_partial_sums(const pl::CvDurations& d) {
  const auto c = pl::theorem_b1_choice(d);
  std::printf("\nTheorem B.1 (minimum partial sum), %s:\n",
              c.cube_dominated ? "a_i = V_i - C_{i+1} (C_{n+1} = C_1)"
                               : "mirrored, a'_i = C_{n+1-i} - V_{n-i} (V_0 = V_n)");
  std::printf("  %4s %10s %10s\n", "i", "a_i", "F(i)");
  for (int i = 1; i <= d.n(); ++i)
    std::printf("  %4d %10lld %10lld%s\n", i,
                static_cast<long long>(c.a[static_cast<std::size_t>(i - 1)].count),
                static_cast<long long>(c.F[static_cast<std::size_t>(i)].count),
                i == c.m ? "   <- minimum: m" : "");
  std::string holds;
  for (int m = 1; m <= d.n(); ++m)
    if (pl::eq20_holds(c.a, m)) {
      if (!holds.empty()) holds += ", ";
      holds += std::to_string(m);
    }
  std::printf(
      "  Eq. 20 holds for m in {%s}; the layout for m = %d has n - 1 = %d internal "
      "C->V edges\n",
      holds.c_str(), c.m, d.n() - 1);
}

/// Runs the whole exploration for one set of durations; returns the process exit code.
int explore(const Options& o) {
  const pl::CvDurations& d = o.durations;
  pl::validate_durations(d);
  const int n = d.n();
  std::printf("== %s: n = %d CV pairs ==\n", o.title.c_str(), n);
  print_durations(d);
  print_partial_sums(d);

  // The candidate arrangements.
  std::vector<Candidate> cands;
  std::vector<int> natural(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) natural[static_cast<std::size_t>(i)] = i + 1;
  cands.push_back({"natural order", pl::best_placement(d, natural, natural).arrangement});
  cands.push_back({"Theorem B.1", pl::theorem_b1_arrangement(d)});
  std::optional<pl::Placement> optimum;
  if (n <= pl::max_exhaustive_pairs) {
    optimum = pl::exhaustive_optimum(d);
    cands.push_back({"exhaustive optimum", optimum->arrangement});
  }
  if (!o.cube_order.empty())
    cands.push_back(
        {o.user_label, pl::best_placement(d, o.cube_order, o.vector_order).arrangement});

  std::printf("\nArrangements (preload count = (2n - 1) - internal edges = %d - s):\n", 2 * n - 1);
  const int ow = std::max(14, 3 * n + 2);  // width of an order column
  std::printf("  %-22s %-*s %-*s %-6s %s\n", "arrangement", ow, "Cube order", ow, "Vector order",
              "count", "internal edges");
  std::printf("  %-22s %-*s %-*s %-6d %s\n", "nothing internal (F5)", ow, "any", ow, "any",
              2 * n - 1, "none");
  for (const auto& c : cands) {
    const auto r = pl::analyze(d, c.arrangement);
    const auto [co, vo] = pl::unit_orders(d, c.arrangement);
    std::printf("  %-22s %-*s %-*s %-6d %s\n", c.name.c_str(), ow, order_text(co, 'C').c_str(), ow,
                order_text(vo, 'V').c_str(), r.preload_count, internal_text(d, r).c_str());
  }
  if (optimum) {
    const auto vc = pl::exhaustive_optimum(d, pl::EdgeFilter::vector_to_cube_only);
    std::printf(
        "  Theorem 4.1: count %d is always reachable (n = %d); the best here is %d. With "
        "only V->C edges (the theorem's wording) the best is %d.\n",
        n, n, optimum->preload_count, vc.preload_count);
  } else {
    std::printf("  (exhaustive search skipped: n > %d)\n", pl::max_exhaustive_pairs);
  }

  // The arrangement to draw.
  std::string which = o.draw;
  if (which == "optimum" && !optimum) which = "theorem";
  if (which == "user" && o.cube_order.empty())
    throw UsageError{"--draw user needs --cube-order and --vector-order"};
  const std::string wanted = which == "optimum"   ? "exhaustive optimum"
                             : which == "theorem" ? "Theorem B.1"
                             : which == "natural" ? "natural order"
                                                  : o.user_label;
  const auto chosen = std::find_if(cands.begin(), cands.end(),
                                   [&](const Candidate& c) { return c.name == wanted; });
  const pl::TimedCycle& a = chosen->arrangement;
  const auto r = pl::analyze(d, a);
  std::printf("\nChosen Cycle: %s (P = %lld cycles), preload count %d:\n", wanted.c_str(),
              static_cast<long long>(a.period.count), r.preload_count);
  std::printf("  %-6s %-7s %9s %9s %5s  %s\n", "stage", "unit", "offset", "end", "lag", "input");
  for (int p = 0; p < 2 * n; ++p) {
    const auto st = pl::Stage::at_chain_position(p);
    std::string input = "-";
    if (p > 0)
      input = std::string(r.internal[static_cast<std::size_t>(p - 1)] ? "same Cycle"
                                                                      : "previous Cycle") +
              " (" + pl::Stage::at_chain_position(p - 1).label() + ")";
    std::printf("  %-6s %-7s %9lld %9lld %5d  %s\n", st.label().c_str(),
                st.unit == pl::Unit::cube ? "Cube" : "Vector",
                static_cast<long long>(a.offset(st).count),
                static_cast<long long>((a.offset(st) + d.of(st)).count),
                r.lag[static_cast<std::size_t>(p)], input.c_str());
  }

  const auto s = pl::pipeline_schedule(d, a, o.blocks, o.timing);
  std::printf("  Preload phase: %s (%d stages; zero-length ones not shown)\n",
              stage_list(pl::phase_sequence(s, Phase::preload), true, d).c_str(),
              r.preload_stage_count);
  std::printf("  Steady Cycle:  %s\n",
              [&] {
                const auto [co, vo] = pl::unit_orders(d, a);
                return "Cube " + order_text(co, 'C') + " | Vector " + order_text(vo, 'V');
              }()
                  .c_str());
  std::printf("  Drain phase:   %s\n",
              stage_list(pl::phase_sequence(s, Phase::drain), true, d).c_str());

  // Whole pipeline vs serial.
  const auto serial = pl::serial_schedule(d, o.blocks);
  const double hz = o.clock_ghz * 1e9;
  const Hertz clock{hz};
  auto row = [&](const char* name, Cycles makespan) {
    const double busy_c = static_cast<double>((d.cube_total() * o.blocks).count) /
                          static_cast<double>(makespan.count);
    const double busy_v = static_cast<double>((d.vector_total() * o.blocks).count) /
                          static_cast<double>(makespan.count);
    char us[32] = "-";
    if (hz > 0) std::snprintf(us, sizeof us, "%.3f", clock.to_seconds(makespan).us());
    std::printf("  %-30s %14lld %12s %9.1f%% %9.1f%%\n", name,
                static_cast<long long>(makespan.count), us, 100 * busy_c, 100 * busy_v);
  };
  std::printf("\nT = %d KV blocks (%s timing):\n", o.blocks,
              o.timing == pl::Timing::asap ? "asap" : "slot");
  std::printf("  %-30s %14s %12s %10s %10s\n", "schedule", "cycles", "us", "Cube busy",
              "Vector busy");
  row("serial Base (no pipeline)", serial.makespan);
  row("preload pipeline", s.makespan);
  row("bound T * P", d.period() * o.blocks);
  const auto check = pl::verify_schedule(d, s);
  if (!check) {
    std::fprintf(stderr, "internal error: the schedule fails its check: %s\n",
                 check.reason.c_str());
    return 1;
  }

  // Pictures.
  auto timeline = pl::to_timeline(
      s, o.title + ": " + wanted + ", preload count " + std::to_string(r.preload_count), clock);
  amla::sim::SvgGanttOptions svg;
  {
    std::ostringstream sub;
    sub << "C = (";
    for (int i = 0; i < n; ++i) sub << (i ? ", " : "") << d.cube[static_cast<std::size_t>(i)].count;
    sub << "), V = (";
    for (int i = 0; i < n; ++i)
      sub << (i ? ", " : "") << d.vector[static_cast<std::size_t>(i)].count;
    sub << ") cycles; P = " << a.period.count << "; T = " << o.blocks << " blocks, "
        << (o.timing == pl::Timing::asap ? "asap" : "slot") << " timing; makespan "
        << s.makespan.count << " cycles vs serial " << serial.makespan.count;
    svg.subtitle = sub.str();
  }
  const double cycles_shown = static_cast<double>(s.makespan.count);
  const bool label_markers =
      static_cast<double>(s.cycle_start.size()) * 48 < (svg.width_px - 150) && cycles_shown > 0;
  for (std::size_t k = 0; k < s.cycle_start.size(); ++k) {
    const Cycles at = o.timing == pl::Timing::cycle_slots ? a.period * static_cast<std::int64_t>(k)
                                                          : s.cycle_start[k];
    svg.markers.push_back({at, label_markers ? "Cycle " + std::to_string(k + 1) : ""});
  }
  const std::string svg_path = o.out + ".svg", json_path = o.out + ".trace.json";
  amla::sim::write_svg_gantt(svg_path, timeline, svg);
  amla::sim::write_chrome_trace(json_path, timeline);
  std::printf("\nwrote %s (Gantt chart) and %s (Chrome trace: open in ui.perfetto.dev)\n\n",
              svg_path.c_str(), json_path.c_str());
  return 0;
}

Options parse(int argc, char** argv, bool& demo, bool& help) {
  Options o;
  std::optional<std::vector<std::int64_t>> cube, vec;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{arg + " needs a value"};
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      help = true;
    } else if (arg == "--demo") {
      demo = true;
    } else if (arg == "--cube") {
      cube = parse_list(arg, value(), 0, pl::max_stage_cycles);
    } else if (arg == "--vector") {
      vec = parse_list(arg, value(), 0, pl::max_stage_cycles);
    } else if (arg == "--blocks") {
      o.blocks = static_cast<int>(parse_int(arg, value(), 1, 100000));
    } else if (arg == "--timing") {
      const std::string v = value();
      if (v == "asap")
        o.timing = pl::Timing::asap;
      else if (v == "slots")
        o.timing = pl::Timing::cycle_slots;
      else
        throw UsageError{"--timing must be asap or slots, got '" + v + "'"};
    } else if (arg == "--cube-order" || arg == "--vector-order") {
      std::vector<int> order;
      for (auto x : parse_list(arg, value(), 1, pl::max_pairs))
        order.push_back(static_cast<int>(x));
      (arg == "--cube-order" ? o.cube_order : o.vector_order) = order;
    } else if (arg == "--draw") {
      o.draw = value();
      if (o.draw != "optimum" && o.draw != "theorem" && o.draw != "natural" && o.draw != "user")
        throw UsageError{"--draw must be optimum, theorem, natural or user, got '" + o.draw + "'"};
    } else if (arg == "--clock-ghz") {
      const std::string v = value();
      char* end = nullptr;
      o.clock_ghz = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.clock_ghz >= 0 && o.clock_ghz <= 10))
        throw UsageError{"--clock-ghz must be a number in [0, 10], got '" + v + "'"};
    } else if (arg == "--out") {
      o.out = value();
      if (o.out.empty()) throw UsageError{"--out must not be empty"};
    } else {
      throw UsageError{"unknown option '" + arg + "'"};
    }
  }
  if (help || demo) return o;
  if (!cube || !vec) throw UsageError{"give both --cube and --vector (or --demo)"};
  if (cube->size() != vec->size())
    throw UsageError{"--cube has " + std::to_string(cube->size()) + " durations but --vector has " +
                     std::to_string(vec->size()) + "; they must match (one V per C)"};
  if (static_cast<int>(cube->size()) > pl::max_pairs)
    throw UsageError{"at most " + std::to_string(pl::max_pairs) + " CV pairs"};
  for (auto x : *cube) o.durations.cube.push_back(Cycles{x});
  for (auto x : *vec) o.durations.vector.push_back(Cycles{x});
  if (o.durations.period() == Cycles{0}) throw UsageError{"all durations are zero"};
  if (o.cube_order.empty() != o.vector_order.empty())
    throw UsageError{"give --cube-order and --vector-order together"};
  if (!o.cube_order.empty()) {
    for (const auto* order : {&o.cube_order, &o.vector_order}) {
      std::vector<int> sorted = *order;
      std::sort(sorted.begin(), sorted.end());
      for (std::size_t k = 0; k < sorted.size(); ++k)
        if (sorted.size() != cube->size() || sorted[k] != static_cast<int>(k + 1))
          throw UsageError{std::string(order == &o.cube_order ? "--cube-order" : "--vector-order") +
                           " must be a permutation of 1.." + std::to_string(cube->size())};
    }
  }
  o.title = "Preload explorer";
  return o;
}

int demo() {
  // AMLA (Section 4.1.3): n = 2 with V2 = 0. The Cube times are the per-KV-block matmuls at the
  // Cube's peak (16x16x16 BF16 MACs per cycle) for M = 256 rows (128 heads x S_q = 2):
  // C1 = 256*512*576/4096 = 18432 cycles, C2 = 256*512*512/4096 = 16384 cycles. The V1 time is
  // illustrative (not published): longer than C2, shorter than C1 + C2.
  Options amla_case;
  amla_case.durations.cube = {Cycles{18432}, Cycles{16384}};
  amla_case.durations.vector = {Cycles{24000}, Cycles{0}};
  amla_case.blocks = 6;
  amla_case.out = "preload_amla";
  amla_case.title = "AMLA (n = 2, V2 = 0)";
  // The paper's own Cycle [C1, C2, V1] (Figure 7): V1 straddles the C1/C2 boundary.
  amla_case.cube_order = {1, 2};
  amla_case.vector_order = {1, 2};
  amla_case.draw = "user";
  amla_case.user_label = "Figure 7 (paper)";
  int rc = explore(amla_case);
  {
    pl::CvDurations shorter = amla_case.durations;
    shorter.vector[0] = Cycles{16000};
    std::printf(
        "Note: with V1 = 16000 <= C2 the best count drops to %d: V1 can then run after C1 "
        "inside the same Cycle.\n\n",
        pl::exhaustive_optimum(shorter).preload_count);
  }
  // Lemma B.2: V2 + C_j > sum C for every j, so no Cube stage can end before V2 starts or start
  // after it ends; at most n - 1 dependencies fit in a Cycle and the count is n.
  Options adversarial;
  adversarial.durations.cube = {Cycles{4000}, Cycles{3000}, Cycles{5000}};
  adversarial.durations.vector = {Cycles{1000}, Cycles{10000}, Cycles{1000}};
  adversarial.blocks = 8;
  adversarial.out = "preload_adversarial";
  adversarial.title = "Lemma B.2 adversary (V2 + C_j > sum C)";
  rc = std::max(rc, explore(adversarial));
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bool demo_mode = false, help = false;
    Options o = parse(argc, argv, demo_mode, help);
    if (help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (demo_mode) return demo();
    return explore(o);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "error: %s\n(run with --help for the options)\n", e.message.c_str());
    return 2;
  } catch (const amla::invalid_argument& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
