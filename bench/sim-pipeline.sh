#!/bin/sh
# The pipeline judged in simulation (docs/simulation.md): pp stages of one
# simulated CPU core each (one rank per node), K micro-batches of one
# sequence, 1F1B and Zero Bubble (--zero-bubble, ZB-H1): the simulated step,
# and each stage's bubble from the simulated trace against 1F1B's
# (p - 1) / (m + p - 1); and ZB-H2 (--zero-bubble --pp-inflight 2 p - 1:
# more micro-batches in flight, more memory). Calibrated once by a real pp 2
# run of the same per-stage sizes (a block's tasks do not depend on how
# many stages there are), with and without the split.
#
# Each simulation runs 4 steps: the first two in the order of the guessed
# costs, the second measured (its tasks' simulated times), the last two in
# the order re-planned from them (sw_pipeline_replan); the step and the
# bubble are the last two's. Per run: the simulated ms/step; the measured
# F, B, W per unit (ms, stage 0's; B the whole backward without the split);
# per stage the W units after the last forward, the share of the step
# without compute (the trace's), and that time in ms beside the bubble time
# of the formulas at the measured costs: 1F1B's (p - 1)(F + B + W) and a
# third of it, ZB-H1's (p - 1)(F + B - W) (the Zero Bubble paper's
# measure); the hop between stages 0 and 1 the re-planned order counted
# (ms); each stage's saved activations in the memory model (MiB).
#
# usage: bench/sim-pipeline.sh [--build DIR] [--sim-build DIR] [--pp "4 8"]
#          [--micro "8 16"] [--preset P] [--shape "ARGS"] [--calibration DIR] [--sched LIST]
#   --pp LIST      stage counts (default "4 8")
#   --micro LIST   micro-batches per step (default "8 16")
#   --preset P     network between the nodes (bench/sim-platform.sh; nvlink-ib)
#   --shape ARGS   the model (default: --layers 8 --hidden 256 --heads 4
#                  --seq 128 --vocab 512); layers must divide by every pp
#   --calibration DIR  calibrate into DIR, or reuse DIR when it holds this
#                  shape's calibration already (default: a fresh one)
#   --sched LIST   schedules (default "1F1B ZB-H1 ZB-H2"; ZB-H2: --zero-bubble
#                  --pp-inflight 2 pp - 1)
set -eu
me=sim-pipeline
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build sim_build=$top/build-sim pps="4 8" micros="8 16" preset=nvlink-ib cal= scheds="1F1B ZB-H1 ZB-H2"
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
    --calibration) need "$@"; cal=$2; shift ;;
    --sched) need "$@"; scheds=$2; shift ;;
    -h|--help) usage_from "$0"; exit 0 ;;
    *) die2 "unknown option '$1' (see --help)" ;;
  esac
  shift
done
sim_builds "$build" "$sim_build"
work=$(mktemp -d "${TMPDIR:-/tmp}/sw-pipe.XXXXXX")
trap 'rm -rf "$work"' EXIT
k0=$(echo $micros | cut -d' ' -f1)
[ -n "$cal" ] || cal=$work/cal
if [ "$(cat "$cal/.sim-pipeline" 2>/dev/null)" != "$shape K $k0" ]; then
  for zb in "" --zero-bubble; do
    sh "$top/bench/calibrate.sh" --build "$build" --calibration "$cal" --host pipe --np 2 examples/gpt_train $shape \
      --pp 2 --grad-accum "$k0" --batch "$k0" --ncpus 1 $zb --steps 12 --quiet --log "$work/c.csv" > "$work/c.out" 2>&1 ||
      { tail -n 5 "$work/c.out"; die2 "calibration failed"; }
  done
  echo "$shape K $k0" > "$cal/.sim-pipeline"
fi
echo "$me: $shape, one core per stage, micro-batches of 1 sequence, preset $preset; calibrated by real pp 2 runs on $(cpu_model)"
printf '%-4s %-4s %-6s %11s %10s %-18s  %s\n' pp K sched "ms/step" "1F1B form." "F B W ms (stage 0)" \
  "per stage: W after the last F, bubble % | ms; formulas' ms: 1F1B (a third), ZB-H1 | hop | saved MiB"
for p in $pps; do
  sh "$top/bench/sim-platform.sh" --nodes "$p" --ranks-per-node 1 --cpus 1 --preset "$preset" --out "$work/plat$p" > /dev/null
  for k in $micros; do
    for sched in $scheds; do
      # ZB-H2: ZB-H1's split with 2 p - 1 micro-batches in flight per stage (at most K; the Zero Bubble paper's
      # ZB-H2 gives stage s 2 (p - s) - 1: --pp-inflight is one quota for every stage)
      case $sched in 1F1B) zb= ;; ZB-H1) zb=--zero-bubble ;; ZB-H2) zb="--zero-bubble --pp-inflight $((2 * p - 1))" ;; esac
      t0=$(date +%s)
      sh "$top/bench/sim.sh" --build "$sim_build" --calibration "$cal" --host pipe --platform "$work/plat$p" \
        examples/gpt_train $shape --pp "$p" --grad-accum "$k" --batch "$k" --ncpus 1 $zb --steps 4 \
        --log "$work/s.csv" --trace "$work/t.json" > "$work/s.out" 2>&1 ||
        { echo "pp $p K $k $zb: simulation failed:"; grep -v 'calibrated enough' "$work/s.out" | tail -n 5; continue; }
      # the re-planned steps (3 and 4): ms/step from the log, each stage's time without compute from the overlap rows
      ms=$(awk -F, 'NR > 1 && $1 >= 3 { s += $3; n++ } END { if (n) printf "%.1f", s / n }' "$work/s.csv")
      # stage 0's measured costs (ms; W 0 without the split) and the hop to stage 1 (ms)
      c0=$(sed -n 's/^schedule: costs stage 0 \([^,]*\) ms.*/\1/p' "$work/s.out")
      val() { echo "$c0" | sed -n "s/.*$1 \([0-9.e+-]*\).*/\1/p" | grep . || echo 0; }
      f=$(val F) b=$(val B) w=$(val W) hop=$(val hop)
      late=$(sed -n 's/^schedule: W units after the last forward: //p' "$work/s.out" | tail -n 1 | sed 's/stage [0-9]* //g; s/,//g')
      bub=$(sed -n 's/^bubble: stage \([0-9]*\): \([0-9.]*\)% of the step.*/\2/p' "$work/s.out" | tr '\n' ' ')
      idle=$(awk '$1 == "overlap:" && $3 ~ /^[0-9]+$/ && $3 >= 3 { s[$2] += $4 - $5; n[$2]++ }
                  END { for (r = 0; r in n; r++) printf "%.1f ", s[r] / n[r] }' "$work/s.out")
      # each stage's saved activations in the memory model (MiB): the micro slots its order keeps
      mem=$(sed -n 's/^memory: rank [0-9]*: the model needs .* saved activations \([0-9.]*\),.*/\1/p' "$work/s.out" | tr '\n' ' ')
      # the formulas at the measured costs (without the split the backward is B + W: ZB-H1's formula does not apply)
      form=$(awk -v p="$p" -v f="$f" -v b="$b" -v w="$w" 'BEGIN { printf "%.1f (a third %.1f), %s", (p - 1) * (f + b + w),
             (p - 1) * (f + b + w) / 3, (w > 0 ? sprintf("%.1f", (p - 1) * (f + b - w)) : "-") }')
      printf '%-4s %-4s %-6s %11s %9s%% %-18s  W %s| %% %s| ms %s| %s | hop %s ms | saved MiB %s(%s s)\n' "$p" "$k" \
        "$sched" "$ms" "$(awk -v p="$p" -v m="$k" 'BEGIN { printf "%.1f", 100 * (p - 1) / (m + p - 1) }')" "$f $b $w" \
        "${late:--} " "$bub" "$idle" "$form" "$hop" "${mem:--}" "$(($(date +%s) - t0))"
    done
  done
done
