#!/bin/sh
# W124 (SPEC): GPT-2 124M shape, batch 4, seq 64, fp32, AdamW, one process,
# 2 CPU workers; starweave's gpt_train side by side with the same model in
# PyTorch (2 threads), plus the GEMM share and the sgemm roofline.
# usage: bench/w124.sh [steps]      (run from the build directory or set BUILD)
set -eu
steps=${1:-6}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
[ -x "$BUILD/examples/gpt_train" ] || { echo "w124: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
shape="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4"
log=$(mktemp)
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
"$BUILD/bench/sgemm_peak" 1024
echo "== starweave gpt_train W124, $steps steps, 2 CPU workers"
"$BUILD/examples/gpt_train" $shape --max-pos 1024 --steps "$steps" --ncpus 2 --profile --log "$log" | tee "$log.out"
sw_ms=$(sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$log.out")
echo "== PyTorch $($TORCH_PYTHON -c 'import torch; print(torch.__version__)'), 2 threads"
$TORCH_PYTHON "$here/torch_gpt.py" --layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 \
  --steps "$steps" --threads 2 | tee "$log.torch"
torch_ms=$(sed -n 's/^torch_ms_per_step \([0-9.]*\).*/\1/p' "$log.torch")
echo "== W124 summary"
echo "starweave_ms_per_step $sw_ms"
echo "torch_ms_per_step $torch_ms"
awk -v a="$sw_ms" -v b="$torch_ms" 'BEGIN { printf "ratio_starweave_over_torch %.3f (goal <= 0.5)\n", a / b }'
grep "GEMM share" "$log.out" | sed 's/^profile: //'
rm -f "$log" "$log.out" "$log.torch"
