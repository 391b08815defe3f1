#!/usr/bin/env bash
# Builds amla's fuzz targets (fuzz/fuzz_*.cpp, a CMake project of its own) with clang, libFuzzer,
# AddressSanitizer and UBSan, and runs each for a bounded time:
#   scripts/fuzz.sh [seconds]            each target runs `seconds` (default 20), starting from its
#                                        committed corpus fuzz/corpus/<target>/ (read only: the
#                                        inputs it finds go to a temporary folder)
#   scripts/fuzz.sh --merge [seconds]    the same, then merges what it found into the committed
#                                        corpus (libFuzzer's set-cover merge over edges: only
#                                        inputs that reach code the corpus does not)
# A failed relation, a crash or a sanitizer report stops the run with a non-zero status and
# leaves the input in build-fuzz/artifacts/ (replay it: build-fuzz/<target> <file>); each finding
# becomes a regression test in tests/. Build folder: build-fuzz/ (override with AMLA_FUZZ_DIR);
# compiler: clang++ (AMLA_FUZZ_CXX).
set -euo pipefail
cd "$(dirname "$0")/.."

merge=0
if [ "${1:-}" = "--merge" ]; then
  merge=1
  shift
fi
seconds=${1:-20}
dir=${AMLA_FUZZ_DIR:-build-fuzz}
cxx=${AMLA_FUZZ_CXX:-clang++}
jobs=$(nproc 2>/dev/null || echo 2)

command -v "$cxx" >/dev/null || { echo "fuzz.sh: $cxx not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }
gen=()
if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then
  gen=(-G Ninja)
fi
cmake -S fuzz -B "$dir" "${gen[@]}" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=
cmake --build "$dir" -j "$jobs"

mkdir -p "$dir/artifacts"
status=0
for src in fuzz/fuzz_*.cpp; do
  name=$(basename "$src" .cpp)
  corpus=fuzz/corpus/$name
  mkdir -p "$corpus"
  found=$(mktemp -d)
  echo "fuzz.sh: $name for ${seconds} s from $corpus"
  if ! "$dir/$name" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix="$dir/artifacts/$name-" "$found" "$corpus"; then
    echo "fuzz.sh: $name FAILED; the input is in $dir/artifacts/" >&2
    status=1
  elif [ "$merge" = 1 ]; then
    "$dir/$name" -set_cover_merge=1 -use_counters=0 "$corpus" "$found"
  fi
  rm -rf "$found"
done
exit $status
