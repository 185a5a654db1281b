#!/bin/sh
# Pipeline bubble of the emergent schedule (pipeline.h): gpt_train with pp
# stages, one rank (and one CPU worker) per stage, K micro-batches, traced;
# per stage and step, the share of the step's wall time its worker did not
# compute (sw_trace_overlap: wall - compute; the stage waits for its
# neighbours there), beside 1F1B's formula (p - 1) / (K + p - 1) and, with
# --virtual V chunks per stage, the interleaved (p - 1) / (V K + p - 1),
# averaged over the steps after the first. The model has 2 P blocks.
# usage: bench/pp.sh [--pp P] [--micro "2 4 8"] [--steps N] [--inflight Q] [--virtual 1|2] [--gantt OUT.png] [--help]
#                    [-- gpt_train args]
#   --gantt: step 2 of the last micro-batch count's run drawn as a Gantt chart (bench/plot_trace.py)
# Then, for comparison, the same model and the last K's batch on one rank
# with one and with two CPU workers (ms/step).
#   (run from the build directory or set BUILD; P ranks; on a machine with
#   fewer cores than P the stages share cores and the figures are not a bubble)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
pp=2; micro="2 4 8"; steps=4; inflight=0; virtual=1; gantt=
while [ $# -gt 0 ]; do
  case $1 in
    --pp) pp=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --inflight) inflight=$2; shift 2 ;;
    --virtual) virtual=$2; shift 2 ;;
    --gantt) gantt=$2; shift 2 ;;
    --help|-h) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) echo "pp.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$BUILD/examples/gpt_train" ] || { echo "pp.sh: build gpt_train first (make), or set BUILD" >&2; exit 2; }
. "$here/common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "pp.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores, pp $pp, $virtual chunk(s) per stage, quota ${inflight} (0: 1F1B)"
printf '%6s %6s %10s %12s %12s %12s\n' micro stage "ms/step" "bubble" "1F1B formula" "interleaved"
for K in $micro; do
  sh "$here/../tests/mpi_launch.sh" "$pp" "$BUILD/examples/gpt_train" --pp "$pp" --grad-accum "$K" \
    --pp-inflight "$inflight" --pp-virtual "$virtual" --layers $((2 * pp)) --hidden 256 --heads 4 --seq 128 --batch $((2 * K)) \
    --steps "$steps" --ncpus 1 --trace "$tmp/t.json" --log "$tmp/log.csv" "$@" > "$tmp/out" 2>&1 \
    || { cat "$tmp/out"; exit 1; }
  ms=$(awk -F, 'NR > 2 { s += $3; n++ } END { printf "%.1f", s / n }' "$tmp/log.csv")
  python3 - "$tmp/t.json.overlap.json" "$K" "$pp" "$ms" "$virtual" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))["overlap"]
K, p, ms, v = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
for rank in range(p):
    steps = [r for r in rows if r["rank"] == rank and r["step"] > 1]
    bubble = sum(1 - r["compute_us"] / r["wall_us"] for r in steps) / len(steps)
    print("%6d %6d %10s %11.1f%% %11.1f%% %11.1f%%" % (K, rank, ms, 100 * bubble, 100 * (p - 1) / (K + p - 1),
                                                  100 * (p - 1) / (v * K + p - 1)))
EOF
done
for n in 1 2; do
  "$BUILD/examples/gpt_train" --grad-accum "$K" --layers $((2 * pp)) --hidden 256 --heads 4 --seq 128 \
    --batch $((2 * K)) --steps "$steps" --ncpus "$n" --quiet --log "$tmp/one.csv" "$@" > "$tmp/out" 2>&1 \
    || { cat "$tmp/out"; exit 1; }
  echo "one rank, $n CPU worker(s), K $K: $(awk -F, 'NR > 2 { s += $3; n++ } END { printf "%.1f", s / n }' "$tmp/one.csv") ms/step"
done
[ -z "$gantt" ] || /usr/bin/python3 "$here/plot_trace.py" "$tmp/t.json" --step 2 --gantt "$gantt"
