// amla/backend/cuda/amla.cuh: the AMLA recurrence (Algorithm 2 with Appendix A) on a CUDA GPU,
// the device mirror of attention/amla.hpp (its defaults: appendix_a compensation, hardware
// integer add, clamp -30, nudge 1e-6, truncating cast of N * 2^23, n = round to nearest even).
//
// Per query row and 64-key block (rescale.cuh, step_frame<rescale_mode::amla>):
//   n = rint(-m / ln2), S32 = exp(ln2 (n + m / ln2)), S16 = BF16(S32), c = S16 / S32,
//   eps = 1.5 (c / c_prev - 1), k = trunc((max(n - n_prev, -30) + eps + 1e-6) * 2^23),
//   O <- AS_FP32(AS_INT32(O) + k) (not for a row's first block with keys),
//   O <- O + BF16(exp(S - m) * S16) V,  out = BF16(O / (l * S16)),  lse = m + ln l.
// On a GPU O lives in registers, so the integer add costs what the FP32 multiply of Base costs
// (one instruction per element); the mode exists so that kernel engineers can run and check the
// Ascend formulation on the hardware at hand. The add is the raw "hardware" form: an O element
// that is exactly 0 or tiny turns into garbage exactly as attention/amla.hpp's hardware mode
// documents (the CPU reference counts and locates those cases; the GPU does not).
#pragma once

#include "amla/backend/cuda/decode.cuh"

namespace amla::cuda {

/// decode() with AMLA's integer-add rescale (options.mode is overridden).
inline DecodeLaunch amla_decode(const DeviceDecodeInputs& in, const DeviceDecodeOutputs& out,
                                CudaDecodeOptions options = {}, cudaStream_t stream = nullptr) {
  options.mode = rescale_mode::amla;
  return decode(in, out, options, stream);
}

}  // namespace amla::cuda
