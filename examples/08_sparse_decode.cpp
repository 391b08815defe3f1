// examples/08_sparse_decode.cpp: sparse top-k decode (DeepSeek-V3.2's DSA) with attention sinks
// on the CPU references: each query token attends only the topk keys an indexer chose for it
// (problem/sparse.hpp), and each head's sink logit joins the softmax denominator
// (problem/conventions.hpp, "Attention sinks").
//
//   example_08_sparse_decode [--seqlen N] [--topk K] [--heads H] [--page P] [--seed S] [--demo]
//                            [--help]
//
// The problem: 2 sequences of the MLA shape (d_qk 576, d_v 512, one KV head), 2 query tokens each
// (MTP, causal), BF16 values. The index lists stand in for an indexer's choice: for each token,
// K positions drawn among the keys it may see, so some repeat (a duplicate counts twice), and
// about one in eight set to -1 (invalid); sequence 1's second token lists no valid key at all and
// gets the empty-row result. Sinks are drawn per head around the rows' lse.
//
// Printed: each recurrence's error against the float64 golden of the same sparse problem (relative
// Frobenius norm of out, largest lse difference) in its BF16 mode, without and with sinks, and
// the share of the softmax weight the sink takes per head (1 - 1 / sink_divisor).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "amla/amla.hpp"
#include "example_cli.hpp"

namespace at = amla::attention;

namespace {

struct Config {
  int seqlen = 8192;
  int topk = 2048;
  int heads = 128;
  int page = 64;
  std::uint64_t seed = 1;
};

void usage() {
  std::printf(
      "example_08_sparse_decode: sparse top-k decode and attention sinks against golden\n"
      "  --seqlen N   keys per sequence (default 8192)\n"
      "  --topk K     entries per query token's index list (default 2048)\n"
      "  --heads H    query heads (default 128)\n"
      "  --page P     page size, any positive value (default 64)\n"
      "  --seed S     seed of the values, the index lists and the sinks (default 1)\n"
      "  --demo       a quick run: 1000 keys, topk 256, 16 heads, page size 61\n"
      "  --help       this text\n");
}

/// Relative Frobenius error of a against b, and the largest |lse difference| over finite lse.
template <class A, class B>
std::pair<double, double> errors(const A& a, const B& b) {
  double num = 0.0, den = 0.0, lse = 0.0;
  for (std::size_t i = 0; i < b.out.size(); ++i) {
    const double d = static_cast<double>(a.out[i]) - static_cast<double>(b.out[i]);
    num += d * d;
    den += static_cast<double>(b.out[i]) * static_cast<double>(b.out[i]);
  }
  for (std::size_t i = 0; i < b.lse.size(); ++i) {
    if (std::isfinite(b.lse[i])) {
      lse = std::max(lse, std::abs(static_cast<double>(a.lse[i]) - b.lse[i]));
    }
  }
  return {den > 0.0 ? std::sqrt(num / den) : std::sqrt(num), lse};
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* hint = " (see --help)";
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--demo") {
      c.seqlen = 1000;
      c.topk = 256;
      c.heads = 16;
      c.page = 61;
    } else if (a == "--seqlen") {
      c.seqlen = std::atoi(amla_example::option_value(i, argc, argv, hint));
    } else if (a == "--topk") {
      c.topk = std::atoi(amla_example::option_value(i, argc, argv, hint));
    } else if (a == "--heads") {
      c.heads = std::atoi(amla_example::option_value(i, argc, argv, hint));
    } else if (a == "--page") {
      c.page = std::atoi(amla_example::option_value(i, argc, argv, hint));
    } else if (a == "--seed") {
      c.seed = std::strtoull(amla_example::option_value(i, argc, argv, hint), nullptr, 10);
    } else {
      std::fprintf(stderr, "example_08_sparse_decode: unknown argument '%s' (see --help)\n",
                   a.c_str());
      return 2;
    }
  }
  try {
    const auto p = at::ProblemBuilder()
                       .batch(2)
                       .s_q(2)
                       .heads(c.heads, 1)
                       .dims(576, 512)
                       .page_size(c.page)
                       .seqlens({c.seqlen, std::max(1, c.seqlen / 3)})
                       .seed(c.seed)
                       .build<amla::bf16>();
    at::DecodeOptions o;
    o.causal = true;

    // The index lists: topk positions among the keys each token may see, one in eight -1.
    std::mt19937_64 rng(c.seed);
    const int topk = std::max(c.topk, 1);
    std::vector<std::int32_t> indices;
    for (int b = 0; b < 2; ++b) {
      for (int t = 0; t < 2; ++t) {
        const int seen = amla::visible_keys(p.seqlens[static_cast<std::size_t>(b)], 2, t, true);
        for (int i = 0; i < topk; ++i) {
          const bool invalid = seen == 0 || (b == 1 && t == 1) || rng() % 8 == 0;
          indices.push_back(invalid
                                ? amla::invalid_index
                                : static_cast<std::int32_t>(rng() % static_cast<unsigned>(seen)));
        }
      }
    }
    auto in = p.inputs();
    in.sparse = amla::SparseTopk{topk, indices, {}};

    // Sinks around the rows' lse: the keys' lse of head h, token 0 of sequence 0, plus N(0, 2^2).
    const auto plain = at::golden_decode(in, o);
    std::normal_distribution<double> around(0.0, 2.0);
    std::vector<float> sink(static_cast<std::size_t>(c.heads));
    for (int h = 0; h < c.heads; ++h) {
      sink[static_cast<std::size_t>(h)] = static_cast<float>(plain.lse_at(0, 0, h) + around(rng));
    }

    std::printf(
        "sparse decode: 2 sequences of %d and %d keys, s_q 2 (causal), %d heads, "
        "d_qk 576, d_v 512, page size %d, topk %d\n\n",
        p.seqlens[0], p.seqlens[1], c.heads, c.page, topk);
    std::printf("%-22s %14s %12s %14s %12s\n", "recurrence (bf16)", "out err", "lse err",
                "out err +sink", "lse +sink");
    auto with_sink = in;
    with_sink.sink = sink;
    const auto truth_sink = at::golden_decode(with_sink, o);
    const auto row = [&](const char* name, const auto& r, const auto& rs) {
      const auto [e, l] = errors(r, plain);
      const auto [es, ls] = errors(rs, truth_sink);
      std::printf("%-22s %14.3e %12.3e %14.3e %12.3e\n", name, e, l, es, ls);
    };
    row("Base (block 64)", at::base_decode(in, o, {at::precision::bf16, 64}),
        at::base_decode(with_sink, o, {at::precision::bf16, 64}));
    at::AmlaOptions amla64;
    amla64.block_size = 64;
    row("AMLA (block 64)", at::amla_decode(in, o, amla64), at::amla_decode(with_sink, o, amla64));
    row("seesaw", at::seesaw_decode(in, o), at::seesaw_decode(with_sink, o));
    row("transposed", at::transposed_decode(in, o), at::transposed_decode(with_sink, o));
    row("split-KV (4 splits)", at::split_kv_decode(in, o), at::split_kv_decode(with_sink, o));

    std::printf("\nshare of the softmax weight the sink takes (sequence 0, token 0):\n");
    for (int h = 0; h < std::min(c.heads, 8); ++h) {
      const double d = amla::sink_divisor(plain.lse_at(0, 0, h),
                                          static_cast<double>(sink[static_cast<std::size_t>(h)]));
      std::printf("  head %d: lse %8.3f  sink %8.3f  share %.4f\n", h, plain.lse_at(0, 0, h),
                  static_cast<double>(sink[static_cast<std::size_t>(h)]), 1.0 - 1.0 / d);
    }
    std::printf(
        "\nsequence 1, token 1 lists no valid key: out 0, lse %g (the empty row), with "
        "or without a sink\n",
        truth_sink.lse_at(1, 1, 0));
  } catch (const amla::invalid_argument& e) {
    std::fprintf(stderr, "example_08_sparse_decode: %s\n", e.what());
    return 2;
  }
  return 0;
}
