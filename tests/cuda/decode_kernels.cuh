// tests/cuda/decode_kernels.cuh: the decode kernels compiled once for every program of this
// repository that launches them (cuda_decode, bm_cuda_decode, bm_hopper_model). amla::cuda::decode
// reaches every kernel it launches through detail::dispatch<Mode> (the Hopper kernel's
// instantiations, the combine, the fallback kernel); declaring its two instantiations extern here
// keeps each program's own translation unit from compiling those kernels again, and
// decode_kernels.cu (cmake/amla_cuda.cmake: amla_cuda_decode_kernels) defines them. A program of a
// user needs neither file: decode() instantiates what it launches wherever it is called.
#pragma once

#include "amla/backend/cuda/cuda.cuh"

namespace amla::cuda::detail {

extern template DecodeLaunch dispatch<rescale_mode::standard>(const DeviceDecodeInputs&,
                                                              const DeviceDecodeOutputs&, float,
                                                              const CudaDecodeOptions&,
                                                              const device_facts&, cudaStream_t);
extern template DecodeLaunch dispatch<rescale_mode::amla>(const DeviceDecodeInputs&,
                                                          const DeviceDecodeOutputs&, float,
                                                          const CudaDecodeOptions&,
                                                          const device_facts&, cudaStream_t);

}  // namespace amla::cuda::detail
