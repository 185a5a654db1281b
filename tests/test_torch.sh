#!/bin/sh
# Model test against PyTorch, for GPT-2 and LLaMA: tests/test_gpt_ref exports a
# small model (`--model llama`: GQA, rotary positions, RMSNorm, SwiGLU) --
# initial parameters, tokens, step-1 loss and gradients, losses after 5 AdamW
# steps -- and tests/torch_gpt.py recomputes them with PyTorch (Debian
# python3-torch), with each CPU GEMM backend of the build. PASS/FAIL per
# model and backend; exit 77 (skip) only when torch cannot be
# imported, 99 when an exporter's own reference fails its self-check.
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
top_builddir=${top_builddir:-.}
if [ -z "$top_srcdir" ]; then
    top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
fi

if ! "$TORCH_PYTHON" -c 'import torch' >/dev/null 2>&1; then
    echo "SKIP: python3-torch not importable by $TORCH_PYTHON (install Debian python3-torch)"
    exit 77
fi

tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/starweave_torch.XXXXXX") || { echo "FAIL: mktemp"; exit 1; }
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 1' HUP INT TERM

failed=0
hard=0
# with each CPU GEMM backend of the build (oneDNN where built: SKIP otherwise)
for gemm in openblas onednn; do
  for model in gpt2 llama; do
    echo "# model $model, gemm $gemm"
    SW_GEMM=$gemm "$top_builddir/tests/test_gpt_ref" --export "$tmpdir/$model" --model "$model" 2> "$tmpdir/err"
    rc=$?
    cat "$tmpdir/err" >&2
    if [ $rc -eq 2 ] && grep -q 'built without oneDNN' "$tmpdir/err"; then
        echo "SKIP gemm $gemm: $(grep -m 1 'built without' "$tmpdir/err")"
        break
    elif [ $rc -eq 99 ]; then # its reference failed a self-check: nothing to compare
        echo "ERROR: $top_builddir/tests/test_gpt_ref --export --model $model (gemm $gemm): hard error"
        hard=1
        continue
    elif [ $rc -ne 0 ]; then
        echo "FAIL $model, gemm $gemm: $top_builddir/tests/test_gpt_ref --export --model $model failed (exit $rc)"
        failed=1
        continue
    fi
    "$TORCH_PYTHON" "$top_srcdir/tests/torch_gpt.py" "$tmpdir/$model"
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "PASS $model, gemm $gemm: starweave matches PyTorch (and the serial C reference)"
    else
        echo "FAIL $model, gemm $gemm: starweave differs from PyTorch (exit $rc)"
        failed=1
    fi
  done
done
[ $hard -eq 1 ] && exit 99
exit $failed
