// Error norms shared by the attention tests: relative Frobenius error of flat output buffers and
// the worst lse error (with empty rows, lse = -inf, required to match exactly).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace amla_test {

/// The lse of an empty row in a float result.
inline constexpr float finf = std::numeric_limits<float>::infinity();

/// ||got - want|| / (||want|| + 1e-10) over flat output buffers.
template <class A, class B>
double rel_frobenius(const std::vector<A>& got, const std::vector<B>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    num += d * d;
    den += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  return std::sqrt(num) / (std::sqrt(den) + 1e-10);
}

/// The worst |got - want| / (1 + |want|) over lse buffers; infinity when an infinite want (an
/// empty row) is not matched exactly.
inline double max_lse_error(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      if (static_cast<double>(got[i]) != want[i]) return std::numeric_limits<double>::infinity();
    } else {
      e = std::max(e, std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i])));
    }
  }
  return e;
}

}  // namespace amla_test
