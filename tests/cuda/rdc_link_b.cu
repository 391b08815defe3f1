// tests/cuda/rdc_link_b.cu: the other unit of cuda_rdc_link (rdc_link_a.cu says what it checks).
#include <cstdio>

#include "amla/backend/cuda/cuda.cuh"

#include "rdc_link.hpp"

rdc_link::entries rdc_link::entries_b() {
  return {&amla::cuda::decode, &amla::cuda::plan_decode, &amla::cuda::golden_decode};
}

int main() {
  const rdc_link::entries a = rdc_link::entries_a(), b = rdc_link::entries_b();
  // One definition of each entry point in the program, whichever unit names it.
  const bool same = a.decode == b.decode && a.plan == b.plan && a.golden == b.golden;
  std::printf("two units with relocatable device code linked; entry points %s\n",
              same ? "shared" : "differ");
  return same ? 0 : 1;
}
