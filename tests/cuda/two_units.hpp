// tests/cuda/two_units.hpp: the entry points each unit of cuda_two_units takes the address of.
#pragma once

#include "amla/backend/cuda/cuda.cuh"

namespace two_units {

struct entries {
  decltype(&amla::cuda::decode) decode;
  decltype(&amla::cuda::plan_decode) plan;
  decltype(&amla::cuda::golden_decode) golden;
};

entries entries_a();
entries entries_b();

}  // namespace two_units
