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

/// out [batch, s_q, H, D_v] and lse [batch, H, s_q] in scalar S, laid out by `shape` (io_shape, as
/// MlaResult).
template <class S>
struct Partial {
  DecodeShape shape;
  std::vector<S> out;
  std::vector<S> lse;

  explicit Partial(const DecodeShape& s) : shape(s), out(s.out_elems()), lse(s.lse_elems()) {}

  template <class Row>
  void set(int b, int t, int h, const Row& row, S l) {
    S* dst = out.data() + shape.out_offset(b, t, h);
    for (int c = 0; c < shape.d_v; ++c) dst[c] = row(c);
    lse[shape.lse_offset(b, t, h)] = l;
  }

  /// The MlaResult, with the output cast to BF16 when `round_output` (bf16 mode only).
  MlaResult finish(formulation ran, bool round_output) const {
    MlaResult r(shape, ran);
    for (std::size_t i = 0; i < out.size(); ++i) {
      r.out[i] = round_output ? static_cast<double>(round_bf16(static_cast<float>(out[i])))
                              : static_cast<double>(out[i]);
    }
    for (std::size_t i = 0; i < lse.size(); ++i) r.lse[i] = static_cast<double>(lse[i]);
    return r;
  }
};

/// A formulation's result in the mode of `options`: `run(S{})` returns its Partial<S> in the
/// mode's scalar (double for float64, float for bf16), finished as formulation `ran` (the output
/// cast to BF16 when the bf16 mode asks for it).
template <class Run>
MlaResult run_in_mode(const MlaOptions& options, formulation ran, Run&& run) {
  if (options.mode == numerics::float64) return run(double{}).finish(ran, false);
  return run(float{}).finish(ran, options.round_output_bf16);
}

}  // namespace amla::mla::detail
