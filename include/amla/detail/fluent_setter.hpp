// amla/detail/fluent_setter.hpp: the one-field setter behind the problem builders' chained
// setters (attention/problem_builder.hpp, mla/problem_builder.hpp).
#pragma once

#include <utility>

namespace amla::detail {

/// Base of a builder whose setters chain (`b.batch(4).s_q(2)`): set(field, v) stores v in one of
/// the builder's fields and returns the builder.
template <class Builder>
class FluentSetter {
 protected:
  template <class Field, class Value>
  Builder& set(Field& field, Value v) {
    field = std::move(v);
    return static_cast<Builder&>(*this);
  }
};

}  // namespace amla::detail
