// Command-line helpers shared by the examples.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

namespace amla_example {

/// The value that follows option argv[i], advancing i past it. Without one, prints
/// "OPTION needs a value" and `hint` to stderr and exits with status 2.
inline const char* option_value(int& i, int argc, char** argv, const char* hint = "") {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "%s needs a value%s\n", argv[i], hint);
    std::exit(2);
  }
  return argv[++i];
}

/// A switch of an example's command line: argument `name` stores `value` in `*target`.
struct Switch {
  const char* name;
  bool* target;
  bool value;
};

/// Whether `arg` is one of `switches`; if it is, stores that switch's value.
inline bool set_switch(std::string_view arg, std::initializer_list<Switch> switches) {
  for (const Switch& s : switches) {
    if (arg == s.name) {
      *s.target = s.value;
      return true;
    }
  }
  return false;
}

}  // namespace amla_example
