#!/bin/sh
# The DiT layers (dit.h) under mpirun against the whole batch's reference
# (tests/test_dit_layers.c): one rank; tp 2 with sp (adaLN's per-sequence
# sums over TP, grid attention's heads split); Ulysses 2 and Ring 2 with
# zigzag (adaLN's sums over the sequence-parallel group, cross-attention's
# queries split and its K/V gradients in parts); grid attention with
# Ulysses refused (exit 2 on every rank, the message once).
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/tests/test_dit_layers"
dit() { # dit NP ARGS...: tests/test_dit_layers on NP ranks
  np=$1; shift
  want "np=$np $*" || return 0
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-120} sh "$LAUNCH" "$np" "$PROG" "$@" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  check "np=$np $*: $(grep -E '[0-9]+ passed, [0-9]+ failed \(all ranks\)' "$TMPD/out" | sed 's/.*: //' | head -n 1) (exit $rc)" [ "$rc" = 0 ]
}
dit 1
dit 2 --tp 2 --sp
dit 2 --tp 2
dit 2 --ulysses 2
dit 2 --ring 2 --zigzag
want "refused" && refused 2 "sw_grid_attention_create: ulysses x ring (2 x 1) must be 1" \
  "grid attention with Ulysses 2" "$PROG" --ulysses 2 --refuse
finish
