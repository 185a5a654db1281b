#!/bin/sh
# The DiT model (examples/dit_train) against PyTorch: dit_train --export
# writes the initial parameters (adaLN weights N(0, 0.05) or more, so that every
# branch has a gradient: adaLN-Zero's zeros would leave the blocks' own
# parameters without one at step 1), the batch (latents, conditioning,
# each step's noise and t), the losses of 3 AdamW steps and every step-1
# gradient; tests/torch_dit.py rebuilds the model in PyTorch float32 and
# checks the loss at relative 1e-5, every gradient within 1e-4 of its
# max|g|, and the losses after the AdamW steps. Exit 77 (skip) when torch
# cannot be imported.
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
top_builddir=${top_builddir:-.}
[ -n "$top_srcdir" ] || top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
. "$top_srcdir/tests/common.sh"
need_torch
dit_export() { # dit_export NAME ARGS...: export, then the oracle
  name=$1; shift
  want "$name" || return 0
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$top_builddir/examples/dit_train" --steps 3 --adaln-std 0.05 \
    --export "$TMPD/$name" "$@" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  "$TORCH_PYTHON" "$top_srcdir/tests/torch_dit.py" "$TMPD/$name" > "$TMPD/oracle" 2>&1
  orc=$?
  cat "$TMPD/oracle"
  check "$name: dit_train $* (exit $rc) = PyTorch: $(grep -c '^PASS' "$TMPD/oracle") checks passed (oracle exit $orc)" \
    [ "$rc" = 0 -a "$orc" = 0 ]
}
# 4 frames of 8 x 8 x 4 latents, patch 2 (16 patches a frame), hidden 32, 4 heads, 2 blocks, 6 conditioning positions
dit_export "dit 2 blocks" --layers 2
# another shape: 3 frames of 4 x 6 x 3 latents (a 2 x 3 patch grid), 3 heads of 8, 9 conditioning positions of 5
# features, batch 3, a larger learning rate; weights N(0, 0.2), adaLN's N(0, 0.1): attention far from uniform
dit_export "dit other shape" --init-std 0.2 --adaln-std 0.1 --layers 1 --frames 3 --height 4 --width 6 --channels 3 --patch 2 --hidden 24 --heads 3 \
  --cond-len 9 --cond-dim 5 --batch 3 --lr 1e-2
finish
