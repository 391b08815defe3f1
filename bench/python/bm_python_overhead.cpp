// bench/python/bm_python_overhead.cpp: the C++ side of bm_python_overhead.py. Times golden_decode
// and base_decode on the DeepSeek head group the script times from Python (ProblemBuilder's
// deepseek_mla(1, seqlen) with its default seed: the very problem amla.cases.deepseek_mla
// builds) and prints one JSON line: per-call milliseconds and a checksum of each output.
//
//   bm_python_overhead_cpp SEQLEN REPS THREADS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "amla/attention/golden.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/problem_builder.hpp"

namespace at = amla::attention;

template <class F>
std::string time_ms(int reps, F&& f, double& checksum) {
  std::string list;
  for (int i = 0; i <= reps; ++i) {  // call 0 warms up and is not reported
    const auto t0 = std::chrono::steady_clock::now();
    checksum = f();
    const auto t1 = std::chrono::steady_clock::now();
    if (i == 0) continue;
    if (!list.empty()) list += ", ";
    list += std::to_string(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return "[" + list + "]";
}

template <class V>
double sum_of(const V& v) {
  double s = 0;
  for (const auto x : v) s += static_cast<double>(x);
  return s;
}

int main(int argc, char** argv) {
  const int seqlen = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  const auto p = at::ProblemBuilder::deepseek_mla(1, seqlen).build<amla::bf16>();
  at::DecodeOptions opt;
  opt.threads = threads;
  double golden_sum = 0, base_sum = 0;
  const std::string golden = time_ms(
      reps, [&] { return sum_of(at::golden_decode(p.inputs(), opt).out); }, golden_sum);
  const std::string base = time_ms(
      reps, [&] { return sum_of(at::base_decode(p.inputs(), opt).out); }, base_sum);
  std::printf("{\"golden_ms\": %s, \"base_ms\": %s, \"golden_sum\": %.17g, \"base_sum\": %.17g}\n",
              golden.c_str(), base.c_str(), golden_sum, base_sum);
  return 0;
}
