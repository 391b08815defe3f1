// python/src/decode.cpp: the decode recurrences (golden, base, amla, seesaw, transposed,
// split_kv) on caller arrays, dense or sparse top-k, with or without attention sinks, and the lse
// convention converter.
//
// One entry point, _decode(recurrence, ...), reads the arrays as views (no copy), runs the
// recurrence with the GIL released, writes out and lse into the caller's arrays and converts lse
// to the requested convention. The Python layer (amla/_decode.py) checks shapes and allocates
// outputs; everything here is validated again by the library's own validator.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "amla/attention/golden.hpp"
#include "amla/problem/conventions.hpp"
#include "common.hpp"
#include "recurrence_options.hpp"

namespace amla::python {
namespace {

enum class recurrence : std::uint8_t { golden, base, amla, seesaw, transposed, split_kv };

struct RecurrenceName {
  recurrence r;
  const char* name;
  const char* fn;
};
constexpr RecurrenceName recurrences[] = {
    {recurrence::golden, "golden", "amla.golden"},
    {recurrence::base, "base", "amla.base"},
    {recurrence::amla, "amla", "amla.amla"},
    {recurrence::seesaw, "seesaw", "amla.seesaw"},
    {recurrence::transposed, "transposed", "amla.transposed"},
    {recurrence::split_kv, "split_kv", "amla.split_kv"},
};

LseConvention parse_convention(const char* fn, const std::string& base, const std::string& empty) {
  LseConvention c;
  c.base = parse_choice<lse_base>(fn, "lse_base", base, {{"e", lse_base::e}, {"2", lse_base::two}});
  c.empty = parse_choice<empty_lse>(fn, "empty_lse", empty,
                                    {{"-inf", empty_lse::neg_inf}, {"+inf", empty_lse::pos_inf}});
  return c;
}

template <class S>
void convert_inplace(std::span<S> lse, LseConvention from, LseConvention to) {
  if (from == to) return;
  for (S& x : lse) x = amla::convert_lse(x, from, to);
}

template <class T, class A>
std::span<T> span_of(A& a) {
  return {static_cast<T*>(const_cast<void*>(static_cast<const void*>(a.data()))), a.size()};
}

/// Field `field` of each record as a numpy column.
template <class Record, class Field>
nb::ndarray<nb::numpy, Field> column(const std::vector<Record>& records, Field Record::*field) {
  std::vector<Field> values(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) values[i] = records[i].*field;
  return owned_array(std::move(values), {records.size()});
}

/// A dict of numpy columns over `records`, one per (name, member) pair, in the pairs' order.
template <class Record, class... Field>
nb::dict columns(const std::vector<Record>& records,
                 std::pair<const char*, Field Record::*>... named) {
  nb::dict d;
  ((d[named.first] = column(records, named.second)), ...);
  return d;
}

/// Report of amla_decode as plain Python values: counts, the located violations and the located
/// clamp events column by column (amla/_decode.py turns the columns into numpy record arrays).
nb::dict report_dict(const at::AmlaReport& r) {
  using V = at::AmlaViolation;
  const nb::dict located =
      columns(r.located, std::pair{"batch", &V::batch}, std::pair{"kv_head", &V::kv_head},
              std::pair{"block", &V::block}, std::pair{"row", &V::row}, std::pair{"col", &V::col},
              std::pair{"add", &V::add}, std::pair{"before", &V::before},
              std::pair{"after", &V::after}, std::pair{"intended", &V::intended});
  using C = at::AmlaClampEvent;
  const nb::dict clamps = columns(r.clamps, std::pair{"batch", &C::batch},
                                  std::pair{"kv_head", &C::kv_head}, std::pair{"block", &C::block},
                                  std::pair{"row", &C::row}, std::pair{"step", &C::step});
  nb::dict d;
  d["violations"] = r.violations;
  d["rescaled_elements"] = r.rescaled_elements;
  d["located"] = located;
  d["clamped"] = r.clamped;
  d["clamps"] = clamps;
  return d;
}

/// Runs one recurrence; returns the AMLA report for recurrence::amla.
template <class T, class OutT, class LseT>
std::optional<at::AmlaReport> run(recurrence r, const char* fn, const DecodeInputs<T>& in,
                                  const DecodeOptions& opt, const DecodeOutputs<OutT, LseT>& outs,
                                  const RecurrenceOptions& ro) {
  if constexpr (std::is_same_v<LseT, double>) {
    (void)fn;
    (void)ro;
    AMLA_ASSERT(r == recurrence::golden);
    at::golden_decode(in, opt, outs);
    return std::nullopt;
  } else {
    switch (r) {
      case recurrence::base:
        at::base_decode(in, opt, outs, ro.base);
        break;
      case recurrence::amla:
        return at::amla_decode(in, opt, outs, ro.amla);
      case recurrence::seesaw:
        at::seesaw_decode(in, opt, outs, ro.seesaw);
        break;
      case recurrence::transposed:
        at::transposed_decode(in, opt, outs, ro.transposed);
        break;
      case recurrence::split_kv:
        at::split_kv_decode(in, opt, outs, ro.split_kv);
        break;
      default:
        invalid(fn, "recurrence", "golden", "runs with float64 lse");
    }
    return std::nullopt;
  }
}

int dim(const char* fn, const char* arg, std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX)) {
    invalid(fn, arg, std::to_string(n), "a dimension must be at most " + std::to_string(INT_MAX));
  }
  return static_cast<int>(n);
}

nb::object decode(const std::string& name, InArray q, InArray kv, std::optional<InArray> v,
                  InArray block_table, InArray seqlens, int d_v, OutArray out,
                  std::optional<OutArray> lse, bool causal, std::optional<float> softmax_scale,
                  bool round_output_bf16, bool round_output_fp16, int threads, int rows_per_task,
                  const std::string& lse_base, const std::string& empty_lse,
                  const nb::dict& options, std::optional<InArray> indices,
                  std::optional<InArray> topk_length, std::optional<InArray> sink) {
  const RecurrenceName* rec = nullptr;
  for (const RecurrenceName& r : recurrences) {
    if (name == r.name) rec = &r;
  }
  if (rec == nullptr) invalid("amla._decode", "recurrence", "'" + name + "'", "unknown");
  const char* fn = rec->fn;
  const bool golden = rec->r == recurrence::golden;

  // Element types.
  const elem et = elem_of(q);
  if (et != elem::f32 && et != elem::bf16) {
    invalid(fn, "q", std::string("dtype ") + elem_name(et),
            "must be float32, bfloat16 (ml_dtypes or DLPack) or uint16 BF16 bits");
  }
  if (elem_of(kv) != et) {
    invalid(fn, "kv", std::string("dtype ") + elem_name(elem_of(kv)),
            std::string("must have q's dtype (") + elem_name(et) + ")");
  }
  if (v && elem_of(*v) != et) {
    invalid(fn, "v", std::string("dtype ") + elem_name(elem_of(*v)),
            std::string("must have q's dtype (") + elem_name(et) + ")");
  }
  if (elem_of(block_table) != elem::i32) {
    invalid(fn, "block_table", std::string("dtype ") + elem_name(elem_of(block_table)),
            "must be int32");
  }
  if (elem_of(seqlens) != elem::i32) {
    invalid(fn, "seqlens", std::string("dtype ") + elem_name(elem_of(seqlens)), "must be int32");
  }
  const elem native = golden ? elem::f64 : elem::f32;
  const elem ot = elem_of(out);
  if (ot != native && ot != elem::bf16) {
    invalid(fn, "out", std::string("dtype ") + elem_name(ot),
            std::string("must be ") + elem_name(native) + " or bfloat16");
  }
  if (lse && elem_of(*lse) != native) {
    invalid(fn, "lse", std::string("dtype ") + elem_name(elem_of(*lse)),
            std::string("must be ") + elem_name(native));
  }
  for (const auto& [arr, arg] : {std::pair{&indices, "indices"}, {&topk_length, "topk_length"}}) {
    if (*arr && elem_of(**arr) != elem::i32) {
      invalid(fn, arg, std::string("dtype ") + elem_name(elem_of(**arr)), "must be int32");
    }
  }
  if (sink && elem_of(*sink) != elem::f32) {
    invalid(fn, "sink", std::string("dtype ") + elem_name(elem_of(*sink)), "must be float32");
  }
  if (indices && indices->ndim() != 3) {
    invalid(fn, "indices", "rank " + std::to_string(indices->ndim()),
            "must be 3 [batch, s_q, topk]");
  }
  if (topk_length && !indices) invalid(fn, "topk_length", "given", "needs indices");
  if (q.ndim() != 4 || kv.ndim() != 4 || block_table.ndim() != 2 || seqlens.ndim() != 1) {
    invalid(fn, "q, kv, block_table, seqlens", "their ranks", "must be 4, 4, 2 and 1");
  }

  DecodeShape s;
  s.batch = dim(fn, "q.shape[0]", q.shape(0));
  s.s_q = dim(fn, "q.shape[1]", q.shape(1));
  s.h_q = dim(fn, "q.shape[2]", q.shape(2));
  s.d_qk = dim(fn, "q.shape[3]", q.shape(3));
  s.num_pages = dim(fn, "kv.shape[0]", kv.shape(0));
  s.page_size = dim(fn, "kv.shape[1]", kv.shape(1));
  s.h_kv = dim(fn, "kv.shape[2]", kv.shape(2));
  s.d_v = d_v;
  s.max_pages_per_seq = dim(fn, "block_table.shape[1]", block_table.shape(1));

  const DecodeOptions opt{.causal = causal,
                          .softmax_scale = softmax_scale,
                          .round_output_bf16 = round_output_bf16,
                          .round_output_fp16 = round_output_fp16,
                          .threads = threads,
                          .rows_per_task = rows_per_task};
  const LseConvention convention = parse_convention(fn, lse_base, empty_lse);
  // Every Python object is read here, with the GIL held; the recurrence runs without it.
  const RecurrenceOptions ro = RecurrenceArgs(fn, options).parse(rec->name);

  std::optional<at::AmlaReport> report;
  auto with_inputs = [&](auto element) {
    using T = decltype(element);
    DecodeInputs<T> in{s,
                       span_of<const T>(q),
                       span_of<const T>(kv),
                       v ? span_of<const T>(*v) : std::span<const T>{},
                       span_of<const std::int32_t>(block_table),
                       span_of<const std::int32_t>(seqlens)};
    if (indices) {
      in.sparse.topk = dim(fn, "indices.shape[2]", indices->shape(2));
      in.sparse.indices = span_of<const std::int32_t>(*indices);
      if (topk_length) in.sparse.topk_length = span_of<const std::int32_t>(*topk_length);
    }
    if (sink) in.sink = span_of<const float>(*sink);
    auto with_outputs = [&](auto out_element, auto lse_element) {
      using OutT = decltype(out_element);
      using LseT = decltype(lse_element);
      const DecodeOutputs<OutT, LseT> outs{span_of<OutT>(out),
                                           lse ? span_of<LseT>(*lse) : std::span<LseT>{}};
      nb::gil_scoped_release release;
      report = run<T, OutT, LseT>(rec->r, fn, in, opt, outs, ro);
      convert_inplace(outs.lse, amla_lse, convention);
    };
    if (golden) {
      if (ot == elem::bf16) {
        with_outputs(bf16{}, double{});
      } else {
        with_outputs(double{}, double{});
      }
    } else {
      if (ot == elem::bf16) {
        with_outputs(bf16{}, float{});
      } else {
        with_outputs(float{}, float{});
      }
    }
  };
  if (et == elem::bf16) {
    with_inputs(bf16{});
  } else {
    with_inputs(float{});
  }
  if (report) return report_dict(*report);
  return nb::none();
}

/// Converts an lse array in place between conventions (problem/conventions.hpp's convert_lse).
void convert_lse_inplace(OutArray lse, const std::string& from_base, const std::string& from_empty,
                         const std::string& to_base, const std::string& to_empty) {
  const char* fn = "amla.convert_lse";
  const LseConvention from = parse_convention(fn, from_base, from_empty);
  const LseConvention to = parse_convention(fn, to_base, to_empty);
  switch (elem_of(lse)) {
    case elem::f32:
      convert_inplace(span_of<float>(lse), from, to);
      break;
    case elem::f64:
      convert_inplace(span_of<double>(lse), from, to);
      break;
    default:
      invalid(fn, "lse", std::string("dtype ") + elem_name(elem_of(lse)),
              "must be float32 or float64");
  }
}

}  // namespace

void bind_decode(nb::module_& m) {
  m.def("_decode", &decode, nb::arg("recurrence"), nb::arg("q"), nb::arg("kv"), nb::arg("v").none(),
        nb::arg("block_table"), nb::arg("seqlens"), nb::arg("d_v"), nb::arg("out").noconvert(),
        nb::arg("lse").noconvert().none(), nb::arg("causal"), nb::arg("softmax_scale").none(),
        nb::arg("round_output_bf16"), nb::arg("round_output_fp16"), nb::arg("threads"),
        nb::arg("rows_per_task"), nb::arg("lse_base"), nb::arg("empty_lse"), nb::arg("options"),
        nb::arg("indices").none() = nb::none(), nb::arg("topk_length").none() = nb::none(),
        nb::arg("sink").none() = nb::none(),
        "Runs one decode recurrence on caller arrays (see amla/_decode.py for the public API).");
  m.def("_convert_lse_inplace", &convert_lse_inplace, nb::arg("lse").noconvert(),
        nb::arg("from_base"), nb::arg("from_empty"), nb::arg("to_base"), nb::arg("to_empty"));
}

}  // namespace amla::python
