// amla/mla/detail/partial.hpp: a formulation's output in its working scalar, before it becomes an
// MlaResult (and the partial outputs TyphoonMLA combines).
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <vector>

#include "amla/mla/cost.hpp"
#include "amla/mla/decode_problem.hpp"
#include "amla/numeric/bf16.hpp"

namespace amla::mla::detail {

/// out [batch, s_q, H, D_v] and lse [batch, H, s_q] in scalar S (the layouts of MlaResult).
template <class S>
struct Partial {
  int batch, s_q, heads, d_v;
  std::vector<S> out;
  std::vector<S> lse;

  Partial(int b, int sq, int h, int dv)
      : batch(b),
        s_q(sq),
        heads(h),
        d_v(dv),
        out(static_cast<std::size_t>(b) * sq * h * dv),
        lse(static_cast<std::size_t>(b) * h * sq) {}

  std::size_t out_offset(int b, int t, int h) const {
    return ((static_cast<std::size_t>(b) * s_q + t) * heads + h) * d_v;
  }
  std::size_t lse_offset(int b, int t, int h) const {
    return (static_cast<std::size_t>(b) * heads + h) * s_q + t;
  }
  template <class Row>
  void set(int b, int t, int h, const Row& row, S l) {
    S* dst = out.data() + out_offset(b, t, h);
    for (int c = 0; c < d_v; ++c) dst[c] = row(c);
    lse[lse_offset(b, t, h)] = l;
  }

  /// The MlaResult, with the output cast to BF16 when `round_output` (bf16 mode only).
  MlaResult finish(formulation ran, bool round_output) const {
    MlaResult r(batch, s_q, heads, d_v, ran);
    for (std::size_t i = 0; i < out.size(); ++i) {
      r.out[i] = round_output ? static_cast<double>(round_bf16(static_cast<float>(out[i])))
                              : static_cast<double>(out[i]);
    }
    for (std::size_t i = 0; i < lse.size(); ++i) r.lse[i] = static_cast<double>(lse[i]);
    return r;
  }
};

}  // namespace amla::mla::detail
