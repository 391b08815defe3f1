// examples/05_typhoon_roofline.cpp: when does TyphoonMLA pay off? The roofline time of one MLA
// decode step (attention only) for the naive, absorb and TyphoonMLA formulations, for DeepSeek-V3
// and Kimi K2, over the TyphoonMLA paper's three system prompts as the shared prefix, batch sizes
// 1 to 1024, priced by amla/mla/cost.hpp on a chip from amla/arch.
//
//   example_05_typhoon_roofline [--demo] [--help] [--hw NAME] [--suffix N] [--svg FILE]
//
// It prints a table per model and prompt, writes the curves as an SVG picture, and then runs the
// three formulations on one small real decode step to show that they agree.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "amla/amla.hpp"
#include "example_cli.hpp"

namespace {

namespace mla = amla::mla;

struct Prompt {
  const char* name;
  const char* source;
  std::int64_t tokens;
};

// The TyphoonMLA paper's Table 2.
constexpr Prompt prompts[] = {
    {"A", "Claude-4", 26472},
    {"B", "OpenAI/o3", 7069},
    {"C", "Grok/Personas", 4759},
};

struct Model {
  const char* name;
  mla::MlaDims dims;
};

constexpr Model models[] = {
    {"DeepSeek-V3", mla::presets::deepseek_v3},
    {"Kimi K2", mla::presets::kimi_k2},
};

struct Options {
  bool demo = false;
  mla::Hardware hw = mla::hardware::typhoon_npu;
  std::string hw_key = "typhoon_npu";
  std::int64_t suffix = 512;
  std::int64_t max_batch = 1024;
  std::string svg = "typhoon_roofline.svg";
};

void usage() {
  std::printf(
      "usage: example_05_typhoon_roofline [--demo] [--help] [--hw NAME] [--suffix N] [--svg FILE]\n"
      "\n"
      "Roofline time of one MLA decode step (attention only: QK^T and PV, HBM reads of the KV\n"
      "cache) for the naive, absorb and TyphoonMLA formulations. Models: DeepSeek-V3 and Kimi K2.\n"
      "Shared prefix: the TyphoonMLA paper's prompts A (26472 tokens), B (7069), C (4759); every\n"
      "request also has its own suffix. Batch sizes 1 to 1024. TyphoonMLA's time is the plan it\n"
      "takes: its mixed kernel where the model says it is faster, else the absorb fall-back.\n"
      "Then naive, absorb and TyphoonMLA run on one small DeepSeek-V3 step (random weights), in\n"
      "float64 and in BF16 emulation, and their agreement is printed.\n"
      "\n"
      "  --hw NAME     typhoon_npu (default: 376 TFLOPS, 1.8 TB/s, the paper's NPU),\n"
      "               ascend910, h100 (989 TFLOPS, 3.35 TB/s), h800, h800_throttled\n"
      "  --suffix N   non-shared tokens per request (default 512)\n"
      "  --svg FILE   where to write the picture (default typhoon_roofline.svg)\n"
      "  --demo       a quick run (the same sweep, a smaller real case; writes the SVG into the\n"
      "               current directory)\n"
      "  --help       this text\n");
}

bool pick_hardware(const std::string& key, mla::Hardware& hw) {
  if (key == "typhoon_npu")
    hw = mla::hardware::typhoon_npu;
  else if (key == "ascend910")
    hw = mla::hardware::ascend910;
  else if (key == "h100")
    hw = mla::hardware::h100_sxm;
  else if (key == "h800")
    hw = mla::hardware::h800_sxm;
  else if (key == "h800_throttled")
    hw = mla::hardware::h800_sxm_throttled;
  else
    return false;
  return true;
}

// One point of a curve: the three formulations' times at batch size b.
struct Point {
  std::int64_t batch;
  double naive_s, absorb_s, typhoon_s;
  bool mixed;
};

std::vector<Point> sweep(const mla::MlaDims& dims, std::int64_t prefix, const Options& o) {
  std::vector<Point> pts;
  for (std::int64_t b = 1; b <= o.max_batch; ++b) {
    const mla::DecodeStep s{b, 1, prefix, o.suffix};
    const auto choice = mla::typhoon_choice(dims, s, o.hw);
    pts.push_back({b, mla::roofline_time(mla::formulation::naive, dims, s, o.hw).time_s(),
                   choice.absorb_s, choice.time_s(), choice.mixed});
  }
  return pts;
}

void print_table(const Model& m, const Prompt& p, const std::vector<Point>& pts, const Options& o) {
  const auto switch_b = mla::typhoon_min_batch(m.dims, {1, 1, p.tokens, o.suffix}, o.hw);
  std::printf("\n%s, prompt %s (%s, %lld shared tokens), suffix %lld, %.*s\n", m.name, p.name,
              p.source, static_cast<long long>(p.tokens), static_cast<long long>(o.suffix),
              static_cast<int>(o.hw.name.size()), o.hw.name.data());
  std::printf(
      "  equation 1: B_theta = %.1f; the full roofline model switches to the mixed kernel "
      "at B = %s\n",
      mla::typhoon_batch_threshold(m.dims, 1, o.hw),
      switch_b ? std::to_string(*switch_b).c_str() : "never (<= 65536)");
  std::printf("  %6s %12s %12s %12s %-7s %10s %10s\n", "B", "naive ms", "absorb ms", "typhoon ms",
              "plan", "vs absorb", "vs best");
  for (const Point& pt : pts) {
    if ((pt.batch & (pt.batch - 1)) != 0) continue;  // powers of two in the table
    const double best = std::min(pt.naive_s, pt.absorb_s);
    std::printf("  %6lld %12.4f %12.4f %12.4f %-7s %9.2fx %9.2fx\n",
                static_cast<long long>(pt.batch), pt.naive_s * 1e3, pt.absorb_s * 1e3,
                pt.typhoon_s * 1e3, pt.mixed ? "mixed" : "absorb", pt.absorb_s / pt.typhoon_s,
                best / pt.typhoon_s);
  }
}

// ---------------------------------------------------------------- SVG ----------------------------

struct Panel {
  const Model* model;
  const Prompt* prompt;
  std::vector<Point> pts;
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Time axis label: 10^k seconds as ms, us or s text.
std::string time_label(int exp10) {
  const double v = std::pow(10.0, exp10);
  if (exp10 <= -4) return fmt("%g \u00b5s", v * 1e6);
  if (exp10 <= -1) return fmt("%g ms", v * 1e3);
  return fmt("%g s", v);
}

void write_svg(const std::vector<Panel>& panels, const Options& o) {
  const int cols = 3, rows = 2;
  const double pw = 360, ph = 270;                  // panel plot area
  const double ml = 78, mr = 24, mt = 54, mb = 58;  // per-panel margins
  const double top = 96;                            // title + legend band
  const double W = cols * (ml + pw + mr), H = top + rows * (mt + ph + mb) + 10;

  // One y range for all panels, in whole decades, so they compare at a glance.
  double tmin = 1e300, tmax = 0;
  for (const Panel& p : panels) {
    for (const Point& pt : p.pts) {
      tmin = std::min({tmin, pt.naive_s, pt.absorb_s, pt.typhoon_s});
      tmax = std::max({tmax, pt.naive_s, pt.absorb_s, pt.typhoon_s});
    }
  }
  const int y_lo = static_cast<int>(std::floor(std::log10(tmin)));
  const int y_hi = static_cast<int>(std::ceil(std::log10(tmax)));
  const double x_hi = std::log2(static_cast<double>(o.max_batch));

  const char* c_naive = "#d95f02";
  const char* c_absorb = "#1f78b4";
  const char* c_typhoon = "#1b9e77";

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << ' ' << H << "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << W / 2
    << "\" y=\"30\" text-anchor=\"middle\" font-size=\"19\" "
       "font-weight=\"bold\">Roofline time of one MLA decode step: naive, absorb and "
       "TyphoonMLA</text>\n";
  s << "<text x=\"" << W / 2 << "\" y=\"52\" text-anchor=\"middle\" font-size=\"13\" fill=\"#444\">"
    << std::string(o.hw.name) << ": " << fmt("%.0f", o.hw.peak_flops_per_s / 1e12) << " TFLOP/s, "
    << fmt("%.2f", o.hw.hbm_bytes_per_s / 1e12)
    << " TB/s; attention only, BF16 cache, S_q = 1, suffix " << o.suffix
    << " tokens per request; TyphoonMLA as it runs (absorb fall-back below its switch)</text>\n";

  // Legend.
  const double lx = W / 2 - 270, ly = 76;
  auto legend = [&](double x, const char* color, double width, double opacity, const char* text) {
    s << "<line x1=\"" << x << "\" y1=\"" << ly << "\" x2=\"" << x + 34 << "\" y2=\"" << ly
      << "\" stroke=\"" << color << "\" stroke-width=\"" << width << "\" stroke-opacity=\""
      << opacity << "\" stroke-linecap=\"round\"/>\n";
    s << "<text x=\"" << x + 42 << "\" y=\"" << ly + 4.5 << "\" font-size=\"13\">" << text
      << "</text>\n";
  };
  legend(lx, c_naive, 2, 1, "naive");
  legend(lx + 110, c_absorb, 2, 1, "absorb");
  legend(lx + 230, c_typhoon, 6, 0.45, "TyphoonMLA");
  s << "<line x1=\"" << lx + 380 << "\" y1=\"" << ly << "\" x2=\"" << lx + 414 << "\" y2=\"" << ly
    << "\" stroke=\"#777\" stroke-width=\"1.2\" stroke-dasharray=\"4 3\"/>\n";
  s << "<text x=\"" << lx + 422 << "\" y=\"" << ly + 4.5
    << "\" font-size=\"13\">switch to mixed</text>\n";

  for (std::size_t i = 0; i < panels.size(); ++i) {
    const Panel& p = panels[i];
    const double ox = static_cast<double>(i % cols) * (ml + pw + mr) + ml;
    const double oy = top + static_cast<double>(i / cols) * (mt + ph + mb) + mt;
    auto X = [&](double b) { return ox + std::log2(b) / x_hi * pw; };
    auto Y = [&](double t) { return oy + ph - (std::log10(t) - y_lo) / (y_hi - y_lo) * ph; };

    s << "<g>\n";
    s << "<text x=\"" << ox + pw / 2 << "\" y=\"" << oy - 14
      << "\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">" << p.model->name
      << ", prompt " << p.prompt->name << " (" << p.prompt->tokens << " shared tokens)</text>\n";
    s << "<rect x=\"" << ox << "\" y=\"" << oy << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"#fafafa\" stroke=\"none\"/>\n";
    // Grid and ticks: decades on y (minor 2..9 lighter), powers of two on x.
    for (int e = y_lo; e <= y_hi; ++e) {
      const double y = Y(std::pow(10.0, e));
      s << "<line x1=\"" << ox << "\" y1=\"" << y << "\" x2=\"" << ox + pw << "\" y2=\"" << y
        << "\" stroke=\"#d0d0d0\" stroke-width=\"1\"/>\n";
      s << "<text x=\"" << ox - 7 << "\" y=\"" << y + 4
        << "\" text-anchor=\"end\" font-size=\"11\" fill=\"#333\">" << time_label(e) << "</text>\n";
      if (e == y_hi) break;
      for (int m = 2; m <= 9; ++m) {
        const double ym = Y(m * std::pow(10.0, e));
        s << "<line x1=\"" << ox << "\" y1=\"" << ym << "\" x2=\"" << ox + pw << "\" y2=\"" << ym
          << "\" stroke=\"#ececec\" stroke-width=\"0.7\"/>\n";
      }
    }
    for (int k = 0; k <= static_cast<int>(x_hi); ++k) {
      const double x = X(std::ldexp(1.0, k));
      s << "<line x1=\"" << x << "\" y1=\"" << oy << "\" x2=\"" << x << "\" y2=\"" << oy + ph
        << "\" stroke=\"" << (k % 2 == 0 ? "#d0d0d0" : "#ececec") << "\" stroke-width=\"1\"/>\n";
      if (k % 2 == 0) {
        s << "<text x=\"" << x << "\" y=\"" << oy + ph + 17
          << "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#333\">" << (1 << k) << "</text>\n";
      }
    }
    s << "<rect x=\"" << ox << "\" y=\"" << oy << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#555\" stroke-width=\"1\"/>\n";
    s << "<text x=\"" << ox + pw / 2 << "\" y=\"" << oy + ph + 38
      << "\" text-anchor=\"middle\" font-size=\"12\">batch size B (log scale)</text>\n";
    s << "<text transform=\"translate(" << ox - 58 << ' ' << oy + ph / 2
      << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">time per step</text>\n";

    auto curve = [&](auto get, const char* color, double width, double opacity) {
      s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"" << width
        << "\" stroke-opacity=\"" << opacity
        << "\" stroke-linejoin=\"round\" stroke-linecap=\"round\" points=\"";
      for (const Point& pt : p.pts) {
        s << fmt("%.2f", X(static_cast<double>(pt.batch))) << ',' << fmt("%.2f", Y(get(pt))) << ' ';
      }
      s << "\"/>\n";
    };
    curve([](const Point& pt) { return pt.typhoon_s; }, c_typhoon, 6, 0.45);
    curve([](const Point& pt) { return pt.naive_s; }, c_naive, 2, 1);
    curve([](const Point& pt) { return pt.absorb_s; }, c_absorb, 2, 1);

    // Where TyphoonMLA switches, and its speed-up over absorb at the largest batch.
    const auto sw =
        std::find_if(p.pts.begin(), p.pts.end(), [](const Point& pt) { return pt.mixed; });
    if (sw != p.pts.end()) {
      const double x = X(static_cast<double>(sw->batch));
      s << "<line x1=\"" << x << "\" y1=\"" << oy << "\" x2=\"" << x << "\" y2=\"" << oy + ph
        << "\" stroke=\"#777\" stroke-width=\"1.2\" stroke-dasharray=\"4 3\"/>\n";
      s << "<text x=\"" << x - 5 << "\" y=\"" << oy + 16
        << "\" text-anchor=\"end\" font-size=\"11\" fill=\"#555\">B = " << sw->batch << "</text>\n";
    }
    const Point& last = p.pts.back();
    s << "<text x=\"" << ox + pw - 8 << "\" y=\"" << oy + ph - 10
      << "\" text-anchor=\"end\" font-size=\"12\" fill=\"" << c_typhoon
      << "\" font-weight=\"bold\">" << fmt("%.2f", last.absorb_s / last.typhoon_s)
      << "\u00d7 vs absorb at B = " << last.batch << "</text>\n";
    s << "</g>\n";
  }
  s << "</svg>\n";
  std::ofstream f(o.svg);
  f << s.str();
  if (!f) {
    std::fprintf(stderr, "could not write %s\n", o.svg.c_str());
    std::exit(1);
  }
  std::printf("\nwrote %s\n", o.svg.c_str());
}

// ------------------------------------------------------- a real case ---------------------------

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ||a - b||_F / ||b||_F over the outputs, and the largest |lse difference| (finite entries).
std::pair<double, double> agreement(const mla::MlaResult& a, const mla::MlaResult& b) {
  double num = 0, den = 0, lse = 0;
  for (std::size_t i = 0; i < a.out.size(); ++i) {
    num += (a.out[i] - b.out[i]) * (a.out[i] - b.out[i]);
    den += b.out[i] * b.out[i];
  }
  for (std::size_t i = 0; i < a.lse.size(); ++i) {
    if (std::isfinite(a.lse[i]) && std::isfinite(b.lse[i])) {
      lse = std::max(lse, std::abs(a.lse[i] - b.lse[i]));
    }
  }
  return {std::sqrt(num / den), lse};
}

// The three formulations on one small DeepSeek-V3 decode step with random weights, in float64
// and in BF16 emulation, compared with the float64 naive result.
void real_case(const Options& o) {
  const int prefix = o.demo ? 96 : 512;
  const std::vector<int> suffixes =
      o.demo ? std::vector<int>{40, 0, 17, 64} : std::vector<int>{300, 0, 17, 512, 128, 64, 1, 200};
  const auto p = mla::MlaProblemBuilder(mla::presets::deepseek_v3)
                     .s_q(2)
                     .prefix_len(prefix)
                     .suffix_lens(suffixes)
                     .page_size(64)
                     .seed(2025)
                     .build<amla::bf16>();
  std::printf(
      "\nOne real decode step: DeepSeek-V3 dims, random BF16 weights and inputs, B = %d, "
      "s_q = 2 (causal), shared prefix %d, suffixes",
      p.shape.batch, prefix);
  for (int len : suffixes) std::printf(" %d", len);
  std::printf(
      ".\nErrors are against the float64 naive result: ||out - ref||_F / ||ref||_F and "
      "max |lse - ref|.\n");
  std::printf("  %-8s %-8s %-8s %14s %14s %10s\n", "mode", "formul.", "ran", "out rel err",
              "lse max err", "wall s");
  mla::MlaOptions opt;
  opt.causal = true;
  mla::TyphoonOptions mixed;
  mixed.plan = mla::typhoon_plan::mixed;  // B = 4 is far below the switch; show the mixed kernel
  mla::MlaResult ref;
  for (auto mode : {mla::numerics::float64, mla::numerics::bf16}) {
    opt.mode = mode;
    const char* mode_name = mode == mla::numerics::float64 ? "float64" : "bf16";
    auto t0 = std::chrono::steady_clock::now();
    const auto naive = mla::naive_decode(p.model(), p.inputs(), opt);
    const double t_naive = seconds_since(t0);
    if (mode == mla::numerics::float64) ref = naive;
    t0 = std::chrono::steady_clock::now();
    const auto absorb = mla::absorb_decode(p.model(), p.inputs(), opt);
    const double t_absorb = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    mla::MlaResult typhoon;
    if (mode == mla::numerics::float64) {
      typhoon = mla::typhoon_decode(
          p.model(), p.inputs(), mla::decompress_prefix<double>(p.model(), p.inputs()), opt, mixed);
    } else {
      typhoon = mla::typhoon_decode(p.model(), p.inputs(),
                                    mla::decompress_prefix<amla::bf16>(p.model(), p.inputs()), opt,
                                    mixed);
    }
    const double t_typhoon = seconds_since(t0);
    const std::pair<const mla::MlaResult*, double> runs[] = {
        {&naive, t_naive}, {&absorb, t_absorb}, {&typhoon, t_typhoon}};
    const char* names[] = {"naive", "absorb", "typhoon"};
    for (int i = 0; i < 3; ++i) {
      const auto [err, lse] = agreement(*runs[i].first, ref);
      const auto ran = mla::to_string(runs[i].first->ran);
      std::printf("  %-8s %-8s %-8.*s %14.3e %14.3e %10.3f\n", mode_name, names[i],
                  static_cast<int>(ran.size()), ran.data(), err, lse, runs[i].second);
    }
  }
  std::printf(
      "  (typhoon's time includes decompressing the prefix once; float64 agreement is at "
      "float64 rounding, bf16 at BF16 rounding, about 2^-9)\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return amla_example::option_value(i, argc, argv); };
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--demo") {
      o.demo = true;
    } else if (a == "--hw") {
      o.hw_key = value();
      if (!pick_hardware(o.hw_key, o.hw)) {
        std::fprintf(stderr, "unknown --hw %s (see --help)\n", o.hw_key.c_str());
        return 2;
      }
    } else if (a == "--suffix") {
      o.suffix = std::atoll(value().c_str());
      if (o.suffix < 0) {
        std::fprintf(stderr, "--suffix must be >= 0\n");
        return 2;
      }
    } else if (a == "--svg") {
      o.svg = value();
    } else {
      std::fprintf(stderr, "unknown argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }

  std::printf("TyphoonMLA roofline on %.*s: %.0f TFLOP/s, %.2f TB/s (ridge %.0f FLOP/byte)\n",
              static_cast<int>(o.hw.name.size()), o.hw.name.data(), o.hw.peak_flops_per_s / 1e12,
              o.hw.hbm_bytes_per_s / 1e12, o.hw.ridge_flops_per_byte());
  std::printf(
      "Times are roofline estimates of attention alone (Table 1 of the paper, plus the LSE "
      "combine), not measurements.\n");

  std::vector<Panel> panels;
  for (const Model& m : models) {
    for (const Prompt& p : prompts) {
      panels.push_back({&m, &p, sweep(m.dims, p.tokens, o)});
      print_table(m, p, panels.back().pts, o);
    }
  }
  write_svg(panels, o);
  real_case(o);
  return 0;
}
