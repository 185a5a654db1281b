#!/bin/sh
# Activation memory against step time: gpt_train with --recompute none,
# selective, full and full every 2, and selective with --offload (no
# budget, and a main-RAM budget of about a third of the saved activations),
# on W124 (GPT-2 124M shape, seq 64, batch 4) and on a longer sequence (seq
# 512, where none keeps the seq^2 probabilities), one process, 2 CPU
# workers. Per mode: ms/step (mean of the timed steps, the first is not
# timed), the overhead against none, the saved activation bytes of all
# blocks (registered by the builder; equal to the model, see --memory-report and tests/test_memory.sh), and main RAM's
# peak as StarPU counts it with the bytes written to / read from the disk
# node (offload).
# usage: bench/recompute.sh [steps] [extra gpt_train flags for every run]
#        (run from the build directory or set BUILD)
set -eu
steps=${1:-4}
shift $(( $# > 0 ? 1 : 0 ))
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
[ -x "$BUILD/examples/gpt_train" ] || { echo "recompute: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
log=$(mktemp)
trap 'rm -f "$log" "$log.out"' EXIT
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
bench() { # bench NAME SHAPE BUDGET_MIB
  name=$1 shape=$2 budget=$3 base=""
  shift 3
  echo "== $name: $shape, $steps steps, 2 CPU workers"
  printf '%-44s %10s %9s %10s   %s\n' mode ms/step overhead "saved MiB" "offload (rank 0)"
  for mode in none selective full "full --recompute-every 2" "selective --offload" \
      "selective --offload --offload-budget-mb $budget"; do
    "$BUILD/examples/gpt_train" $shape --steps "$steps" --ncpus 2 --log "$log" --memory-report \
      --recompute $mode "$@" > "$log.out" 2>&1 || { cat "$log.out"; continue; }
    ms=$(sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$log.out")
    mb=$(awk '$1 == "memory:" && $2 == "0" && $3 ~ /^[0-9]+$/ { b += $5 } END { printf "%.2f", b / 1048576 }' "$log.out")
    [ -n "$base" ] || base=$ms
    off=""
    case $mode in *offload*) off=$(sed -n 's/^memory: rank 0: //p' "$log.out");; esac
    printf '%-44s %10s %+8.1f%% %10s   %s\n' "$mode" "$ms" \
      "$(awk -v a="$ms" -v b="$base" 'BEGIN { print 100 * (a / b - 1) }')" "$mb" "$off"
  done
}
bench W124 "--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --max-pos 1024 --batch 4" 48 "$@"
bench "seq 512" "--layers 4 --hidden 256 --heads 8 --seq 512 --batch 2" 40 "$@"
