// amla/mla/decompress.hpp: the latent cache expanded to per-head K and V (the naive layout).
//
// For a latent token [c_n (D_l), c_r (D_r)] and head h:
//   k(h) = [W_KVb1[h] c_n (D_n), c_r (D_r)]   (D_qk = D_n + D_r; the RoPE part is shared by heads)
//   v(h) = W_KVb2[h] c_n                      (D_v)
// The naive formulation does this for every token it attends; TyphoonMLA does it once for the
// shared prefix (at prefill, where a naive kernel produces it anyway) and keeps the result:
// `decompress_prefix` gives that stored prefix, K [L_s, H, D_qk] and V [L_s, H, D_v].
//
// Precision follows the element type of the result:
//   double:      float64 products of the inputs as stored (the float64 truth);
//   bf16, float: BF16-rounded inputs, FP32 accumulation, result rounded to BF16 (what a GEMM
//                writing a BF16 cache stores; float elements then hold BF16-exact values).
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/parallel.hpp"
#include "amla/mla/decode_problem.hpp"
#include "amla/mla/model.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::mla {

/// Element types a decompressed prefix may be stored in.
template <class P>
concept prefix_element =
    std::is_same_v<P, double> || std::is_same_v<P, float> || std::is_same_v<P, bf16>;

/// Read-only view of a decompressed shared prefix: K [len, H, D_qk], V [len, H, D_v].
template <prefix_element P>
struct PrefixKVView {
  int len = 0;
  std::span<const P> k;
  std::span<const P> v;
};

/// The layout of a decompressed prefix of `len` tokens as a DecodeShape: one page of `len` slots
/// with H KV heads of d_qk = D_n + D_r (K) and d_v = D_v (V), so token s of head h sits at
/// slot_index(0, s, h) times d_qk in K and times d_v in V, and kv_elems / v_elems are the sizes.
inline DecodeShape prefix_kv_shape(const MlaDims& d, int len) {
  return DecodeShape{.batch = 1,
                     .s_q = 1,
                     .h_q = d.heads,
                     .h_kv = d.heads,
                     .d_qk = d.d_qk(),
                     .d_v = d.d_v,
                     .num_pages = 1,
                     .page_size = len,
                     .max_pages_per_seq = 1};
}

/// A decompressed shared prefix that owns its memory.
template <prefix_element P>
struct PrefixKV {
  MlaDims dims;
  int len = 0;
  std::vector<P> k;  ///< [len, H, D_qk]
  std::vector<P> v;  ///< [len, H, D_v]

  PrefixKVView<P> view() const { return {len, k, v}; }
};

namespace detail {

/// A * B in the mode's arithmetic: float64 for S = double; for S = float, a BF16 GEMM with FP32
/// accumulation. Every caller passes operands that are already BF16 values in the bf16 mode
/// (rounded when gathered, converted or stored), so they are not rounded again here.
template <class S, class DA, class DB>
Mat<S> project(const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b) {
  if constexpr (std::is_same_v<S, double>) {
    return matmul_f64(a, b);
  } else {
    static_assert(std::is_same_v<S, float>);
    return matmul_prerounded(a, b);
  }
}

/// What a kernel stores of a tensor it writes for the next kernel: BF16 in the bf16 mode
/// (S = float), the float64 value itself in the float64 mode.
template <class S>
void store_rounded(Mat<S>& m) {
  if constexpr (std::is_same_v<S, float>) round_bf16_inplace(m);
}

/// x stored as element type P (x is BF16-exact whenever P is bf16, so nothing rounds twice).
template <class P, class S>
P store_element(S x) {
  if constexpr (std::is_same_v<P, bf16>) {
    return bf16::from_float(static_cast<float>(x));
  } else {
    return static_cast<P>(x);
  }
}

/// K [L, D_qk] and V [L, D_v] of one head from latent rows [L, D_l + D_r] (in the mode's
/// arithmetic; see the file comment). w1 is W_KVb1[h] [D_n, D_l], w2 is W_KVb2[h] [D_v, D_l].
template <class S>
void decompress_head(const MlaDims& d, const Mat<S>& latent, const Mat<S>& w1, const Mat<S>& w2,
                     Mat<S>& k, Mat<S>& v) {
  const Eigen::Index n = latent.rows();
  k.resize(n, d.d_qk());
  v.resize(n, d.d_v);
  if (n == 0) return;
  const auto c_n = latent.leftCols(d.d_latent);
  Mat<S> k_n = project<S>(c_n, w1.transpose());
  store_rounded<S>(k_n);
  k.leftCols(d.d_nope) = k_n;
  k.rightCols(d.d_rope) = latent.rightCols(d.d_rope);
  v = project<S>(c_n, w2.transpose());
  store_rounded<S>(v);
}

}  // namespace detail

/// Decompresses the shared prefix of `inputs` (prefix_latent, prefix_len tokens) into per-head K
/// and V, once, for TyphoonMLA. P = double gives the float64 expansion, P = bf16 (or float) what
/// a BF16 kernel stores. Throws amla::invalid_argument for an inconsistent model or inputs.
template <prefix_element P, mla_element T>
PrefixKV<P> decompress_prefix(const MlaModel<T>& model, const MlaDecodeInputs<T>& inputs,
                              int threads = 0) {
  const char* fn = "amla::mla::decompress_prefix";
  detail::validate_model(fn, model);
  if (inputs.prefix_len < 0) {
    amla::detail::throw_invalid(fn, "inputs.prefix_len", std::to_string(inputs.prefix_len),
                                "must be >= 0");
  }
  const MlaDims& d = model.dims;
  amla::detail::check_span(fn, "inputs.prefix_latent", inputs.prefix_latent,
                           static_cast<std::size_t>(amla::detail::checked_product(
                               fn, "inputs.prefix_latent", "[prefix_len, D_l + D_r]",
                               inputs.prefix_len, d.absorb_d_qk())),
                           "[prefix_len, D_l + D_r]");
  if (threads < 0) {
    amla::detail::throw_invalid(fn, "threads", std::to_string(threads),
                                "must be >= 0 (0 = hardware concurrency)");
  }
  using S = std::conditional_t<std::is_same_v<P, double>, double, float>;
  constexpr bool round = std::is_same_v<S, float>;
  PrefixKV<P> out;
  out.dims = d;
  out.len = inputs.prefix_len;
  const DecodeShape shape = prefix_kv_shape(d, inputs.prefix_len);
  out.k.resize(shape.kv_elems());
  out.v.resize(shape.v_elems());
  if (inputs.prefix_len == 0) return out;
  const detail::Mat<S> latent =
      detail::block_as<S>(inputs.prefix_latent.data(), inputs.prefix_len, d.absorb_d_qk(), round);
  amla::detail::parallel_for(static_cast<std::size_t>(d.heads),
                             amla::detail::resolve_threads(threads), [&](std::size_t task) {
                               const int h = static_cast<int>(task);
                               detail::Mat<S> k, v;
                               detail::decompress_head<S>(d, latent,
                                                          w_kvb1_head<S>(model, h, round),
                                                          w_kvb2_head<S>(model, h, round), k, v);
                               for (int s = 0; s < inputs.prefix_len; ++s) {
                                 P* kd = out.k.data() + shape.slot_index(0, s, h) * shape.d_qk;
                                 P* vd = out.v.data() + shape.slot_index(0, s, h) * shape.d_v;
                                 for (int c = 0; c < shape.d_qk; ++c)
                                   kd[c] = detail::store_element<P>(k(s, c));
                                 for (int c = 0; c < shape.d_v; ++c)
                                   vd[c] = detail::store_element<P>(v(s, c));
                               }
                             });
  return out;
}

}  // namespace amla::mla
