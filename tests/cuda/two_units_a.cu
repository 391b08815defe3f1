// tests/cuda/two_units_a.cu: one of two translation units that include the whole CUDA backend in
// one program (cmake/amla_cuda.cmake: cuda_two_units links them as whole-program code,
// cuda_two_units_rdc with relocatable device code, -rdc). Building the programs is the check: every
// kernel and function the headers define may be defined by several units of one program. Running
// one touches no GPU.
#include "amla/backend/cuda/cuda.cuh"

#include "two_units.hpp"

// Each entry point's address makes this unit define it and every kernel it launches.
two_units::entries two_units::entries_a() {
  return {&amla::cuda::decode, &amla::cuda::plan_decode, &amla::cuda::golden_decode};
}
