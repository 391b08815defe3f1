#!/usr/bin/env bash
# amla's whole test pass, the one CI runs (.ci/run calls exactly this):
#   1. install missing build dependencies with apt-get
#   2. check formatting with clang-format
#   3. Release build, warnings as errors, of the tests, benchmarks and examples, and where nvcc is
#      found of the CUDA programs and the standalone .cuh check; ctest runs every Catch2 test case,
#      the examples' --demo runs, the standalone-header check and the packaging check
#   4. the tests built again with AddressSanitizer + UBSan and run
#   5. the fuzz targets (fuzz/fuzz_*.cpp) built with clang, libFuzzer, ASan and UBSan and run 20 s
#      each from their committed corpora (scripts/fuzz.sh)
#   6. the Python package built and installed with pip, and its pytest suite (scripts/python-test.sh)
# Each tests/<area>/ is one program compiled as a few unity translation units over one precompiled
# header (tests/CMakeLists.txt); ctest still lists every test case as <area>/<test case>.
# Build folders: build/ and build-sanitize/ (override with AMLA_BUILD_DIR / AMLA_SAN_DIR); Ninja
# when it is installed, for folders not yet configured with another generator.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

scripts/install-deps.sh
scripts/check-format.sh

configure() {
  local dir=$1
  shift
  local gen=()
  if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then
    gen=(-G Ninja)
  fi
  cmake -S . -B "$dir" "${gen[@]}" "$@"
}

build=${AMLA_BUILD_DIR:-build}
configure "$build" -DCMAKE_BUILD_TYPE=Release -DAMLA_WERROR=ON
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"

san=${AMLA_SAN_DIR:-build-sanitize}
# -O1 without -g and with assertions on (no build type): the sanitizers need no debug info to name
# the failing line of a test. The standalone-header check, already done above, is left out.
configure "$san" -DCMAKE_BUILD_TYPE= -DAMLA_WERROR=ON \
  -DAMLA_BUILD_BENCH=OFF -DAMLA_BUILD_EXAMPLES=OFF -DAMLA_ENABLE_CUDA=OFF \
  -DAMLA_TEST_REDUCED=ON -DAMLA_TEST_HEADERS=OFF -DAMLA_INSTALL=OFF \
  "-DCMAKE_CXX_FLAGS=-O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake --build "$san" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$san" --output-on-failure -j "$jobs"

scripts/fuzz.sh
scripts/python-test.sh
echo "test.sh: all passes green"
