#!/usr/bin/env bash
# Sets up (apt-get) and builds amla's examples, then runs the flagship demos. Pictures and traces
# go to demo-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
scripts/install-deps.sh
build=${AMLA_BUILD_DIR:-build-demo}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DAMLA_BUILD_TESTS=OFF -DAMLA_BUILD_BENCH=OFF
cmake --build "$build" -j "$jobs"
mkdir -p demo-out
for ex in "$(realpath "$build")"/examples/example_*; do
  [ -x "$ex" ] || continue
  echo; echo "==== $(basename "$ex")"
  (cd demo-out && "$ex" --demo)
done
