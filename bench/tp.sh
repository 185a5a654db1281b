#!/bin/sh
# Tensor (+ sequence) parallelism: step time of gpt_train at 2 ranks with
# tp 2 and tp 2 + sp against one rank (2 workers), for the default small
# model and for W124; with the bytes each rank sent on the TP group per
# step as the library counted them, next to its traffic model
# (sw_gpt_traffic: 2 all-reduces per layer forward and 2 backward, the
# same volume with sp).
# usage: bench/tp.sh [steps-small] [steps-w124]   (run from the build directory or set BUILD)
set -eu
small_steps=${1:-30}
w124_steps=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
[ -x "$BUILD/examples/gpt_train" ] || { echo "tp: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
run() { # run NAME STEPS NP ARGS...
  name=$1; steps=$2; np=$3; shift 3
  if [ "$np" = 1 ]; then
    "$BUILD/examples/gpt_train" --steps "$steps" --log "$log" --quiet "$@" > "$log.out" 2>&1
  else
    sh "$here/../tests/mpi_launch.sh" "$np" "$BUILD/examples/gpt_train" --steps "$steps" --log "$log" --quiet "$@" > "$log.out" 2>&1
  fi
  ms=$(sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$log.out")
  loss=$(sed -n 's/.*-> \([0-9.]*\) after.*/\1/p' "$log.out")
  comm=$(sed -n 's/^communication: rank 0 sent \([0-9.]*\) MiB per step .* in \([0-9.]*\) collectives (model: \([0-9.]*\) MiB)/\1 MiB in \2 collectives, model \3 MiB/p' "$log.out")
  busy=$(sed -n 's/^profile: [0-9]* tasks, workers busy \([0-9.]*%\).*GEMM share of step time \([0-9.]*%\).*/busy \1, GEMM \2/p' "$log.out")
  printf '%-28s %-34s ms/step %8s  final loss %s  %s  %s\n' "$name" "np=$np $*" "${ms:-FAILED}" "${loss:-?}" "${comm:-}" "${busy:-}"
  [ -n "$ms" ] || cat "$log.out"
}
small="--layers 2 --hidden 128 --heads 4 --seq 64 --batch 8"
w124="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024"
echo "== small model ($small), $small_steps steps"
run "one rank, 2 workers" "$small_steps" 1 $small --ncpus 2
run "tp 2" "$small_steps" 2 $small --tp 2
run "tp 2 + sp" "$small_steps" 2 $small --tp 2 --sp
echo "== W124 ($w124), $w124_steps steps"
run "one rank, 2 workers" "$w124_steps" 1 $w124 --ncpus 2 --profile
run "tp 2" "$w124_steps" 2 $w124 --tp 2 --profile
run "tp 2 + sp" "$w124_steps" 2 $w124 --tp 2 --sp --profile
