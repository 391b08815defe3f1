#!/usr/bin/env bash
# Regenerates the measured tables of examples/ETAP_RESULTS.md: FlashMLA-ETAP's Table 1 (RMSE of
# FP16 outputs against float64) on amla's FP16 Base and transposed recurrences, with
# example_07_etap_accuracy over contexts 512 to 64K. Deterministic (fixed seed). A few minutes of
# CPU. Options: --samples N (default 4).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/results.sh
results_begin --samples 4 example_07_etap_accuracy -- "$@"
samples=$results_value out=$results_out
ex="$results_build/examples/example_07_etap_accuracy"
doc=examples/ETAP_RESULTS.md
# The program's last line is its own wall time, which is not a result: it is left out.
"$ex" --samples "$samples" | grep -v ' sample(s) in ' >"$out"
splice_block "$doc" etap-table1 results-etap.sh "example_07_etap_accuracy --samples $samples" "$out"
echo "results-etap: $doc updated"
