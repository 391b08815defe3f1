// amla/detail/checked.hpp: size arithmetic that cannot wrap.
//
// Every element count and byte count amla derives from user-given sizes goes through these
// functions, so a product that does not fit is reported (as amla::invalid_argument naming the
// argument) instead of wrapping to a small number that then passes a span check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "amla/config.hpp"

namespace amla::detail {

/// The largest element count amla accepts for one tensor: what a std::ptrdiff_t (and so an
/// Eigen::Index and a pointer difference) can address.
inline constexpr std::int64_t max_elements = std::numeric_limits<std::ptrdiff_t>::max();

/// a * b for non-negative a and b, or -1 when the product exceeds `limit`.
constexpr std::int64_t mul_or_overflow(std::int64_t a, std::int64_t b,
                                       std::int64_t limit = max_elements) noexcept {
  if (a < 0 || b < 0) return -1;
  if (a == 0 || b == 0) return 0;
  if (a > limit / b) return -1;
  return a * b;
}

/// a + b for non-negative a and b, or -1 when the sum exceeds `limit`.
constexpr std::int64_t add_or_overflow(std::int64_t a, std::int64_t b,
                                       std::int64_t limit = max_elements) noexcept {
  if (a < 0 || b < 0) return -1;
  if (a > limit - b) return -1;
  return a + b;
}

/// The product of non-negative factors; throws amla::invalid_argument naming `fn`, `arg` (the
/// quantity, e.g. "shape (kv elements)") and the factors when it exceeds max_elements.
template <class... Ints>
std::int64_t checked_product(const char* fn, const char* arg, const char* layout, Ints... factors) {
  std::int64_t p = 1;
  bool overflow = false;
  ((overflow = overflow || (p = mul_or_overflow(p, static_cast<std::int64_t>(factors))) < 0), ...);
  if (overflow) {
    std::string value;
    ((value += (value.empty() ? "" : " * ") + std::to_string(static_cast<std::int64_t>(factors))),
     ...);
    throw_invalid(fn, arg, value,
                  std::string(layout) + " must be at most " + std::to_string(max_elements) +
                      " elements (the product overflows)");
  }
  return p;
}

}  // namespace amla::detail
