// Shared helpers of the seesaw and transposed tests: BF16-exact random head groups, a plain
// float64 softmax-attention reference over a HeadGroup, and error norms.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "amla/attention/head_group.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"

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

struct Reference {
  amla::MatrixD out;
  std::vector<double> lse;
};

/// Exact softmax attention in float64 over the inputs as given (no rounding).
inline Reference reference(const amla::attention::HeadGroup& g) {
  const Eigen::Index rows = g.rows();
  Reference ref{amla::MatrixD::Zero(rows, g.d_v()),
                std::vector<double>(static_cast<std::size_t>(rows),
                                    -std::numeric_limits<double>::infinity())};
  const amla::MatrixD q = g.q.cast<double>();
  const amla::MatrixD k = g.k.cast<double>();
  const amla::MatrixD v = g.v.cast<double>();
  for (Eigen::Index r = 0; r < rows; ++r) {
    const Eigen::Index n = g.visible_keys(r);
    if (n == 0) continue;
    Eigen::VectorXd s = (k.topRows(n) * q.row(r).transpose()) * static_cast<double>(g.scale);
    const double mx = s.maxCoeff();
    Eigen::VectorXd p = (s.array() - mx).exp().matrix();
    const double l = p.sum();
    ref.out.row(r) = (p.transpose() * v.topRows(n)) / l;
    ref.lse[static_cast<std::size_t>(r)] = mx + std::log(l);
  }
  return ref;
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

}  // namespace amla_test::variants
