#!/bin/sh
# The planner checked against real runs (docs/planner.md): gpt_train --plan
# --verify-spread on this machine, at each world size given -- N layouts
# spread over the ranked table (the first, the last, evenly between) run for
# real (mpirun --oversubscribe), predicted and measured ms/step and memory
# side by side, Spearman's rank correlation, the layouts within 20 % and the
# largest error.
# usage: bench/plan.sh [--build DIR] [--ranks "2 4"] [--spread N]
#          [--steps S] [--machine FILE] [MODEL FLAGS...]
# Default model: W124 (GPT-2 124M, seq 64, batch 4: bench/w124.sh's shape);
# ranks 2 and 4, 8 layouts each, 4 steps (the first not timed). Without
# --machine the planner measures this machine at its start (GEMM rates at
# 16 and 256 rows, an AdamW pass) -- on a loaded machine those figures are
# the load's: run it on a quiet one. OPENBLAS_CORETYPE is set as
# bench/common.sh sets it.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build ranks="2 4" spread=8 steps=4 machine=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --spread) spread=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --machine) machine=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- --layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024
# A StarPU home of its own: the planner takes the GEMM rate from StarPU's
# history model of sw_gemm where one exists, and ~/.starpu's holds every
# run this machine ever made, loaded ones included (18 GFLOP/s against a
# quiet 124 on 2026-11-28); empty, the planner measures the GEMM at start.
# STARPU_HOME set by the caller is kept.
if [ -z "${STARPU_HOME:-}" ]; then
  STARPU_HOME=$(mktemp -d "${TMPDIR:-/tmp}/sw-plan-home.XXXXXX"); export STARPU_HOME
  trap 'rm -rf "$STARPU_HOME"' EXIT
fi
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
. "$top/bench/common.sh"
for n in $ranks; do
  echo "bench/plan.sh: $n ranks: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  "$build/examples/gpt_train" --plan --plan-ranks "$n" --plan-top 10 ${machine:+--plan-machine "$machine"} \
    --verify-spread "$spread" --verify-steps "$steps" "$@"
  echo "bench/plan.sh: $n ranks took $(($(date +%s) - t0)) s"
done
