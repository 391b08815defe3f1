// python/src/cuda_bridge.hpp: the CUDA backend as the amla._amla_cuda module calls it. A plain C++
// interface (no CUDA or nanobind types), so that the module's nanobind code stays with the host
// compiler and only cuda_bridge.cu goes through nvcc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "amla/problem/shape.hpp"

namespace amla::python::cuda_bridge {

/// Device pointers of a decode problem (layouts as amla::cuda::DeviceDecodeInputs).
struct Inputs {
  DecodeShape shape;
  const void* q = nullptr;
  const void* kv = nullptr;
  const void* v = nullptr;  ///< nullptr: V is the first d_v columns of kv
  const std::int32_t* block_table = nullptr;
  const std::int32_t* seqlens = nullptr;
};

/// A sized split-KV schedule made by plan_decode (amla::cuda::DecodePlan's fields; memory a
/// device address).
struct Plan {
  int batch = 0;
  int s_q = 0;
  int h_q = 0;
  int block_keys = 0;
  int slots = 0;
  std::uintptr_t memory = 0;
};

/// The options of amla::cuda::CudaDecodeOptions, by name.
struct DecodeOptions {
  bool causal = false;
  std::optional<float> softmax_scale;
  std::string mode = "standard";     ///< "standard" | "amla"
  std::string kernel = "automatic";  ///< "automatic" | "simple" | "hopper"
  std::string rescale = "hardware";  ///< "hardware" | "safe" (AMLA's add)
  bool skip_unmoved = false;         ///< AMLA's identity step (k = 0 where the max did not move)
  int num_splits = 0;
  bool check_tables = true;
  void* workspace = nullptr;  ///< nullptr: decode() allocates its own
  std::size_t workspace_bytes = 0;
  std::optional<Plan> plan;  ///< a plan made once by plan_decode and reused
};

/// What amla::cuda::decode launched.
struct Launch {
  std::string kernel;
  int pieces = 1;
  std::string fallback_reason;
};

/// amla::cuda::decode on `stream` (a cudaStream_t as an integer; 0 the default stream). out:
/// BF16 [batch, s_q, h_q, d_v]; lse: float [batch, h_q, s_q].
Launch decode(const Inputs& in, void* out, float* lse, const DecodeOptions& options,
              std::uintptr_t stream);

/// amla::cuda::decode_workspace_bytes of the inputs' shape (options: num_splits) on the current
/// device.
std::size_t workspace_bytes(const Inputs& in, int num_splits);

/// amla::cuda::plan_decode on `stream`, writing the plan into `workspace` (`bytes` long).
Plan plan_decode(const Inputs& in, void* workspace, std::size_t bytes, bool check_tables,
                 std::uintptr_t stream);

/// amla::cuda::golden_decode on `stream`. out: double [batch, s_q, h_q, d_v]; lse: double
/// [batch, h_q, s_q].
void golden(const Inputs& in, double* out, double* lse, bool causal,
            std::optional<float> softmax_scale, bool check_tables, std::uintptr_t stream);

}  // namespace amla::python::cuda_bridge
