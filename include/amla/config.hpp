// amla/config.hpp: version, error macros, host/device qualifiers, feature macros.
//
// Every amla header includes this one first. It has no dependencies beyond the standard library.
//
// Compiled where called. A header function that is not a template is compiled in every unit that
// includes its header, with every template its body uses, called or not: each Eigen product of a
// recurrence costs 0.4-0.7 s of the compiler's time, golden_attention<float> 2 s. The functions
// that run a recurrence (its core, the public xxx_attention, and the descriptor's core behind
// xxx_decode) are therefore templates with one unused parameter, `template <class = void>`:
// called as before, compiled only in the units that call them (amla.hpp alone: 10 s of g++ instead
// of 21).
#pragma once

#include <charconv>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#define AMLA_VERSION_MAJOR 0
#define AMLA_VERSION_MINOR 1
#define AMLA_VERSION_PATCH 0
#define AMLA_VERSION_STRING "0.1.0"

// AMLA_HOST_DEVICE marks functions usable from both host code and CUDA device code. Under a
// compiler that is not nvcc (or clang-cuda) it expands to nothing.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define AMLA_HOST_DEVICE __host__ __device__
#define AMLA_DEVICE_COMPILE 1
#else
#define AMLA_HOST_DEVICE
#define AMLA_DEVICE_COMPILE 0
#endif

// AMLA_ENUMERATORS_BEGIN / AMLA_ENUMERATORS_END enclose a scoped enum whose enumerators are named
// after amla's number types (precision::fp16 beside amla::fp16, a type alias): GCC's -Wshadow
// reports such an enumerator as shadowing the alias, though a scoped enumerator cannot hide it.
#if defined(__GNUC__) && !defined(__clang__)
#define AMLA_ENUMERATORS_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wshadow\"")
#define AMLA_ENUMERATORS_END _Pragma("GCC diagnostic pop")
#else
#define AMLA_ENUMERATORS_BEGIN
#define AMLA_ENUMERATORS_END
#endif

// AMLA_ASSERT checks internal invariants (never user input: host entry points validate and throw
// instead). A user may define AMLA_ASSERT before including amla to route failures elsewhere.
#ifndef AMLA_ASSERT
#if defined(__CUDA_ARCH__)
#include <cassert>
#define AMLA_ASSERT(cond) assert(cond)
#else
#include <cstdio>
#include <cstdlib>
#define AMLA_ASSERT(cond)                                                                     \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: amla internal invariant failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                                    \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
#endif
#endif

namespace amla {

/// Thrown by host entry points when an argument breaks a rule. The message names the argument,
/// the value it had and the rule it broke. Derives from std::invalid_argument so callers that do
/// not know amla can still catch it.
class invalid_argument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

/// The text of a value in an error message. Numbers are formatted with std::to_chars (floating
/// point as printf's %g, 6 significant digits), so a message never depends on the global
/// locale, and a host process whose iostreams are in a bad state (a second C++ runtime loaded
/// beside amla's, as some Python extensions bring) can still report an error.
template <class T>
std::string to_text(const T& value) {
  constexpr bool character = std::is_same_v<T, char> || std::is_same_v<T, signed char> ||
                             std::is_same_v<T, unsigned char> || std::is_same_v<T, wchar_t> ||
                             std::is_same_v<T, char8_t> || std::is_same_v<T, char16_t> ||
                             std::is_same_v<T, char32_t>;
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && !character) {
    char buf[64];
    std::to_chars_result r;
    if constexpr (std::is_floating_point_v<T>) {
      r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::general, 6);
    } else {
      r = std::to_chars(buf, buf + sizeof buf, value);
    }
    return std::string(buf, r.ptr);
  } else {
    std::ostringstream os;
    os << value;
    return os.str();
  }
}

[[noreturn]] inline void throw_invalid(const char* function, const char* argument,
                                       const std::string& value, const std::string& rule) {
  throw amla::invalid_argument(std::string(function) + ": argument '" + argument + "' = " + value +
                               " violates: " + rule);
}

/// Throws as throw_invalid unless `value` is finite and > 0.
template <class T>
void require_finite_positive(const char* function, const char* argument, T value) {
  if (!(std::isfinite(value) && value > T{0})) {
    throw_invalid(function, argument, to_text(value), "must be finite and > 0");
  }
}

}  // namespace detail
}  // namespace amla

// AMLA_THROW(arg, value, rule) throws amla::invalid_argument naming the enclosing function, the
// argument, its value and the rule. AMLA_REQUIRE(cond, arg, value, rule) throws when cond is false.
#define AMLA_THROW(arg, value, rule) \
  ::amla::detail::throw_invalid(__func__, arg, ::amla::detail::to_text(value), rule)
#define AMLA_REQUIRE(cond, arg, value, rule)   \
  do {                                         \
    if (!(cond)) AMLA_THROW(arg, value, rule); \
  } while (0)
