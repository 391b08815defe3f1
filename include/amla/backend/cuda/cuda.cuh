// amla/backend/cuda/cuda.cuh: the CUDA backend in one include (nvcc only; amla/amla.hpp never
// includes it). Files mirror attention/: driver.cuh is the driver (attention/driver.hpp),
// online_softmax.cuh and amla.cuh the two recurrences (attention/online_softmax.hpp, amla.hpp),
// golden.cuh the float64 reference (attention/golden.hpp).
#pragma once

#include "amla/backend/cuda/amla.cuh"
#include "amla/backend/cuda/driver.cuh"
#include "amla/backend/cuda/golden.cuh"
#include "amla/backend/cuda/online_softmax.cuh"
