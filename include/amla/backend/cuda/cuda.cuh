// amla/backend/cuda/cuda.cuh: the CUDA backend in one include (nvcc only; amla/amla.hpp never
// includes it). decode.cuh is the driver, base.cuh and amla.cuh the two rescaling modes.
#pragma once

#include "amla/backend/cuda/amla.cuh"
#include "amla/backend/cuda/base.cuh"
#include "amla/backend/cuda/decode.cuh"
