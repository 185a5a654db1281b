#!/bin/sh
# Model test against PyTorch: tests/test_gpt_ref exports a small GPT-2 (initial
# parameters, tokens, step-1 loss and gradients, losses after 5 AdamW steps)
# and tests/torch_gpt.py recomputes them with PyTorch (Debian python3-torch).
# Exit 77 (skip) when torch cannot be imported.
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

"$top_builddir/tests/test_gpt_ref" --export "$tmpdir/export"
rc=$?
if [ $rc -eq 99 ]; then # its reference failed a self-check: nothing to compare
    echo "ERROR: $top_builddir/tests/test_gpt_ref --export: hard error"
    exit 99
elif [ $rc -ne 0 ]; then
    echo "FAIL: $top_builddir/tests/test_gpt_ref --export failed (exit $rc)"
    exit 1
fi
"$TORCH_PYTHON" "$top_srcdir/tests/torch_gpt.py" "$tmpdir/export"
rc=$?
if [ $rc -eq 0 ]; then echo "PASS: starweave matches PyTorch"; else echo "FAIL: starweave differs from PyTorch"; fi
exit $rc
