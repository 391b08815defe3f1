// Command-line helpers shared by the examples.
#pragma once

#include <cstdio>
#include <cstdlib>

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

}  // namespace amla_example
