#!/bin/sh
# W124 (SPEC): GPT-2 124M shape, batch 4, seq 64, fp32, AdamW, one process,
# 2 CPU workers; starweave's gpt_train side by side with the same model in
# PyTorch (2 threads), plus the GEMM share and the roofline: the step's
# FLOPs at the best single-core sgemm rate measured in the same run (every
# CPU GEMM backend of the build on a W124 tile, bench/sgemm_peak) on 2
# workers; and, where oneDNN runs bf16 GEMMs natively (AVX512-BF16 or AMX),
# the bf16 step, its speed-up and its loss curve against fp32's, beside
# PyTorch's bf16 autocast (its speed and its own loss curves). Every run
# trains on the same batches: windows of W124_DATA's bytes (default: Debian's
# GPL-3 text; the synthetic corpus and random tokens if it is unreadable).
# usage: bench/w124.sh [steps]      (run from the build directory or set BUILD)
set -eu
steps=${1:-6}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
[ -x "$BUILD/examples/gpt_train" ] || { echo "w124: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
shape="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4"
data=${W124_DATA:-/usr/share/common-licenses/GPL-3}
if [ -r "$data" ]; then data_opt="--data $data"; else data_opt= data="unreadable ($data): synthetic corpus, PyTorch random tokens"; fi
log=$(mktemp)
# ms/step from gpt_train's last line, and from torch_gpt.py's
sw_ms_of() { sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$1"; }
torch_ms_of() { sed -n 's/^torch_ms_per_step \([0-9.]*\).*/\1/p' "$1"; }
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; data: $data"
"$BUILD/bench/sgemm_peak" 1024 | tee "$log.peak"
best=$(sed -n 's/^sgemm_best_gflops_1core [a-z]* \([0-9.]*\)/\1/p' "$log.peak")
echo "== starweave gpt_train W124, $steps steps, 2 CPU workers"
"$BUILD/examples/gpt_train" $shape $data_opt --max-pos 1024 --steps "$steps" --ncpus 2 --profile --log "$log" 2>&1 |
  tee "$log.out"
sw_ms=$(sw_ms_of "$log.out")
gflop=$(sed -n 's/.* \([0-9.]*\) GFLOP\/step.*/\1/p' "$log.out")
if grep -q '^bf16_gflops_1core' "$log.peak"; then
  echo "== starweave gpt_train W124 --dtype bf16 --gemm onednn, $steps steps"
  "$BUILD/examples/gpt_train" $shape $data_opt --max-pos 1024 --steps "$steps" --ncpus 2 --dtype bf16 --gemm onednn \
    --profile --log "$log.bf16" 2>&1 | tee "$log.bf16.out"
  bf16_ms=$(sw_ms_of "$log.bf16.out")
else
  bf16_ms=
fi
# PyTorch with gpt_train's optimizer settings (lr 1e-3, betas 0.9/0.999, no
# weight decay), so that its own bf16-vs-fp32 loss curves are a peer for ours
torch_run() { # torch_run DTYPE OUT
  $TORCH_PYTHON "$here/torch_gpt.py" --layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 \
    --steps "$steps" --threads 2 --lr 1e-3 --beta2 0.999 --weight-decay 0 --dtype "$1" $data_opt | tee "$2"
}
echo "== PyTorch $($TORCH_PYTHON -c 'import torch; print(torch.__version__)'), 2 threads"
torch_run fp32 "$log.torch"
torch_ms=$(torch_ms_of "$log.torch")
if [ -n "$bf16_ms" ]; then
  echo "== PyTorch, 2 threads, bf16 autocast"
  torch_run bf16 "$log.torch16"
  torch16_ms=$(torch_ms_of "$log.torch16")
fi
echo "== W124 summary"
echo "starweave_ms_per_step $sw_ms"
echo "torch_ms_per_step $torch_ms"
awk -v a="$sw_ms" -v b="$torch_ms" 'BEGIN { printf "ratio_starweave_over_torch %.3f (goal <= 0.5)\n", a / b }'
awk -v f="$gflop" -v g="$best" -v ms="$sw_ms" 'BEGIN { r = f / (2 * g) * 1000;
  printf "roofline_ms %.1f (%s GFLOP/step at %s GFLOP/s per worker, 2 workers); step / roofline %.2f (goal <= 1.3)\n", r, f, g, ms / r }'
grep "GEMM share" "$log.out" | sed 's/^profile: //'
if [ -n "$bf16_ms" ]; then
  awk -v a="$sw_ms" -v b="$bf16_ms" 'BEGIN { printf "bf16_ms_per_step %s, fp32 / bf16 %.2f (goal >= 1.6)\n", b, a / b }'
  grep "GEMM share" "$log.bf16.out" | sed 's/^profile: /bf16: /'
  awk -v a="$torch_ms" -v b="$torch16_ms" -v s="$bf16_ms" \
    'BEGIN { printf "torch_bf16_ms_per_step %s, its fp32 / bf16 %.2f; starweave bf16 / PyTorch bf16 %.3f\n", b, a / b, s / b }'
  # torch_gpt.py's lines "step K loss L ms T" as CSV "K,L"
  for f in torch torch16; do sed -n 's/^step \([0-9]*\) loss \([0-9.]*\) .*/\1,\2/p' "$log.$f" > "$log.$f.csv"; done
  echo "loss curves, relative difference bf16 vs fp32 (goal within 1 %); PyTorch autocast beside (same batches, its own initial values):"
  echo "  step  starweave fp32  bf16  difference  |  PyTorch fp32  bf16  difference"
  awk -F, 'function rel(a, b) { return a > b ? (a - b) / b : (b - a) / b }
    FILENAME == ARGV[1] { if (FNR > 1) f[$1] = $2; next }
    FILENAME == ARGV[2] { if (FNR > 1) h[$1] = $2; next }
    FILENAME == ARGV[3] { t[$1] = $2; next }
    ($1 in f) && ($1 in h) { d = rel(h[$1], f[$1]); e = ($1 in t) ? rel($2, t[$1]) : 0
      if (d > dw) dw = d; if (e > ew) ew = e; n++; if (d > 0.01) over++; if (e > 0.01) tover++
      printf "  %s  %s %s %.4f  |  %s %s %.4f\n", $1, f[$1], h[$1], d, t[$1], $2, e }
    END { printf "worst relative difference: starweave %.4f (%d of %d steps over 1 %%), PyTorch autocast %.4f (%d over 1 %%)\n",
      dw, over, n, ew, tover, n }' "$log" "$log.bf16" "$log.torch.csv" "$log.torch16.csv"
else
  echo "bf16: not run (no native bf16 GEMM here: needs oneDNN on a CPU with AVX512-BF16 or AMX; --dtype bf16 widens bf16 operands to fp32, no speed-up)"
fi
rm -f "$log" "$log".*
