// amla/backend/cuda/detail/check.cuh: the nvcc guard every CUDA header starts with, and CUDA
// errors as exceptions that name the failing call.
#pragma once

#if !defined(__CUDACC__)
#error \
    "amla/backend/cuda/*.cuh are CUDA headers: compile this translation unit with nvcc (a .cu file, or LANGUAGE CUDA in CMake). The CPU library is amla/amla.hpp."
#endif

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "amla/config.hpp"

namespace amla::cuda {

/// A CUDA runtime or driver call failed. what() names the call, the error and where it was made.
class cuda_error : public std::runtime_error {
 public:
  cuda_error(const std::string& message, int code) : std::runtime_error(message), code_(code) {}
  /// The cudaError_t (or CUresult) value.
  int code() const noexcept { return code_; }

 private:
  int code_;
};

namespace detail {

[[noreturn]] inline void throw_cuda(const char* call, cudaError_t err, const char* file, int line) {
  throw cuda_error(std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                       cudaGetErrorString(err) + ") at " + file + ":" + std::to_string(line),
                   static_cast<int>(err));
}

}  // namespace detail
}  // namespace amla::cuda

/// Evaluates a CUDA runtime call and throws amla::cuda::cuda_error naming it when it fails.
#define AMLA_CUDA_CHECK(call)                                                      \
  do {                                                                             \
    const cudaError_t amla_cuda_err_ = (call);                                     \
    if (amla_cuda_err_ != cudaSuccess)                                             \
      ::amla::cuda::detail::throw_cuda(#call, amla_cuda_err_, __FILE__, __LINE__); \
  } while (0)

/// Checks the launch of the kernel named `name` (configuration errors surface here).
#define AMLA_CUDA_CHECK_LAUNCH(name)                                                           \
  do {                                                                                         \
    const cudaError_t amla_cuda_err_ = cudaGetLastError();                                     \
    if (amla_cuda_err_ != cudaSuccess)                                                         \
      ::amla::cuda::detail::throw_cuda("launch of " name, amla_cuda_err_, __FILE__, __LINE__); \
  } while (0)
