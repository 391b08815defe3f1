// fuzz/fuzz_sim.cpp: libFuzzer target over the simulator's public entry points. The first byte
// picks one of them; the rest builds its input: the discrete-event engine (units, pools, links,
// operations, dependencies, huge and tiny work), stage schedules (chains, arrangements, blocks),
// the preload theory (durations, timed Cycles, pipelines), chips and tilings (every chip field
// edited to NaN, infinity, zero, huge or negative values) with a Cube stage, whole decode
// simulations on small chips, the trace writers, Cycles arithmetic, and warp-specialised Hopper
// kernels (GPU chips, schedules, tile schedulers, stage costs) on small GPUs.
//
// What the simulator promises, and this target checks: no input hangs, crashes or trips a
// sanitizer; malformed input is an amla::invalid_argument, misuse of an Engine's state a plain
// std::logic_error; a result that is not ok says why (a non-empty reason); an ok result has a
// non-negative makespan. Anything else (another exception, an empty reason) aborts, so libFuzzer
// reports it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include "amla/sim/calibration.hpp"
#include "amla/sim/chip.hpp"
#include "amla/sim/cube_stage.hpp"
#include "amla/sim/decode.hpp"
#include "amla/sim/engine.hpp"
#include "amla/sim/gpu_chip.hpp"
#include "amla/sim/hopper_decode.hpp"
#include "amla/sim/pipeline.hpp"
#include "amla/sim/preload_theory.hpp"
#include "amla/sim/tiling.hpp"
#include "amla/sim/trace.hpp"
#include "amla/sim/units.hpp"
#include "byte_reader.hpp"

namespace {

using namespace amla::sim;

/// Reads the fuzz bytes as a stream of small choices; past the end every read is 0.
class Bytes_in : public amla_fuzz::ByteReader {
 public:
  using ByteReader::ByteReader;
  bool flag() { return byte() & 1; }
  int small(int n) { return n <= 0 ? 0 : byte() % n; }
  /// A number from a menu of ordinary and hostile values, or raw bits.
  double real() {
    static const double menu[] = {0.0,    1.0,    -1.0,  0.5,   2.0,   64.0,  1e-300,
                                  1e-18,  1e-6,   1e6,   1e12,  1e30,  1e300, 0x1p32,
                                  0x1p48, 0x1p62, 1.8e9, -1e30, 128.0, 3.0,   1e-3};
    const int k = byte();
    if (k < 200) return menu[k % (sizeof menu / sizeof menu[0])];
    if (k < 220) return std::numeric_limits<double>::infinity();
    if (k < 240) return std::nan("");
    double d;
    const std::int64_t bits = i64();
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  /// A cycle count: mostly small, sometimes at int64's edges.
  std::int64_t cycles() {
    const int k = byte();
    if (k < 200) return k % 50;
    static const std::int64_t menu[] = {-1,
                                        std::int64_t{1} << 32,
                                        std::int64_t{1} << 40,
                                        std::int64_t{1} << 61,
                                        std::int64_t{1} << 62,
                                        std::numeric_limits<std::int64_t>::max(),
                                        std::numeric_limits<std::int64_t>::min(),
                                        std::numeric_limits<std::int64_t>::max() - 1};
    if (k < 248) return menu[k % 8];
    return i64();
  }
  std::string text() {
    std::string s;
    for (int n = small(12); n > 0; --n) s += static_cast<char>(byte());
    return s;
  }
};

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_sim finding: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_status(const Status& s, const char* where) {
  if (!s.ok && s.reason.empty()) finding(where, "a result that is not ok gives no reason");
}

// ---- the entry points ----

void fuzz_engine(Bytes_in& in) {
  Engine e(in.flag());
  std::vector<UnitId> units;
  for (int n = 1 + in.small(6); n > 0; --n) units.push_back(e.add_unit(in.text(), 1 + in.small(4)));
  std::vector<PoolId> pools;
  for (int n = in.small(4); n > 0; --n) pools.push_back(e.add_pool(in.text(), in.small(5)));
  std::vector<LinkId> links;
  for (int n = in.small(3); n > 0; --n) {
    const double cap = in.real();
    if (cap > 0 && std::isfinite(cap)) links.push_back(e.add_link("link", BytesPerCycle{cap}));
  }
  std::vector<OpId> ops;
  const int n_ops = 1 + in.small(48);
  for (int i = 0; i < n_ops; ++i) {
    const UnitId u = units[static_cast<std::size_t>(in.small(static_cast<int>(units.size())))];
    Work w;
    if (in.flag()) {
      w = Work::compute(Cycles{in.cycles()}, Cycles{in.flag() ? in.cycles() : 0});
    } else {
      const double bytes = in.real(), rate = in.real();
      const LinkId l =
          !links.empty() && in.flag()
              ? links[static_cast<std::size_t>(in.small(static_cast<int>(links.size())))]
              : LinkId{};
      w = Work::transfer(Bytes{bytes}, BytesPerCycle{rate}, Cycles{in.small(4)}, l);
    }
    Label label;
    label.name = in.text();
    label.category = in.flag() ? "C1" : in.text();
    try {
      ops.push_back(e.add_op(u, w, label));
    } catch (const amla::invalid_argument&) {
    }
    if (in.flag()) e.set_start(u, Cycles{in.small(100)});
  }
  if (ops.empty()) return;
  const auto pick = [&] {
    return ops[static_cast<std::size_t>(in.small(static_cast<int>(ops.size())))];
  };
  for (int n = in.small(64); n > 0; --n) {
    const OpId a = pick(), b = pick();
    if (a.index != b.index) e.depend(a, b, Cycles{in.small(8)});
  }
  for (int n = pools.empty() ? 0 : in.small(16); n > 0; --n) {
    const PoolId p = pools[static_cast<std::size_t>(in.small(static_cast<int>(pools.size())))];
    (in.flag() ? e.acquire(pick(), p, 1 + in.small(2)) : e.release(pick(), p, 1 + in.small(2)));
  }
  RunResult r;
  try {
    r = e.run();
  } catch (const amla::invalid_argument&) {
    throw;
  } catch (const std::logic_error& x) {
    if (typeid(x) != typeid(std::logic_error)) throw;
    return;  // a release without an acquire: a documented misuse
  }
  check_status(r, "Engine::run");
  if (r.ok && r.makespan < Cycles{0}) finding("Engine::run", "negative makespan");
  std::ostringstream os;
  write_chrome_trace(os, e.timeline("fuzz", Hertz{in.flag() ? 1e9 : 0}));
}

StageChain chain_from(Bytes_in& in) {
  StageChain chain;
  for (int n = 1 + in.small(5); n > 0; --n) {
    chain.stages.push_back({in.flag() ? "C" : "V", in.flag() ? UnitKind::cube : UnitKind::vector,
                            Cycles{in.cycles()}, in.flag()});
  }
  if (in.flag())
    chain.tail =
        StageSpec{"T", in.flag() ? UnitKind::cube : UnitKind::vector, Cycles{in.cycles()}, false};
  return chain;
}

void fuzz_schedule(Bytes_in& in) {
  const StageChain chain = chain_from(in);
  Arrangement arr;
  for (int n = in.small(6); n > 0; --n) {
    const ArrangementSlot slot{in.small(7) - 1,
                               in.flag() ? in.small(9) - 4 : static_cast<int>(in.i64() >> 32)};
    (in.flag() ? arr.cube : arr.vector).push_back(slot);
  }
  // Small schedules, or block counts past the documented limits (whose refusal is the point):
  // a legitimate schedule of 10^6 blocks takes seconds, too long for a fuzz input.
  const int blocks = in.flag()
                         ? 1 + in.small(40)
                         : 1000001 + static_cast<int>(static_cast<std::uint64_t>(in.i64()) >> 35);
  check_status(check_arrangement(chain, arr), "check_arrangement");
  Schedule sch = in.flag() ? cyclic_schedule(chain, blocks, arr) : serial_schedule(chain, blocks);
  const ScheduleResult r = simulate_schedule(chain, sch, Cycles{in.small(5)});
  check_status(r, "simulate_schedule");
  if (r.ok) {
    std::ostringstream os;
    SvgGanttOptions o;
    write_svg_gantt(os, r.timeline, o);
  }
}

void fuzz_preload(Bytes_in& in) {
  namespace pl = preload;
  pl::CvDurations d;
  const int n = 1 + in.small(4);
  for (int i = 0; i < n; ++i) {
    d.cube.push_back(Cycles{in.cycles()});
    d.vector.push_back(Cycles{in.cycles()});
  }
  if (in.flag()) d.vector.push_back(Cycles{1});  // a size mismatch
  const pl::TimedCycle b1 = pl::theorem_b1_arrangement(d);
  const pl::PreloadAnalysis a = pl::analyze(d, b1);
  if (a.preload_count > n) finding("theorem_b1_arrangement", "preload count above n");
  pl::TimedCycle t = b1;
  t.period = Cycles{in.flag() ? in.cycles() : t.period.count};
  for (auto& o : t.cube_offset)
    if (in.flag()) o = Cycles{in.cycles()};
  for (auto& o : t.vector_offset)
    if (in.flag()) o = Cycles{in.cycles()};
  check_status(pl::check_arrangement(d, t), "preload::check_arrangement");
  const int blocks = 1 + in.small(12);
  check_status(
      pl::pipeline_schedule(d, b1, blocks, in.flag() ? pl::Timing::asap : pl::Timing::cycle_slots),
      "pipeline_schedule");
  if (n <= 3 && in.flag()) (void)pl::exhaustive_optimum(d);
}

/// Edits of one chip field each: a real value, the same clamped to an integer, a cycle count.
using ChipEdit = void (*)(Chip&, double, std::int64_t, std::int64_t);
constexpr ChipEdit chip_edits[] = {
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.clock = Hertz{v}; },
    [](Chip& c, double, std::int64_t i, std::int64_t) { c.dies = static_cast<int>(i % 100); },
    [](Chip& c, double, std::int64_t i, std::int64_t) {
      c.cube_cores_per_die = static_cast<int>(i % 5000);
    },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.l0c = amla::sim::Bytes{v}; },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.l1 = amla::sim::Bytes{v}; },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.l2_per_die = amla::sim::Bytes{v}; },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.hbm_bytes_per_s_per_die = v; },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.hbm_efficiency = v; },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.mte2 = BytesPerCycle{v}; },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.mte1 = BytesPerCycle{v}; },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.fixp = BytesPerCycle{v}; },
    [](Chip& c, double, std::int64_t, std::int64_t k) { c.hbm_latency = Cycles{k}; },
    [](Chip& c, double, std::int64_t i, std::int64_t) {
      c.vector_fp32_lanes = static_cast<int>(i % 70000);
    },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.amla_v1_ops_per_element = v; },
    [](Chip& c, double v, std::int64_t, std::int64_t) { c.fixed_overhead = Seconds{v}; },
    [](Chip& c, double, std::int64_t, std::int64_t k) { c.core_start_stagger = Cycles{k}; },
};

void edit_chip(Bytes_in& in, Chip& c) {
  for (int n = in.small(4); n > 0; --n) {
    const double v = in.real();
    const auto i =
        static_cast<std::int64_t>(std::isfinite(v) ? std::fmax(-1e18, std::fmin(v, 1e18)) : -1);
    const std::int64_t k = in.cycles();
    chip_edits[in.small(static_cast<int>(std::size(chip_edits)))](c, v, i, k);
  }
}

void fuzz_cube_stage(Bytes_in& in) {
  Chip c = ascend910();
  edit_chip(in, c);
  c.validate();
  Tiling t = in.flag() ? amla_c1_tiling(64 * (1 + in.small(4))) : amla_c2_tiling(128);
  const int which = in.small(6);
  if (which == 0) t.base_k = 16 * (1 + in.small(18));
  if (which == 1) t.M = in.cycles();
  if (which == 2) t.acc_bytes = in.real();
  if (which == 3) t.N = 16 * (1 + in.small(64));
  if (which == 4) t.b_slots = in.small(5);
  check_status(check_fit(t, c), "check_fit");
  CubeStageOptions o;
  o.concurrent_cores = in.small(3);
  o.b_from_hbm = in.flag();
  o.record = in.flag();
  const CubeStageResult r = simulate_cube_stage(c, t, o);
  check_status(r, "simulate_cube_stage");
}

void fuzz_decode(Bytes_in& in) {
  Chip c = in.flag() ? ascend910() : typhoon_npu();
  c.dies = 1 + in.small(2);
  c.cube_cores_per_die = 1 + in.small(4);
  if (in.flag()) c.core_start_stagger = Cycles{0};
  if (in.flag()) c.hbm_latency_jitter = Cycles{0};
  edit_chip(in, c);
  amla::Workload w{.s_q = 1 + in.small(2), .h_q = 16 * (1 + in.small(16)), .causal = in.flag()};
  w.seqlens.clear();
  for (int n = 1 + in.small(4); n > 0; --n) w.seqlens.push_back(in.small(9) * in.small(600));
  // Short sequences, or one long enough that the documented work bound must refuse it (a
  // simulation just under the bound takes seconds, too long for a fuzz input).
  if (in.flag()) w.seqlens.back() = (1 << 29) + in.small(256);
  DecodeOptions o;
  o.variant = in.flag() ? Variant::amla : Variant::base;
  o.schedule = static_cast<DecodeSchedule>(in.small(5));
  o.kv_block = in.flag() ? 512 : 64 * in.small(17);
  o.max_rows_per_task = in.flag() ? 256 : in.small(300);
  o.base_o_in_ub = in.flag();
  o.symmetry = in.flag();
  o.record_timeline = in.flag();
  if (in.flag()) {
    o.arrangement = Arrangement{{{0, in.small(5) - 1}, {2, in.small(3)}}, {{1, in.small(3)}}};
    o.schedule = DecodeSchedule::automatic;
  }
  const DecodeResult r = simulate_decode(c, w, o);
  check_status(r, "simulate_decode");
  if (r.ok && r.time.count < 0) finding("simulate_decode", "negative time");
  if (r.ok && o.record_timeline) {
    std::ostringstream os;
    write_svg_gantt(os, r.timeline);
  }
}

void fuzz_trace(Bytes_in& in) {
  Timeline t;
  t.title = in.text();
  t.clock = Hertz{in.flag() ? 1e9 : in.real()};
  for (int n = in.small(5); n > 0; --n) {
    Lane lane;
    lane.name = in.text();
    for (int k = in.small(8); k > 0; --k) {
      const std::int64_t a = in.cycles();
      const std::int64_t b =
          in.flag() && a < (std::int64_t{1} << 62) ? a + in.small(100) : in.cycles();
      lane.intervals.push_back(
          {Cycles{a}, Cycles{b}, in.text(), in.text(), static_cast<Phase>(in.small(5))});
    }
    t.lanes.push_back(std::move(lane));
  }
  std::ostringstream os;
  if (in.flag()) {
    write_chrome_trace(os, t);
  } else {
    SvgGanttOptions o;
    o.width_px = in.flag() ? 1280 : static_cast<int>(in.i64() >> 40);
    o.lane_height_px = 12 + in.small(200);
    o.interval_labels = in.flag();
    o.subtitle = in.text();
    for (int n = in.small(4); n > 0; --n) o.markers.push_back({Cycles{in.cycles()}, in.text()});
    write_svg_gantt(os, t, o);
  }
}

/// One edit of a GPU chip field to a fuzzed value.
using GpuChipEdit = void (*)(GpuChip&, double);
constexpr GpuChipEdit gpu_chip_edits[] = {
    [](GpuChip& c, double v) { c.tma_bytes_per_cycle = v; },
    [](GpuChip& c, double v) { c.tensor_priority = v; },
    [](GpuChip& c, double v) { c.l2_refetch = v; },
    [](GpuChip& c, double v) { c.memory_latency = Seconds{v}; },
    [](GpuChip& c, double v) { c.hbm_efficiency = v; },
    [](GpuChip& c, double v) { c.clock = Hertz{v}; },
    [](GpuChip& c, double v) { c.smem_bytes_per_block = v; },
};

void fuzz_hopper(Bytes_in& in) {
  GpuChip c = in.flag() ? h100_sxm() : h20();
  c.sms = 1 + in.small(8);
  // One field edited, or (one choice in eight) none.
  const auto edit = static_cast<std::size_t>(in.small(8));
  if (edit < std::size(gpu_chip_edits)) gpu_chip_edits[edit](c, in.real());
  HopperKernel k = in.flag() ? amla_hopper_kernel(in.flag()) : flashmla_kernel();
  k.schedule = static_cast<HopperSchedule>(in.small(4));
  k.tiles = static_cast<TileScheduler>(in.small(3));
  k.splits = in.small(70);
  if (in.flag()) k.softmax = {in.real(), in.real()};
  if (in.flag()) k.rows_per_cta = in.small(300);
  amla::Workload w{.s_q = 1 + in.small(2), .h_q = 16 * (1 + in.small(8)), .causal = in.flag()};
  w.seqlens.clear();
  for (int n = 1 + in.small(4); n > 0; --n) w.seqlens.push_back(in.small(5) * in.small(400));
  if (in.flag()) w.seqlens.back() = (1 << 29) + in.small(256);  // refused by the work bound
  HopperDecodeOptions o;
  o.symmetry = in.flag();
  o.record_timeline = in.flag();
  o.timeline_sm = in.small(10);
  const HopperDecodeResult r = simulate_hopper_decode(c, w, k, o);
  check_status(r, "simulate_hopper_decode");
  if (r.ok && !(r.time.count >= 0)) finding("simulate_hopper_decode", "negative time");
}

void fuzz_units(Bytes_in& in) {
  const Cycles a{in.i64()}, b{in.i64()};
  const std::int64_t k = in.i64() >> in.small(64);
  switch (in.small(4)) {
    case 0:
      (void)(a + b);
      break;
    case 1:
      (void)(a - b);
      break;
    case 2:
      (void)(a * k);
      break;
    default: {
      Cycles c = a;
      c += b;
      c -= b;
      if (c != a) finding("Cycles", "+= then -= changed the value");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes_in in(data, size);
  try {
    switch (in.small(8)) {
      case 0:
        fuzz_engine(in);
        break;
      case 1:
        fuzz_schedule(in);
        break;
      case 2:
        fuzz_preload(in);
        break;
      case 3:
        fuzz_cube_stage(in);
        break;
      case 4:
        fuzz_decode(in);
        break;
      case 5:
        fuzz_trace(in);
        break;
      case 6:
        fuzz_hopper(in);
        break;
      default:
        fuzz_units(in);
        break;
    }
  } catch (const amla::invalid_argument&) {
    // Malformed input, rejected with a message: what the simulator promises.
  } catch (const std::logic_error& e) {
    if (typeid(e) != typeid(std::logic_error)) finding("unexpected exception", e.what());
  } catch (const std::exception& e) {
    finding("unexpected exception", e.what());
  }
  return 0;
}
