#!/bin/sh
# The pipeline judged in simulation (docs/simulation.md): pp stages of one
# simulated CPU core each (one rank per node), K micro-batches of one
# sequence, 1F1B and Zero Bubble (--zero-bubble, ZB-H1): the simulated step,
# and each stage's bubble from the simulated trace against 1F1B's
# (p - 1) / (m + p - 1). Calibrated once by a real pp 2 run of the same
# per-stage sizes (a block's tasks do not depend on how many stages there
# are), with and without the split.
#
# usage: bench/sim-pipeline.sh [--build DIR] [--sim-build DIR] [--pp "4 8"]
#          [--micro "8 16"] [--preset P] [--shape "ARGS"]
#   --pp LIST      stage counts (default "4 8")
#   --micro LIST   micro-batches per step (default "8 16")
#   --preset P     network between the nodes (bench/sim-platform.sh; nvlink-ib)
#   --shape ARGS   the model (default: --layers 8 --hidden 256 --heads 4
#                  --seq 128 --vocab 512); layers must divide by every pp
set -eu
me=sim-pipeline
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build sim_build=$top/build-sim pps="4 8" micros="8 16" preset=nvlink-ib
shape="--layers 8 --hidden 256 --heads 4 --seq 128 --vocab 512"
. "$top/bench/common.sh"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need "$@"; build=$2; shift ;;
    --sim-build) need "$@"; sim_build=$2; shift ;;
    --pp) need "$@"; pps=$2; shift ;;
    --micro) need "$@"; micros=$2; shift ;;
    --preset) need "$@"; preset=$2; shift ;;
    --shape) need "$@"; shape=$2; shift ;;
    -h|--help) usage_from "$0"; exit 0 ;;
    *) die2 "unknown option '$1' (see --help)" ;;
  esac
  shift
done
sim_builds "$build" "$sim_build"
work=$(mktemp -d "${TMPDIR:-/tmp}/sw-pipe.XXXXXX")
trap 'rm -rf "$work"' EXIT
cal=$work/cal
k0=$(echo $micros | cut -d' ' -f1)
for zb in "" --zero-bubble; do
  sh "$top/bench/calibrate.sh" --build "$build" --calibration "$cal" --host pipe --np 2 examples/gpt_train $shape \
    --pp 2 --grad-accum "$k0" --batch "$k0" --ncpus 1 $zb --steps 12 --quiet --log "$work/c.csv" > "$work/c.out" 2>&1 ||
    { tail -n 5 "$work/c.out"; die2 "calibration failed"; }
done
echo "$me: $shape, one core per stage, micro-batches of 1 sequence, preset $preset; calibrated by real pp 2 runs on $(cpu_model)"
printf '%-4s %-4s %-6s %12s %11s  %s\n' pp K sched "sim ms/step" "1F1B form." "bubble per stage (simulated trace)"
for p in $pps; do
  sh "$top/bench/sim-platform.sh" --nodes "$p" --ranks-per-node 1 --cpus 1 --preset "$preset" --out "$work/plat$p" > /dev/null
  for k in $micros; do
    for zb in "" --zero-bubble; do
      t0=$(date +%s)
      sh "$top/bench/sim.sh" --build "$sim_build" --calibration "$cal" --host pipe --platform "$work/plat$p" \
        examples/gpt_train $shape --pp "$p" --grad-accum "$k" --batch "$k" --ncpus 1 $zb --steps 3 \
        --log "$work/s.csv" --trace "$work/t.json" > "$work/s.out" 2>&1 ||
        { echo "pp $p K $k $zb: simulation failed:"; grep -v 'calibrated enough' "$work/s.out" | tail -n 5; continue; }
      ms=$(sed -n 's/^simulation: \([0-9.]*\) simulated ms\/step.*/\1/p' "$work/s.out")
      bub=$(sed -n 's/^bubble: stage \([0-9]*\): \([0-9.]*%\) of the step.*/\2/p' "$work/s.out" | tr '\n' ' ')
      sched=1F1B
      [ -z "$zb" ] || sched=ZB-H1
      printf '%-4s %-4s %-6s %12s %10s%%  %s (%s s)\n' "$p" "$k" "$sched" "$ms" \
        "$(awk -v p="$p" -v m="$k" 'BEGIN { printf "%.1f", 100 * (p - 1) / (m + p - 1) }')" "$bub" "$(($(date +%s) - t0))"
    done
  done
done
