// examples/06_hopper_decode_model.cpp: warp-specialised MLA decode kernels on Hopper GPUs, one SM
// at a time on the cycle engine (sim/hopper_decode.hpp), against measurements.
//
//   example_06_hopper_decode_model [--demo] [--help] [--calibrate] [--no-svg] [--no-trace]
//
// Prints the H100 model's inputs (measured by scripts/hopper-model.sh, two constants calibrated);
// amla's hopper/standard and hopper/amla kernels predicted next to their measured times (b = 128,
// s_q {1, 2}, s_k {1024, 4096, 16384}, varlen batches, split-KV, one CTA and one wave); FlashMLA's
// seesaw schedule next to its reported H100 figures; where the time goes in one SM for each
// schedule, with a Gantt chart (SVG) and a Chrome trace of that SM; a ThunderMLA-style imbalanced
// batch under amla's grid of CTAs and under FlashMLA's balanced tile scheduler; and FlashMLA
// against FlashMLA-ETAP on an H20 (h_q = 16), next to the ETAP paper's Figure 1.
// --demo runs the same sections on fewer shapes (a second or two). --calibrate refits the two
// calibrated constants and prints them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "amla/problem/workload.hpp"
#include "amla/sim/gpu_chip.hpp"
#include "amla/sim/hopper_calibration.hpp"
#include "amla/sim/hopper_decode.hpp"
#include "amla/sim/trace.hpp"

namespace {

using amla::Workload;
using namespace amla::sim;

struct Options {
  bool demo = false, calibrate = false, svg = true, trace = true;
};

void usage() {
  std::printf(
      "example_06_hopper_decode_model: MLA decode kernels on Hopper (amla's two Hopper kernels,\n"
      "FlashMLA's seesaw, FlashMLA-ETAP) on the cycle engine, against measurements.\n\n"
      "  --demo        fewer shapes (a second or two); pictures into the current dir\n"
      "  --calibrate   refit the two calibrated constants to the one-CTA runs and print them\n"
      "  --no-svg      no Gantt charts\n"
      "  --no-trace    no Chrome traces\n"
      "  --help        this text\n\n"
      "The full run writes hopper_<schedule>_gantt.svg and hopper_<schedule>_trace.json for\n"
      "amla's standard and AMLA kernels and FlashMLA's seesaw (one SM at b 128, s_q 1, s_k "
      "1024).\n");
}

double pct(double model, double measured) {
  return 100 * (model / measured - 1);
}

const char* within(double err) {
  return std::fabs(err) <= 10 ? "" : "  (miss)";
}

// ---- the inputs ----
void inputs(const GpuChip& c) {
  std::printf("== The H100 model's inputs (scripts/hopper-model.sh, examples/SIM_RESULTS.md)\n");
  std::printf(
      "SMs %d; tensor %.0f FLOP/cycle/SM; wgmma latency %lld (N 64) / %lld (N 256) cycles\n", c.sms,
      c.tensor_flops_per_cycle, static_cast<long long>(c.wgmma_n64_latency.count),
      static_cast<long long>(c.wgmma_n256_latency.count));
  std::printf("tensor vs CUDA cores side by side: %.2f : 1 of the SM (measured)\n",
              c.tensor_priority);
  std::printf(
      "TMA %.1f B/cycle per SM, latency %.0f ns; HBM %.3g B/s x %.3f; L2 refetch %.3f per "
      "extra reader; CTA turnaround %.3f us\n",
      c.tma_bytes_per_cycle, c.memory_latency.count * 1e9, c.hbm_bytes_per_s, c.hbm_efficiency,
      c.l2_refetch, c.cta_launch.us());
  const HopperKernel s = amla_hopper_kernel(false), a = amla_hopper_kernel(true);
  std::printf(
      "amla kernel CUDA stages (cycles alone, x%.3f calibrated): softmax %.0f / %.0f, "
      "rescale %.0f / %.0f (standard / AMLA); kernel overhead %.2f us (calibrated)\n\n",
      calibrated_hopper::amla_kernel_cuda_factor, s.softmax.alone_cycles(),
      a.softmax.alone_cycles(), s.rescale.alone_cycles(), a.rescale.alone_cycles(),
      c.kernel_overhead.us());
}

// ---- amla's kernels against their measurements ----
void amla_table(bool demo) {
  std::printf(
      "== amla's Hopper kernels on the H100: predicted vs measured (launches back to "
      "back, at the SM clock sampled meanwhile)\n");
  std::printf("%-10s %-15s %4s %3s %3s %6s %5s | %9s %9s %7s | %9s\n", "case", "kernel", "b", "h_q",
              "s_q", "s_k", "MHz", "model us", "measured", "error", "median");
  int n = 0, ok = 0;
  for (const HopperMeasurement& m : hopper_h100_measurements()) {
    if (demo && m.name == "uniform" && m.workload.max_seqlen() != 1024) continue;
    const double p = predict_us(m);
    const double e = pct(p, m.stream_us);
    const bool fitted = m.name == "one CTA" && !m.amla_mode;
    std::printf("%-10s %-15s %4d %3d %3d %6d %5.0f | %9.1f %9.1f %+6.1f%% | %9.1f%s\n",
                m.name.c_str(), m.amla_mode ? "hopper/amla" : "hopper/standard", m.workload.batch(),
                m.workload.h_q, m.workload.s_q, m.workload.max_seqlen(), m.clock_mhz, p,
                m.stream_us, e, m.median_us, fitted ? "  (fitted)" : within(e));
    if (m.name == "uniform") {
      ++n;
      ok += std::fabs(e) <= 10;
    }
  }
  std::printf("the issue's %d shapes (uniform): %d within 10%%\n\n", n, ok);
}

// ---- FlashMLA's figures ----
void flashmla_table(bool demo) {
  std::printf(
      "== FlashMLA's seesaw schedule (balanced tile scheduler) vs its reported H100 "
      "figures\n");
  std::printf("%3s %6s | %9s | %16s %16s\n", "s_q", "s_k", "reported", "model @1980 MHz",
              "model @1830 MHz");
  for (const ThroughputFigure& f : flashmla_h100_figures()) {
    if (demo && f.workload.max_seqlen() != 1024) continue;
    double t[2];
    for (int i = 0; i < 2; ++i) {
      GpuChip c = h100_sxm();
      c.clock =
          Hertz{i == 0 ? amla::arch::h100_sxm::max_clock_hz : amla::arch::h100_sxm::boost_clock_hz};
      const HopperDecodeResult r = simulate_hopper_decode(c, f.workload, flashmla_kernel());
      t[i] = r.tflops();
    }
    const double e0 = pct(t[0], f.tflops), e1 = pct(t[1], f.tflops);
    std::printf("%3d %6d | %9.0f | %6.0f (%+5.1f%%) %6.0f (%+5.1f%%)%s\n", f.workload.s_q,
                f.workload.max_seqlen(), f.tflops, t[0], e0, t[1], e1, within(e0));
  }
  std::printf("\n");
}

// Every interval of one steady pair of blocks (64 and 65), per unit, relative to the pair's
// first Q K^T issue, up to the next pair's.
void steady_pair(const Timeline& t) {
  const auto find = [&](const std::string& name) {
    for (const Lane& lane : t.lanes)
      for (const Interval& iv : lane.intervals)
        if (iv.name == name) return iv.start.count;
    return std::int64_t{-1};
  };
  const std::int64_t t0 = find("c0 issue QK64"), t1 = find("c0 issue QK66");
  if (t0 < 0 || t1 < 0) return;
  for (const Lane& lane : t.lanes) {
    std::string line;
    for (const Interval& iv : lane.intervals) {
      if (iv.end.count <= t0 || iv.start.count >= t1 || iv.end == iv.start) continue;
      char buf[96];
      std::snprintf(buf, sizeof buf, " %s %lld-%lld", iv.name.substr(3).c_str(),
                    static_cast<long long>(iv.start.count - t0),
                    static_cast<long long>(iv.end.count - t0));
      line += buf;
    }
    std::printf("      %-14s%s\n", lane.name.substr(4).c_str(), line.c_str());
  }
  std::printf("      (the next pair starts at %lld)\n", static_cast<long long>(t1 - t0));
}

// ---- one SM per schedule ----
void one_sm(const Options& o) {
  std::printf(
      "== Where the time goes: one SM, b 128, s_q 1, s_k 1024 (2 CTAs of 16 blocks for "
      "amla's grid, a balanced range for FlashMLA), H100 at 1830 MHz\n");
  struct S {
    const char* file;
    HopperKernel kernel;
  };
  // The seesaw with amla's standard stage costs isolates what the schedule alone changes.
  HopperKernel seesaw_amla_costs = amla_hopper_kernel(false);
  seesaw_amla_costs.name = "seesaw, amla costs";
  seesaw_amla_costs.schedule = HopperSchedule::seesaw;
  seesaw_amla_costs.tiles = TileScheduler::balanced;
  const S schedules[] = {{"amla_standard", amla_hopper_kernel(false)},
                         {"amla_amla", amla_hopper_kernel(true)},
                         {"flashmla_seesaw", flashmla_kernel()},
                         {"seesaw_amla_costs", seesaw_amla_costs}};
  const Workload w = Workload::uniform(128, 1, 128, 1024);
  for (const S& s : schedules) {
    HopperDecodeOptions opt;
    opt.record_timeline = o.svg || o.trace;
    const HopperDecodeResult r = simulate_hopper_decode(h100_sxm(), w, s.kernel, opt);
    std::printf(
        "%-18s (%-10s): %7.1f us, %5.0f TFLOPS; the SM's tensor work %.0f%% of the "
        "time, CUDA-core work %.0f%%\n",
        s.kernel.name.c_str(), to_string(s.kernel.schedule), r.time.us(), r.tflops(),
        100 * r.tensor_busy, 100 * r.cuda_busy);
    for (const UnitStats& u : r.sm_units) {
      const double span = static_cast<double>(r.cycles.count);
      std::printf(
          "    %-18s busy %5.1f%%  waits on data %5.1f%%  on a buffer %5.1f%%  idle %5.1f%%\n",
          u.name.c_str(), 100 * u.busy.count / span, 100 * u.stalled_on_data.count / span,
          100 * u.stalled_on_buffer.count / span, 100 * u.idle.count / span);
    }
    // The steady state of the schedule alone: one CTA of 128 blocks on an otherwise idle chip.
    HopperKernel lone = s.kernel;
    lone.tiles = TileScheduler::grid;
    lone.splits = 1;
    HopperDecodeOptions lone_opt;
    lone_opt.record_timeline = true;
    const HopperDecodeResult one =
        simulate_hopper_decode(h100_sxm(), Workload::uniform(1, 1, 64, 128 * 64), lone, lone_opt);
    const double pair = static_cast<double>(one.cycles.count) / 64;
    const double tensor_pair = 2 * detail::wgmma_work(h100_sxm(), 64, 64, 16, 36) / 4096 +
                               4 * detail::wgmma_work(h100_sxm(), 64, 256, 16, 4) / 4096;
    std::printf(
        "    one CTA alone: %.0f cycles per pair of blocks, of which the tensor cores work "
        "%.0f (%.0f%%); a steady pair (blocks 64 and 65), cycles from its first Q K^T "
        "issue:\n",
        pair, tensor_pair, 100 * tensor_pair / pair);
    steady_pair(one.timeline);
    const std::string base = std::string("hopper_") + s.file;
    if (o.svg) {
      SvgGanttOptions g;
      g.subtitle = "one SM: wgmma streams (Cube), CUDA-core stages (Vector) and TMA loads";
      write_svg_gantt(base + "_gantt.svg", r.timeline, g);
    }
    if (o.trace) write_chrome_trace(base + "_trace.json", r.timeline);
  }
  std::printf("\n");
}

// ---- varlen ----
void varlen(bool demo) {
  std::printf(
      "== Varlen batches on the H100 at 1830 MHz: amla's grid of CTAs vs a balanced tile "
      "scheduler, same per-block costs (amla's standard kernel)\n");
  std::printf("%-12s %3s | %20s | %20s\n", "batch", "s_q", "grid: us  SM end spread",
              "balanced: us  spread");
  struct B {
    const char* name;
    std::vector<int> lens;
  };
  const B batches[] = {{"imbalanced", imbalanced_seqlens()}, {"mixed", mixed_seqlens()}};
  for (const B& b : batches) {
    for (const int s_q : {1, 2}) {
      if (demo && s_q == 2) continue;
      Workload w = Workload::uniform(1, s_q, 128, 1);
      w.seqlens = b.lens;
      HopperKernel grid = amla_hopper_kernel(false), balanced = grid;
      balanced.tiles = TileScheduler::balanced;
      double us[2], spread[2];
      int i = 0;
      for (const HopperKernel* k : {&grid, &balanced}) {
        const HopperDecodeResult r = simulate_hopper_decode(h100_sxm(), w, *k);
        std::vector<double> ends;
        for (const Cycles c : r.sm_finish)
          if (c.count > 0) ends.push_back(static_cast<double>(c.count));
        std::sort(ends.begin(), ends.end());
        us[i] = r.time.us();
        spread[i] = ends.empty() ? 0 : ends.back() / ends[ends.size() / 2];
        ++i;
      }
      std::printf("%-12s %3d | %8.1f  max/median %4.2f | %8.1f  max/median %4.2f\n", b.name, s_q,
                  us[0], spread[0], us[1], spread[1]);
    }
  }
  std::printf("\n");
}

// ---- ETAP on the H20 ----
void etap(bool demo) {
  std::printf(
      "== H20, h_q 16, s_q 1: FlashMLA (rows padded to 64) vs FlashMLA-ETAP (transposed), "
      "TFLOPS\n");
  std::printf("%5s %6s | %8s %8s %6s\n", "batch", "s_k", "FlashMLA", "ETAP", "ratio");
  const GpuChip c = h20();
  const std::vector<int> sks =
      demo ? std::vector<int>{512, 65536} : std::vector<int>{512, 1024, 4096, 16384, 32768, 65536};
  for (const int b : {16, 32}) {
    for (const int sk : sks) {
      const Workload w = Workload::uniform(b, 1, 16, sk);
      const double f = simulate_hopper_decode(c, w, flashmla_kernel()).tflops();
      const double e = simulate_hopper_decode(c, w, flashmla_etap_kernel()).tflops();
      std::printf("%5d %6d | %8.1f %8.1f %6.2f\n", b, sk, f, e, e / f);
    }
  }
  std::printf("ETAP paper, Figure 1:");
  for (const ThroughputFigure& f : etap_h20_figures())
    std::printf(" %s b %d s_k %d: %.0f;", f.source.c_str(), f.workload.batch(),
                f.workload.max_seqlen(), f.tflops);
  std::printf("\n\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--demo") {
      o.demo = true;
    } else if (a == "--calibrate") {
      o.calibrate = true;
    } else if (a == "--no-svg") {
      o.svg = false;
    } else if (a == "--no-trace") {
      o.trace = false;
    } else {
      std::fprintf(stderr, "unknown argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  try {
    if (o.calibrate) {
      const HopperFit f = fit_hopper_constants();
      std::printf(
          "fitted to the one-CTA runs of hopper/standard: CUDA-core factor %.4f "
          "(committed %.4f), kernel overhead %.3f us (committed %.3f)\n",
          f.cuda_factor, calibrated_hopper::amla_kernel_cuda_factor, f.kernel_overhead_us,
          calibrated_hopper::h100_kernel_overhead_us);
      std::printf(
          "  s_k 16384: model %.1f us, measured %.1f; s_k 1024: model %.1f, measured "
          "%.1f\n",
          f.long_run_us, f.long_measured_us, f.short_run_us, f.short_measured_us);
      return 0;
    }
    inputs(h100_sxm());
    amla_table(o.demo);
    flashmla_table(o.demo);
    one_sm(o);
    varlen(o.demo);
    etap(o.demo);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
