#!/bin/sh
# Scale by simulation (docs/simulation.md, "Scale"): a GPT on 8, 64 and 512
# simulated ranks in the layouts whose per-rank task sizes one real pp 2
# run of this machine calibrates (a block's tasks depend on the hidden
# size, the sequence and the micro-batch, not on the number of stages or dp
# ranks): pipeline stages (1F1B), data parallelism (no ZeRO: ZeRO's shards
# have sizes of their own), and both. Every collective is MPI's own
# (--collective-algo mpi), simulated by SMPI on the platform's network.
# Each simulated rank computes at this machine's measured per-core rate
# (one CPU worker per rank); the network is a typed preset. Prints, per
# layout: simulated ms/step, the bubble of the first and last stage from
# the simulated trace, and the wall time the simulation took.
#
# usage: bench/sim-scale.sh [--build DIR] [--sim-build DIR] [--ranks "8 64"]
#          [--preset P] [--shape "ARGS"] [--layers L] [--micro K]
#   --ranks LIST   world sizes (default "8 64"; 512 takes long)
#   --shape ARGS   the model but its layers (default GPT-2 medium at seq
#                  512: --hidden 1024 --heads 16 --vocab 50257 --seq 512)
#   --layers L     layers of the simulated model (24)
#   --micro K      micro-batches of one sequence per step and pipeline (16)
#   --preset P     bench/sim-platform.sh's preset (nvlink-ib: 8 ranks per node)
set -eu
me=sim-scale
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build sim_build=$top/build-sim ranks="8 64" preset=nvlink-ib layers=24 micro=16
shape="--hidden 1024 --heads 16 --vocab 50257 --seq 512 --max-pos 1024"
die2() { echo "$me: error: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die2 "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need "$@"; build=$2; shift ;;
    --sim-build) need "$@"; sim_build=$2; shift ;;
    --ranks) need "$@"; ranks=$2; shift ;;
    --preset) need "$@"; preset=$2; shift ;;
    --shape) need "$@"; shape=$2; shift ;;
    --layers) need "$@"; layers=$2; shift ;;
    --micro) need "$@"; micro=$2; shift ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die2 "unknown option '$1' (see --help)" ;;
  esac
  shift
done
[ -x "$build/examples/gpt_train" ] || die2 "no real build with examples/gpt_train in $build"
[ -x "$sim_build/examples/gpt_train" ] || die2 "no simulation build in $sim_build (docs/simulation.md)"
cal=${SW_SIM_SCALE_CALIBRATION:-$HOME/.cache/starweave/calibration-scale}
host=scale-$(echo "$shape" | tr -c 'a-z0-9' '_' | tr -s _)
if ! ls "$cal/codelets/"*/*".$host" > /dev/null 2>&1; then
  t0=$(date +%s)
  sh "$top/bench/calibrate.sh" --build "$build" --calibration "$cal" --host "$host" --np 2 examples/gpt_train $shape \
    --layers 2 --pp 2 --grad-accum 4 --batch 4 --ncpus 1 --collective-algo mpi --steps 11 --quiet --log /dev/null ||
    die2 "calibration failed"
  echo "$me: calibrated in $(($(date +%s) - t0)) s ($cal, host $host)"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/sw-scale.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "$me: SIMULATION. $shape --layers $layers, micro-batches of 1 sequence, $micro per pipeline per step; ranks compute at $(grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //') per-core rates (calibrated); network: preset $preset (typed)"
printf '%-6s %-22s %12s %14s %10s %10s\n' ranks layout "sim ms/step" "seq/s (sim)" "bubble s0" "wall s"
for n in $ranks; do
  rpn=$((n < 8 ? n : 8))
  sh "$top/bench/sim-platform.sh" --nodes $((n / rpn)) --ranks-per-node $rpn --cpus 1 --preset "$preset" \
    --out "$work/p$n" > /dev/null
  for pp in 1 8; do
    [ $((n % pp)) = 0 ] && [ $((layers % pp)) = 0 ] || continue
    dp=$((n / pp))
    k=$micro
    [ "$pp" = 1 ] && k=1
    lay="--pp $pp --dp $dp --grad-accum $k --batch $((dp * k))"
    t0=$(date +%s)
    sh "$top/bench/sim.sh" --build "$sim_build" --calibration "$cal" --host "$host" --platform "$work/p$n" \
      examples/gpt_train $shape --layers "$layers" $lay --ncpus 1 --collective-algo mpi --steps 2 \
      --log "$work/s.csv" --trace "$work/t.json" > "$work/s.out" 2>&1 ||
      { echo "$n ranks, pp $pp dp $dp: simulation failed:"; grep -v 'calibrated enough' "$work/s.out" | tail -n 5; continue; }
    ms=$(sed -n 's/^simulation: \([0-9.]*\) simulated ms\/step.*/\1/p' "$work/s.out")
    b0=$(sed -n 's/^bubble: stage 0: \([0-9.]*%\).*/\1/p' "$work/s.out")
    printf '%-6s %-22s %12s %14s %10s %10s\n' "$n" "pp $pp x dp $dp, K $k" "$ms" \
      "$(awk -v m="$ms" -v b=$((dp * k)) 'BEGIN { printf "%.1f", b / (m / 1000) }')" "${b0:--}" "$(($(date +%s) - t0))"
  done
done
