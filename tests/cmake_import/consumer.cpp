// Uses amla the way a downstream project would: through the umbrella header, with a decode
// problem run through the float64 golden recurrence (which works on std::thread).
#include <amla/amla.hpp>
#include <cmath>
#include <cstdio>

int main() {
  // 0.5f is 126 << 23 (AMLA Figure 3); times 2^2 by an integer add is 2.0f.
  const float two = amla::mul_pow2_hardware(0.5f, 2);
  bool ok =
      amla::as_int32(0.5f) == (126 << 23) && two == 2.0f && amla::round_bf16(1.00390625f) == 1.0f;

  namespace at = amla::attention;
  const auto p =
      at::ProblemBuilder().batch(1).heads(2, 1).dims(8, 4).page_size(4).seqlens({5}).build<float>();
  const auto truth = at::golden_decode(p.inputs());
  ok = ok && truth.out.size() == 2 * 4 && truth.lse.size() == 2;
  for (double x : truth.out) ok = ok && std::isfinite(x);
  for (double x : truth.lse) ok = ok && std::isfinite(x);

  std::printf("amla %s %s\n", AMLA_VERSION_STRING, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
