// Uses amla the way a downstream project would: through the umbrella header.
#include <amla/amla.hpp>
#include <cstdio>

int main() {
  // 0.5f is 126 << 23 (AMLA Figure 3); times 2^2 by an integer add is 2.0f.
  const float two = amla::mul_pow2_hardware(0.5f, 2);
  const bool ok =
      amla::as_int32(0.5f) == (126 << 23) && two == 2.0f && amla::round_bf16(1.00390625f) == 1.0f;
  std::printf("amla %s %s\n", AMLA_VERSION_STRING, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
