#!/bin/sh
# W124 on one GPU (GPU builds, configure --enable-cuda; a machine with a
# GPU): gpt_train with every op that has a CUDA implementation on the GPU
# (--device cuda), its step time, FLOP rate and MFU against the GPU's fp32
# peak; in bf16 (--dtype bf16) against the bf16 peak; with activation offload
# to pinned main RAM; and the same run on the CPU workers.
# usage: bench/gpu.sh [steps]   (run from the build directory or set BUILD)
# PEAK_TFLOPS: the GPU's dense fp32 peak (default: 67, H100/H200 SXM without
# tensor cores; the GEMMs are cublasSgemm in fp32, no TF32); PEAK_BF16_TFLOPS
# for the --dtype bf16 run (default: 989, their dense bf16 tensor-core peak).
set -eu
steps=${1:-10}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
PEAK_TFLOPS=${PEAK_TFLOPS:-67}
PEAK_BF16_TFLOPS=${PEAK_BF16_TFLOPS:-989}
[ -x "$BUILD/examples/gpt_train" ] || { echo "gpu: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
shape="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024"
echo "== machine: $(nproc) cores; GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2> /dev/null || echo none)"
out=$(mktemp)
run() { # run LABEL PEAK ARGS...: prints ms/step, GFLOP/s and the MFU against PEAK TFLOP/s
  label=$1; pk=$2; shift 2
  if ! "$BUILD/examples/gpt_train" $shape --steps "$steps" --log "$out.csv" "$@" > "$out" 2>&1; then
    cat "$out"; echo "gpu: $label failed" >&2; exit 1
  fi
  line=$(grep '^gpt_train: loss' "$out")
  ms=$(echo "$line" | sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p')
  gf=$(echo "$line" | sed -n 's/.* \([0-9.]*\) GFLOP\/s.*/\1/p')
  awk -v l="$label" -v ms="$ms" -v gf="$gf" -v pk="$pk" \
    'BEGIN { printf "%-28s %9.1f ms/step %9.1f GFLOP/s  MFU %.2f %% of %g TFLOP/s\n", l, ms, gf, gf / (pk * 10), pk }'
  grep -E "^profile: .*GEMM share" "$out" || true
}
echo "== W124, $steps steps (the first is warm-up)"
run "GPU (--device cuda)" "$PEAK_TFLOPS" --ncuda 1 --device cuda --profile
run "GPU, --dtype bf16" "$PEAK_BF16_TFLOPS" --ncuda 1 --device cuda --dtype bf16
run "GPU + offload (pinned RAM)" "$PEAK_TFLOPS" --ncuda 1 --device cuda --offload
run "CPU workers only" "$PEAK_TFLOPS" --ncuda 0
rm -f "$out" "$out.csv"
