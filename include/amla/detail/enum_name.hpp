// amla/detail/enum_name.hpp: the name of an enumerator, looked up in a table.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <type_traits>

#include "amla/config.hpp"

namespace amla::detail {

/// names[e] for an enum whose enumerators are 0, 1, ..., names.size() - 1 in declaration order;
/// `fallback` for any other value (a value cast in from outside the enumerators, or an enumerator
/// deliberately left out of the table).
template <class Enum>
constexpr const char* enum_name(Enum e, std::initializer_list<const char*> names,
                                const char* fallback = "?") noexcept {
  static_assert(std::is_enum_v<Enum>);
  const auto i = static_cast<std::make_unsigned_t<std::underlying_type_t<Enum>>>(e);
  return static_cast<std::size_t>(i) < names.size() ? names.begin()[i] : fallback;
}

}  // namespace amla::detail
