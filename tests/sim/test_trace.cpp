// Tests of amla/sim/trace.hpp. The writers' output is read back by a small strict JSON parser and
// a small strict XML parser written here (no library), and the structure is checked: event and
// rectangle counts, escaping round trips, monotone timestamps, colours by category.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amla/sim/preload_theory.hpp"
#include "amla/sim/trace.hpp"

namespace {

using namespace amla::sim;

// ---- a strict JSON reader ----

struct JValue {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<JValue> arr;
  std::vector<std::string> keys;  // an object: keys[i] names values[i]
  std::vector<JValue> values;

  const JValue& at(const std::string& key) const {
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return values[i];
    throw std::runtime_error("missing key " + key);
  }
  bool has(const std::string& key) const {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  }
};

/// A position in a text being parsed, shared by the two strict readers below.
class TextCursor {
 protected:
  TextCursor(std::string_view s, const char* format) : s_(s), format_(format) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(std::string(format_) + " error at " + std::to_string(i_) + ": " +
                             what);
  }
  /// Skips the whitespace JSON and XML both allow: space, tab, newline, carriage return.
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  /// After the document only whitespace may follow.
  void expect_end(const char* what) {
    skip_ws();
    if (i_ != s_.size()) fail(what);
  }
  std::string_view s_;
  std::size_t i_ = 0;

 private:
  const char* format_;
};

class JsonReader : TextCursor {
 public:
  explicit JsonReader(std::string_view s) : TextCursor(s, "JSON") {}
  JValue document() {
    JValue v = value();
    expect_end("trailing characters");
    return v;
  }

 private:
  char peek() {
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected ") + c);
    ++i_;
  }
  /// Comma-separated items up to `close` (the opening bracket already read).
  template <class Item>
  void items(char close, Item&& item) {
    if (peek() == close) {
      ++i_;
      return;
    }
    for (;;) {
      item();
      if (peek() != ',') break;
      ++i_;
    }
    expect(close);
  }
  JValue value() {
    const char c = peek();
    JValue v;
    if (c == '{') {
      v.kind = JValue::Kind::object;
      ++i_;
      items('}', [&] {
        if (peek() != '"') fail("expected a key");
        std::string k = string();
        expect(':');
        v.keys.push_back(std::move(k));
        v.values.push_back(value());
      });
      return v;
    }
    if (c == '[') {
      v.kind = JValue::Kind::array;
      ++i_;
      items(']', [&] { v.arr.push_back(value()); });
      return v;
    }
    if (c == '"') {
      v.kind = JValue::Kind::string;
      v.str = string();
      return v;
    }
    if (s_.substr(i_, 4) == "true" || s_.substr(i_, 5) == "false") {
      v.kind = JValue::Kind::boolean;
      v.b = s_[i_] == 't';
      i_ += v.b ? 4 : 5;
      return v;
    }
    if (s_.substr(i_, 4) == "null") {
      i_ += 4;
      return v;
    }
    return number();
  }
  JValue number() {
    const std::size_t first = i_;
    auto digits = [&] {
      const std::size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == d) fail("expected digits");
    };
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0')
      ++i_;
    else
      digits();
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    JValue v;
    v.kind = JValue::Kind::number;
    v.num = std::strtod(std::string(s_.substr(first, i_ - first)).c_str(), nullptr);
    return v;
  }
  static void put_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  std::uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<std::uint32_t>(h - 'A' + 10);
      else
        fail("bad hex digit");
    }
    return v;
  }
  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("raw control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(i_, 2) != "\\u") fail("lone high surrogate");
            i_ += 2;
            const std::uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("lone low surrogate");
          }
          put_utf8(out, cp);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }
};

/// Whether s is well-formed UTF-8 (an independent check, not the writer's sanitiser).
bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0 || (n == 1 && c < 0xC2) || i + static_cast<std::size_t>(n) >= s.size()) return false;
    for (int k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]) & 0xC0) != 0x80)
        return false;
    i += static_cast<std::size_t>(n) + 1;
  }
  return true;
}

// ---- a strict XML reader (the subset an SVG writer needs) ----

struct XmlNode {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlNode> children;
  std::string text;  // all character data directly inside, unescaped

  std::string attr(const std::string& k) const {
    for (const auto& [a, v] : attrs)
      if (a == k) return v;
    return {};
  }
  void collect(const std::string& tag, const std::string& cls,
               std::vector<const XmlNode*>& out) const {
    if (name == tag && (cls.empty() || attr("class") == cls)) out.push_back(this);
    for (const auto& c : children) c.collect(tag, cls, out);
  }
  std::vector<const XmlNode*> all(const std::string& tag, const std::string& cls = "") const {
    std::vector<const XmlNode*> out;
    collect(tag, cls, out);
    return out;
  }
};

class XmlReader : TextCursor {
 public:
  explicit XmlReader(std::string_view s) : TextCursor(s, "XML") {}
  XmlNode document() {
    if (s_.substr(0, 5) == "<?xml") {
      const auto e = s_.find("?>");
      if (e == std::string_view::npos) fail("unterminated declaration");
      i_ = e + 2;
    }
    skip_ws();
    XmlNode root = element();
    expect_end("content after the root element");
    return root;
  }

 private:
  std::string name() {
    const std::size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                              s_[i_] == ':' || s_[i_] == '_'))
      ++i_;
    if (i_ == b) fail("expected a name");
    return std::string(s_.substr(b, i_ - b));
  }
  std::string unescape(std::string_view raw) {
    std::string out;
    for (std::size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] == '<') fail("raw '<' in text or attribute");
      if (raw[k] != '&') {
        const auto c = static_cast<unsigned char>(raw[k]);
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') fail("control character");
        out += raw[k];
        continue;
      }
      const auto semi = raw.find(';', k);
      if (semi == std::string_view::npos) fail("raw '&'");
      const std::string_view ent = raw.substr(k + 1, semi - k - 1);
      if (ent == "amp")
        out += '&';
      else if (ent == "lt")
        out += '<';
      else if (ent == "gt")
        out += '>';
      else if (ent == "quot")
        out += '"';
      else if (ent == "apos")
        out += '\'';
      else
        fail("unknown entity &" + std::string(ent) + ";");
      k = semi;
    }
    return out;
  }
  XmlNode element() {
    if (s_[i_] != '<') fail("expected '<'");
    ++i_;
    XmlNode n;
    n.name = name();
    for (;;) {
      skip_ws();
      if (i_ >= s_.size()) fail("unterminated start tag");
      if (s_.substr(i_, 2) == "/>") {
        i_ += 2;
        return n;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      std::string a = name();
      for (const auto& kv : n.attrs)
        if (kv.first == a) fail("duplicate attribute " + a);
      if (s_[i_] != '=') fail("expected '='");
      ++i_;
      if (s_[i_] != '"') fail("attribute values must be double-quoted");
      const auto close = s_.find('"', i_ + 1);
      if (close == std::string_view::npos) fail("unterminated attribute");
      n.attrs.emplace_back(a, unescape(s_.substr(i_ + 1, close - i_ - 1)));
      i_ = close + 1;
    }
    for (;;) {
      const auto lt = s_.find('<', i_);
      if (lt == std::string_view::npos) fail("unterminated element " + n.name);
      n.text += unescape(s_.substr(i_, lt - i_));
      i_ = lt;
      if (s_.substr(i_, 2) == "</") {
        i_ += 2;
        const std::string close = name();
        if (close != n.name) fail("</" + close + "> closes <" + n.name + ">");
        skip_ws();
        if (s_[i_] != '>') fail("expected '>'");
        ++i_;
        return n;
      }
      n.children.push_back(element());
    }
  }
};

// ---- fixtures ----

Timeline sample_timeline(double clock_hz) {
  Timeline t;
  t.title = "Sample \"pipeline\" <test> & more";
  t.clock = Hertz{clock_hz};
  t.lanes.push_back(Lane{"Cube", {}});
  t.lanes.push_back(Lane{"Vector \"0\"", {}});
  t.lanes.push_back(Lane{"cube0/MTE2", {}});
  auto& c = t.lanes[0].intervals;
  c.push_back({Cycles{0}, Cycles{900}, "C1[1]", "C1", Phase::preload});
  c.push_back({Cycles{900}, Cycles{1800}, "C1[2]", "C1", Phase::preload});
  c.push_back({Cycles{2600}, Cycles{3400}, "C2[1]", "C2", Phase::steady});  // out of order
  c.push_back({Cycles{1800}, Cycles{2600}, "C1[3]", "C1", Phase::steady});
  c.push_back({Cycles{3400}, Cycles{4200}, "C2[2]", "C2", Phase::drain});
  auto& v = t.lanes[1].intervals;
  v.push_back({Cycles{900}, Cycles{1500}, "V1[1] \"quoted\" back\\slash", "V1", Phase::preload});
  v.push_back({Cycles{1800}, Cycles{2400}, "new\nline\ttab \x01 ctl", "V1", Phase::steady});
  v.push_back({Cycles{2600}, Cycles{2600}, "zero-length", "V2", Phase::steady});
  v.push_back({Cycles{3400}, Cycles{3900}, "micro \xC2\xB5s <&>'", "V1", Phase::drain});
  auto& m = t.lanes[2].intervals;
  m.push_back({Cycles{0}, Cycles{300}, "ld K", "MTE2", Phase::none});
  m.push_back({Cycles{300}, Cycles{700}, "bad \xFF byte", "MTE2", Phase::none});
  return t;
}

std::size_t interval_count(const Timeline& t) {
  std::size_t n = 0;
  for (const auto& l : t.lanes) n += l.intervals.size();
  return n;
}

std::string chrome(const Timeline& t) {
  std::ostringstream os;
  amla::sim::write_chrome_trace(os, t);
  return os.str();
}

std::string svg(const Timeline& t, const amla::sim::SvgGanttOptions& o = {}) {
  std::ostringstream os;
  amla::sim::write_svg_gantt(os, t, o);
  return os.str();
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kReplacement = "\xEF\xBF\xBD";

}  // namespace

TEST_CASE("Chrome trace: structure, counts and escaping read back", "[sim][trace]") {
  const Timeline t = sample_timeline(1.8e9);
  const std::string out = chrome(t);
  REQUIRE(valid_utf8(out));
  const JValue doc = JsonReader(out).document();
  REQUIRE(doc.kind == JValue::Kind::object);
  const auto& events = doc.at("traceEvents").arr;

  std::map<int, std::string> thread_names;
  std::string process_name;
  std::vector<const JValue*> xs;
  int sort_indices = 0;
  for (const auto& e : events) {
    const std::string ph = e.at("ph").str;
    CHECK(e.at("pid").num == 1);
    if (ph == "M") {
      const std::string what = e.at("name").str;
      if (what == "process_name") process_name = e.at("args").at("name").str;
      if (what == "thread_name")
        thread_names[static_cast<int>(e.at("tid").num)] = e.at("args").at("name").str;
      if (what == "thread_sort_index") ++sort_indices;
    } else {
      REQUIRE(ph == "X");
      xs.push_back(&e);
    }
  }
  CHECK(process_name == t.title);
  CHECK(thread_names.size() == t.lanes.size());
  CHECK(sort_indices == static_cast<int>(t.lanes.size()));
  CHECK(thread_names[2] == "Vector \"0\"");
  CHECK(xs.size() == interval_count(t));

  // Every interval comes back once, by name, on its lane's thread, with its times.
  std::map<std::string, const JValue*> by_name;
  for (const JValue* e : xs) by_name[e->at("name").str] = e;
  for (std::size_t l = 0; l < t.lanes.size(); ++l)
    for (const auto& iv : t.lanes[l].intervals) {
      std::string expect = iv.name;
      if (expect == "bad \xFF byte") expect = "bad " + kReplacement + " byte";
      INFO(expect);
      REQUIRE(by_name.count(expect) == 1);
      const JValue& e = *by_name[expect];
      CHECK(thread_names[static_cast<int>(e.at("tid").num)] == t.lanes[l].name);
      CHECK(e.at("cat").str == iv.category);
      CHECK(e.at("ts").num ==
            Approx(static_cast<double>(iv.start.count) / 1.8e9 * 1e6).margin(1e-6));
      CHECK(e.at("dur").num ==
            Approx(static_cast<double>((iv.end - iv.start).count) / 1.8e9 * 1e6).margin(1e-6));
      CHECK(e.at("args").at("start_cycles").num == static_cast<double>(iv.start.count));
      CHECK(e.at("args").at("end_cycles").num == static_cast<double>(iv.end.count));
      CHECK(e.at("args").at("phase").str == amla::sim::detail::phase_name(iv.phase));
    }
  CHECK(by_name.count("new\nline\ttab \x01 ctl") == 1);  // control characters survive escaped

  // Timestamps are monotone within each thread (the writer sorts each lane).
  std::map<double, double> last_ts;
  for (const JValue* e : xs) {
    const double tid = e->at("tid").num, ts = e->at("ts").num;
    if (last_ts.count(tid)) CHECK(ts >= last_ts[tid]);
    last_ts[tid] = ts;
  }
  const auto& other = doc.at("otherData");
  CHECK(other.at("time_unit").str == "us");
  CHECK(other.at("clock_hz").num == 1.8e9);
  CHECK(other.at("makespan_cycles").num == 4200);
  CHECK(other.at("title").str == t.title);
  CHECK_FALSE(other.has("note"));
}

TEST_CASE("Chrome trace: a clock of 0 writes cycles and says so", "[sim][trace]") {
  const Timeline t = sample_timeline(0);
  const JValue doc = JsonReader(chrome(t)).document();
  CHECK(doc.at("otherData").at("time_unit").str == "cycles");
  CHECK_THAT(doc.at("otherData").at("note").str, Catch::Contains("cycles"));
  for (const auto& e : doc.at("traceEvents").arr)
    if (e.at("ph").str == "X") {
      CHECK(e.at("ts").num == e.at("args").at("start_cycles").num);
      CHECK(e.at("ts").num + e.at("dur").num == e.at("args").at("end_cycles").num);
    }
}

TEST_CASE("Chrome trace: empty timelines and bad input", "[sim][trace]") {
  Timeline empty;
  const JValue doc = JsonReader(chrome(empty)).document();
  CHECK(doc.at("traceEvents").arr.size() == 1);  // the process name only
  CHECK(doc.at("traceEvents").arr[0].at("args").at("name").str == "amla");

  Timeline bad = sample_timeline(1e9);
  bad.lanes[1].intervals[0].end = Cycles{100};  // before its start (900)
  CHECK_THROWS_WITH(chrome(bad),
                    Catch::Contains("Vector \"0\"/V1[1]") && Catch::Contains("0 <= start <= end"));
  Timeline neg = sample_timeline(-5);
  CHECK_THROWS_WITH(chrome(neg), Catch::Contains("timeline.clock") && Catch::Contains("-5"));
  Timeline nan = sample_timeline(std::nan(""));
  CHECK_THROWS_AS(chrome(nan), amla::invalid_argument);
}

TEST_CASE("Chrome trace and SVG: file convenience and unwritable paths", "[sim][trace]") {
  const Timeline t = sample_timeline(1.8e9);
  const auto dir = std::filesystem::temp_directory_path() / "amla_test_trace";
  std::filesystem::create_directories(dir);
  amla::sim::write_chrome_trace(dir / "t.json", t);
  CHECK(read_file(dir / "t.json") == chrome(t));
  amla::sim::write_svg_gantt(dir / "t.svg", t);
  CHECK(read_file(dir / "t.svg") == svg(t));
  const std::filesystem::path nowhere = "/nonexistent-amla-dir/sub/t.json";
  CHECK_THROWS_WITH(
      amla::sim::write_chrome_trace(nowhere, t),
      Catch::Contains("'path'") && Catch::Contains("/nonexistent-amla-dir/sub/t.json"));
  CHECK_THROWS_AS(amla::sim::write_svg_gantt(nowhere, t), amla::invalid_argument);
  CHECK_THROWS_WITH(amla::sim::write_svg_gantt(dir, t), Catch::Contains(dir.string()));
  std::filesystem::remove_all(dir);
}

TEST_CASE("SVG Gantt: well-formed, one rect per interval, colours by category", "[sim][trace]") {
  const Timeline t = sample_timeline(1.8e9);
  amla::sim::SvgGanttOptions opt;
  opt.subtitle = "n = 2 & <stuff>";
  opt.markers = {{Cycles{1800}, "Cycle 1"}, {Cycles{3400}, "Cycle 2 <end>"}};
  const std::string out = svg(t, opt);
  REQUIRE(valid_utf8(out));
  const XmlNode root = XmlReader(out).document();
  CHECK(root.name == "svg");
  CHECK(root.attr("xmlns") == "http://www.w3.org/2000/svg");

  // One <rect class="iv"> per interval, lane by lane in (start, end) order, fill by category.
  const auto rects = root.all("rect", "iv");
  REQUIRE(rects.size() == interval_count(t));
  const auto lanes = root.all("g", "lane");
  REQUIRE(lanes.size() == t.lanes.size());
  for (std::size_t l = 0; l < t.lanes.size(); ++l) {
    CHECK(lanes[l]->attr("data-lane") == t.lanes[l].name);
    const auto in_lane = lanes[l]->all("rect", "iv");
    const auto sorted = amla::sim::detail::sorted_intervals(t.lanes[l]);
    REQUIRE(in_lane.size() == sorted.size());
    double prev_x = -1;
    for (std::size_t k = 0; k < sorted.size(); ++k) {
      const XmlNode& r = *in_lane[k];
      CHECK(r.attr("data-category") == sorted[k]->category);
      CHECK(r.attr("fill") == amla::sim::category_colour(sorted[k]->category));
      const double x = std::stod(r.attr("x")), w = std::stod(r.attr("width"));
      CHECK(x >= prev_x);
      CHECK(w > 0);
      prev_x = x;
      REQUIRE(r.children.size() == 1);  // the tooltip
      CHECK(r.children[0].name == "title");
      std::string expect = sorted[k]->name;
      if (expect == "bad \xFF byte") expect = "bad " + kReplacement + " byte";
      if (expect == "new\nline\ttab \x01 ctl") expect = "new\nline\ttab  ctl";  // 0x01 dropped
      CHECK_THAT(r.children[0].text, Catch::StartsWith(expect + " ("));
    }
  }
  // Labels written inside wide intervals read back unescaped.
  bool saw_escaped_label = false;
  for (const XmlNode* txt : root.all("text", "iv-label"))
    saw_escaped_label = saw_escaped_label || txt->text == "micro \xC2\xB5s <&>'";
  CHECK(saw_escaped_label);

  // Title, subtitle, lane names, markers.
  CHECK(root.all("title")[0]->text == t.title);
  CHECK(root.all("text", "title")[0]->text == t.title);
  CHECK(root.all("text", "subtitle")[0]->text == "n = 2 & <stuff>");
  CHECK(root.all("text", "lane-name").size() == t.lanes.size());
  CHECK(root.all("line", "marker").size() == 2);
  CHECK(root.all("text", "marker-label")[1]->text == "Cycle 2 <end>");

  // Phases: a band per (lane, phase) present, a bracket and label per phase present.
  std::size_t lane_phase_pairs = 0;
  for (const auto& lane : t.lanes)
    for (Phase p : {Phase::preload, Phase::steady, Phase::drain})
      lane_phase_pairs += std::any_of(lane.intervals.begin(), lane.intervals.end(),
                                      [p](const Interval& iv) { return iv.phase == p; });
  CHECK(root.all("rect", "phase-band").size() == lane_phase_pairs);
  std::vector<std::string> labels;
  for (const XmlNode* n : root.all("text", "phase-label")) labels.push_back(n->text);
  CHECK(labels == std::vector<std::string>{"Preload", "Steady", "Drain"});

  // Legend: every category once, each swatch in its category's colour, then the phases.
  const auto swatches = root.all("rect", "legend-swatch");
  const auto legend = root.all("text", "legend-label");
  REQUIRE(swatches.size() == legend.size());
  std::vector<std::string> names;
  for (std::size_t k = 0; k < legend.size(); ++k) {
    names.push_back(legend[k]->text);
    if (legend[k]->text.find(" phase") == std::string::npos)
      CHECK(swatches[k]->attr("fill") == amla::sim::category_colour(legend[k]->text));
  }
  CHECK(names == std::vector<std::string>{"C1", "C2", "V1", "V2", "MTE2", "Preload phase",
                                          "Steady phase", "Drain phase"});

  // Axis: increasing tick labels from 0, in microseconds (4200 cycles at 1.8 GHz = 2.33 us).
  const auto ticks = root.all("text", "tick-label");
  REQUIRE(ticks.size() >= 3);
  CHECK(std::stod(ticks[0]->text) == 0);
  for (std::size_t k = 1; k < ticks.size(); ++k)
    CHECK(std::stod(ticks[k]->text) > std::stod(ticks[k - 1]->text));
  CHECK(std::stod(ticks.back()->text) <= 4200 / 1.8e9 * 1e6 + 1e-9);
  CHECK_THAT(root.all("text", "axis-title")[0]->text, Catch::Contains("1.8 GHz"));
}

TEST_CASE("SVG Gantt: the palette is fixed and follows categories", "[sim][trace]") {
  using amla::sim::category_colour;
  const std::vector<std::string> known = {"C1", "C2", "C3",   "C4",   "V1",   "V2",
                                          "V3", "V4", "MTE2", "MTE1", "MMAD", "FixP"};
  for (std::size_t i = 0; i < known.size(); ++i) {
    const std::string c = category_colour(known[i]);
    CHECK(c.size() == 7);
    CHECK(c[0] == '#');
    for (std::size_t j = 0; j < i; ++j) CHECK(c != category_colour(known[j]));
  }
  // Pinned: these are the documented colours; a change must be deliberate.
  CHECK(category_colour("C1") == "#3E6FB0");
  CHECK(category_colour("V1") == "#F28E2B");
  CHECK(category_colour("MTE2") == "#8E6BB3");
  // Cube stages are cool (blue/green over red), Vector stages warm (red over blue).
  auto channel = [](const std::string& hex, int k) {
    return std::stoi(hex.substr(static_cast<std::size_t>(1 + 2 * k), 2), nullptr, 16);
  };
  for (int i = 1; i <= 16; ++i) {
    const std::string c = category_colour("C" + std::to_string(i));
    const std::string v = category_colour("V" + std::to_string(i));
    CHECK(std::max(channel(c, 1), channel(c, 2)) > channel(c, 0));
    CHECK(channel(v, 0) > channel(v, 2));
  }
  CHECK(category_colour("C9") == category_colour("C1"));
  CHECK(category_colour("something else") == category_colour("something else"));
  CHECK(category_colour("something else").size() == 7);
}

TEST_CASE("SVG Gantt: empty timelines, cycles axis and bad options", "[sim][trace]") {
  const XmlNode empty = XmlReader(svg(Timeline{})).document();
  CHECK(empty.all("rect", "iv").empty());
  CHECK(empty.all("text", "empty").size() == 1);

  const Timeline t = sample_timeline(0);
  const XmlNode root = XmlReader(svg(t)).document();
  CHECK(root.all("rect", "iv").size() == interval_count(t));
  CHECK(root.all("text", "axis-title")[0]->text == "time (cycles)");
  CHECK(std::stod(root.all("text", "tick-label").back()->text) <= 4200);

  amla::sim::SvgGanttOptions narrow;
  narrow.width_px = 100;
  CHECK_THROWS_WITH(svg(t, narrow), Catch::Contains("options.width_px") && Catch::Contains("100"));
  amla::sim::SvgGanttOptions flat;
  flat.lane_height_px = 3;
  CHECK_THROWS_WITH(svg(t, flat), Catch::Contains("options.lane_height_px"));
  amla::sim::SvgGanttOptions marker;
  marker.markers = {{Cycles{-1}, "x"}};
  CHECK_THROWS_WITH(svg(t, marker), Catch::Contains("options.markers[].at"));
  Timeline bad = sample_timeline(1e9);
  bad.lanes[0].intervals[0].start = Cycles{-4};
  CHECK_THROWS_WITH(svg(bad), Catch::Contains("Cube/C1[1]"));
}

TEST_CASE("SVG Gantt and Chrome trace: extreme clocks and times still write every number",
          "[sim][trace]") {
  // An interval at 2^62 cycles on a 1 Hz clock is 4.6e24 us, on 1e15 Hz 4.6e9 us with 6
  // decimals; fixed notation of such numbers once overflowed a 64-byte buffer.
  for (const double hz : {1.0, 1e15}) {
    Timeline t;
    t.title = "extreme";
    t.clock = amla::sim::Hertz{hz};
    t.lanes = {Lane{"u", {{Cycles{0}, Cycles{std::int64_t{1} << 62}, "a", "C1", Phase::none}}}};
    INFO("clock " << hz);
    const std::string s = svg(t);
    CHECK(XmlReader(s).document().all("rect", "iv").size() == 1);
    CHECK(XmlReader(s).document().all("text", "tick-label").size() >= 2);
    const JValue j = JsonReader(chrome(t)).document();
    CHECK(j.at("traceEvents").arr.size() >= 1);
  }
  // A clock under 1 Hz would make microseconds overflow to infinity (not JSON): refused.
  Timeline slow;
  slow.clock = amla::sim::Hertz{1e-300};
  CHECK_THROWS_WITH(chrome(slow), Catch::Contains("'timeline.clock' = 1e-300"));
  CHECK_THROWS_WITH(svg(slow), Catch::Contains("[1, 1e15] Hz"));
  // A phase outside the enumeration once indexed past the writer's phase tables.
  Timeline odd = sample_timeline(1e9);
  odd.lanes[0].intervals[0].phase = static_cast<Phase>(4);
  CHECK_THROWS_WITH(
      svg(odd), Catch::Contains("'timeline interval phase'") && Catch::Contains("Cube/C1[1]: 4"));
  CHECK_THROWS_WITH(chrome(odd), Catch::Contains("timeline interval phase"));
}

TEST_CASE("SVG Gantt: crowded marker labels are thinned, lines kept", "[sim][trace]") {
  const Timeline t = sample_timeline(0);
  amla::sim::SvgGanttOptions opt;
  opt.markers = {{Cycles{2000}, "far"},
                 {Cycles{100}, "a long marker label"},
                 {Cycles{110}, "B"},
                 {Cycles{4200}, "at the right edge"}};
  const XmlNode root = XmlReader(svg(t, opt)).document();
  CHECK(root.all("line", "marker").size() == 4);
  std::vector<std::string> labels;
  for (const XmlNode* n : root.all("text", "marker-label")) labels.push_back(n->text);
  CHECK(labels == std::vector<std::string>{"a long marker label", "far", "at the right edge"});
  CHECK(root.all("text", "marker-label")[2]->attr("text-anchor") == "end");
}

TEST_CASE("A preload pipeline drawn both ways", "[sim][trace]") {
  namespace pl = amla::sim::preload;
  pl::CvDurations d;
  d.cube = {Cycles{4}, Cycles{3}, Cycles{5}};
  d.vector = {Cycles{2}, Cycles{6}, Cycles{1}};
  const auto s = pl::pipeline_schedule(d, pl::theorem_b1_arrangement(d), 6);
  const Timeline t = pl::to_timeline(s, "n = 3", Hertz{1e9});
  const XmlNode root = XmlReader(svg(t)).document();
  CHECK(root.all("rect", "iv").size() == 36);
  const JValue doc = JsonReader(chrome(t)).document();
  std::size_t xs = 0;
  for (const auto& e : doc.at("traceEvents").arr) xs += e.at("ph").str == "X";
  CHECK(xs == 36);
}
