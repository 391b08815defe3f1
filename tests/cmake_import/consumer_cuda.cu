// Uses amla's CUDA backend the way a downstream project would: the one backend include, and a
// kernel of its own calling amla's host-device numerics. Launches nothing, so it runs anywhere.
#include <amla/backend/cuda/cuda.cuh>
#include <cstdio>

__global__ void round_all(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = amla::round_bf16(x[i]);
}

int main() {
  const bool ok = amla::round_bf16(1.00390625f) == 1.0f;  // the host side of the same function
  std::printf("amla %s cuda %s\n", AMLA_VERSION_STRING, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
