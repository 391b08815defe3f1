// tests/cuda/rdc_link_a.cu: one of two translation units that include the whole CUDA backend and
// are linked with relocatable device code (-rdc; cmake/amla_cuda.cmake, target cuda_rdc_link).
// Building the program is the check: every kernel and function the headers define may be defined
// by several units of one program. Running it touches no GPU.
#include "amla/backend/cuda/cuda.cuh"

#include "rdc_link.hpp"

// Each entry point's address makes this unit define it and every kernel it launches.
rdc_link::entries rdc_link::entries_a() {
  return {&amla::cuda::decode, &amla::cuda::plan_decode, &amla::cuda::golden_decode};
}
