// python/src/module.cpp: the amla._amla extension module: exception mapping, the problem builder
// (attention::ProblemBuilder), and the other translation units' bindings.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amla/attention/problem_builder.hpp"
#include "common.hpp"

namespace amla::python {
namespace {

namespace at = amla::attention;

at::ValueDistribution distribution(const char* fn, const char* arg,
                                   const std::pair<std::string, double>& d) {
  if (d.first == "normal") return at::ValueDistribution::normal(d.second);
  if (d.first == "uniform") return at::ValueDistribution::uniform(d.second);
  invalid(fn, arg, "('" + d.first + "', ...)", "the kind must be 'normal' or 'uniform'");
}

template <class T, class Bits>
nb::ndarray<nb::numpy, Bits> as_array(std::vector<T>&& v,
                                      std::initializer_list<std::size_t> shape) {
  if constexpr (std::is_same_v<T, Bits>) {
    return owned_array(std::move(v), shape);
  } else {  // bf16 -> its uint16 bit patterns (one pass; bf16 is two plain bytes)
    std::vector<Bits> bits(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) bits[i] = v[i].bits;
    return owned_array(std::move(bits), shape);
  }
}

template <class T, class Bits>
nb::dict problem_dict(at::DecodeProblem<T>&& p) {
  const DecodeShape& s = p.shape;
  const auto z = [](int n) { return static_cast<std::size_t>(n); };
  nb::dict d;
  d["q"] = as_array<T, Bits>(std::move(p.q), {z(s.batch), z(s.s_q), z(s.h_q), z(s.d_qk)});
  d["kv"] =
      as_array<T, Bits>(std::move(p.kv), {z(s.num_pages), z(s.page_size), z(s.h_kv), z(s.d_qk)});
  if (p.v.empty()) {
    d["v"] = nb::none();
  } else {
    d["v"] =
        as_array<T, Bits>(std::move(p.v), {z(s.num_pages), z(s.page_size), z(s.h_kv), z(s.d_v)});
  }
  d["block_table"] = owned_array(std::move(p.block_table), {z(s.batch), z(s.max_pages_per_seq)});
  d["seqlens"] = owned_array(std::move(p.seqlens), {z(s.batch)});
  d["d_v"] = s.d_v;
  return d;
}

nb::dict build_problem(int batch, int s_q, int h_q, int h_kv, int d_qk, int d_v, int page_size,
                       std::optional<std::vector<int>> seqlens,
                       std::optional<std::pair<int, int>> random_seqlens, bool separate_v,
                       std::pair<std::string, double> q_distribution,
                       std::pair<std::string, double> kv_distribution, std::uint64_t seed,
                       bool shuffle_pages, int spare_pages, int extra_table_columns,
                       bool poison_unused, bool round_to_bf16, const std::string& dtype) {
  const char* fn = "amla.cases.build";
  at::ProblemBuilder b;
  b.batch(batch).s_q(s_q).heads(h_q, h_kv).dims(d_qk, d_v).page_size(page_size);
  if (random_seqlens) {
    b.random_seqlens(random_seqlens->first, random_seqlens->second);
  } else if (seqlens) {
    b.seqlens(*seqlens);
  }
  b.separate_v(separate_v)
      .q_distribution(distribution(fn, "q_distribution", q_distribution))
      .kv_distribution(distribution(fn, "kv_distribution", kv_distribution))
      .seed(seed)
      .shuffle_pages(shuffle_pages)
      .spare_pages(spare_pages)
      .extra_table_columns(extra_table_columns)
      .poison_unused(poison_unused)
      .round_to_bf16(round_to_bf16);
  if (dtype == "bf16") {
    at::DecodeProblem<bf16> p;
    {
      nb::gil_scoped_release release;
      p = b.build<bf16>();
    }
    return problem_dict<bf16, std::uint16_t>(std::move(p));
  }
  if (dtype == "float32") {
    at::DecodeProblem<float> p;
    {
      nb::gil_scoped_release release;
      p = b.build<float>();
    }
    return problem_dict<float, float>(std::move(p));
  }
  invalid(fn, "dtype", "'" + dtype + "'", "must be 'bf16' or 'float32'");
}

}  // namespace
}  // namespace amla::python

NB_MODULE(_amla, m) {
  namespace nb = nanobind;
  using namespace amla::python;
  m.doc() = "amla's C++ core (use the amla package, not this module)";
  m.attr("__version__") = AMLA_VERSION_STRING;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const amla::invalid_argument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  m.def("_build_problem", &build_problem, nb::arg("batch"), nb::arg("s_q"), nb::arg("h_q"),
        nb::arg("h_kv"), nb::arg("d_qk"), nb::arg("d_v"), nb::arg("page_size"),
        nb::arg("seqlens").none(), nb::arg("random_seqlens").none(), nb::arg("separate_v"),
        nb::arg("q_distribution"), nb::arg("kv_distribution"), nb::arg("seed"),
        nb::arg("shuffle_pages"), nb::arg("spare_pages"), nb::arg("extra_table_columns"),
        nb::arg("poison_unused"), nb::arg("round_to_bf16"), nb::arg("dtype"));
  bind_decode(m);
  bind_models(m);
  bind_formats(m);
}
