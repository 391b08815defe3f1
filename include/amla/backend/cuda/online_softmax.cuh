// amla/backend/cuda/online_softmax.cuh: the Base recurrence (FlashAttention, AMLA Algorithm 1) on a
// CUDA GPU, the device mirror of attention/online_softmax.hpp.
//
// What the kernels compute in this mode, per query row and 64-key block (rescale.cuh):
//   S = scale * Q K^T (BF16 operands, FP32 accumulation), m_new = max(m, rowmax S),
//   P = exp(S - m_new) in FP32, l = l exp(m - m_new) + rowsum P, O = O exp(m - m_new) + BF16(P) V,
//   out = BF16(O / l), lse = m + ln l.
// The Hopper kernel runs exactly this block order on both halves of O (detail/hopper_kernel.cuh);
// the simple kernel is the FP32 float reference (P not rounded). Tests compare both with the CPU
// golden and the CPU Base recurrence.
#pragma once

#include "amla/backend/cuda/driver.cuh"

namespace amla::cuda {

/// decode() with the standard exp rescale (options.mode is overridden).
inline DecodeLaunch base_decode(const DeviceDecodeInputs& in, const DeviceDecodeOutputs& out,
                                CudaDecodeOptions options = {}, cudaStream_t stream = nullptr) {
  options.mode = rescale_mode::standard;
  return decode(in, out, options, stream);
}

}  // namespace amla::cuda
