#!/bin/sh
# The planner checked against real runs (docs/planner.md): gpt_train --plan
# --verify-spread on this machine, at each world size given -- N layouts
# spread over the ranked table (the first, the last, evenly between) run for
# real (mpirun --oversubscribe), predicted and measured ms/step and memory
# side by side, Spearman's rank correlation, the layouts within 20 % and the
# largest error. --program dit_train: the same for the DiT (dit_train
# --plan). --simulate-verified SIMBUILD: each of those layouts also through
# the simulated task graph of the simulation build SIMBUILD (docs/simulation.md),
# calibrated by a real run of that layout's own task sizes (bench/calibrate.sh,
# 10 steps), then simulated (bench/sim.sh, 3 steps): estimate, simulated and
# measured ms/step side by side, Spearman and "within 20 %" for both
# predictions. The simulation charges the calibration's measured cost per
# task (bench/sim.sh).
# usage: bench/plan.sh [--build DIR] [--ranks "2 4"] [--spread N]
#          [--steps S] [--machine FILE] [--program gpt_train|dit_train]
#          [--simulate-verified SIMBUILD] [MODEL FLAGS...]
# Default model: W124 (GPT-2 124M, seq 64, batch 4: bench/w124.sh's shape);
# the DiT's: 8 frames of 16 x 16 latents, hidden 128, 4 blocks, batch 4;
# ranks 2 and 4, 8 layouts each, 4 steps (the first not timed). Without
# --machine the planner measures this machine at its start (GEMM rates at
# 16 and 256 rows, an AdamW pass) -- on a loaded machine those figures are
# the load's: run it on a quiet one. OPENBLAS_CORETYPE is set as
# bench/common.sh sets it.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build ranks="2 4" spread=8 steps=4 machine="" program=gpt_train simbuild="" me=plan.sh
. "$top/bench/common.sh"
plan_options "$0" "--ranks:ranks --spread:spread --steps:steps --program:program --simulate-verified:simbuild" "$@"
shift "$plan_shift"
case $program in
  gpt_train) model=$w124_flags ;;
  # the DiT: 8 frames of 16 x 16 latents (64 patches of 2 x 2 per frame), hidden 128, 4 blocks
  dit_train) model="--frames 8 --height 16 --width 16 --patch 2 --hidden 128 --heads 8 --layers 4 --batch 4 --cond-len 16 --cond-dim 64" ;;
  *) die2 "--program must be gpt_train or dit_train (got '$program')" ;;
esac
# shellcheck disable=SC2086 # the default model's flags are words
[ $# -gt 0 ] || set -- $model
# A StarPU home of its own: the planner takes the GEMM rate from StarPU's
# history model of sw_gemm where one exists, and ~/.starpu's holds every
# run this machine ever made, loaded ones included (18 GFLOP/s against a
# quiet 124 on 2026-11-28); empty, the planner measures the GEMM at start.
# STARPU_HOME set by the caller is kept.
if [ -z "${STARPU_HOME:-}" ]; then
  STARPU_HOME=$(mktemp -d "${TMPDIR:-/tmp}/sw-plan-home.XXXXXX"); export STARPU_HOME
  trap 'rm -rf "$STARPU_HOME"' EXIT
fi
for n in $ranks; do
  echo "bench/plan.sh: $n ranks: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)${simbuild:+, each layout also simulated}"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  "$build/examples/$program" --plan --plan-ranks "$n" --plan-top 10 ${machine:+--plan-machine "$machine"} \
    --verify-spread "$spread" --verify-steps "$steps" ${simbuild:+--simulate-verified --sim-build "$simbuild"} "$@"
  echo "bench/plan.sh: $n ranks took $(($(date +%s) - t0)) s"
done
