// Test helpers for the MLA formulations: an independent long-double oracle computed straight from
// MLA's definition, and comparison metrics.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "amla/mla/absorb.hpp"
#include "amla/mla/decode_problem.hpp"
#include "amla/mla/naive.hpp"
#include "amla/mla/problem_builder.hpp"
#include "amla/numeric/gemm.hpp"

namespace mla_test {

namespace mla = amla::mla;

/// Real head-dim ratios in miniature: 3 heads, D_n 16, D_r 8, D_v 12, D_l 32.
inline constexpr mla::MlaDims small{3, 16, 8, 12, 32};

/// Smaller still, for validation and builder tests: 2 heads, D_n 8, D_r 4, D_v 6, D_l 16.
inline constexpr mla::MlaDims tiny{2, 8, 4, 6, 16};

template <class T>
long double val(T x) {
  if constexpr (std::is_same_v<T, amla::bf16>) {
    return static_cast<long double>(x.to_float());
  } else {
    return static_cast<long double>(x);
  }
}

/// The latent rows (D_l + D_r values each) of request b's context: the shared prefix, then the
/// request's suffix read through its block table from the paged cache.
template <class T>
std::vector<const T*> context_rows(const mla::MlaProblem<T>& p, int b) {
  const auto cols = static_cast<std::size_t>(p.dims.absorb_d_qk());
  const int suffix = p.seqlens[static_cast<std::size_t>(b)];
  const int page_size = p.shape.page_size;
  std::vector<const T*> rows(static_cast<std::size_t>(p.prefix_len + suffix));
  for (int j = 0; j < p.prefix_len; ++j) {
    rows[static_cast<std::size_t>(j)] = p.prefix_latent.data() + static_cast<std::size_t>(j) * cols;
  }
  for (int s = 0; s < suffix; ++s) {
    const int page =
        p.block_table[static_cast<std::size_t>(b) * p.shape.max_pages_per_seq + s / page_size];
    rows[static_cast<std::size_t>(p.prefix_len + s)] =
        p.cache.data() + (static_cast<std::size_t>(page) * page_size + s % page_size) * cols;
  }
  return rows;
}

/// context_rows(p, b) as a matrix, one row per key of the context.
inline amla::MatrixF context_latent(const mla::MlaProblem<float>& p, int b) {
  const std::vector<const float*> rows = context_rows(p, b);
  const int cols = p.dims.absorb_d_qk();
  amla::MatrixF m(static_cast<Eigen::Index>(rows.size()), cols);
  for (std::size_t s = 0; s < rows.size(); ++s) {
    for (int c = 0; c < cols; ++c) m(static_cast<Eigen::Index>(s), c) = rows[s][c];
  }
  return m;
}

/// MLA decode from its definition in long double: for every (b, t, h) and visible key j,
/// k_n = W_KVb1[h] c_n(j), v = W_KVb2[h] c_n(j), s = scale (q_n . k_n + q_r . c_r(j)); out is
/// the softmax-weighted sum of v, lse = log sum exp s. No library code beyond the layouts.
template <class T>
mla::MlaResult oracle(const mla::MlaProblem<T>& p, bool causal, double scale_override = 0) {
  const mla::MlaDims& d = p.dims;
  const long double scale =
      scale_override > 0 ? scale_override : 1.0L / std::sqrt(static_cast<long double>(d.d_qk()));
  mla::MlaResult r(mla::io_shape(d, p.shape.batch, p.shape.s_q), mla::formulation::naive);
  for (int b = 0; b < p.shape.batch; ++b) {
    const std::vector<const T*> rows = context_rows(p, b);
    const int ctx = static_cast<int>(rows.size());
    for (int h = 0; h < d.heads; ++h) {
      // Decompressed keys and values of head h.
      std::vector<long double> kn(static_cast<std::size_t>(ctx) * d.d_nope),
          v(static_cast<std::size_t>(ctx) * d.d_v);
      for (int j = 0; j < ctx; ++j) {
        for (int i = 0; i < d.d_nope; ++i) {
          long double acc = 0;
          const T* w = p.w_kvb1.data() + (static_cast<std::size_t>(h) * d.d_nope + i) * d.d_latent;
          for (int c = 0; c < d.d_latent; ++c) acc += val(w[c]) * val(rows[j][c]);
          kn[static_cast<std::size_t>(j) * d.d_nope + i] = acc;
        }
        for (int i = 0; i < d.d_v; ++i) {
          long double acc = 0;
          const T* w = p.w_kvb2.data() + (static_cast<std::size_t>(h) * d.d_v + i) * d.d_latent;
          for (int c = 0; c < d.d_latent; ++c) acc += val(w[c]) * val(rows[j][c]);
          v[static_cast<std::size_t>(j) * d.d_v + i] = acc;
        }
      }
      for (int t = 0; t < p.shape.s_q; ++t) {
        const int vis = causal ? std::clamp(ctx - p.shape.s_q + t + 1, 0, ctx) : ctx;
        const T* q =
            p.q.data() + ((static_cast<std::size_t>(b) * p.shape.s_q + t) * d.heads + h) * d.d_qk();
        std::vector<long double> s(static_cast<std::size_t>(vis));
        long double m = -std::numeric_limits<long double>::infinity();
        for (int j = 0; j < vis; ++j) {
          long double acc = 0;
          for (int i = 0; i < d.d_nope; ++i)
            acc += val(q[i]) * kn[static_cast<std::size_t>(j) * d.d_nope + i];
          for (int i = 0; i < d.d_rope; ++i)
            acc += val(q[d.d_nope + i]) * val(rows[j][d.d_latent + i]);
          s[j] = scale * acc;
          m = std::max(m, s[j]);
        }
        double* out = r.out_row(b, t, h);
        if (vis == 0) {
          for (int i = 0; i < d.d_v; ++i) out[i] = 0;
          r.lse_at(b, t, h) = -std::numeric_limits<double>::infinity();
          continue;
        }
        long double l = 0;
        std::vector<long double> o(static_cast<std::size_t>(d.d_v), 0.0L);
        for (int j = 0; j < vis; ++j) {
          const long double e = std::exp(s[j] - m);
          l += e;
          for (int i = 0; i < d.d_v; ++i) o[i] += e * v[static_cast<std::size_t>(j) * d.d_v + i];
        }
        for (int i = 0; i < d.d_v; ++i) out[i] = static_cast<double>(o[i] / l);
        r.lse_at(b, t, h) = static_cast<double>(m + std::log(l));
      }
    }
  }
  return r;
}

/// ||a - b||_F / ||b||_F over the outputs (0 when both are zero).
inline double rel_error(const mla::MlaResult& a, const mla::MlaResult& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.out.size(); ++i) {
    num += (a.out[i] - b.out[i]) * (a.out[i] - b.out[i]);
    den += b.out[i] * b.out[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// Largest |a - b| over lse entries (-inf must match -inf exactly; returns inf otherwise).
inline double lse_error(const mla::MlaResult& a, const mla::MlaResult& b) {
  double e = 0;
  for (std::size_t i = 0; i < a.lse.size(); ++i) {
    if (std::isinf(a.lse[i]) || std::isinf(b.lse[i])) {
      if (a.lse[i] != b.lse[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    e = std::max(e, std::abs(a.lse[i] - b.lse[i]));
  }
  return e;
}

/// Checks a float64 formulation (decode(problem, options) -> MlaResult) against the oracle on
/// `small`: causal and not, s_q 1 and 2, with and without a shared prefix, four requests of
/// suffixes {5, 0, 17, 1} in pages of 4. Each case checks that it ran as `ran`, its output error
/// below `out_tol` and its lse error below `lse_tol`.
template <class Decode>
void check_oracle_sweep(Decode decode, mla::formulation ran, std::uint64_t seed, double out_tol,
                        double lse_tol) {
  for (bool causal : {false, true}) {
    for (int s_q : {1, 2}) {
      for (int prefix : {0, 9}) {
        const auto p = mla::MlaProblemBuilder(small)
                           .batch(4)
                           .s_q(s_q)
                           .prefix_len(prefix)
                           .suffix_lens({5, 0, 17, 1})
                           .page_size(4)
                           .seed(seed + static_cast<std::uint64_t>(s_q + prefix))
                           .build<amla::bf16>();
        mla::MlaOptions o;
        o.causal = causal;
        const mla::MlaResult r = decode(p, o);
        const mla::MlaResult ref = oracle(p, causal);
        INFO("causal " << causal << " s_q " << s_q << " prefix " << prefix);
        CHECK(r.ran == ran);
        CHECK(rel_error(r, ref) < out_tol);
        CHECK(lse_error(r, ref) < lse_tol);
      }
    }
  }
}

/// check_oracle_sweep of naive_decode or absorb_decode (`f`), which must run as itself.
inline void check_formulation_sweep(mla::formulation f, std::uint64_t seed, double out_tol,
                                    double lse_tol) {
  check_oracle_sweep(
      [f](const auto& p, const mla::MlaOptions& o) {
        return f == mla::formulation::naive ? mla::naive_decode(p.model(), p.inputs(), o)
                                            : mla::absorb_decode(p.model(), p.inputs(), o);
      },
      f, seed, out_tol, lse_tol);
}

inline bool all_finite(const mla::MlaResult& r) {
  for (double x : r.out) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace mla_test
