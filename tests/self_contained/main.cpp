// Links the generated one-header translation units; compiling them is the test.
#include <cstdio>

int main() {
  std::printf("%d public headers compiled standalone\n", AMLA_HEADER_COUNT);
  return 0;
}
