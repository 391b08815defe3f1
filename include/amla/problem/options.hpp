// amla/problem/options.hpp: what a decode problem means beyond its tensors (mask, scale, output
// cast) and how the host runs it (threads, row blocking).
#pragma once

#include <cmath>
#include <optional>

#include "amla/problem/shape.hpp"

namespace amla {

/// What the problem means and how the host runs it.
struct DecodeOptions {
  bool causal = false;                   ///< mask aligned to the end (problem/shape.hpp)
  std::optional<float> softmax_scale{};  ///< default 1 / sqrt(d_qk); must be finite and > 0
  /// Round the final output to BF16 as a kernel's output cast does (a bf16 `out` always is).
  bool round_output_bf16 = false;
  /// Round the final output to FP16 as an FP16 kernel's output cast does (numeric/fp16.hpp's
  /// rounding, overflow to Inf). At most one of the two output casts may be set.
  bool round_output_fp16 = false;
  int threads = 0;  ///< host threads; 0 = std::thread::hardware_concurrency()
  /// Query rows per task within a head group (0 = the whole group). Part of the result's
  /// definition (a GEMM's low bits may depend on how rows are blocked), independent of `threads`.
  int rows_per_task = 64;
};

/// The softmax scale a problem uses: options.softmax_scale, or 1 / sqrt(d_qk).
inline float resolved_scale(const DecodeOptions& options, const DecodeShape& shape) {
  return options.softmax_scale
             ? *options.softmax_scale
             : static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.d_qk)));
}

}  // namespace amla
