// tests/cuda/rdc_link.hpp: the entry points each unit of cuda_rdc_link takes the address of.
#pragma once

#include "amla/backend/cuda/cuda.cuh"

namespace rdc_link {

struct entries {
  decltype(&amla::cuda::decode) decode;
  decltype(&amla::cuda::plan_decode) plan;
  decltype(&amla::cuda::golden_decode) golden;
};

entries entries_a();
entries entries_b();

}  // namespace rdc_link
