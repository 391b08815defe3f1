// The message of an amla::invalid_argument, for tests that check what a rejected call says.
#pragma once

#include <string>

#include "amla/config.hpp"

namespace amla_test {

/// The message of the amla::invalid_argument `call` throws ("" when it does not throw).
template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const amla::invalid_argument& e) {
    return e.what();
  }
  return "";
}

/// Whether `msg` names the argument `arg` the way amla's messages do ('arg', in quotes).
inline bool names(const std::string& msg, const std::string& arg) {
  return msg.find("'" + arg + "'") != std::string::npos;
}

}  // namespace amla_test
