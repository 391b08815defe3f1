// tests/cuda/cpu_reference.cpp: see cpu_reference.hpp.
#include "cpu_reference.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <thread>

#include "amla/attention/amla.hpp"
#include "amla/attention/driver.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/numeric/bf16.hpp"

namespace amla_cuda_test {

namespace {

constexpr std::uint16_t bf16_nan = 0x7FC0;

float bf16_to_float(std::uint16_t b) {
  return amla::bf16::from_bits(b).to_float();
}

/// splitmix64: a small, fast, well-mixed generator for filling large buffers.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1p-53; }
  /// Two standard normal values (Box-Muller).
  void normal2(float& a, float& b) {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double t = 6.283185307179586 * uniform();
    a = static_cast<float>(r * std::cos(t));
    b = static_cast<float>(r * std::sin(t));
  }
};

void fill_normal(std::vector<std::uint16_t>& v, std::size_t begin, std::size_t end, float spread,
                 std::uint64_t seed) {
  Rng rng{seed};
  for (std::size_t i = begin; i < end; i += 2) {
    float a, b;
    rng.normal2(a, b);
    v[i] = amla::bf16::from_float(a * spread).bits;
    if (i + 1 < end) v[i + 1] = amla::bf16::from_float(b * spread).bits;
  }
}

template <class F>
void parallel_for(std::size_t n, F&& f) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  std::atomic<std::size_t> counter{0};
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (;;) {
        const std::size_t i = counter.fetch_add(1);
        if (i >= n) return;
        f(i);
      }
    });
  }
  for (auto& th : pool) th.join();
}

}  // namespace

int HostProblem::visible(int b, int t) const {
  const int len = seqlens[static_cast<std::size_t>(b)];
  if (!causal) return len;
  return std::clamp(len - s_q + t + 1, 0, len);
}

std::size_t HostProblem::kv_offset(int b, int key) const {
  const int page = block_table[static_cast<std::size_t>(b) * max_pages + key / page_size];
  return (static_cast<std::size_t>(page) * page_size + key % page_size) * h_kv *
         static_cast<std::size_t>(d_qk);
}

HostProblem make_problem(int batch, int s_q, int h_q, const std::vector<int>& seqlens,
                         int page_size, bool causal, float spread, std::uint64_t seed) {
  HostProblem p;
  p.batch = batch;
  p.s_q = s_q;
  p.h_q = h_q;
  p.page_size = page_size;
  p.causal = causal;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.d_qk)));
  p.seqlens.assign(seqlens.begin(), seqlens.end());
  int max_len = 1;
  int used_pages = 0;
  for (int len : seqlens) {
    max_len = std::max(max_len, len);
    used_pages += (len + page_size - 1) / page_size;
  }
  p.max_pages = (max_len + page_size - 1) / page_size + 1;  // one spare column
  p.num_pages = used_pages + 3;                             // a few pages nobody uses
  Rng rng{seed};
  std::vector<int> order(static_cast<std::size_t>(p.num_pages));
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[static_cast<std::size_t>(rng.next() % i)]);
  }
  // Block table: used entries from the shuffled pages, the rest out of range.
  p.block_table.assign(static_cast<std::size_t>(batch) * p.max_pages, 0);
  std::vector<char> page_used(static_cast<std::size_t>(p.num_pages), 0);
  std::size_t next_page = 0;
  for (int b = 0; b < batch; ++b) {
    const int pages = (seqlens[static_cast<std::size_t>(b)] + page_size - 1) / page_size;
    for (int i = 0; i < p.max_pages; ++i) {
      std::int32_t& e = p.block_table[static_cast<std::size_t>(b) * p.max_pages + i];
      if (i < pages) {
        e = order[next_page++];
        page_used[static_cast<std::size_t>(e)] = 1;
      } else {
        e = (i % 2 == 0) ? -7 - i : p.num_pages + 1000 + i;
      }
    }
  }
  const std::size_t row = static_cast<std::size_t>(p.h_kv) * p.d_qk;
  p.kv.assign(static_cast<std::size_t>(p.num_pages) * page_size * row, bf16_nan);
  p.q.assign(static_cast<std::size_t>(batch) * s_q * h_q * p.d_qk, 0);
  // Fill used slots (a page's slots past the sequence's length stay NaN).
  std::vector<std::pair<std::size_t, std::size_t>> ranges;  // [begin, end) element ranges
  for (int b = 0; b < batch; ++b) {
    const int len = seqlens[static_cast<std::size_t>(b)];
    for (int key0 = 0; key0 < len; key0 += page_size) {
      const int page = p.block_table[static_cast<std::size_t>(b) * p.max_pages + key0 / page_size];
      const int n = std::min(page_size, len - key0);
      const std::size_t begin = static_cast<std::size_t>(page) * page_size * row;
      ranges.emplace_back(begin, begin + static_cast<std::size_t>(n) * row);
    }
  }
  parallel_for(ranges.size(), [&](std::size_t i) {
    fill_normal(p.kv, ranges[i].first, ranges[i].second, spread, seed * 7919 + i + 1);
  });
  const std::size_t q_per = static_cast<std::size_t>(s_q) * h_q * p.d_qk;
  parallel_for(static_cast<std::size_t>(batch), [&](std::size_t b) {
    fill_normal(p.q, b * q_per, (b + 1) * q_per, spread, seed * 104729 + b + 17);
  });
  return p;
}

void golden_f64(const HostProblem& p, std::vector<double>& out, std::vector<double>& lse) {
  out.assign(p.out_elems(), 0.0);
  lse.assign(p.lse_elems(), -std::numeric_limits<double>::infinity());
  const int hpg = p.h_q / p.h_kv;
  // One task per (batch, kv head, token).
  const std::size_t tasks = static_cast<std::size_t>(p.batch) * p.h_kv * p.s_q;
  parallel_for(tasks, [&](std::size_t task) {
    const int t = static_cast<int>(task % static_cast<std::size_t>(p.s_q));
    const int g = static_cast<int>((task / p.s_q) % static_cast<std::size_t>(p.h_kv));
    const int b = static_cast<int>(task / (static_cast<std::size_t>(p.s_q) * p.h_kv));
    const int vis = p.visible(b, t);
    if (vis == 0) return;
    // Gather the visible keys as doubles.
    std::vector<double> k(static_cast<std::size_t>(vis) * p.d_qk);
    for (int key = 0; key < vis; ++key) {
      const int page = p.block_table[static_cast<std::size_t>(b) * p.max_pages + key / p.page_size];
      const std::size_t src =
          ((static_cast<std::size_t>(page) * p.page_size + key % p.page_size) * p.h_kv + g) *
          p.d_qk;
      for (int d = 0; d < p.d_qk; ++d) {
        k[static_cast<std::size_t>(key) * p.d_qk + d] = bf16_to_float(p.kv[src + d]);
      }
    }
    std::vector<double> q(static_cast<std::size_t>(p.d_qk)), s(static_cast<std::size_t>(vis)),
        o(static_cast<std::size_t>(p.d_v));
    for (int j = 0; j < hpg; ++j) {
      const int h = g * hpg + j;
      const std::size_t qoff = ((static_cast<std::size_t>(b) * p.s_q + t) * p.h_q + h) *
                               static_cast<std::size_t>(p.d_qk);
      for (int d = 0; d < p.d_qk; ++d)
        q[static_cast<std::size_t>(d)] = bf16_to_float(p.q[qoff + d]);
      double m = -std::numeric_limits<double>::infinity();
      for (int key = 0; key < vis; ++key) {
        const double* kr = k.data() + static_cast<std::size_t>(key) * p.d_qk;
        double acc = 0.0;
        for (int d = 0; d < p.d_qk; ++d) acc += q[static_cast<std::size_t>(d)] * kr[d];
        s[static_cast<std::size_t>(key)] = acc * static_cast<double>(p.scale);
        m = std::max(m, s[static_cast<std::size_t>(key)]);
      }
      double l = 0.0;
      std::fill(o.begin(), o.end(), 0.0);
      for (int key = 0; key < vis; ++key) {
        const double e = std::exp(s[static_cast<std::size_t>(key)] - m);
        l += e;
        const double* vr = k.data() + static_cast<std::size_t>(key) * p.d_qk;  // V = K[:, :d_v]
        for (int d = 0; d < p.d_v; ++d) o[static_cast<std::size_t>(d)] += e * vr[d];
      }
      const std::size_t ooff =
          ((static_cast<std::size_t>(b) * p.s_q + t) * p.h_q + h) * static_cast<std::size_t>(p.d_v);
      for (int d = 0; d < p.d_v; ++d) out[ooff + d] = o[static_cast<std::size_t>(d)] / l;
      lse[(static_cast<std::size_t>(b) * p.h_q + h) * p.s_q + t] = m + std::log(l);
    }
  });
}

void cpu_recurrence(const HostProblem& p, const std::string& mode, std::vector<std::uint16_t>& out,
                    std::vector<float>& lse) {
  namespace at = amla::attention;
  std::vector<amla::bf16> q(p.q.size()), kv(p.kv.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = amla::bf16::from_bits(p.q[i]);
  for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = amla::bf16::from_bits(p.kv[i]);
  at::DecodeInputs<amla::bf16> in;
  in.shape = at::DecodeShape{p.batch, p.s_q,       p.h_q,       p.h_kv,     p.d_qk,
                             p.d_v,   p.num_pages, p.page_size, p.max_pages};
  in.q = q;
  in.kv = kv;
  in.block_table = p.block_table;
  in.seqlens = p.seqlens;
  at::DecodeOptions options;
  options.causal = p.causal;
  options.softmax_scale = p.scale;
  std::vector<amla::bf16> o(p.out_elems());
  lse.assign(p.lse_elems(), 0.0f);
  const at::DecodeOutputs<amla::bf16, float> outputs{o, lse};
  if (mode == "base") {
    at::BaseOptions base;
    base.block_size = 64;
    at::base_decode(in, options, outputs, base);
  } else {
    at::AmlaOptions amla;
    amla.block_size = 64;
    amla.rescale = amla::pow2_mode::safe;
    at::amla_decode(in, options, outputs, amla);
  }
  out.resize(o.size());
  for (std::size_t i = 0; i < o.size(); ++i) out[i] = o[i].bits;
}

}  // namespace amla_cuda_test
