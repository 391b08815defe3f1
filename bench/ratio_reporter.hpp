// bench/ratio_reporter.hpp: console output plus a table of throughput ratios against a baseline
// measured in the same run.
//
// Convention: a benchmark named "family/variant/args..." is compared with "family/baseline/args..."
// (same family, same arguments). The ratio printed is baseline_time / variant_time, i.e. the
// variant's throughput as a fraction of the baseline's for the same work. With repetitions, the
// median aggregate is used.
#pragma once

#include <benchmark/benchmark.h>
#include <unistd.h>  // isatty

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace amla::bench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  // Google Benchmark applies --benchmark_color only to the reporter it creates itself: colours
  // here only on a terminal, so that a redirected run (scripts/results-bench.sh) is plain text.
  RatioReporter() : ConsoleReporter(isatty(fileno(stdout)) ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.error_occurred) continue;
      const bool aggregate = r.run_type == Run::RT_Aggregate;
      if (aggregate && r.aggregate_name != "median") continue;
      std::string name = r.run_name.str();
      times_[name] = r.GetAdjustedRealTime();
      if (!aggregate || order_.empty() || order_.back() != name) order_.push_back(name);
    }
  }

  void Finalize() override {
    benchmark::ConsoleReporter::Finalize();
    bool header = false;
    for (const auto& name : order_) {
      const auto slash1 = name.find('/');
      if (slash1 == std::string::npos) continue;
      const auto slash2 = name.find('/', slash1 + 1);
      const std::string family = name.substr(0, slash1);
      const std::string variant = name.substr(
          slash1 + 1, slash2 == std::string::npos ? std::string::npos : slash2 - slash1 - 1);
      if (variant == "baseline") continue;
      const std::string rest = slash2 == std::string::npos ? "" : name.substr(slash2);
      const auto base = times_.find(family + "/baseline" + rest);
      if (base == times_.end()) continue;
      if (!header) {
        std::printf("\nThroughput relative to the baseline measured in the same run:\n");
        std::printf("%-60s %10s\n", "benchmark", "ratio");
        header = true;
      }
      std::printf("%-60s %9.3fx\n", name.c_str(), base->second / times_[name]);
    }
    std::fflush(stdout);
  }

 private:
  std::map<std::string, double> times_;
  std::vector<std::string> order_;
};

}  // namespace amla::bench

/// BENCHMARK_MAIN with the ratio table printed after the usual console output.
#define AMLA_BENCHMARK_MAIN_WITH_RATIOS()                             \
  int main(int argc, char** argv) {                                   \
    benchmark::Initialize(&argc, argv);                               \
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1; \
    amla::bench::RatioReporter reporter;                              \
    benchmark::RunSpecifiedBenchmarks(&reporter);                     \
    benchmark::Shutdown();                                            \
    return 0;                                                         \
  }
