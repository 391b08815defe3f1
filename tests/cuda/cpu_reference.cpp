// tests/cuda/cpu_reference.cpp: see cpu_reference.hpp.
#include "cpu_reference.hpp"

#include <algorithm>

#include "amla/attention/amla.hpp"
#include "amla/attention/golden.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/problem_builder.hpp"

namespace amla_cuda_test {

namespace at = amla::attention;

struct Problem::owner {
  at::DecodeProblem<amla::bf16> problem;
};

Problem::Problem(const ProblemSpec& spec) : owner_(std::make_unique<owner>()) {
  owner_->problem = at::ProblemBuilder()
                        .s_q(spec.s_q)
                        .heads(spec.h_q, spec.h_kv)
                        .dims(spec.d_qk, spec.d_v)
                        .separate_v(spec.separate_v)
                        .page_size(spec.page_size)
                        .batch(static_cast<int>(spec.seqlens.size()))
                        .seqlens(spec.seqlens)
                        .distribution(at::ValueDistribution::normal(spec.spread))
                        .spare_pages(3)
                        .seed(spec.seed)
                        .build<amla::bf16>();
  inputs_ = owner_->problem.inputs();
}

Problem::~Problem() = default;

void Problem::set_trap(int col) {
  at::DecodeProblem<amla::bf16>& p = owner_->problem;
  const amla::DecodeShape& s = p.shape;
  for (int b = 0; b < s.batch; ++b) {
    const int len = p.seqlens[static_cast<std::size_t>(b)];
    for (int key = 0; key < std::min(len, 128); ++key) {
      const int page = p.block_table[s.table_offset(b, key / s.page_size)];
      amla::bf16* k = p.kv.data() + s.slot_index(page, key % s.page_size, 0) * s.d_qk;
      if (key < 64) {
        k[col] = amla::bf16::from_bits(0);  // +0.0
      } else {
        for (int d = 0; d < s.d_qk; ++d) k[d] = amla::bf16::from_float(4.0f * k[d].to_float());
      }
    }
  }
}

void Problem::set(Tensor which, int b, int i, int j, int d, float value) {
  at::DecodeProblem<amla::bf16>& p = owner_->problem;
  const amla::bf16 x = amla::bf16::from_float(value);
  switch (which) {
    case Tensor::q:
      p.q[p.shape.q_offset(b, i, j) + static_cast<std::size_t>(d)] = x;
      break;
    case Tensor::k:
      const_cast<amla::bf16*>(p.key(b, i, j))[d] = x;
      break;
    case Tensor::v:
      const_cast<amla::bf16*>(p.value(b, i, j))[d] = x;
      break;
  }
  inputs_ = p.inputs();
}

amla::DecodeResult<double, double> golden(const Problem& p, const amla::DecodeOptions& options) {
  return at::golden_decode(p.inputs(), options);
}

amla::DecodeResult<amla::bf16, float> cpu_base(const Problem& p,
                                               const amla::DecodeOptions& options) {
  amla::DecodeResult<amla::bf16, float> r(p.shape());
  at::BaseOptions base;
  base.block_size = 64;
  at::base_decode(p.inputs(), options, r.view(), base);
  return r;
}

amla::DecodeResult<amla::bf16, float> cpu_amla(const Problem& p, const amla::DecodeOptions& options,
                                               bool skip_unmoved) {
  amla::DecodeResult<amla::bf16, float> r(p.shape());
  at::AmlaOptions amla;
  amla.block_size = 64;
  amla.rescale = amla::pow2_mode::safe;
  amla.skip_unmoved = skip_unmoved;
  at::amla_decode(p.inputs(), options, r.view(), amla);
  return r;
}

}  // namespace amla_cuda_test
