// amla/mla/problem_builder.hpp: random, valid, reproducible MLA decode problems (weights, queries,
// a shared prefix and paged per-request suffixes) that own their memory, for tests, examples and
// benchmarks.
//
//   auto p = amla::mla::MlaProblemBuilder(amla::mla::presets::deepseek_v3)
//                .batch(4).prefix_len(100).suffix_lens({7, 0, 33, 64}).page_size(16).seed(3)
//                .build<amla::bf16>();
//   auto naive = amla::mla::naive_decode(p.model(), p.inputs());
//
// Values come from the attention ProblemBuilder's compiler-independent stream and are rounded to
// BF16: queries and latent cache from N(0, s^2) with s = value_std (default 1); weights from the
// uniform distribution with standard deviation weight_std (default 1 / sqrt(D_l), so decompressed
// keys and values have unit scale and the scaled scores are of order 1, as in a trained model;
// uniform because DeepSeek-V3's 17 million weights are drawn several times faster that way). Draw
// order is fixed (weights, queries, prefix, each request's suffix) so the paging never changes the
// values. Suffix pages are shuffled and, with poison_unused (default on), unused pages, slots past
// a request's end and block-table entries past its pages hold NaN and out-of-range ids that must
// never be read.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amla/attention/problem_builder.hpp"
#include "amla/config.hpp"
#include "amla/detail/fluent_setter.hpp"
#include "amla/mla/decode_problem.hpp"
#include "amla/mla/model.hpp"
#include "amla/mla/presets.hpp"

namespace amla::mla {

/// An MLA decode problem that owns its tensors (layouts as in mla/decode_problem.hpp).
template <mla_element T>
struct MlaProblem {
  MlaDims dims;
  DecodeShape shape;  ///< suffix_shape of the inputs: batch, s_q and the suffix cache's paging
  int prefix_len = 0;
  std::vector<T> w_kvb1;         ///< [H, D_n, D_l]
  std::vector<T> w_kvb2;         ///< [H, D_v, D_l]
  std::vector<T> q;              ///< [batch, s_q, H, D_n + D_r]
  std::vector<T> prefix_latent;  ///< [prefix_len, D_l + D_r]
  std::vector<T> cache;          ///< [num_pages, page_size, D_l + D_r]
  std::vector<std::int32_t> block_table;
  std::vector<std::int32_t> seqlens;

  MlaModel<T> model() const { return {dims, w_kvb1, w_kvb2}; }
  MlaDecodeInputs<T> inputs() const {
    return {
        shape.batch,
        shape.s_q,
        q,
        prefix_len,
        prefix_latent,
        {shape.num_pages, shape.page_size, shape.max_pages_per_seq, cache, block_table, seqlens}};
  }
};

/// Builds random valid MLA problems; setters return *this; build() validates and throws
/// amla::invalid_argument for bad settings.
class MlaProblemBuilder : public amla::detail::FluentSetter<MlaProblemBuilder> {
 public:
  explicit MlaProblemBuilder(MlaDims dims) : dims_(dims) {}

  MlaProblemBuilder& batch(int n) { return set(batch_, n); }
  MlaProblemBuilder& s_q(int n) { return set(s_q_, n); }
  MlaProblemBuilder& prefix_len(int n) { return set(prefix_len_, n); }
  /// One suffix length per request (sets the batch to their count), or one for all requests.
  MlaProblemBuilder& suffix_lens(std::vector<int> lens) {
    suffix_lens_ = std::move(lens);
    if (suffix_lens_.size() > 1) batch_ = static_cast<int>(suffix_lens_.size());
    return *this;
  }
  MlaProblemBuilder& page_size(int n) { return set(page_size_, n); }
  MlaProblemBuilder& value_std(double s) { return set(value_std_, s); }
  /// Default 1 / sqrt(D_l).
  MlaProblemBuilder& weight_std(double s) { return set(weight_std_, s); }
  MlaProblemBuilder& seed(std::uint64_t s) { return set(seed_, s); }
  MlaProblemBuilder& poison_unused(bool on = true) { return set(poison_, on); }

  template <mla_element T = bf16>
  MlaProblem<T> build() const {
    const char* fn = "amla::mla::MlaProblemBuilder::build";
    namespace ad = attention::detail;
    detail::validate_dims(fn, dims_);
    amla::detail::check_dim(fn, "batch", batch_);
    amla::detail::check_dim(fn, "s_q", s_q_);
    amla::detail::check_dim(fn, "page_size", page_size_);
    if (prefix_len_ < 0) {
      amla::detail::throw_invalid(fn, "prefix_len", std::to_string(prefix_len_), "must be >= 0");
    }
    const std::vector<std::int32_t> lens =
        ad::batch_lengths(fn, "suffix_lens", suffix_lens_, batch_);
    for (const std::int32_t len : lens) {
      amla::detail::checked_sum(fn, "suffix_lens", "prefix_len + a suffix length", prefix_len_, len,
                                INT_MAX);
    }
    const double wstd =
        weight_std_ ? *weight_std_ : 1.0 / std::sqrt(static_cast<double>(dims_.d_latent));
    amla::detail::require_finite_positive(fn, "value_std", value_std_);
    amla::detail::require_finite_positive(fn, "weight_std", wstd);

    // The suffix cache's paging, as the attention builder pages a cache of one KV head: with
    // poison_unused one spare (poisoned) page and one spare block-table column, always shuffled.
    MlaProblem<T> p;
    p.dims = dims_;
    p.shape = {batch_,     s_q_, dims_.heads, 1, dims_.absorb_d_qk(), dims_.absorb_d_v(), 1,
               page_size_, 1};
    p.prefix_len = prefix_len_;
    p.seqlens = lens;
    DecodeShape& shape = p.shape;
    const int spare = poison_ ? 1 : 0;
    ad::size_pages(fn, {"suffix_lens", "suffix_lens", "suffix_lens"}, shape, lens, spare, spare);
    validate_shape(fn, shape, true);
    const auto prefix_elems = static_cast<std::size_t>(amla::detail::checked_product(
        fn, "prefix_len", "prefix_latent [prefix_len, D_l + D_r]", prefix_len_, shape.d_qk));
    amla::detail::require_allocatable(fn, "prefix_len", prefix_elems, sizeof(T));
    amla::detail::require_allocatable(fn, "suffix_lens", shape.kv_elems(), sizeof(T));

    ad::ValueStream values(seed_);
    ad::ValueStream layout(seed_ ^ 0x9E3779B97F4A7C15ull);
    const auto draw = [&](std::vector<T>& v, const char* arg, std::size_t n,
                          attention::ValueDistribution dist) {
      v = amla::detail::allocate<T>(fn, arg, n);
      ad::draw_into(v.data(), n, values, dist, value_format::bf16);
    };
    const auto normal = attention::ValueDistribution::normal(value_std_);
    const auto uniform = attention::ValueDistribution::uniform(std::sqrt(3.0) * wstd);
    const MlaDims& d = dims_;
    draw(p.w_kvb1, "w_kvb1", p.model().w_kvb1_elems(), uniform);
    draw(p.w_kvb2, "w_kvb2", p.model().w_kvb2_elems(), uniform);
    draw(p.q, "q", io_shape(d, batch_, s_q_).q_elems(), normal);
    draw(p.prefix_latent, "prefix_len", prefix_elems, normal);

    p.block_table = ad::assign_pages(shape, lens, true, poison_, layout);
    p.cache = amla::detail::allocate<T>(fn, "suffix_lens", shape.kv_elems(),
                                        poison_ ? ad::poison_value<T>() : T{});
    for (int b = 0; b < batch_; ++b) {
      for (int s = 0; s < lens[static_cast<std::size_t>(b)]; ++s) {
        T* dst = p.cache.data() + ad::key_slot(shape, p.block_table, b, s, 0) * shape.d_qk;
        ad::draw_into(dst, static_cast<std::size_t>(shape.d_qk), values, normal,
                      value_format::bf16);
      }
    }
    return p;
  }

 private:
  MlaDims dims_;
  int batch_ = 1;
  int s_q_ = 1;
  int prefix_len_ = 0;
  std::vector<int> suffix_lens_{0};
  int page_size_ = 64;
  double value_std_ = 1.0;
  std::optional<double> weight_std_;  // default 1 / sqrt(D_l)
  std::uint64_t seed_ = 1;
  bool poison_ = true;
};

}  // namespace amla::mla
