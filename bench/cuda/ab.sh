#!/usr/bin/env bash
# Times the CUDA kernels of this tree beside other versions of them in one run, on a GPU machine:
# each version is built on its own, and the benchmark runs them in turn, round after round, the
# order rotated each round, so that every version sees the same card, clocks and temperature.
#
#   bench/cuda/ab.sh [--runs N] [--filter LIST] [--test] OTHER...
#
# OTHER is a source folder (a copy of amla's tree) or a git revision of this repository. "." (this
# tree again) measures the noise of the comparison itself: two builds of the same source.
#   --runs N       rounds (default 4); every round runs every build's bm_cuda_decode once (two
#                  passes over the configurations)
#   --filter LIST  bm_cuda_decode's --filter (default: hopper/standard$,hopper/amla$)
#   --test         also run `cuda_decode gpu-quick` on every build with one seed
#                  (AMLA_CUDA_TEST_SEED, default 4242) and report whether each prints the same
#                  distances as this tree's (the same inputs; outputs bit for bit where they do)
#
# Prints, per configuration, each build's fastest and slowest pass in us and its fastest pass
# against this tree's (time ratio: below 1 is faster than this tree). Logs go to
# $AMLA_CUDA_LOG_DIR (default build-cuda-ab/logs). Needs what scripts/cuda.sh needs.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
runs=4
filter='hopper/standard$,hopper/amla$'
test=0
others=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=${2:?}; shift ;;
    --filter) filter=${2:?}; shift ;;
    --test) test=1 ;;
    -*) echo "usage: bench/cuda/ab.sh [--runs N] [--filter LIST] [--test] OTHER..." >&2; exit 2 ;;
    *) others+=("$1") ;;
  esac
  shift
done
[ ${#others[@]} -gt 0 ] || { echo "ab.sh: name at least one other version" >&2; exit 2; }
case "$runs" in '' | *[!0-9]* | 0) echo "ab.sh: --runs must be a positive integer, got '$runs'" >&2; exit 2 ;; esac

root=${AMLA_CUDA_AB_DIR:-build-cuda-ab}
logs=${AMLA_CUDA_LOG_DIR:-$root/logs}
mkdir -p "$root" "$logs"
jobs=$(nproc 2>/dev/null || echo 4)

# The versions: 0 is this tree; each other gets a source folder (a revision is exported into one).
names=(this)
sources=(.)
for i in "${!others[@]}"; do
  o=${others[$i]}
  n="v$((i + 1))"
  if [ -d "$o" ]; then
    src=$o
  elif git rev-parse --verify --quiet "$o^{commit}" >/dev/null; then
    src="$root/src-$n"
    rm -rf "$src" && mkdir -p "$src" && git archive "$o" | tar -x -C "$src" || exit 1
  else
    echo "ab.sh: '$o' is neither a folder nor a git revision" >&2
    exit 2
  fi
  names+=("$n")
  sources+=("$src")
  echo "$n = $o"
done

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
prefix=()
[ -n "${AMLA_DEPS_PREFIX:-}" ] && prefix=("-DCMAKE_PREFIX_PATH=$AMLA_DEPS_PREFIX")
echo "== configure and build (${#names[@]} builds)"
per_build=$(((jobs + ${#names[@]} - 1) / ${#names[@]}))
for i in "${!names[@]}"; do
  (
    b="$root/build-${names[$i]}"
    cmake -S "${sources[$i]}" -B "$b" "${gen[@]}" "${prefix[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DAMLA_ENABLE_CUDA=ON -DAMLA_BUILD_TESTS=OFF -DAMLA_BUILD_BENCH=OFF -DAMLA_BUILD_EXAMPLES=OFF \
      -DAMLA_BUILD_CUDA_TESTS=ON -DAMLA_BUILD_CUDA_BENCH=ON -DAMLA_INSTALL=OFF \
      "-DAMLA_CUDA_ARCHITECTURES=${AMLA_CUDA_ARCHITECTURES:-90a}" &&
      cmake --build "$b" -j "$per_build" --target bm_cuda_decode cuda_decode
  ) > "$logs/build-${names[$i]}.log" 2>&1 &
done
wait
for n in "${names[@]}"; do
  if [ ! -x "$root/build-$n/bm_cuda_decode" ]; then
    echo "ab.sh: the build of $n failed (log: $logs/build-$n.log)" >&2
    grep -m 5 -i error "$logs/build-$n.log" >&2
    exit 1
  fi
done

if [ "$test" = 1 ]; then
  echo "== gpu-quick, seed ${AMLA_CUDA_TEST_SEED:-4242}"
  # Lines that may differ between builds of equal kernels: timings and source paths in messages.
  distances() { grep -v -e ' s)$' -e 'GPU [0-9.]* ms' -e '/include/amla/' "$1"; }
  for n in "${names[@]}"; do
    AMLA_CUDA_TEST_SEED=${AMLA_CUDA_TEST_SEED:-4242} timeout 900 \
      "$root/build-$n/cuda_decode" gpu-quick > "$logs/test-$n.log" 2>&1
    rc=$?
    same=""
    if [ "$n" != this ]; then
      if diff -q <(distances "$logs/test-this.log") <(distances "$logs/test-$n.log") >/dev/null; then
        same=", the same distances as this tree"
      else
        same=", distances differ from this tree's"
      fi
    fi
    echo "$n: rc $rc, $(tail -n 1 "$logs/test-$n.log")$same"
  done
fi

echo "== $runs rounds"
for n in "${names[@]}"; do : > "$logs/bench-$n.log"; done
k=${#names[@]}
for r in $(seq "$runs"); do
  for i in $(seq 0 $((k - 1))); do
    n=${names[$(((i + r) % k))]}
    timeout 600 "$root/build-$n/bm_cuda_decode" --filter "$filter" >> "$logs/bench-$n.log" 2>&1
  done
  echo "round $r done"
done

python3 - "$logs" "${names[@]}" <<'PY'
import collections, re, sys
logs, names = sys.argv[1], sys.argv[2:]
line = re.compile(r"pass \d+\s+(\S+(?: \S+)*?)\s+b\s+(\d+) s_q (\d+) s_k\s+(\d+) pieces\s+\d+:\s+([\d.]+) us")
times = collections.defaultdict(lambda: collections.defaultdict(list))
for n in names:
    for text in open(f"{logs}/bench-{n}.log"):
        m = line.match(text)
        if m:
            times[(m[1], int(m[2]), int(m[3]), int(m[4]))][n].append(float(m[5]))
print("us: fastest-slowest pass of each build; (x): its fastest against this tree's")
print("%-40s" % "configuration" + "".join("%26s" % n for n in names))
for key in times:
    row = times[key]
    base = min(row["this"]) if row.get("this") else None
    cells = []
    for n in names:
        v = row.get(n)
        if not v:
            cells.append("%26s" % "-")
            continue
        ratio = " (%.3f)" % (min(v) / base) if base and n != "this" else ""
        cells.append("%26s" % ("%.1f-%.1f%s" % (min(v), max(v), ratio)))
    print("%-40s" % ("%s b %d s_q %d s_k %d" % key) + "".join(cells))
PY
