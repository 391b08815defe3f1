#!/usr/bin/env bash
# Builds, tests and benchmarks amla's CUDA backend on a GPU machine in one run; the benchmark's
# table comes last.
#
#   scripts/cuda.sh                  full tests (the whole test grid) and the full benchmark grid
#   scripts/cuda.sh --quick          small test cases and s_k = 4096 only
#   scripts/cuda.sh --quick-tests    small test cases, the full benchmark grid
#   scripts/cuda.sh --profile        also Nsight Compute (ncu) on the Hopper kernel at two shapes
#                                    (b 128, s_q 2, s_k 16384 and b 128, s_q 1, s_k 1024): speed of
#                                    light, warp stalls, pipe use (logs/ncu.log)
#   scripts/cuda.sh --simple-only    the tests on the simple kernel alone (the fallback off Hopper;
#                                    combines with --quick)
#   scripts/cuda.sh --record         also write the device, ptxas, test and benchmark blocks of
#                                    bench/CUDA_RESULTS.md (copied to $OUT when that is set)
#   AMLA_CUDA_ARCHITECTURES="80;90a" scripts/cuda.sh    another architecture list (default 90a)
#
# After amla's benchmark, FlashMLA's Hopper kernel is timed the same way on the same card
# (bench/cuda/flashmla.py) when the flash_mla package is importable (python3 -m pip install
# sgl-flash-mla; skipped otherwise), with a table of amla's kernels as fractions of it.
#
# Needs nvcc, CMake and Eigen 3.4 (not Catch2 or Google Benchmark: the CUDA test and timing
# programs are plain executables). AMLA_DEPS_PREFIX names a prefix holding Eigen
# (include/eigen3, share/eigen3/cmake) when the system has none; AMLA_CUDA_BUILD_DIR the build
# folder (default build-cuda). Logs go to $AMLA_CUDA_LOG_DIR when set; AMLA_CUDA_TEST_TIMEOUT bounds
# the tests in seconds (default 900).
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0
quick_tests=0
record=0
profile=0
simple_only=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1; quick_tests=1 ;;
    --quick-tests) quick_tests=1 ;;
    --profile) profile=1 ;;
    --simple-only) simple_only=(--simple-only) ;;
    --record) record=1 ;;
    *) echo "usage: scripts/cuda.sh [--quick|--quick-tests] [--simple-only] [--profile] [--record]" >&2
       exit 2 ;;
  esac
done
build=${AMLA_CUDA_BUILD_DIR:-build-cuda}
logs=${AMLA_CUDA_LOG_DIR:-$build/logs}
mkdir -p "$logs"
jobs=$(nproc 2>/dev/null || echo 4)

echo "== device"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv 2>/dev/null || echo "(nvidia-smi unavailable)"
  nvcc --version | tail -n 2
} | tee "$logs/device.log"

echo "== configure and build"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
prefix=()
[ -n "${AMLA_DEPS_PREFIX:-}" ] && prefix=("-DCMAKE_PREFIX_PATH=$AMLA_DEPS_PREFIX")
cmake -S . -B "$build" "${gen[@]}" "${prefix[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DAMLA_ENABLE_CUDA=ON -DAMLA_BUILD_TESTS=OFF -DAMLA_BUILD_BENCH=OFF -DAMLA_BUILD_EXAMPLES=OFF \
  -DAMLA_BUILD_CUDA_TESTS=ON -DAMLA_BUILD_CUDA_BENCH=ON -DAMLA_INSTALL=OFF \
  -DAMLA_CUDA_VERBOSE=ON "-DAMLA_CUDA_ARCHITECTURES=${AMLA_CUDA_ARCHITECTURES:-90a}" \
  >"$logs/configure.log" 2>&1 || { cat "$logs/configure.log"; exit 1; }
t0=$(date +%s)
# The programs whose ptxas lines the report lists; not cuda_two_units_rdc, whose unoptimised
# device link would add its own.
if ! cmake --build "$build" -j "$jobs" --target cuda_decode bm_cuda_decode bm_hopper_model \
  >"$logs/build.log" 2>&1; then
  cat "$logs/build.log"
  exit 1
fi
echo "built in $(( $(date +%s) - t0 )) s; ptxas, every kernel (registers, spills):"
# ptxas -v prints "Compiling entry function 'NAME' for 'sm_XX'" and, some lines later (nvcc 13
# puts other lines between), "N bytes spill stores, ..." and "Used N registers, ...". Each such
# line is printed after the entry it belongs to, demangled when c++filt is there.
demangle=cat
command -v c++filt >/dev/null && demangle=c++filt
awk '
  /Compiling entry function/ { entry = $0; sub(/.*Compiling entry function /, "", entry); next }
  entry != "" && /spill stores|Used [0-9]+ registers/ {
    line = $0; sub(/^ptxas[^:]*: */, "", line); sub(/^ +/, "", line); print entry ": " line
  }
' "$logs/build.log" | $demangle | sort -u | tee "$logs/ptxas.log"
grep -E "C75[0-9][0-9]" "$logs/build.log" | sort -u | tee -a "$logs/ptxas.log" || true

echo "== tests"
status=0
"$build/cuda_decode" validate >"$logs/validate.log" 2>&1 || status=1
tail -n 1 "$logs/validate.log"
test_mode=gpu
[ $quick_tests = 1 ] && test_mode=gpu-quick
timeout "${AMLA_CUDA_TEST_TIMEOUT:-900}" "$build/cuda_decode" "$test_mode" "${simple_only[@]}" 2>&1 |
  tee "$logs/test.log"
rc=${PIPESTATUS[0]}
[ "$rc" -ne 0 ] && status=1

echo "== benchmark"
bench_args=()
[ $quick = 1 ] && bench_args=(--quick)
if [ "$rc" -eq 2 ] || [ "$rc" -eq 3 ] || [ "$rc" -eq 124 ]; then
  echo "skipped: the tests reported a kernel fault or hang (exit $rc)" | tee "$logs/bench.log"
  status=1
else
  timeout 300 "$build/bm_cuda_decode" "${bench_args[@]}" 2>&1 | tee "$logs/bench.log"
  [ "${PIPESTATUS[0]}" -ne 0 ] && status=1
fi

echo "== FlashMLA in the same run"
flashmla=0
if [ "$rc" -eq 2 ] || [ "$rc" -eq 3 ] || [ "$rc" -eq 124 ]; then
  echo "skipped: the tests reported a kernel fault or hang (exit $rc)" | tee "$logs/flashmla.log"
elif python3 -c 'import flash_mla' >/dev/null 2>&1; then
  flashmla_args=()  # --quick: the shapes bm_cuda_decode --quick times (s_k 4096)
  [ $quick = 1 ] && flashmla_args=(--filter "128,1,4096;128,2,4096;16,2,4096")
  timeout 300 python3 bench/cuda/flashmla.py "${flashmla_args[@]}" --amla-log "$logs/bench.log" \
    2>&1 | tee "$logs/flashmla.log"
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then flashmla=1; else status=1; fi
else
  echo "skipped: FlashMLA is not importable (python3 -m pip install sgl-flash-mla)" |
    tee "$logs/flashmla.log"
fi

if [ $profile = 1 ] && [ "$rc" -ne 2 ] && [ "$rc" -ne 3 ] && [ "$rc" -ne 124 ]; then
  echo "== profile (ncu)"
  if command -v ncu >/dev/null; then
    : >"$logs/ncu.log"
    for shape in "128 2 16384" "128 1 1024"; do
      # shellcheck disable=SC2086
      timeout 240 ncu --kernel-name regex:decode_kernel --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section Occupancy \
        --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
        "$build/bm_cuda_decode" --profile $shape >>"$logs/ncu.log" 2>&1 ||
        echo "ncu failed on $shape (exit $?)" | tee -a "$logs/ncu.log"
    done
    grep -E "^  [a-z_]+.*decode_kernel|Duration|Throughput|Issue Slots Busy|Stall|Pipe|Warp Cycles|Eligible|Active Warps|SM Frequency|Executed Ipc" \
      "$logs/ncu.log" | head -n 120
  else
    echo "ncu not found" | tee "$logs/ncu.log"
  fi
fi

echo
echo "== summary"
grep -E "^(validate|gpu):" "$logs/validate.log" "$logs/test.log" | sed 's/^.*\.log://'
grep -E "^cuBLAS" "$logs/bench.log" || true
sed -n '/^| kernel/,$p' "$logs/bench.log"
[ $flashmla = 1 ] && sed -n '/^| b, s_q, s_k/,$p' "$logs/flashmla.log"

if [ $record = 1 ]; then
  . scripts/lib/results.sh
  doc=bench/CUDA_RESULTS.md
  args="${*:-}"
  cat "$logs/device.log" "$logs/ptxas.log" >"$logs/record-build.txt"
  splice_block "$doc" cuda-build cuda.sh "scripts/cuda.sh $args (device, nvcc, ptxas per kernel)" \
    "$logs/record-build.txt"
  grep -E "^(validate|gpu)" "$logs/validate.log" "$logs/test.log" | sed 's/^.*\.log://' \
    >"$logs/record-tests.txt"
  splice_block "$doc" cuda-tests cuda.sh "cuda_decode validate; cuda_decode $test_mode ${simple_only[*]}" \
    "$logs/record-tests.txt"
  splice_block "$doc" cuda-bench cuda.sh "bm_cuda_decode ${bench_args[*]}" "$logs/bench.log"
  # Without FlashMLA in this run the block says so, rather than keep another run's figures.
  splice_block "$doc" cuda-flashmla cuda.sh \
    "bench/cuda/flashmla.py --amla-log (the bm_cuda_decode run above)" "$logs/flashmla.log"
  if [ $profile = 1 ]; then
    grep -E "^  [a-z_]+.*decode_kernel|Duration|SM Frequency|Throughput|Issue Slots Busy|Executed Ipc A|is the highest|Warp Cycles Per Issued|Eligible Warps|stalled" \
      "$logs/ncu.log" >"$logs/record-profile.txt" || true
    splice_block "$doc" cuda-profile cuda.sh \
      "ncu on bm_cuda_decode --profile 128 2 16384 and --profile 128 1 1024" "$logs/record-profile.txt"
  fi
  [ -n "${OUT:-}" ] && cp "$doc" "$OUT/"
  echo "recorded into $doc"
fi
exit $status
