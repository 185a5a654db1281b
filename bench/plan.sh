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
build=$top/build ranks="2 4" spread=8 steps=4 machine="" me=plan.sh
. "$top/bench/common.sh"
plan_options "$0" "--ranks:ranks --spread:spread --steps:steps" "$@"
shift "$plan_shift"
# shellcheck disable=SC2086 # the default model's flags are words
[ $# -gt 0 ] || set -- $w124_flags
for n in $ranks; do
  echo "bench/plan.sh: $n ranks: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  "$build/examples/gpt_train" --plan --plan-ranks "$n" --plan-top 10 ${machine:+--plan-machine "$machine"} \
    --verify-spread "$spread" --verify-steps "$steps" "$@"
  echo "bench/plan.sh: $n ranks took $(($(date +%s) - t0)) s"
done
