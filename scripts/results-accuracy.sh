#!/usr/bin/env bash
# Regenerates the measured tables of examples/ACCURACY_RESULTS.md: AMLA Tables 3 and 4 with
# example_02_accuracy, 100 samples per distribution in each V layout, and the error sources at
# 20 samples. Deterministic (fixed seed; results do not depend on the thread count). About 12
# minutes on 2 cores. Options: --samples N (default 100) for the two main tables.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/results.sh
results_begin --samples 100 example_02_accuracy -- "$@"
samples=$results_value out=$results_out
ex="$results_build/examples/example_02_accuracy"
doc=examples/ACCURACY_RESULTS.md
# The program's last line is its own wall time, which is not a result: it is left out.
run() { "$ex" "$@" | grep -v ' sample(s) in ' >"$out"; }
run --samples "$samples" --layout mla --no-diagnostics --locate
splice_block "$doc" accuracy-mla results-accuracy.sh \
  "example_02_accuracy --samples $samples --layout mla --no-diagnostics --locate" "$out"
run --samples "$samples" --layout independent --no-diagnostics --locate
splice_block "$doc" accuracy-independent results-accuracy.sh \
  "example_02_accuracy --samples $samples --layout independent --no-diagnostics --locate" "$out"
run --samples 20
splice_block "$doc" accuracy-diagnostics results-accuracy.sh "example_02_accuracy --samples 20" \
  "$out"
echo "results-accuracy: $doc updated"
