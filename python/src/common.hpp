// python/src/common.hpp: what the translation units of the amla._amla extension share: the array
// types they accept, dtype tests, owning numpy arrays made from std::vector, argument errors.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/enum_name.hpp"

namespace amla::python {

namespace nb = nanobind;

/// A read-only CPU array of any dtype (numpy through the buffer protocol, anything else with
/// __dlpack__: torch CPU tensors arrive without a copy). C-contiguous: a strided input is copied
/// by nanobind, which is only ever done for inputs.
using InArray = nb::ndarray<nb::ro, nb::device::cpu, nb::c_contig>;
/// A writable C-contiguous CPU array (outputs; passed with noconvert so nothing is copied).
using OutArray = nb::ndarray<nb::device::cpu, nb::c_contig>;

/// Element kinds the bindings know. bf16 is a DLPack bfloat16 array, or uint16 holding BF16 bit
/// patterns (numpy has no bfloat16 of its own; ml_dtypes arrays arrive as uint16 views).
enum class elem : std::uint8_t { f32, f64, bf16, i32, other };

template <class A>
elem elem_of(const A& a) {
  const nb::dlpack::dtype d = a.dtype();
  if (d == nb::dtype<float>()) return elem::f32;
  if (d == nb::dtype<double>()) return elem::f64;
  if (d == nb::dtype<std::uint16_t>()) return elem::bf16;
  if (d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat) && d.bits == 16 &&
      d.lanes == 1) {
    return elem::bf16;
  }
  if (d == nb::dtype<std::int32_t>()) return elem::i32;
  return elem::other;
}

inline const char* elem_name(elem e) {
  return amla::detail::enum_name(e, {"float32", "float64", "bfloat16", "int32"}, "another dtype");
}

/// An owning numpy array that takes over `v` (no copy of the elements).
template <class T>
nb::ndarray<nb::numpy, T> owned_array(std::vector<T>&& v,
                                      std::initializer_list<std::size_t> shape) {
  auto* heap = new std::vector<T>(std::move(v));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(heap->data(), shape.size(), shape.begin(), owner);
}

/// An owning numpy array that takes over `v`, of a shape known only at run time.
template <class T>
nb::ndarray<nb::numpy, T> owned_array(std::vector<T>&& v, const std::vector<std::size_t>& shape) {
  auto* heap = new std::vector<T>(std::move(v));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(heap->data(), shape.size(), shape.data(), owner);
}

/// A dict of one record's fields, one entry per (name, member) pair in the pairs' order: a data
/// member's value, or what a const member function returns.
template <class Record, class... Member>
nb::dict fields(const Record& r, std::pair<const char*, Member>... named) {
  nb::dict d;
  ((d[named.first] = std::invoke(named.second, r)), ...);
  return d;
}

/// Throws amla::invalid_argument (mapped to ValueError) in amla's message format.
[[noreturn]] inline void invalid(const char* fn, const char* arg, const std::string& value,
                                 const std::string& rule) {
  amla::detail::throw_invalid(fn, arg, value, rule);
}

/// The value paired with `text` in `choices`; otherwise throws naming argument `arg` of `fn`, the
/// text given and the names allowed ("must be 'a', 'b' or 'c'").
template <class T>
T parse_choice(const char* fn, const char* arg, const std::string& text,
               std::initializer_list<std::pair<const char*, T>> choices) {
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
  }
  std::string rule = "must be ";
  std::size_t i = 0;
  for (const auto& c : choices) {
    if (i > 0) rule += i + 1 == choices.size() ? " or " : ", ";
    rule += "'" + std::string(c.first) + "'";
    ++i;
  }
  invalid(fn, arg, "'" + text + "'", rule);
}

void bind_decode(nb::module_& m);
void bind_models(nb::module_& m);
void bind_formats(nb::module_& m);

}  // namespace amla::python
