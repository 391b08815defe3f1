// amla/detail/checked.hpp: size arithmetic that cannot wrap.
//
// Every element count and byte count amla derives from user-given sizes goes through these
// functions, so a product or sum that does not fit is reported (as amla::invalid_argument naming
// the argument) instead of wrapping to a small number that then passes a span check, and memory
// amla allocates for the caller (owned results, built problems) is allocated by `allocate`, so
// that a size the system cannot provide is reported the same way instead of std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

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

/// a + b for values in [0, limit]; throws amla::invalid_argument naming `fn` and `arg` (with the
/// two terms and what they count) when the sum exceeds `limit`.
inline std::int64_t checked_sum(const char* fn, const char* arg, const char* what, std::int64_t a,
                                std::int64_t b, std::int64_t limit) {
  const std::int64_t s = add_or_overflow(a, b, limit);
  if (s < 0) {
    throw_invalid(fn, arg, std::to_string(a) + " + " + std::to_string(b),
                  std::string(what) + " must be at most " + std::to_string(limit));
  }
  return s;
}

/// The most memory amla allocates for one buffer it owns: 1 TiB, past what any host holds (and
/// past the largest allocation AddressSanitizer serves), so a size past it is refused before
/// anything is attempted.
inline constexpr std::uint64_t max_allocation_bytes = std::uint64_t{1} << 40;

/// Throws amla::invalid_argument naming `fn` and `arg` unless n elements of `bytes_each` bytes fit
/// in max_allocation_bytes.
inline void require_allocatable(const char* fn, const char* arg, std::uint64_t n,
                                std::size_t bytes_each) {
  if (n > max_allocation_bytes / bytes_each) {
    throw_invalid(fn, arg,
                  std::to_string(n) + " elements of " + std::to_string(bytes_each) + " bytes",
                  "must fit in " + std::to_string(max_allocation_bytes) +
                      " bytes, the most amla allocates for one buffer");
  }
}

/// std::vector<T>(n, fill), or amla::invalid_argument naming `fn` and `arg` when it is larger than
/// max_allocation_bytes or the system cannot provide the memory (std::bad_alloc or
/// std::length_error from the allocation).
template <class T>
std::vector<T> allocate(const char* fn, const char* arg, std::size_t n, const T& fill = T{}) {
  require_allocatable(fn, arg, n, sizeof(T));
  try {
    return std::vector<T>(n, fill);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  throw_invalid(fn, arg, std::to_string(n) + " elements of " + std::to_string(sizeof(T)) + " bytes",
                "must fit in memory (the allocation failed)");
}

}  // namespace amla::detail
