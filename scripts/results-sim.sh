#!/usr/bin/env bash
# Regenerates the measured tables of examples/SIM_RESULTS.md with example_04_amla_decode_model:
# the Table 5 sweep on the calibrated Ascend 910 model (S_q = 1 against the paper, S_q = 2 and
# Base predicted), the sensitivity to the non-public figures, and the decode kernel under the
# arrangement Theorem B.1 builds; and with example_06_hopper_decode_model: the Hopper model's fit
# and its predictions next to the H100 measurements (which scripts/hopper-model.sh records on a GPU
# machine), FlashMLA's figures and ETAP on the H20. Deterministic; about a minute of CPU. The
# Ascend calibration itself (which refits its constants) is scripts/calibrate_sim.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/results.sh
results_begin "" "" example_04_amla_decode_model example_06_hopper_decode_model -- "$@"
out=$results_out
ex="$results_build/examples/example_04_amla_decode_model"
hopper="$results_build/examples/example_06_hopper_decode_model"
doc=examples/SIM_RESULTS.md
work=$(mktemp -d)
run() { (cd "$work" && "$ex" "$@" --no-svg --no-trace) >"$out"; }
run
splice_block "$doc" sim-table5 results-sim.sh "example_04_amla_decode_model" "$out"
run --sensitivity
splice_block "$doc" sim-sensitivity results-sim.sh "example_04_amla_decode_model --sensitivity" \
  "$out"
run --theorem-b1
# The flag adds its section after the default run's tables, which the first block already holds.
sed -n '/^Arrangements at/,$p' "$out" >"$out.b1" && mv "$out.b1" "$out"
splice_block "$doc" sim-theorem-b1 results-sim.sh "example_04_amla_decode_model --theorem-b1" "$out"
(cd "$work" && "$hopper" --calibrate && echo && "$hopper" --no-svg --no-trace) >"$out"
splice_block "$doc" sim-hopper results-sim.sh \
  "example_06_hopper_decode_model --calibrate; example_06_hopper_decode_model" "$out"
rm -rf "$work"
echo "results-sim: $doc updated"
