#!/bin/sh
# W124 (bench/w124.sh's shape, 2 CPU workers) with two builds, or one build
# with two sets of gpt_train flags, run interleaved -- A, B, A, B, ... -- so
# that the machine's drift (10-20 % on these VMs) falls on both alike.
# Prints each run's ms/step (mean over steps 2..N) and its wall time (the
# process from start to exit: set-up and initial values included), and each
# side's medians.
# usage: sh bench/ab.sh BUILD_A BUILD_B [reps (3)] [steps (6)]
#   A_ARGS, B_ARGS: extra gpt_train flags per side, e.g.
#   A_ARGS="--gemm openblas" B_ARGS="--gemm onednn" sh bench/ab.sh build build
set -eu
[ $# -ge 2 ] || { echo "usage: sh bench/ab.sh BUILD_A BUILD_B [reps] [steps]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
a=$1 b=$2 reps=${3:-3} steps=${4:-6}
for d in "$a" "$b"; do
  [ -x "$d/examples/gpt_train" ] || { echo "ab: $d/examples/gpt_train not built" >&2; exit 2; }
done
. "$here/common.sh"
shape="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024 --ncpus 2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "== A: $a ${A_ARGS:-}"
echo "== B: $b ${B_ARGS:-}"
i=0
while [ $i -lt "$reps" ]; do
  for side in A B; do
    if [ $side = A ]; then d=$a args=${A_ARGS:-}; else d=$b args=${B_ARGS:-}; fi
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$d/examples/gpt_train" $shape --steps "$steps" $args --log "$tmp/log.csv" > "$tmp/out" 2>&1 ||
      { cat "$tmp/out"; exit 1; }
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    ms=$(sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$tmp/out")
    echo "$side $ms ms/step, $wall s wall"
    echo "$ms" >> "$tmp/$side"
    echo "$wall" >> "$tmp/$side.wall"
  done
  i=$((i + 1))
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ma=$(median "$tmp/A") mb=$(median "$tmp/B")
awk -v a="$ma" -v b="$mb" 'BEGIN { printf "median A %.1f ms/step, B %.1f ms/step, B / A %.3f\n", a, b, b / a }'
wa=$(median "$tmp/A.wall") wb=$(median "$tmp/B.wall")
awk -v a="$wa" -v b="$wb" 'BEGIN { printf "median wall A %.2f s, B %.2f s, B / A %.3f\n", a, b, b / a }'
