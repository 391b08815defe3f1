// tests/cuda/decode_kernels.cu: the one definition of the decode kernels that the programs
// including decode_kernels.cuh declare extern (that header says why).
#include "decode_kernels.cuh"

namespace amla::cuda::detail {

template DecodeLaunch dispatch<rescale_mode::standard>(const DeviceDecodeInputs&,
                                                       const DeviceDecodeOutputs&, float,
                                                       const CudaDecodeOptions&,
                                                       const device_facts&, cudaStream_t);
template DecodeLaunch dispatch<rescale_mode::amla>(const DeviceDecodeInputs&,
                                                   const DeviceDecodeOutputs&, float,
                                                   const CudaDecodeOptions&, const device_facts&,
                                                   cudaStream_t);

}  // namespace amla::cuda::detail
