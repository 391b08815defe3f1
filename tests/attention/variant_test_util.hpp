// Shared helpers of the attention tests: BF16-exact random head groups, end-aligned causal
// visibility, error norms, paged problems by their geometry and the paged sweep.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "amla/attention/driver.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/attention/problem_builder.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"
#include "error_norms.hpp"

namespace amla_test::variants {

/// Dense inputs of one head group: q [rows, d_qk], k [n_keys, d_qk], an independent V
/// [n_keys, d_v]; all BF16-exact, drawn from N(0, sigma^2).
struct Inputs {
  amla::MatrixF q, k, kv_v;
  float scale;

  amla::attention::HeadGroup group(std::span<const int> visible) const {
    return amla::attention::HeadGroup{q, k, kv_v, visible, scale};
  }
};

inline Inputs random_inputs(int rows, int n_keys, int d_qk, int d_v, int seed, float sigma) {
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::normal_distribution<float> dist(0.0f, sigma);
  const auto fill = [&](int r, int c) {
    amla::MatrixF m(r, c);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = amla::round_bf16(dist(gen));
    return m;
  };
  Inputs in{fill(rows, d_qk), fill(n_keys, d_qk), fill(n_keys, d_v), 0.0f};
  in.scale = 1.0f / std::sqrt(static_cast<float>(d_qk));
  return in;
}

/// End-aligned causal visibility for rows ordered token-major over s_q tokens.
inline std::vector<int> causal_visible(int rows, int n_keys, int s_q) {
  const int per_token = (rows + s_q - 1) / s_q;
  std::vector<int> vis(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    const int t = r / per_token;
    vis[static_cast<std::size_t>(r)] = std::clamp(n_keys - s_q + t + 1, 0, n_keys);
  }
  return vis;
}

/// ||a - b||_F / ||b||_F (0 when both are 0).
template <class DA, class DB>
double relative_error(const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b) {
  const amla::MatrixD ad = a.template cast<double>();
  const amla::MatrixD bd = b.template cast<double>();
  const double num = (ad - bd).norm();
  const double den = bd.norm();
  return den == 0.0 ? (num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity()) : num / den;
}

/// The worst row's ||a_r - b_r|| / ||b_r||.
template <class DA, class DB>
double max_row_relative_error(const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b) {
  double worst = 0.0;
  for (Eigen::Index r = 0; r < a.rows(); ++r)
    worst = std::max(worst, relative_error(a.row(r), b.row(r)));
  return worst;
}

using amla_test::max_lse_error;
using amla_test::rel_frobenius;

/// A paged problem's geometry in ProblemBuilder's terms: heads(h_q, h_kv), s_q, dims(d_qk, d_v),
/// page_size and seqlens (several lengths set the batch to their count).
struct PagedShape {
  struct Heads {
    int h_q = 1, h_kv = 1;
  };
  struct Dims {
    int d_qk = 0, d_v = 0;
  };
  Heads heads;
  int s_q = 1;
  Dims dims;
  int page_size = 0;
  std::vector<int> seqlens;
};

/// A ProblemBuilder set to `s`; the seed, the V layout and the value settings are the caller's.
inline amla::attention::ProblemBuilder builder(const PagedShape& s) {
  return amla::attention::ProblemBuilder()
      .heads(s.heads.h_q, s.heads.h_kv)
      .s_q(s.s_q)
      .dims(s.dims.d_qk, s.dims.d_v)
      .page_size(s.page_size)
      .seqlens(s.seqlens);
}

/// One case of a paged sweep: heads, query tokens, page size, KV block size, sequence lengths.
struct PagedCase {
  int h_q, h_kv, s_q, page, block;
  std::vector<int> lens;
};

/// The problems of one sweep case (bf16 caches of d_qk / d_v, drawn from `seed`) with and without
/// the causal mask and with V in the K cache or separate: calls check(problem, options) for each.
template <class Check>
void for_each_layout(const PagedCase& c, int d_qk, int d_v, std::uint64_t seed, Check&& check) {
  for (const bool causal : {false, true}) {
    for (const bool separate_v : {false, true}) {
      const auto p = builder({{c.h_q, c.h_kv}, c.s_q, {d_qk, d_v}, c.page, c.lens})
                         .separate_v(separate_v)
                         .seed(seed)
                         .template build<amla::bf16>();
      amla::attention::DecodeOptions o;
      o.causal = causal;
      check(p, o);
    }
  }
}

/// The paged sweep (h_q, s_q, causal, page sizes, block sizes from 1 to 512, lengths 0, 1 and not
/// multiples of the page or block size, both V layouts), calling check(problem, options, block)
/// for each.
template <class Check>
void for_each_paged_case(Check&& check) {
  const std::vector<PagedCase> cases = {
      {1, 1, 1, 1, 64, {0, 1, 37}},     {3, 1, 2, 16, 7, {1, 130, 16}},
      {16, 1, 4, 64, 64, {65, 3, 200}}, {16, 4, 2, 128, 32, {300, 0}},
      {64, 1, 1, 16, 64, {129}},        {128, 1, 2, 64, 64, {200}},
      {6, 3, 4, 1, 1, {5, 2}},          {16, 4, 2, 128, 512, {700, 0}},
      {128, 1, 2, 64, 512, {600}},
  };
  for (const auto& c : cases) {
    for_each_layout(
        c, 40, 24, static_cast<std::uint64_t>(c.h_q * 13 + c.page),
        [&](const auto& p, const amla::attention::DecodeOptions& o) { check(p, o, c.block); });
  }
}

}  // namespace amla_test::variants
