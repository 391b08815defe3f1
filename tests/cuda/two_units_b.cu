// tests/cuda/two_units_b.cu: the other unit of cuda_two_units (two_units_a.cu says what it checks).
#include <cstdio>

#include "amla/backend/cuda/cuda.cuh"

#include "two_units.hpp"

two_units::entries two_units::entries_b() {
  return {&amla::cuda::decode, &amla::cuda::plan_decode, &amla::cuda::golden_decode};
}

int main() {
  const two_units::entries a = two_units::entries_a(), b = two_units::entries_b();
  // One definition of each entry point in the program, whichever unit names it.
  const bool same = a.decode == b.decode && a.plan == b.plan && a.golden == b.golden;
  std::printf("two units including the CUDA backend linked; entry points %s\n",
              same ? "shared" : "differ");
  return same ? 0 : 1;
}
