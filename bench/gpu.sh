#!/bin/sh
# GPT-2 124M on one GPU (GPU builds, configure --enable-cuda; a machine with
# a GPU): gpt_train with every op that has a CUDA implementation on the GPU
# (--device cuda), its step time, tokens/s, FLOP rate and MFU against the
# GPU's fp32 peak; in bf16 (--dtype bf16) against the bf16 peak; the share
# of the step in GEMMs (--profile).
# usage: bench/gpu.sh [steps] [w124|gpt2]   (run from the build directory or set BUILD)
#   w124 (default): W124 (seq 64, batch 4): fp32, bf16, with activation
#        offload to pinned main RAM, and the same run on the CPU workers;
#   gpt2: batch 16 x seq 1024, the shape of llm.c's GPT-2 124M figures:
#        fp32 and bf16 on the GPU.
# A run that fails is reported (its output's tail, "gpu: LABEL failed") and
# the next one runs; the exit status is 1 when any failed.
# PEAK_TFLOPS: the GPU's dense fp32 peak (default: 67, H100/H200 SXM without
# tensor cores; the GEMMs are cublasSgemm in fp32, no TF32); PEAK_BF16_TFLOPS
# for the --dtype bf16 runs (default: 989, their dense bf16 tensor-core peak).
set -eu
steps=${1:-10}
model=${2:-w124}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
PEAK_TFLOPS=${PEAK_TFLOPS:-67}
PEAK_BF16_TFLOPS=${PEAK_BF16_TFLOPS:-989}
case "$steps" in -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ -x "$BUILD/examples/gpt_train" ] || { echo "gpu: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
case "$model" in
  w124) seq=64; batch=4 ;;
  gpt2) seq=1024; batch=16 ;;
  *) echo "gpu: unknown model '$model' (w124 or gpt2)" >&2; exit 2 ;;
esac
shape="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq $seq --batch $batch --max-pos 1024"
echo "== machine: $(nproc) cores; GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2> /dev/null || echo none)"
out=$(mktemp)
failed=0
run() { # run LABEL PEAK ARGS...: prints ms/step, tokens/s, GFLOP/s and the MFU against PEAK TFLOP/s
  label=$1; pk=$2; shift 2
  if ! "$BUILD/examples/gpt_train" $shape --steps "$steps" --log "$out.csv" "$@" > "$out" 2>&1; then
    tail -n 20 "$out"; echo "gpu: $label failed" >&2; failed=1; return 0
  fi
  line=$(grep '^gpt_train: loss' "$out")
  ms=$(echo "$line" | sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p')
  gf=$(echo "$line" | sed -n 's/.* \([0-9.]*\) GFLOP\/s.*/\1/p')
  awk -v l="$label" -v ms="$ms" -v gf="$gf" -v pk="$pk" -v tok="$((seq * batch))" \
    'BEGIN { printf "%-28s %9.1f ms/step %9.0f tokens/s %9.1f GFLOP/s  MFU %.2f %% of %g TFLOP/s\n", l, ms, tok * 1000 / ms, gf, gf / (pk * 10), pk }'
  grep -E "^profile: .*GEMM share" "$out" || true
}
echo "== $model (batch $batch x seq $seq), $steps steps (the first is warm-up)"
run "GPU (--device cuda)" "$PEAK_TFLOPS" --ncuda 1 --device cuda --profile
run "GPU, --dtype bf16" "$PEAK_BF16_TFLOPS" --ncuda 1 --device cuda --dtype bf16 --profile
if [ "$model" = w124 ]; then
  run "GPU + offload (pinned RAM)" "$PEAK_TFLOPS" --ncuda 1 --device cuda --offload
  run "CPU workers only" "$PEAK_TFLOPS" --ncuda 0
fi
rm -f "$out" "$out.csv"
exit $failed
