// python/src/recurrence_options.hpp: the one place where the Python keywords of a recurrence
// (precision, block_size and each recurrence's own options) become its C++ options struct.
//
// The keywords arrive as a dict of plain values, already spelled as in Python:
//   precision      "bf16" | "float32"                                  every recurrence
//   block_size     int, or absent for the recurrence's default          every recurrence but golden
//   compensation   "appendix_a" | "as_printed" | "none"                 amla
//   rescale        "hardware" | "checked" | "safe"                      amla
//   exponent_clamp int; nudge float; n_cast "toward_zero" | "nearest_even"   amla
//   skip_unmoved   bool                                                 amla
//   order          "forward" | "reverse"                                transposed
//   num_splits     int                                                  split_kv
// An unknown keyword or value throws amla::invalid_argument naming it.
#pragma once

#include <string>
#include <string_view>

#include "amla/attention/amla.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/seesaw.hpp"
#include "amla/attention/split_kv.hpp"
#include "amla/attention/transposed.hpp"
#include "common.hpp"

namespace amla::python {

namespace at = amla::attention;

/// The options structs of every recurrence; RecurrenceArgs::parse fills the one a call needs
/// (the others keep their defaults), with the GIL held, before the recurrence runs without it.
struct RecurrenceOptions {
  at::BaseOptions base;
  at::AmlaOptions amla;
  at::SeesawOptions seesaw;
  at::TransposedOptions transposed;
  at::SplitKvOptions split_kv;
};

/// The recurrence keywords of one call, read from the Python dict (needs the GIL).
class RecurrenceArgs {
 public:
  RecurrenceArgs(const char* fn, const nb::dict& d) : fn_(fn), d_(d) {}

  /// The options of recurrence `name` ("golden" takes none).
  RecurrenceOptions parse(std::string_view name) const {
    RecurrenceOptions o;
    if (name == "base") o.base = base();
    if (name == "amla") o.amla = amla();
    if (name == "seesaw") o.seesaw = seesaw();
    if (name == "transposed") o.transposed = transposed();
    if (name == "split_kv") o.split_kv = split_kv();
    return o;
  }

  at::precision mode() const {
    return parse_choice<at::precision>(fn_, "precision", str("precision", "bf16"),
                                       {{"bf16", at::precision::bf16},
                                        {"float32", at::precision::float32},
                                        {"fp16", at::precision::fp16}});
  }
  int block_size(int fallback) const { return integer("block_size", fallback); }

  at::AmlaOptions amla() const {
    at::AmlaOptions o;
    o.mode = mode();
    o.block_size = block_size(o.block_size);
    o.compensation =
        parse_choice<at::amla_compensation>(fn_, "compensation", str("compensation", "appendix_a"),
                                            {{"appendix_a", at::amla_compensation::appendix_a},
                                             {"as_printed", at::amla_compensation::as_printed},
                                             {"none", at::amla_compensation::none}});
    o.rescale = parse_choice<pow2_mode>(fn_, "rescale", str("rescale", "hardware"),
                                        {{"hardware", pow2_mode::hardware},
                                         {"checked", pow2_mode::checked},
                                         {"safe", pow2_mode::safe}});
    o.exponent_clamp = integer("exponent_clamp", o.exponent_clamp);
    if (has("nudge")) o.nudge = typed<float>("nudge", 0.0f, "must be a float");
    o.n_cast = parse_choice<eps_rounding>(
        fn_, "n_cast", str("n_cast", "toward_zero"),
        {{"toward_zero", eps_rounding::toward_zero}, {"nearest_even", eps_rounding::nearest_even}});
    o.skip_unmoved = typed<bool>("skip_unmoved", o.skip_unmoved, "must be a bool");
    return o;
  }

  at::BaseOptions base() const {
    at::BaseOptions o;
    o.mode = mode();
    o.block_size = block_size(o.block_size);
    return o;
  }

  at::SeesawOptions seesaw() const {
    at::SeesawOptions o;
    o.mode = mode();
    o.block_size = block_size(o.block_size);
    return o;
  }

  at::TransposedOptions transposed() const {
    at::TransposedOptions o;
    o.mode = mode();
    o.block_size = block_size(o.block_size);
    o.order = parse_choice<at::kv_block_order>(
        fn_, "order", str("order", "forward"),
        {{"forward", at::kv_block_order::forward}, {"reverse", at::kv_block_order::reverse}});
    return o;
  }

  at::SplitKvOptions split_kv() const {
    at::SplitKvOptions o;
    o.split = base();
    o.num_splits = integer("num_splits", o.num_splits);
    return o;
  }

 private:
  bool has(const char* key) const { return d_.contains(key) && !d_[key].is_none(); }
  /// The keyword `key` as a T, or `fallback` where it is absent or None; a value of another
  /// Python type throws naming the keyword, its value (repr) and the type it must have.
  template <typename T>
  T typed(const char* key, T fallback, const char* type_rule) const {
    if (!has(key)) return fallback;
    T value{};
    if (!nb::try_cast<T>(d_[key], value)) {
      invalid(fn_, key, nb::cast<std::string>(nb::repr(d_[key])), type_rule);
    }
    return value;
  }
  std::string str(const char* key, const char* fallback) const {
    return typed<std::string>(key, fallback, "must be a str");
  }
  int integer(const char* key, int fallback) const {
    return typed<int>(key, fallback, "must be an int");
  }

  const char* fn_;
  const nb::dict& d_;
};

}  // namespace amla::python
