// amla/backend/cuda/amla.cuh: the AMLA recurrence (Algorithm 2 with Appendix A) on a CUDA GPU,
// the device mirror of attention/amla.hpp (its defaults: appendix_a compensation, hardware
// integer add, clamp -30, nudge 1e-6, truncating cast of N * 2^23, n = round to nearest even).
//
// Per query row and 64-key block (rescale.cuh, step_frame<rescale_mode::amla>), with the same
// numeric/ functions attention/amla.hpp calls (numeric/amla_step.hpp for the scalars and k,
// numeric/pow2.hpp for the add), only the unit of m at the edge (base 2 on the GPU):
//   n = rint(-m / ln2), S32 = exp(ln2 (n + m / ln2)), S16 = BF16(S32), c = S16 / S32,
//   eps = 1.5 (c / c_prev - 1), k = trunc((max(n - n_prev, -30) + eps + 1e-6) * 2^23),
//   O <- AS_FP32(AS_INT32(O) + k) (not for a row's first block with keys),
//   O <- O + BF16(exp(S - m) * S16) V,  out = BF16(O / (l * S16)),  lse = m + ln l.
// On a GPU O lives in registers, so the integer add costs what the FP32 multiply of Base costs
// (one instruction per element), but Base skips its multiply whenever the max did not move and
// the printed step cannot (the +1e-6 nudge alone makes k = 8). CudaDecodeOptions::skip_unmoved
// (attention::AmlaOptions::skip_unmoved on the CPU) makes that step k = 0, the exact identity, and
// the Hopper kernel then skips the add as Base skips its multiply; AMLA still executes more
// instructions per block than Base (S16's scaling of P, the scalars of a moved max), and measures
// slower (bench/CUDA_RESULTS.md): the mode exists so that kernel engineers can run and check the
// Ascend formulation on the hardware at hand, not to be faster here.
//
// The form of the add is CudaDecodeOptions::rescale (amla::pow2_mode), as the CPU header's
// AmlaOptions::rescale:
//   hardware (default, the paper's kernel): the raw add. An O element that is exactly 0 (an exact
//     cancellation in P V, or a zero column of V) or tiny when a negative exponent step reaches it
//     turns into garbage (e.g. +0 becomes -1.7e38), exactly as attention/amla.hpp's hardware mode
//     documents. On random N(0,1) inputs the GPU tests see this in a handful of the ~10^9
//     output elements of a full run, and deterministically in a constructed trap.
//   safe: the intended value there. The simple kernel computes it with the CPU header's function
//     (numeric/pow2.hpp's pattern_add_intended); the Hopper kernel flushes values below
//     the normal range to signed zero (they differ by less than 2^-126) and is slower (255
//     registers: bench/CUDA_RESULTS.md).
//   checked: rejected (the CPU reference counts and locates violations; the GPU does not).
#pragma once

#include "amla/backend/cuda/driver.cuh"

namespace amla::cuda {

/// decode() with AMLA's integer-add rescale (options.mode is overridden).
inline DecodeLaunch amla_decode(const DeviceDecodeInputs& in, const DeviceDecodeOutputs& out,
                                CudaDecodeOptions options = {}, cudaStream_t stream = nullptr) {
  options.mode = rescale_mode::amla;
  return decode(in, out, options, stream);
}

}  // namespace amla::cuda
