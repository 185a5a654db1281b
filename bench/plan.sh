#!/bin/sh
# The planner checked against real runs (docs/planner.md): gpt_train --plan
# --verify on this machine -- the top K layouts and a few from the bottom
# run for real (mpirun --oversubscribe), predicted and measured ms/step and
# memory side by side, Spearman's rank correlation.
# usage: bench/plan.sh [--build DIR] [--ranks N] [--verify K] [--bottom B]
#          [--steps S] [MODEL FLAGS...]
# Default model: 4 layers, hidden 256, 8 heads, seq 128, batch 8 (a small
# GPT-2; W124's shape takes minutes per step here); default 2 ranks, K 4, B 2.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build ranks=2 verify=4 bottom=2 steps=4
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --verify) verify=$2; shift 2 ;;
    --bottom) bottom=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- --layers 4 --hidden 256 --heads 8 --seq 128 --batch 8
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "bench/plan.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$build/examples/gpt_train" --plan --plan-ranks "$ranks" --verify "$verify" --verify-bottom "$bottom" \
  --verify-steps "$steps" "$@"
