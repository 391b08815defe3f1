// amla/problem/outputs.hpp: where a decode writes its results: views of the caller's memory, or
// owning buffers (layouts in problem/shape.hpp).
#pragma once

#include <span>
#include <type_traits>
#include <vector>

#include "amla/numeric/bf16.hpp"
#include "amla/problem/shape.hpp"

namespace amla {

/// Writable views of the outputs. lse may be empty when the caller does not want it.
template <class OutT = float, class LseT = float>
struct DecodeOutputs {
  static_assert(std::is_same_v<OutT, float> || std::is_same_v<OutT, double> ||
                    std::is_same_v<OutT, bf16>,
                "out elements are float, double or amla::bf16");
  static_assert(std::is_same_v<LseT, float> || std::is_same_v<LseT, double>,
                "lse elements are float or double");
  std::span<OutT> out;  ///< [batch, s_q, h_q, d_v]
  std::span<LseT> lse;  ///< [batch, h_q, s_q], natural log; may be empty
};

/// Owning outputs, for callers that do not bring their own memory.
template <class OutT = float, class LseT = float>
struct DecodeResult {
  DecodeShape shape;
  std::vector<OutT> out;
  std::vector<LseT> lse;

  /// Zeroed buffers for shape s; throws amla::invalid_argument when they cannot be allocated.
  explicit DecodeResult(const DecodeShape& s)
      : shape(s),
        out(detail::allocate<OutT>("amla::DecodeResult", "out", s.out_elems())),
        lse(detail::allocate<LseT>("amla::DecodeResult", "lse", s.lse_elems())) {}
  DecodeOutputs<OutT, LseT> view() { return {out, lse}; }
  const OutT* out_row(int b, int t, int h) const { return out.data() + shape.out_offset(b, t, h); }
  LseT lse_at(int b, int t, int h) const { return lse[shape.lse_offset(b, t, h)]; }
};

}  // namespace amla
