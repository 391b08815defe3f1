// amla/sim/units.hpp: strong types for the simulator's quantities, so that cycles, bytes and
// seconds are never mixed silently. Each is a thin wrapper with the arithmetic that makes sense:
// same-unit addition and comparison, scaling by a plain number, and explicit conversions that
// name the rate they use (cycles <-> seconds needs a clock; bytes -> cycles needs a bandwidth).
#pragma once

#include <compare>
#include <cstdint>

namespace amla::sim {

/// A count of clock cycles (integral: the engine advances in whole cycles).
struct Cycles {
  std::int64_t count = 0;
  constexpr Cycles() = default;
  constexpr explicit Cycles(std::int64_t c) : count(c) {}
  constexpr auto operator<=>(const Cycles&) const = default;
  constexpr Cycles& operator+=(Cycles o) {
    count += o.count;
    return *this;
  }
  constexpr Cycles& operator-=(Cycles o) {
    count -= o.count;
    return *this;
  }
  friend constexpr Cycles operator+(Cycles a, Cycles b) { return Cycles{a.count + b.count}; }
  friend constexpr Cycles operator-(Cycles a, Cycles b) { return Cycles{a.count - b.count}; }
  friend constexpr Cycles operator*(Cycles a, std::int64_t k) { return Cycles{a.count * k}; }
  friend constexpr Cycles operator*(std::int64_t k, Cycles a) { return Cycles{a.count * k}; }
};

/// A quantity of data in bytes.
struct Bytes {
  double count = 0;
  constexpr Bytes() = default;
  constexpr explicit Bytes(double b) : count(b) {}
  constexpr auto operator<=>(const Bytes&) const = default;
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return Bytes{a.count + b.count}; }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return Bytes{a.count - b.count}; }
  friend constexpr Bytes operator*(Bytes a, double k) { return Bytes{a.count * k}; }
  friend constexpr Bytes operator*(double k, Bytes a) { return Bytes{a.count * k}; }
};

/// A duration in seconds (wall time of the modelled chip).
struct Seconds {
  double count = 0;
  constexpr Seconds() = default;
  constexpr explicit Seconds(double s) : count(s) {}
  constexpr auto operator<=>(const Seconds&) const = default;
  friend constexpr Seconds operator+(Seconds a, Seconds b) { return Seconds{a.count + b.count}; }
  friend constexpr Seconds operator-(Seconds a, Seconds b) { return Seconds{a.count - b.count}; }
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
