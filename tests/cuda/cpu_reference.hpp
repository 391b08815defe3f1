// tests/cuda/cpu_reference.hpp: the CPU side of the CUDA tests: problems built by the library's
// amla::attention::ProblemBuilder and the library's references (golden_decode, base_decode,
// amla_decode) run on them. Compiled by the host compiler (cpu_reference.cpp), so the CPU
// library's Eigen-based headers stay away from nvcc; this interface uses only the Eigen-free
// problem layer (amla::DecodeShape, DecodeInputs, DecodeOptions, DecodeResult).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "amla/numeric/bf16.hpp"
#include "amla/problem/inputs.hpp"
#include "amla/problem/options.hpp"
#include "amla/problem/outputs.hpp"

namespace amla_cuda_test {

/// The ProblemBuilder settings the CUDA tests vary. By default the DeepSeek head dims (d_qk 576,
/// d_v 512, V in the K cache, h_kv 1); BF16 values from N(0, spread^2), shuffled pages, and
/// poison (NaN, out-of-range table entries) everywhere a kernel must not read.
struct ProblemSpec {
  int s_q = 1;
  int h_q = 128;
  std::vector<int> seqlens{1};
  int page_size = 64;
  double spread = 1.0;
  std::uint64_t seed = 1;
  int h_kv = 1;
  int d_qk = 576;
  int d_v = 512;
  bool separate_v = false;
};

/// Which tensor Problem::set writes.
enum class Tensor { q, k, v };

/// A problem built by amla::attention::ProblemBuilder::build<amla::bf16>(), owned by the
/// host-compiled side; inputs() views its tensors.
class Problem {
 public:
  explicit Problem(const ProblemSpec& spec);
  ~Problem();
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  const amla::DecodeInputs<amla::bf16>& inputs() const { return inputs_; }
  const amla::DecodeShape& shape() const { return inputs_.shape; }

  /// The Lemma 3.1 trap: V column `col` is +0 over the first 64 keys of every sequence (so that
  /// column of O is exactly 0 after the first block) and keys 64..127 are 4x larger (the max
  /// jumps, so the AMLA add is a large negative exponent step).
  void set_trap(int col);

  /// Writes `value` at column d of a row: Q of (b, t = i, h = j), or K / V of key i of sequence
  /// b, KV head j (through the block table; V in kv's first d_v columns unless separate).
  void set(Tensor which, int b, int i, int j, int d, float value);

 private:
  struct owner;
  std::unique_ptr<owner> owner_;
  amla::DecodeInputs<amla::bf16> inputs_;
};

/// amla::attention::golden_decode: float64 attention over the BF16 inputs.
amla::DecodeResult<double, double> golden(const Problem& p, const amla::DecodeOptions& options);

/// amla::attention::base_decode with 64-key blocks and a BF16 output: the recurrence the kernels'
/// standard mode mirrors.
amla::DecodeResult<amla::bf16, float> cpu_base(const Problem& p,
                                               const amla::DecodeOptions& options);

/// amla::attention::amla_decode with 64-key blocks, the safe add and a BF16 output: the
/// recurrence the kernels' AMLA mode mirrors, with AmlaOptions::skip_unmoved as given (the
/// kernels' CudaDecodeOptions::skip_unmoved).
amla::DecodeResult<amla::bf16, float> cpu_amla(const Problem& p, const amla::DecodeOptions& options,
                                               bool skip_unmoved);

}  // namespace amla_cuda_test
