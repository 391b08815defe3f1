// tests/cuda/cpu_reference.hpp: host-side problems and references for the CUDA tests. Compiled
// by the host compiler (cpu_reference.cpp), so the CPU library's Eigen-based headers stay away
// from nvcc; the .cu side sees only this plain interface.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace amla_cuda_test {

/// A decode problem in host memory, BF16 values stored as their bit patterns.
struct HostProblem {
  int batch = 1, s_q = 1, h_q = 128, h_kv = 1, d_qk = 576, d_v = 512;
  int num_pages = 1, page_size = 64, max_pages = 1;
  bool causal = false;
  float scale = 0.0f;             ///< the resolved softmax scale
  std::vector<std::uint16_t> q;   ///< [batch, s_q, h_q, d_qk]
  std::vector<std::uint16_t> kv;  ///< [num_pages, page_size, h_kv, d_qk]
  std::vector<std::int32_t> block_table;
  std::vector<std::int32_t> seqlens;

  std::size_t out_elems() const { return static_cast<std::size_t>(batch) * s_q * h_q * d_v; }
  std::size_t lse_elems() const { return static_cast<std::size_t>(batch) * h_q * s_q; }
  int visible(int b, int t) const;
  /// Element offset in kv of key `key` of sequence b (KV head 0).
  std::size_t kv_offset(int b, int key) const;
};

/// Builds a random problem: N(0, spread^2) values rounded to BF16, pages shuffled, every page and
/// slot that no sequence uses filled with NaN, unused block_table entries set to out-of-range
/// values (they must never be read).
HostProblem make_problem(int batch, int s_q, int h_q, const std::vector<int>& seqlens,
                         int page_size, bool causal, float spread, std::uint64_t seed);

/// Float64 golden: exact softmax attention over the BF16 inputs, accumulated in double.
/// out [batch, s_q, h_q, d_v], lse [batch, h_q, s_q] (natural log, -inf for empty rows).
void golden_f64(const HostProblem& p, std::vector<double>& out, std::vector<double>& lse);

/// The CPU library's recurrence of a mode, as the CUDA kernels compute it: "base"
/// (attention/online_softmax.hpp) or "amla" (attention/amla.hpp, safe add), BF16 operands,
/// 64-key blocks, BF16 output. out holds BF16 bit patterns [batch, s_q, h_q, d_v].
void cpu_recurrence(const HostProblem& p, const std::string& mode, std::vector<std::uint16_t>& out,
                    std::vector<float>& lse);

}  // namespace amla_cuda_test
