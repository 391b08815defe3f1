#!/usr/bin/env bash
# Regenerates the measured tables of bench/RESULTS.md: every Google Benchmark program under bench/
# (bm_numeric, bm_attention, bm_mla, bm_sim), each with its ratios against a baseline measured in
# the same run (bench/ratio_reporter.hpp). Timings depend on the machine and its load, which the
# stamp of each block records; quote the ratios. Options: --min-time SECONDS per benchmark
# (default 0.5).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/results.sh
programs=(bm_numeric bm_attention bm_mla bm_sim)
results_begin --min-time 0.5 "${programs[@]}" -- "$@"
min_time=$results_value out=$results_out
doc=bench/RESULTS.md
for p in "${programs[@]}"; do
  "$results_build/bench/$p" --benchmark_min_time="$min_time" >"$out" 2>&1
  splice_block "$doc" "$p" results-bench.sh "$p --benchmark_min_time=$min_time" "$out"
done
echo "results-bench: $doc updated"
