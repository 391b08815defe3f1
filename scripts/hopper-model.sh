#!/usr/bin/env bash
# Measures, on a Hopper GPU machine, what the simulator's Hopper model reads and what it predicts,
# in one run: bench/cuda/bm_hopper_model (wgmma batch cycles, the kernel's CUDA-core stages, HBM,
# launch overhead, and the Hopper decode kernel's times at the issue's shapes and on varlen
# batches) with nvidia-smi sampling the SM clock meanwhile, then bm_cuda_decode --quick (the
# cuBLAS ceiling of the same card, to compare with bench/CUDA_RESULTS.md).
#
#   scripts/hopper-model.sh            build (nvcc, sm_90a) when the programs are missing or older
#                                      than their sources, run, print the log with each decode
#                                      line's mean SM clock appended
#   scripts/hopper-model.sh --record   also write the block hopper-measured of
#                                      examples/SIM_RESULTS.md (copied to $OUT when that is set)
#
# Needs nvcc only (no CMake, no Eigen). AMLA_HOPPER_BUILD_DIR names the folder of the programs
# (default build-hopper-model). The model side is example_06_hopper_decode_model, which reads the
# recorded block; scripts/results-sim.sh regenerates its tables.
set -uo pipefail
cd "$(dirname "$0")/.."
record=0
for arg in "$@"; do
  case "$arg" in
    --record) record=1 ;;
    *) echo "usage: scripts/hopper-model.sh [--record]" >&2; exit 2 ;;
  esac
done
build=${AMLA_HOPPER_BUILD_DIR:-build-hopper-model}
mkdir -p "$build"
flags=(-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude --expt-relaxed-constexpr)
stale() {  # stale BINARY SOURCE: missing, or older than its source or any header it includes
  [ ! -x "$1" ] || [ -n "$(find "$2" include/amla -newer "$1" -print -quit)" ]
}
if stale "$build/bm_hopper_model" bench/cuda/bm_hopper_model.cu; then
  nvcc "${flags[@]}" bench/cuda/bm_hopper_model.cu -o "$build/bm_hopper_model" -lcuda || exit 1
fi
if stale "$build/bm_cuda_decode" bench/cuda/bm_cuda_decode.cu; then
  nvcc "${flags[@]}" bench/cuda/bm_cuda_decode.cu -o "$build/bm_cuda_decode" -lcublas -lcuda || exit 1
fi

log="$build/hopper-model.log"
smi="$build/smi.csv"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu \
    --format=csv 2>/dev/null || echo "(nvidia-smi unavailable)"
  nvcc --version | tail -n 1
} | tee "$log"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 \
  >"$smi" 2>/dev/null &
sampler=$!
"$build/bm_hopper_model" >"$build/raw.log" 2>&1
status=$?
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
# Each decode line gets the mean SM clock and power of the samples inside its window.
awk -F', ' '
  NR == FNR { ts[NR] = $1; mhz[NR] = $2; watt[NR] = $3; n = NR; next }
  /^decode: .*window / {
    w = $0; sub(/.*window /, "", w); split(w, ab, " - ")
    s = 0; p = 0; k = 0
    for (i = 1; i <= n; ++i) if (ts[i] >= ab[1] && ts[i] <= ab[2]) { s += mhz[i]; p += watt[i]; ++k }
    line = $0; sub(/ \| window .*/, "", line)
    if (k > 0) printf "%s | SM %.0f MHz, %.0f W (%d samples)\n", line, s / k, p / k, k
    else printf "%s | SM clock not sampled\n", line
    next
  }
  { print }
' "$smi" "$build/raw.log" | tee -a "$log"
echo "== bm_cuda_decode --quick" | tee -a "$log"
"$build/bm_cuda_decode" --quick 2>&1 | grep -E "^(device|cuBLAS|wgmma|pass)" | tee -a "$log"
[ "${PIPESTATUS[0]}" -ne 0 ] && status=1

if [ $record = 1 ]; then
  . scripts/lib/results.sh
  doc=examples/SIM_RESULTS.md
  splice_block "$doc" hopper-measured hopper-model.sh "scripts/hopper-model.sh --record" "$log"
  [ -n "${OUT:-}" ] && cp "$doc" "$log" "$smi" "$OUT/"
  echo "recorded into $doc"
elif [ -n "${OUT:-}" ]; then
  cp "$log" "$smi" "$OUT/"
fi
exit $status
