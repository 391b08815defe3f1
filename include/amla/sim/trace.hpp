// amla/sim/trace.hpp: pictures of a Timeline. Two writers, both to a std::ostream or to a file:
//
//  * write_chrome_trace: Chrome trace-event JSON (open it in https://ui.perfetto.dev or
//    chrome://tracing). One process (the Timeline's title), one thread per lane, one "X"
//    (complete) event per interval with ts/dur in microseconds (cycles / Timeline.clock). When the
//    clock is 0 the numbers are cycles instead, and "otherData" says so.
//  * write_svg_gantt: an SVG Gantt chart: lanes as rows, one rectangle per interval coloured by
//    its category (C1, V1, ..., MTE2, MMAD, ...), the preload / steady / drain phases as tinted
//    bands and labelled brackets, a time axis with ticks, a legend and a title.
//
// Colours. The AMLA paper's Figures 5-7 are not available to us as pictures, so the palette is
// our own and fixed: Cube stages (C1, C2, ...) in cool blues and greens, Vector stages (V1, V2,
// ...) in warm oranges and reds, the Cube pipes of Section 4.2 (MTE2, MTE1, MMAD, FixP) in purple,
// brown, navy and grey. Any other category gets a colour from a fallback list by a stable hash.
//
// Text. Every string from the Timeline is sanitised to valid UTF-8 (invalid bytes become U+FFFD)
// and escaped for the format (JSON string escapes; XML entities, with the characters XML 1.0
// forbids dropped). Numbers are written with std::to_chars, so no locale can change them.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/enum_name.hpp"
#include "amla/sim/timeline.hpp"
#include "amla/sim/units.hpp"

namespace amla::sim {

namespace detail {

/// Valid UTF-8 of s: each byte that does not start a well-formed sequence (overlong forms,
/// surrogates and code points above U+10FFFF included) becomes U+FFFD.
inline std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = 0;
    std::uint32_t cp = 0, min = 0;
    if (b0 < 0x80) {
      len = 1;
      cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2;
      cp = b0 & 0x1Fu;
      min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3;
      cp = b0 & 0x0Fu;
      min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4;
      cp = b0 & 0x07u;
      min = 0x10000;
    }
    bool ok = len > 0 && i + static_cast<std::size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      ok = (b & 0xC0) == 0x80;
      cp = (cp << 6) | (b & 0x3Fu);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok) {
      out.append(s.substr(i, static_cast<std::size_t>(len)));
      i += static_cast<std::size_t>(len);
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += 1;
    }
  }
  return out;
}

/// A character an escaper replaces, and its replacement.
struct Escape {
  char ch;
  const char* text;
};

/// s, sanitised to UTF-8, with each character listed in `named` replaced by its text and every
/// other control character (below 0x20) handed to `control`, which appends what stands for it.
template <std::size_t N, class Control>
std::string escape(std::string_view s, const Escape (&named)[N], Control&& control) {
  std::string out;
  for (const char ch : utf8_sanitize(s)) {
    const Escape* e = std::find_if(std::begin(named), std::end(named),
                                   [&](const Escape& x) { return x.ch == ch; });
    if (e != std::end(named)) {
      out += e->text;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      control(out, static_cast<unsigned char>(ch));
    } else {
      out += ch;
    }
  }
  return out;
}

/// s as the body of a JSON string (without the quotes): the two-character escapes where JSON has
/// them, \u00XX for the other control characters.
inline std::string json_escape(std::string_view s) {
  static constexpr Escape named[] = {{'"', "\\\""}, {'\\', "\\\\"}, {'\b', "\\b"}, {'\f', "\\f"},
                                     {'\n', "\\n"}, {'\r', "\\r"},  {'\t', "\\t"}};
  return escape(s, named, [](std::string& out, unsigned char c) {
    static constexpr char hex[] = "0123456789abcdef";
    out += "\\u00";
    out += hex[c >> 4];
    out += hex[c & 0xF];
  });
}

/// s as XML character data or an attribute value: & < > " ' as entities; the control characters
/// XML 1.0 does not allow (below 0x20 except tab, newline, carriage return) dropped.
inline std::string xml_escape(std::string_view s) {
  static constexpr Escape named[] = {{'&', "&amp;"},  {'<', "&lt;"},    {'>', "&gt;"},
                                     {'"', "&quot;"}, {'\'', "&apos;"}, {'\t', "\t"},
                                     {'\n', "\n"},    {'\r', "\r"}};
  return escape(s, named, [](std::string&, unsigned char) {});
}

/// A double in fixed notation with `decimals` digits (at most 30), independent of any locale.
/// Any double fits the buffer: a sign, at most 309 integer digits, the point and 30 decimals.
inline std::string fixed(double v, int decimals) {
  if (v == 0) v = 0;  // no "-0.00"
  char buf[400];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed,
                               std::clamp(decimals, 0, 30));
  AMLA_ASSERT(r.ec == std::errc{});
  return std::string(buf, r.ptr);
}

/// A double in the shortest form that reads back exactly, independent of any locale.
inline std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  AMLA_ASSERT(r.ec == std::errc{});
  return std::string(buf, r.ptr);
}

inline const char* phase_name(Phase p) {
  return amla::detail::enum_name(p, {"none", "preload", "steady", "drain"}, "none");
}

/// Throws unless every interval has 0 <= start <= end and the clock is 0 (report cycles) or in
/// [1 Hz, 1e15 Hz], so that every time in microseconds is a finite number.
inline void validate_timeline(const Timeline& t, const char* function) {
  if (!(t.clock.count == 0 || (t.clock.count >= 1 && t.clock.count <= 1e15)))
    ::amla::detail::throw_invalid(function, "timeline.clock",
                                  ::amla::detail::to_text(t.clock.count),
                                  "0 (report cycles) or a frequency in [1, 1e15] Hz");
  for (const Lane& lane : t.lanes)
    for (const Interval& iv : lane.intervals) {
      if (iv.start < Cycles{0} || iv.end < iv.start)
        ::amla::detail::throw_invalid(function, "timeline interval",
                                      lane.name + "/" + iv.name + " [" +
                                          std::to_string(iv.start.count) + ", " +
                                          std::to_string(iv.end.count) + ")",
                                      "0 <= start <= end");
      const int phase = static_cast<int>(iv.phase);
      if (phase < 0 || phase > static_cast<int>(Phase::drain))
        ::amla::detail::throw_invalid(function, "timeline interval phase",
                                      lane.name + "/" + iv.name + ": " + std::to_string(phase),
                                      "a Phase (none, preload, steady, drain)");
    }
}

/// The intervals of a lane ordered by (start, end), as pointers.
inline std::vector<const Interval*> sorted_intervals(const Lane& lane) {
  std::vector<const Interval*> v;
  for (const Interval& iv : lane.intervals) v.push_back(&iv);
  std::stable_sort(v.begin(), v.end(), [](const Interval* a, const Interval* b) {
    return std::make_pair(a->start.count, a->end.count) <
           std::make_pair(b->start.count, b->end.count);
  });
  return v;
}

template <class Writer>
void write_to_path(const std::filesystem::path& path, const char* function, Writer&& write) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    ::amla::detail::throw_invalid(function, "path", path.string(),
                                  "a file that can be opened for writing");
  write(f);
  f.flush();
  if (!f)
    ::amla::detail::throw_invalid(function, "path", path.string(),
                                  "a file that can be written completely");
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Chrome trace-event JSON

/// Writes `t` as Chrome trace-event JSON (the "JSON Object Format": traceEvents plus metadata).
/// Events of a lane come out in (start, end) order; ts and dur are microseconds when t.clock > 0,
/// cycles when it is 0 (otherData.time_unit says which). Throws amla::invalid_argument for a
/// negative or non-finite clock or an interval with end < start or start < 0.
inline void write_chrome_trace(std::ostream& os, const Timeline& t) {
  detail::validate_timeline(t, __func__);
  const bool cycles = t.clock.count == 0;
  auto time = [&](Cycles c) {
    return cycles ? std::to_string(c.count)
                  : detail::fixed(static_cast<double>(c.count) / t.clock.count * 1e6, 6);
  };
  std::string out;
  out += "{\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"" +
         detail::json_escape(t.title.empty() ? "amla" : t.title) + "\"}}";
  for (std::size_t l = 0; l < t.lanes.size(); ++l) {
    const std::string tid = std::to_string(l + 1);
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid +
           ",\"args\":{\"name\":\"" + detail::json_escape(t.lanes[l].name) + "\"}}";
    out += ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid +
           ",\"args\":{\"sort_index\":" + std::to_string(l) + "}}";
  }
  os << out;
  for (std::size_t l = 0; l < t.lanes.size(); ++l) {
    const std::string tid = std::to_string(l + 1);
    for (const Interval* iv : detail::sorted_intervals(t.lanes[l])) {
      out = ",\n{\"name\":\"" + detail::json_escape(iv->name) + "\",\"cat\":\"" +
            detail::json_escape(iv->category.empty() ? "stage" : iv->category) +
            "\",\"ph\":\"X\",\"pid\":1,\"tid\":" + tid + ",\"ts\":" + time(iv->start) +
            ",\"dur\":" + time(iv->end - iv->start) + ",\"args\":{\"phase\":\"" +
            detail::phase_name(iv->phase) +
            "\",\"start_cycles\":" + std::to_string(iv->start.count) +
            ",\"end_cycles\":" + std::to_string(iv->end.count) + "}}";
      os << out;
    }
  }
  out = "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"title\":\"" +
        detail::json_escape(t.title) + "\",\"time_unit\":\"" + (cycles ? "cycles" : "us") +
        "\",\"clock_hz\":" + detail::shortest(t.clock.count) +
        ",\"makespan_cycles\":" + std::to_string(t.makespan().count);
  if (cycles)
    out += ",\"note\":\"Timeline.clock is 0: ts and dur are cycles, shown as if microseconds\"";
  out += "}}\n";
  os << out;
}

/// write_chrome_trace to a file; throws amla::invalid_argument naming the path if it cannot be
/// opened or written.
inline void write_chrome_trace(const std::filesystem::path& path, const Timeline& t) {
  detail::validate_timeline(t, __func__);
  detail::write_to_path(path, __func__, [&](std::ostream& os) { write_chrome_trace(os, t); });
}

// ---------------------------------------------------------------------------------------------
// SVG Gantt chart

/// The fixed fill colour ("#rrggbb") of a stage category.
inline std::string category_colour(std::string_view category) {
  static const std::map<std::string_view, const char*> fixed_colours = {
      // Cube stages: cool.
      {"C1", "#3E6FB0"},
      {"C2", "#2A9D8F"},
      {"C3", "#5AA469"},
      {"C4", "#7FA7D8"},
      {"C5", "#1D5B79"},
      {"C6", "#88C9B9"},
      {"C7", "#3F7D58"},
      {"C8", "#6C8EBF"},
      // Vector stages: warm.
      {"V1", "#F28E2B"},
      {"V2", "#D64550"},
      {"V3", "#E9B949"},
      {"V4", "#F4A3A8"},
      {"V5", "#B5651D"},
      {"V6", "#E86A92"},
      {"V7", "#C9A227"},
      {"V8", "#F6BD8C"},
      // Cube pipes (AMLA Section 4.2) and Vector-side movers.
      {"MTE2", "#8E6BB3"},
      {"MTE1", "#9C755F"},
      {"MMAD", "#2B3F73"},
      {"FixP", "#9AA0A6"},
      {"MTE3", "#C490C9"},
      {"VEC", "#F28E2B"},
      {"GM", "#6B6B6B"},
      {"idle", "#D9D9D9"},
  };
  static constexpr std::array<const char*, 8> fallback = {
      "#7F7F7F", "#A1A13A", "#17A0B8", "#8467BD", "#8C564B", "#D67FC0", "#4D9DE0", "#6BAA75"};
  if (auto it = fixed_colours.find(category); it != fixed_colours.end()) return it->second;
  if (category.size() >= 2 && (category[0] == 'C' || category[0] == 'V') &&
      std::all_of(category.begin() + 1, category.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    // C9, V12, ...: cycle through the family of the unit.
    const int i = std::atoi(std::string(category.substr(1)).c_str());
    const std::string_view cube[] = {"C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8"};
    const std::string_view vec[] = {"V1", "V2", "V3", "V4", "V5", "V6", "V7", "V8"};
    return fixed_colours.at((category[0] == 'C' ? cube : vec)[(i - 1) % 8]);
  }
  std::uint32_t h = 2166136261u;  // FNV-1a: stable across runs and platforms
  for (char c : category) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return fallback[h % fallback.size()];
}

/// A vertical line across the lanes at a time, with a short label (e.g. Cycle boundaries).
struct GanttMarker {
  Cycles at;
  std::string label;
};

/// Layout options of write_svg_gantt.
struct SvgGanttOptions {
  int width_px = 1280;          ///< whole picture, in [320, 20000]
  int lane_height_px = 34;      ///< one row, in [12, 200]
  bool interval_labels = true;  ///< write the interval's name inside it when it fits
  std::string subtitle;         ///< a second line under the title
  std::vector<GanttMarker>
      markers;  ///< vertical lines; a label overlapping an earlier one is dropped
};

namespace detail {

inline double luminance(const std::string& hex) {
  auto channel = [&](std::size_t i) {
    const double c = std::stoi(hex.substr(i, 2), nullptr, 16) / 255.0;
    return c <= 0.03928 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

/// A darker shade of a "#rrggbb" colour (for outlines).
inline std::string darker(const std::string& hex, double factor = 0.72) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out = "#";
  for (std::size_t i = 1; i < 7; i += 2) {
    const int c = static_cast<int>(std::lround(std::stoi(hex.substr(i, 2), nullptr, 16) * factor));
    out += digits[c >> 4];
    out += digits[c & 0xF];
  }
  return out;
}

/// Tick step 1, 2 or 5 x 10^k giving at most `max_ticks` intervals over [0, span].
inline double nice_step(double span, int max_ticks) {
  if (!(span > 0)) return 1;
  const double raw = span / max_ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

/// The sort key of a category in the legend: C1..Cn, V1..Vn, pipes, then the rest by name.
inline std::pair<int, std::string> legend_key(const std::string& c) {
  if (c.size() >= 2 && (c[0] == 'C' || c[0] == 'V') &&
      std::all_of(c.begin() + 1, c.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    const int i = std::atoi(c.c_str() + 1);
    return {(c[0] == 'C' ? 0 : 100000) + i, ""};
  }
  static const char* pipes[] = {"MTE2", "MTE1", "MMAD", "FixP", "MTE3"};
  for (int k = 0; k < 5; ++k)
    if (c == pipes[k]) return {200000 + k, ""};
  return {300000, c};
}

struct PhaseStyle {
  Phase phase;
  const char* label;
  const char* band;    // lane background tint
  const char* accent;  // bracket and legend colour
};
inline constexpr PhaseStyle phase_styles[] = {
    {Phase::preload, "Preload", "#E3ECF8", "#4A78B8"},
    {Phase::steady, "Steady", "#E4F2E4", "#3F8F4A"},
    {Phase::drain, "Drain", "#FBEBDD", "#C8702A"},
};

/// Approximate width in pixels of text at a font size (a sans-serif average advance).
inline double text_width_px(const std::string& s, double font_px) {
  std::size_t glyphs = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++glyphs;
  return static_cast<double>(glyphs) * font_px * 0.6;
}

}  // namespace detail

/// Writes `t` as an SVG Gantt chart. Each interval is one <rect class="iv"> whose fill is
/// category_colour(its category) and whose data-category is its category, with a <title> tooltip;
/// phases appear as tinted bands per lane and labelled brackets above the lanes. Throws
/// amla::invalid_argument for bad intervals or options.
inline void write_svg_gantt(std::ostream& os, const Timeline& t, const SvgGanttOptions& opt = {}) {
  detail::validate_timeline(t, __func__);
  AMLA_REQUIRE(opt.width_px >= 320 && opt.width_px <= 20000, "options.width_px", opt.width_px,
               "in [320, 20000]");
  AMLA_REQUIRE(opt.lane_height_px >= 12 && opt.lane_height_px <= 200, "options.lane_height_px",
               opt.lane_height_px, "in [12, 200]");
  for (const auto& m : opt.markers)
    AMLA_REQUIRE(m.at >= Cycles{0}, "options.markers[].at", m.at.count, ">= 0 cycles");
  using detail::fixed;
  using detail::xml_escape;
  const bool cycles = t.clock.count == 0;
  const double lane_h = opt.lane_height_px;
  const double font = 12;

  // Horizontal layout.
  double label_w = 60;
  for (const Lane& lane : t.lanes)
    label_w = std::max(label_w, detail::text_width_px(detail::utf8_sanitize(lane.name), 13) + 24);
  const double left = label_w, right = 28;
  const double plot_w = opt.width_px - left - right;
  const Cycles makespan = t.makespan();
  Cycles span = makespan;
  for (const auto& m : opt.markers) span = std::max(span, m.at);
  const double span_cycles = std::max<double>(1, static_cast<double>(span.count));
  auto x_of = [&](Cycles c) { return left + plot_w * static_cast<double>(c.count) / span_cycles; };

  // Which categories and phases occur; phase spans over all lanes and per lane.
  std::vector<std::string> categories;
  bool phase_seen[4] = {false, false, false, false};
  Cycles phase_lo[4], phase_hi[4];
  for (const Lane& lane : t.lanes)
    for (const Interval& iv : lane.intervals) {
      if (std::find(categories.begin(), categories.end(), iv.category) == categories.end())
        categories.push_back(iv.category);
      const auto p = static_cast<int>(iv.phase);
      if (iv.phase == Phase::none) continue;
      phase_lo[p] = phase_seen[p] ? std::min(phase_lo[p], iv.start) : iv.start;
      phase_hi[p] = phase_seen[p] ? std::max(phase_hi[p], iv.end) : iv.end;
      phase_seen[p] = true;
    }
  std::stable_sort(categories.begin(), categories.end(), [](const auto& a, const auto& b) {
    return detail::legend_key(a) < detail::legend_key(b);
  });

  // Phase brackets: one row, or two when spans overlap (as-soon-as-possible timing).
  struct Bracket {
    const detail::PhaseStyle* style;
    Cycles lo, hi;
    int row;
  };
  std::vector<Bracket> brackets;
  for (const auto& st : detail::phase_styles) {
    const auto p = static_cast<int>(st.phase);
    if (!phase_seen[p]) continue;
    int row = 0;
    if (!brackets.empty() && phase_lo[p] < brackets.back().hi) row = 1 - brackets.back().row;
    brackets.push_back({&st, phase_lo[p], phase_hi[p], row});
  }
  const int bracket_rows =
      brackets.empty() ? 0
                       : 1 + static_cast<int>(std::any_of(brackets.begin(), brackets.end(),
                                                          [](const Bracket& b) { return b.row; }));

  // Vertical layout.
  const double title_y = 30;
  double y = title_y + (opt.subtitle.empty() ? 14 : 34);
  const double marker_label_h = opt.markers.empty() ? 0 : 16;
  const double brackets_top = y;
  y += bracket_rows * 22.0 + marker_label_h;
  const double lanes_top = y;
  const double lanes_h = lane_h * static_cast<double>(t.lanes.size());
  const double axis_y = lanes_top + lanes_h;
  const double legend_top = axis_y + 46;
  // Legend items: categories, then phases.
  struct Item {
    std::string label, fill, stroke;
  };
  std::vector<Item> items;
  for (const auto& c : categories)
    items.push_back(
        {c.empty() ? "(no category)" : c, category_colour(c), detail::darker(category_colour(c))});
  for (const auto& st : detail::phase_styles)
    if (phase_seen[static_cast<int>(st.phase)])
      items.push_back({std::string(st.label) + " phase", st.band, st.accent});
  std::vector<std::pair<double, double>> item_pos;
  {
    double ix = left, iy = legend_top;
    for (const auto& it : items) {
      const double w = 18 + 6 + detail::text_width_px(detail::utf8_sanitize(it.label), font) + 18;
      if (ix + w > opt.width_px - right && ix > left) {
        ix = left;
        iy += 20;
      }
      item_pos.emplace_back(ix, iy);
      ix += w;
    }
  }
  const double height = (items.empty() ? legend_top : item_pos.back().second + 20) + 14;

  std::string s;
  s.reserve(4096 + 256 * static_cast<std::size_t>(t.lanes.size() * 8));
  auto attr_num = [&](double v) { return fixed(v, 2); };
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(opt.width_px) +
       "\" height=\"" + attr_num(height) + "\" viewBox=\"0 0 " + std::to_string(opt.width_px) +
       " " + attr_num(height) + "\" font-family=\"Helvetica, Arial, 'DejaVu Sans', sans-serif\">\n";
  s += "<title>" + xml_escape(t.title) + "</title>\n";
  s += "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" + std::to_string(opt.width_px) +
       "\" height=\"" + attr_num(height) + "\" fill=\"#FFFFFF\"/>\n";
  s += "<text class=\"title\" x=\"" + attr_num(left) + "\" y=\"" + attr_num(title_y) +
       "\" font-size=\"18\" font-weight=\"bold\" fill=\"#222222\">" + xml_escape(t.title) +
       "</text>\n";
  if (!opt.subtitle.empty())
    s += "<text class=\"subtitle\" x=\"" + attr_num(left) + "\" y=\"" + attr_num(title_y + 20) +
         "\" font-size=\"13\" fill=\"#555555\">" + xml_escape(opt.subtitle) + "</text>\n";
  os << s;
  s.clear();

  // Lane backgrounds, phase bands, lane names.
  s += "<g class=\"lanes\">\n";
  for (std::size_t l = 0; l < t.lanes.size(); ++l) {
    const double ly = lanes_top + lane_h * static_cast<double>(l);
    s += "<rect class=\"lane-bg\" x=\"" + attr_num(left) + "\" y=\"" + attr_num(ly) +
         "\" width=\"" + attr_num(plot_w) + "\" height=\"" + attr_num(lane_h) + "\" fill=\"" +
         (l % 2 == 0 ? "#F7F7F7" : "#FFFFFF") + "\"/>\n";
    for (const auto& st : detail::phase_styles) {
      bool seen = false;
      Cycles lo, hi;
      for (const Interval& iv : t.lanes[l].intervals)
        if (iv.phase == st.phase) {
          lo = seen ? std::min(lo, iv.start) : iv.start;
          hi = seen ? std::max(hi, iv.end) : iv.end;
          seen = true;
        }
      if (!seen) continue;
      s += "<rect class=\"phase-band\" data-phase=\"" + std::string(detail::phase_name(st.phase)) +
           "\" x=\"" + attr_num(x_of(lo)) + "\" y=\"" + attr_num(ly) + "\" width=\"" +
           attr_num(std::max(0.0, x_of(hi) - x_of(lo))) + "\" height=\"" + attr_num(lane_h) +
           "\" fill=\"" + st.band + "\"/>\n";
    }
    s += "<text class=\"lane-name\" x=\"" + attr_num(left - 10) + "\" y=\"" +
         attr_num(ly + lane_h / 2 + 4.5) +
         "\" font-size=\"13\" text-anchor=\"end\" fill=\"#333333\">" + xml_escape(t.lanes[l].name) +
         "</text>\n";
  }
  s += "</g>\n";

  // Grid and axis ticks.
  const double step = detail::nice_step(cycles ? span_cycles : span_cycles / t.clock.count * 1e6,
                                        std::max(2, static_cast<int>(plot_w / 90)));
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  s += "<g class=\"axis\">\n";
  for (int k = 0;; ++k) {
    const double v = step * k;  // in axis units
    const double c = cycles ? v : v * t.clock.count / 1e6;
    if (c > span_cycles * (1 + 1e-9)) break;
    const double x = left + plot_w * c / span_cycles;
    s += "<line class=\"grid\" x1=\"" + attr_num(x) + "\" y1=\"" + attr_num(lanes_top) +
         "\" x2=\"" + attr_num(x) + "\" y2=\"" + attr_num(axis_y) +
         "\" stroke=\"#DDDDDD\" stroke-width=\"1\"/>\n";
    s += "<line class=\"tick\" x1=\"" + attr_num(x) + "\" y1=\"" + attr_num(axis_y) + "\" x2=\"" +
         attr_num(x) + "\" y2=\"" + attr_num(axis_y + 5) + "\" stroke=\"#555555\"/>\n";
    s += "<text class=\"tick-label\" x=\"" + attr_num(x) + "\" y=\"" + attr_num(axis_y + 18) +
         "\" font-size=\"11\" text-anchor=\"middle\" fill=\"#444444\">" + fixed(v, decimals) +
         "</text>\n";
  }
  s += "<line class=\"axis-line\" x1=\"" + attr_num(left) + "\" y1=\"" + attr_num(axis_y) +
       "\" x2=\"" + attr_num(left + plot_w) + "\" y2=\"" + attr_num(axis_y) +
       "\" stroke=\"#555555\"/>\n";
  s += "<text class=\"axis-title\" x=\"" + attr_num(left + plot_w) + "\" y=\"" +
       attr_num(axis_y + 34) + "\" font-size=\"12\" text-anchor=\"end\" fill=\"#444444\">" +
       (cycles ? std::string("time (cycles)")
               : "time (\xC2\xB5s at " + detail::shortest(t.clock.count / 1e9) + " GHz)") +
       "</text>\n";
  s += "</g>\n";
  os << s;
  s.clear();

  // A frame around the lanes.
  if (!t.lanes.empty())
    s += "<rect class=\"frame\" x=\"" + attr_num(left) + "\" y=\"" + attr_num(lanes_top) +
         "\" width=\"" + attr_num(plot_w) + "\" height=\"" + attr_num(lanes_h) +
         "\" fill=\"none\" stroke=\"#C8C8C8\" stroke-width=\"1\"/>\n";

  // Intervals.
  const double pad = std::max(2.0, lane_h * 0.14);
  for (std::size_t l = 0; l < t.lanes.size(); ++l) {
    const double ly = lanes_top + lane_h * static_cast<double>(l) + pad;
    const double h = lane_h - 2 * pad;
    s += "<g class=\"lane\" data-lane=\"" + xml_escape(t.lanes[l].name) + "\">\n";
    for (const Interval* iv : detail::sorted_intervals(t.lanes[l])) {
      const std::string fill = category_colour(iv->category);
      const double x0 = x_of(iv->start), w = std::max(0.75, x_of(iv->end) - x0);
      const double us0 = cycles ? 0 : static_cast<double>(iv->start.count) / t.clock.count * 1e6;
      const double us1 = cycles ? 0 : static_cast<double>(iv->end.count) / t.clock.count * 1e6;
      std::string tip = iv->name + " (" + iv->category + "): cycles " +
                        std::to_string(iv->start.count) + " to " + std::to_string(iv->end.count);
      if (!cycles) tip += ", " + fixed(us0, 3) + " to " + fixed(us1, 3) + " us";
      if (iv->phase != Phase::none) tip += ", " + std::string(detail::phase_name(iv->phase));
      s += "<rect class=\"iv\" data-category=\"" + xml_escape(iv->category) + "\" x=\"" +
           attr_num(x0) + "\" y=\"" + attr_num(ly) + "\" width=\"" + attr_num(w) + "\" height=\"" +
           attr_num(h) + "\" rx=\"2\" fill=\"" + fill + "\" stroke=\"" + detail::darker(fill) +
           "\" stroke-width=\"0.8\"><title>" + xml_escape(tip) + "</title></rect>\n";
      const std::string name = detail::utf8_sanitize(iv->name);
      if (opt.interval_labels && detail::text_width_px(name, 11) + 6 <= w)
        s += "<text class=\"iv-label\" x=\"" + attr_num(x0 + w / 2) + "\" y=\"" +
             attr_num(ly + h / 2 + 4) + "\" font-size=\"11\" text-anchor=\"middle\" fill=\"" +
             (detail::luminance(fill) < 0.4 ? "#FFFFFF" : "#1A1A1A") +
             "\" pointer-events=\"none\">" + xml_escape(name) + "</text>\n";
    }
    s += "</g>\n";
    os << s;
    s.clear();
  }

  // Markers, in time order; a label that would overlap the previous one is left out.
  if (!opt.markers.empty()) {
    std::vector<const GanttMarker*> ms;
    for (const auto& m : opt.markers) ms.push_back(&m);
    std::stable_sort(ms.begin(), ms.end(),
                     [](const GanttMarker* a, const GanttMarker* b) { return a->at < b->at; });
    double last_right = -1e300;
    s += "<g class=\"markers\">\n";
    for (const GanttMarker* m : ms) {
      const double x = x_of(m->at);
      s += "<line class=\"marker\" x1=\"" + attr_num(x) + "\" y1=\"" + attr_num(lanes_top - 4) +
           "\" x2=\"" + attr_num(x) + "\" y2=\"" + attr_num(axis_y) +
           "\" stroke=\"#666666\" stroke-width=\"1\" stroke-dasharray=\"4 3\"/>\n";
      if (m->label.empty()) continue;
      // Right of the line, or left of it where it would leave the picture.
      const double w = detail::text_width_px(detail::utf8_sanitize(m->label), 10);
      const bool flip = x + 3 + w > opt.width_px - 4;
      const double lo = flip ? x - 3 - w : x + 3;
      if (lo < last_right + 6) continue;
      last_right = lo + w;
      s += "<text class=\"marker-label\" x=\"" + attr_num(flip ? x - 3 : x + 3) + "\" y=\"" +
           attr_num(lanes_top - 6) + "\" font-size=\"10\" text-anchor=\"" +
           (flip ? "end" : "start") + "\" fill=\"#555555\">" + xml_escape(m->label) + "</text>\n";
    }
    s += "</g>\n";
  }

  // Phase brackets.
  if (!brackets.empty()) {
    s += "<g class=\"phases\">\n";
    for (const auto& b : brackets) {
      const double by = brackets_top + 22.0 * b.row + 16;
      const double x0 = x_of(b.lo) + 1, x1 = std::max(x0 + 2, x_of(b.hi) - 1);
      s += "<path class=\"phase-bracket\" data-phase=\"" +
           std::string(detail::phase_name(b.style->phase)) + "\" d=\"M" + attr_num(x0) + " " +
           attr_num(by + 5) + " V" + attr_num(by) + " H" + attr_num(x1) + " V" + attr_num(by + 5) +
           "\" fill=\"none\" stroke=\"" + b.style->accent + "\" stroke-width=\"1.5\"/>\n";
      s += "<text class=\"phase-label\" x=\"" + attr_num((x0 + x1) / 2) + "\" y=\"" +
           attr_num(by - 4) +
           "\" font-size=\"12\" font-weight=\"bold\" text-anchor=\"middle\" fill=\"" +
           b.style->accent + "\">" + b.style->label + "</text>\n";
    }
    s += "</g>\n";
  }

  // Legend.
  if (!items.empty()) {
    s += "<g class=\"legend\">\n";
    for (std::size_t k = 0; k < items.size(); ++k) {
      const auto [ix, iy] = item_pos[k];
      s += "<rect class=\"legend-swatch\" x=\"" + attr_num(ix) + "\" y=\"" + attr_num(iy) +
           "\" width=\"18\" height=\"12\" rx=\"2\" fill=\"" + items[k].fill + "\" stroke=\"" +
           items[k].stroke + "\"/>\n";
      s += "<text class=\"legend-label\" x=\"" + attr_num(ix + 24) + "\" y=\"" +
           attr_num(iy + 10.5) + "\" font-size=\"12\" fill=\"#333333\">" +
           xml_escape(items[k].label) + "</text>\n";
    }
    s += "</g>\n";
  }
  if (t.lanes.empty())
    s += "<text class=\"empty\" x=\"" + attr_num(left) + "\" y=\"" + attr_num(lanes_top + 20) +
         "\" font-size=\"13\" fill=\"#777777\">(empty timeline)</text>\n";
  s += "</svg>\n";
  os << s;
}

/// write_svg_gantt to a file; throws amla::invalid_argument naming the path if it cannot be
/// opened or written.
inline void write_svg_gantt(const std::filesystem::path& path, const Timeline& t,
                            const SvgGanttOptions& opt = {}) {
  detail::validate_timeline(t, __func__);
  detail::write_to_path(path, __func__, [&](std::ostream& os) { write_svg_gantt(os, t, opt); });
}

}  // namespace amla::sim
