#!/bin/sh
# GPT on GPUs (GPU builds, configure --enable-cuda): gpt_train with every op
# that has a CUDA implementation on a CUDA worker (--device cuda) against the
# CPU run of the same model and data:
# - one rank, one GPU: losses of 6 steps within 1e-4 relative (looser than
#   SPEC's 1e-5 on purpose: over 6 AdamW steps the GPU's and CPU's summation
#   orders give gradients that differ by rounding, and AdamW turns that noise
#   in near-zero gradients into lr-sized moves -- see tests/test_tp.c; the
#   same-point comparison at 1e-5 is test_tp --device cuda below);
# - the same with --offload to pinned main RAM, and with a GPU memory budget
#   that evicts: the same losses as the GPU run without offload, bit for bit
#   (the same kernels on the same values, only the places of the data differ);
# - one rank: tests/test_tp --device cuda, the model's tasks on the GPU
#   against the same model's on CPU workers in one process: the loss of
#   every step (1e-5 relative) and every gradient (1e-4 of max |g|);
# - with 2 GPUs: tp 2 + sp on 2 ranks with NCCL collectives (--comm nccl)
#   against the one-rank CPU run, 1e-4 relative.
# Skipped (exit 77) with the reason where no CUDA worker starts (CPU-only
# build, or no GPU).
. "${top_srcdir:-.}/tests/common.sh"
small="--layers 6 --hidden 128 --heads 4 --seq 128 --batch 8 --dropout 0.1 --steps 6 --quiet"
timeout 300 "$GPT_TRAIN" $small --steps 1 --ncuda 1 --device cuda --log "$TMPD/probe.csv" > "$TMPD/out" 2>&1
rc=$?
if [ "$rc" = 2 ] && grep -q "needs a CUDA worker" "$TMPD/out"; then
  echo "SKIP: no CUDA worker: $(grep -m 1 'error:' "$TMPD/out" | sed 's/^starweave: error: //')"
  exit 77
fi
check "probe run on one GPU (exit $rc)" [ "$rc" = 0 ]
[ "$rc" = 0 ] || { cat "$TMPD/out"; finish; }

train() { # train NAME NP ARGS...: gpt_train on NP ranks, log in $TMPD/NAME.csv
  name=$1; np=$2; shift 2
  SW_TEST_TIMEOUT=600 sh "$LAUNCH" "$np" "$GPT_TRAIN" $small --log "$TMPD/$name.csv" "$@" > "$TMPD/$name.out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/$name.out"
  check "np=$np gpt_train $*: exit $rc" [ "$rc" = 0 ]
}
compare() { # compare A B TOL: the losses of each step within TOL relative (0: identical text)
  out=$(awk -F, -v tol="$3" 'NR == FNR { if (FNR > 1) a[$1] = $2; next }
    FNR > 1 { n++; d = $2 - a[$1]; if (d < 0) d = -d; r = d / (a[$1] < 0 ? -a[$1] : a[$1]);
              if (r > w) w = r; if (tol == 0 ? $2 != a[$1] : r > tol) bad++ }
    END { printf "%d steps, worst relative difference %.3g, %d over", n, w, bad; exit (n == 6 && bad == 0) ? 0 : 1 }' \
    "$TMPD/$1.csv" "$TMPD/$2.csv")
  rc=$?
  check "losses $1 vs $2 (tolerance $3): $out" [ "$rc" = 0 ]
}
train cpu 1 --ncuda 0
train gpu 1 --ncuda 1 --device cuda
compare cpu gpu 1e-4
run 1 --device cuda --dropout 0.1
train gpu_offload 1 --ncuda 1 --device cuda --offload
compare gpu gpu_offload 0
# 48 MiB of GPU memory: parameters, gradients and AdamW states (about 19 MiB)
# and the two blocks of the working set (2 x 8.03 MiB) fit, the six blocks'
# offloaded activations (48.2 MiB) do not, so StarPU evicts them to RAM
train gpu_budget 1 --ncuda 1 --device cuda --offload --offload-budget-mb 48 --memory-report
grep -E "^memory|node" "$TMPD/gpu_budget.out" | head -n 8
compare gpu gpu_budget 0
ngpu=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
if [ "$ngpu" -ge 2 ]; then
  train nccl 2 --tp 2 --sp --ncuda 1 --device cuda --comm nccl
  compare cpu nccl 1e-4
else
  echo "(tp 2 on NCCL not run: it needs 2 GPUs, found $ngpu)"
fi
finish
