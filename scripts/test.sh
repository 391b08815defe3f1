#!/usr/bin/env bash
# amla's whole test pass, the one CI runs (.ci/run calls exactly this):
#   1. install missing build dependencies with apt-get
#   2. check formatting with clang-format
#   3. configure and build tests, benchmarks and examples with warnings as errors, run ctest
#   4. build the tests again with AddressSanitizer + UBSan and run them
# Build folders: build/ and build-sanitize/ (override with AMLA_BUILD_DIR / AMLA_SAN_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

scripts/install-deps.sh
scripts/check-format.sh

build=${AMLA_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DAMLA_WERROR=ON
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"

san=${AMLA_SAN_DIR:-build-sanitize}
# -O1 without -g and with assertions on (no build type): the sanitizers need no debug info to name
# the failing line of a test, and this keeps the second build of every Eigen-heavy test short.
cmake -S . -B "$san" -DCMAKE_BUILD_TYPE= -DAMLA_WERROR=ON \
  -DAMLA_BUILD_BENCH=OFF -DAMLA_BUILD_EXAMPLES=OFF -DAMLA_ENABLE_CUDA=OFF \
  -DAMLA_TEST_REDUCED=ON -DAMLA_INSTALL=OFF \
  "-DCMAKE_CXX_FLAGS=-O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake --build "$san" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$san" --output-on-failure -j "$jobs"
echo "test.sh: all passes green"
