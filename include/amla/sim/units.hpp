// amla/sim/units.hpp: strong types for the simulator's quantities, so that cycles, bytes and
// seconds are never mixed silently. Each is a thin wrapper with the arithmetic that makes sense:
// same-unit addition and comparison, scaling by a plain number, and explicit conversions that
// name the rate they use (cycles <-> seconds needs a clock; bytes -> cycles needs a bandwidth).
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "amla/config.hpp"

namespace amla::sim {

/// A count of clock cycles (integral: the engine advances in whole cycles). Arithmetic is
/// checked: a sum, difference or product that does not fit in int64 throws
/// amla::invalid_argument naming the operation and its operands, never wraps.
struct Cycles {
  std::int64_t count = 0;
  constexpr Cycles() = default;
  constexpr explicit Cycles(std::int64_t c) : count(c) {}
  constexpr auto operator<=>(const Cycles&) const = default;
  constexpr Cycles& operator+=(Cycles o) { return *this = *this + o; }
  constexpr Cycles& operator-=(Cycles o) { return *this = *this - o; }
  friend constexpr Cycles operator+(Cycles a, Cycles b) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a.count, b.count, &r)) overflow("a + b", a.count, '+', b.count);
    return Cycles{r};
  }
  friend constexpr Cycles operator-(Cycles a, Cycles b) {
    std::int64_t r = 0;
    if (__builtin_sub_overflow(a.count, b.count, &r)) overflow("a - b", a.count, '-', b.count);
    return Cycles{r};
  }
  friend constexpr Cycles operator*(Cycles a, std::int64_t k) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a.count, k, &r)) overflow("a * k", a.count, '*', k);
    return Cycles{r};
  }
  friend constexpr Cycles operator*(std::int64_t k, Cycles a) { return a * k; }

 private:
  [[noreturn]] static void overflow(const char* what, std::int64_t a, char op, std::int64_t b) {
    amla::detail::throw_invalid("amla::sim::Cycles", what,
                                std::to_string(a) + " " + op + " " + std::to_string(b),
                                "the result must fit in int64 cycles");
  }
};

namespace detail {
/// What Bytes and Seconds share: a double of one unit, compared and added only with its own kind.
template <class Unit>
struct real_quantity {
  double count = 0;
  constexpr real_quantity() = default;
  constexpr explicit real_quantity(double c) : count(c) {}
  friend constexpr auto operator<=>(const Unit& a, const Unit& b) { return a.count <=> b.count; }
  friend constexpr bool operator==(const Unit& a, const Unit& b) { return a.count == b.count; }
  friend constexpr Unit operator+(Unit a, Unit b) { return Unit{a.count + b.count}; }
  friend constexpr Unit operator-(Unit a, Unit b) { return Unit{a.count - b.count}; }
};
}  // namespace detail

/// A quantity of data in bytes.
struct Bytes : detail::real_quantity<Bytes> {
  using real_quantity::real_quantity;
  friend constexpr Bytes operator*(Bytes a, double k) { return Bytes{a.count * k}; }
  friend constexpr Bytes operator*(double k, Bytes a) { return Bytes{a.count * k}; }
};

/// A duration in seconds (wall time of the modelled chip).
struct Seconds : detail::real_quantity<Seconds> {
  using real_quantity::real_quantity;
  constexpr double us() const { return count * 1e6; }
};

/// A clock frequency; the only bridge between Cycles and Seconds.
struct Hertz {
  double count = 0;
  constexpr Hertz() = default;
  constexpr explicit Hertz(double hz) : count(hz) {}
  constexpr Seconds to_seconds(Cycles c) const {
    return Seconds{static_cast<double>(c.count) / count};
  }
};

/// A bandwidth in bytes per cycle; the only bridge between Bytes and Cycles.
struct BytesPerCycle {
  double count = 0;
  constexpr BytesPerCycle() = default;
  constexpr explicit BytesPerCycle(double b) : count(b) {}
};

}  // namespace amla::sim
