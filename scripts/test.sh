#!/usr/bin/env bash
# amla's whole test pass, the one CI runs (.ci/run calls exactly this). The build dependencies
# are installed with apt-get where missing and the formatting is checked with clang-format; then
# four passes run at the same time, sharing the machine's cores, each line they print prefixed
# with the pass's name:
#   release   Release build, warnings as errors, of the tests, benchmarks and examples, and where
#             nvcc is found of the CUDA programs (every public .cuh also compiled alone, to PTX,
#             and the backend linked from two units, with and without relocatable device code);
#             ctest runs every Catch2 test case at full size, the examples' --demo runs, the
#             standalone-header check (every public .hpp compiled alone, and amla.hpp in a unit that
#             calls nothing compiling no matrix product) and the packaging check
#   sanitize  the tests built again with AddressSanitizer + UBSan (clang when it is installed, the
#             default compiler otherwise), warnings as errors, assertions on, at -O0 with the
#             exhaustive sweeps shrunk (AMLA_TEST_REDUCED); ctest runs them
#   fuzz      the libFuzzer targets (fuzz/fuzz_*.cpp) built with clang, ASan and UBSan and run
#             20 s each from their committed corpora (scripts/fuzz.sh)
#   python    the Python package built and installed with pip, and its pytest suite
#             (scripts/python-test.sh)
# The script fails when any pass fails, and stops the others then. Each tests/<area>/ is one
# program compiled as one or two unity translation units over one precompiled header
# (tests/CMakeLists.txt), so the templates a test area shares are compiled once or twice per build;
# ctest still lists every test case as <area>/<test case>.
# Build folders: build/, build-sanitize/, build-fuzz/ and build-python/ (override with
# AMLA_BUILD_DIR, AMLA_SAN_DIR, AMLA_FUZZ_DIR and AMLA_PY_BUILD_DIR); Ninja when it is installed,
# for folders not yet configured with another generator. AMLA_SAN_CXX names the sanitizer pass's
# C++ compiler for a folder not yet configured (default clang++ when found).
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

release_pass() {
  local build=${AMLA_BUILD_DIR:-build}
  configure "$build" -DCMAKE_BUILD_TYPE=Release -DAMLA_WERROR=ON
  cmake --build "$build" -j "$jobs"
  ctest --test-dir "$build" --output-on-failure -j "$jobs"
}

sanitize_pass() {
  local san=${AMLA_SAN_DIR:-build-sanitize}
  local compiler=()
  if [ ! -f "$san/CMakeCache.txt" ]; then
    local cxx=${AMLA_SAN_CXX:-$(command -v clang++ || true)}
    [ -n "$cxx" ] && compiler=("-DCMAKE_CXX_COMPILER=$cxx")
  fi
  # -O0 without -g and with assertions on (no build type): the sanitizers name the failing
  # function without debug info, and the instrumented tests compile in a quarter of -O1's time
  # while running (shrunk) in twice its time, the cheaper sum. Benchmarks, examples, CUDA and the
  # standalone-header check are the release pass's.
  configure "$san" "${compiler[@]}" -DCMAKE_BUILD_TYPE= -DAMLA_WERROR=ON \
    -DAMLA_BUILD_BENCH=OFF -DAMLA_BUILD_EXAMPLES=OFF -DAMLA_ENABLE_CUDA=OFF \
    -DAMLA_TEST_REDUCED=ON -DAMLA_TEST_HEADERS=OFF -DAMLA_INSTALL=OFF \
    "-DCMAKE_CXX_FLAGS=-O0 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  cmake --build "$san" -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$san" --output-on-failure -j "$jobs"
}

fuzz_pass() {
  scripts/fuzz.sh
}

python_pass() {
  scripts/python-test.sh
}

# Each pass runs in its own process group (so that a failure can stop a pass with everything it
# started), its output prefixed line by line.
set -m
declare -A pass_of=()
for pass in release sanitize fuzz python; do
  (
    set +m
    "${pass}_pass" 2>&1 | sed -u "s/^/[$pass] /"
  ) &
  pass_of[$!]=$pass
done
set +m

stop_all() {
  for pid in "${!pass_of[@]}"; do
    kill -- -"$pid" 2>/dev/null || true
  done
}
trap 'stop_all; exit 130' INT TERM

failed=""
while [ ${#pass_of[@]} -gt 0 ]; do
  status=0
  wait -n -p done_pid "${!pass_of[@]}" || status=$?
  pass=${pass_of[$done_pid]}
  unset "pass_of[$done_pid]"
  if [ "$status" -ne 0 ]; then
    failed=$pass
    echo "test.sh: the $pass pass failed (exit code $status) after ${SECONDS} s; stopping the others" >&2
    stop_all
    break
  fi
  echo "test.sh: the $pass pass is green after ${SECONDS} s"
done
wait 2>/dev/null || true
[ -z "$failed" ] || exit 1
echo "test.sh: all passes green in ${SECONDS} s"
