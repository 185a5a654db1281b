#!/bin/sh
# Tensor (+ sequence) parallelism: step time of gpt_train at 2 ranks with
# tp 2 and tp 2 + sp against one rank (2 workers), for the default small
# model and for W124; with the bytes each rank sent on the TP group per
# step as the library counted them, next to its traffic model
# (sw_gpt_traffic: 2 all-reduces per layer forward and 2 backward, the
# same volume with sp).
# The layouts run interleaved REPS times (default 3); each line gives the
# median ms/step and its ratio to one rank's.
# usage: [REPS=N] bench/tp.sh [steps-small] [steps-w124 (0: none)]   (run from the build directory or set BUILD)
set -eu
small_steps=${1:-30}
w124_steps=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
[ -x "$BUILD/examples/gpt_train" ] || { echo "tp: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
log=$(mktemp)
trap 'rm -f "$log" "$log".*' EXIT
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
# run NAME STEPS NP ARGS...: one run; appends its ms/step to $log.NAME and
# keeps its last output line of interest in $log.NAME.out
run() {
  name=$1; steps=$2; np=$3; shift 3
  if [ "$np" = 1 ]; then
    "$BUILD/examples/gpt_train" --steps "$steps" --log "$log" --quiet "$@" > "$log.out" 2>&1
  else
    sh "$here/../tests/mpi_launch.sh" "$np" "$BUILD/examples/gpt_train" --steps "$steps" --log "$log" --quiet "$@" > "$log.out" 2>&1
  fi
  ms=$(sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$log.out")
  [ -n "$ms" ] || { cat "$log.out"; echo "tp: $name failed" >&2; exit 1; }
  echo "$ms" >> "$log.$name"
  loss=$(sed -n 's/.*-> \([0-9.]*\) after.*/\1/p' "$log.out")
  comm=$(sed -n 's/^communication: rank 0 sent \([0-9.]*\) MiB per step .* in \([0-9.]*\) collectives (model: \([0-9.]*\) MiB)/\1 MiB in \2 collectives, model \3 MiB/p' "$log.out")
  busy=$(sed -n 's/^profile: [0-9]* tasks, workers busy \([0-9.]*%\).*GEMM share of step time \([0-9.]*%\).*/busy \1, GEMM \2/p' "$log.out")
  echo "final loss ${loss:-?}  ${comm:-}  ${busy:-}" > "$log.$name.out"
}
median() { sort -n "$1" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# compare TITLE STEPS ARGS...: the three layouts interleaved $reps times (the
# machine's speed drifts); median ms/step of each and its ratio to one rank
compare() {
  title=$1; steps=$2; shift 2
  echo "== $title ($*), $steps steps, median of $reps interleaved runs"
  rm -f "$log".one "$log".tp "$log".tpsp
  for i in $(seq "$reps"); do
    run one "$steps" 1 "$@" --ncpus 2 $profile
    run tp "$steps" 2 "$@" --tp 2 $profile
    run tpsp "$steps" 2 "$@" --tp 2 --sp $profile
  done
  base=$(median "$log.one")
  for name in one tp tpsp; do
    m=$(median "$log.$name")
    case $name in one) label="one rank, 2 workers";; tp) label="tp 2 (2 ranks)";; tpsp) label="tp 2 + sp (2 ranks)";; esac
    printf '%-22s ms/step %8s (runs: %s)  x one rank %s  %s\n' "$label" "$m" "$(tr '\n' ' ' < "$log.$name")" \
      "$(echo "$m $base" | awk '{ if ($2 > 0) printf "%.2f", $1 / $2; else printf "?" }')" "$(cat "$log.$name.out")"
  done
}
reps=${REPS:-3}
profile=
compare "small model" "$small_steps" --layers 2 --hidden 128 --heads 4 --seq 64 --batch 8
profile=--profile
[ "$w124_steps" -gt 0 ] || exit 0 # steps-w124 0: the small model only
compare "W124" "$w124_steps" --layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024
