// An independent reference for narrowing FP32 to a small format, shared by the exhaustive tests of
// numeric/fp16.hpp and numeric/fp8.hpp.
//
// The format's non-negative values are listed in code order (which is value order) as doubles
// computed from the fields with std::ldexp, followed by the value one step past the largest (the
// overflow sentinel: Inf's place, or e4m3's NaN at 480). Between two neighbours the rounding rule
// puts a boundary: round to nearest puts it at their midpoint (computed in double, exactly), the
// tie going to the even code; rounding up or down puts it at a neighbour. Every boundary is an
// FP32 value, so the non-negative FP32 patterns [0, 0x7F800000] split into pieces, runs of
// consecutive patterns that must all give one code. The sweep then checks every pattern (with
// both signs) against its piece's code; no integer rounding trick is shared with the code under
// test, and the inner loop over a piece is a plain loop that vectorises.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "amla/numeric/bits.hpp"

namespace minifloat_test {

/// The values of codes 0 ..= max_code + 1 of a format with `mantissa_bits` and `bias` (the last
/// one the overflow sentinel), from the fields alone.
inline std::vector<double> code_values(int mantissa_bits, int bias, std::uint32_t max_code) {
  std::vector<double> v;
  for (std::uint32_t c = 0; c <= max_code + 1; ++c) {
    const int e = static_cast<int>(c >> mantissa_bits);
    const double m = static_cast<double>(c & ((1u << mantissa_bits) - 1u));
    v.push_back(e == 0 ? std::ldexp(m, 1 - bias - mantissa_bits)
                       : std::ldexp(std::ldexp(1.0, mantissa_bits) + m, e - bias - mantissa_bits));
  }
  return v;
}

/// A run of magnitude patterns [start, next piece's start) that all give `code`.
struct Piece {
  std::uint32_t start;
  std::uint32_t code;
};

/// The FP32 pattern of a double that must be exactly an FP32 value.
inline std::uint32_t exact_pattern(double x) {
  const float f = static_cast<float>(x);
  if (static_cast<double>(f) != x) throw std::logic_error("a boundary is not an FP32 value");
  return amla::as_uint32(f);
}

/// Round to nearest, ties to even code, over `values` (code_values): code i + 1 starts at the
/// midpoint of values[i] and values[i + 1], or just after it when the tie goes to the even i.
inline std::vector<Piece> nearest_even_pieces(const std::vector<double>& values) {
  std::vector<Piece> p{{0u, 0u}};
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const std::uint32_t mid = exact_pattern((values[i] + values[i + 1]) / 2);
    const bool tie_goes_up = ((i + 1) & 1u) == 0u;
    p.push_back({tie_goes_up ? mid : mid + 1u, static_cast<std::uint32_t>(i + 1)});
  }
  return p;
}

/// The pieces of the magnitude patterns after one past the last: [start, 0x7F800001).
inline constexpr std::uint64_t magnitude_end = 0x7F800001ull;

/// Calls range(lo, hi) for chunks [lo, hi) of the non-negative FP32 magnitude patterns
/// [0, 0x7F800000] (+0 up to +Inf), spread over all hardware threads; lo is the chunk's first
/// multiple of `stride`. range returns its number of mismatches; the sum is returned.
template <class Range>
std::uint64_t sweep_magnitudes(std::uint64_t stride, Range range) {
  const std::uint64_t chunk = std::uint64_t{1} << 24;
  const std::uint64_t chunks = (magnitude_end + chunk - 1) / chunk;
  std::atomic<std::uint64_t> next{0}, total{0};
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      std::uint64_t n = 0;
      for (std::uint64_t c = next++; c < chunks; c = next++) {
        const std::uint64_t lo = (c * chunk + stride - 1) / stride * stride;
        const std::uint64_t hi = std::min(magnitude_end, (c + 1) * chunk);
        if (lo < hi) n += range(lo, hi);
      }
      total += n;
    });
  }
  for (auto& th : pool) th.join();
  return total.load();
}

/// Mismatches of a narrowing over every `stride`-th magnitude pattern: check(u, count, stride,
/// code) counts the patterns u + j * stride, j < count (each with both signs), that do not give
/// what piece code `code` means. `visited` counts the magnitudes looked at.
template <class Check>
std::uint64_t sweep_pieces(const std::vector<Piece>& pieces, std::uint64_t stride,
                           std::atomic<std::uint64_t>& visited, Check check) {
  return sweep_magnitudes(stride, [&](std::uint64_t lo, std::uint64_t hi) {
    auto it = std::upper_bound(pieces.begin(), pieces.end(), lo,
                               [](std::uint64_t u, const Piece& p) { return u < p.start; });
    std::size_t k = static_cast<std::size_t>(it - pieces.begin()) - 1;
    std::uint64_t bad = 0, n = 0;
    for (std::uint64_t u = lo; u < hi; ++k) {
      const std::uint64_t next = k + 1 < pieces.size() ? pieces[k + 1].start : magnitude_end;
      const std::uint64_t end = std::min(hi, next);
      if (u >= end) continue;
      const std::uint64_t steps = (end - u + stride - 1) / stride;
      bad += check(static_cast<std::uint32_t>(u), static_cast<std::uint32_t>(steps),
                   static_cast<std::uint32_t>(stride), pieces[k].code);
      n += steps;
      u += steps * stride;
    }
    visited += n;
    return bad;
  });
}

/// How many magnitude patterns of [0, 0x7F800000] a sweep with `stride` visits.
inline std::uint64_t expected_visits(std::uint64_t stride) {
  const std::uint64_t chunk = std::uint64_t{1} << 24;
  std::uint64_t n = 0;
  for (std::uint64_t c = 0; c * chunk < magnitude_end; ++c) {
    const std::uint64_t lo = (c * chunk + stride - 1) / stride * stride;
    const std::uint64_t hi = std::min(magnitude_end, (c + 1) * chunk);
    if (lo < hi) n += (hi - lo + stride - 1) / stride;
  }
  return n;
}

}  // namespace minifloat_test
