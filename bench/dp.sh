#!/bin/sh
# Data parallelism, weak scaling: one rank with batch B against 2 ranks
# with --dp 2 and global batch 2B (B per rank), one worker per rank; the
# step time and, from gpt_train --trace's overlap report, the share of
# communication time (the gradient buckets' all-reduces and the loss)
# that ran beside computation on rank 0 (all steps).
# usage: bench/dp.sh [steps-small] [steps-w124]   (run from the build directory or set BUILD)
set -eu
small_steps=${1:-20}
w124_steps=${2:-4}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
[ -x "$BUILD/examples/gpt_train" ] || { echo "dp: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
run() { # run NAME STEPS NP ARGS...
  name=$1; steps=$2; np=$3; shift 3
  sh "$here/../tests/mpi_launch.sh" "$np" "$BUILD/examples/gpt_train" --steps "$steps" --quiet --ncpus 1 \
    --log "$tmp/log.csv" --trace "$tmp/t.json" "$@" > "$tmp/out" 2>&1 || { cat "$tmp/out"; return; }
  ms=$(sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$tmp/out")
  hid=$(awk '$1 == "overlap:" && $2 == 0 && $3 == "all" { print $9 }' "$tmp/out")
  printf '%-22s %-60s ms/step %8s  rank 0 communication beside computation %s\n' "$name" "np=$np $*" "$ms" "$hid"
}
small="--layers 4 --hidden 128 --heads 4 --seq 64"
w124="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --max-pos 1024"
echo "== small model ($small), $small_steps steps"
run "one rank, batch 8" "$small_steps" 1 $small --batch 8
run "dp 2, batch 16" "$small_steps" 2 $small --batch 16 --dp 2
echo "== W124 ($w124), $w124_steps steps"
run "one rank, batch 4" "$w124_steps" 1 $w124 --batch 4
run "dp 2, batch 8" "$w124_steps" 2 $w124 --batch 8 --dp 2
