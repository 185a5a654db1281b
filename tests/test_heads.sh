#!/bin/sh
# The heads' absolute losses (tests/test_heads.c): the pooled head (MSE and
# cross-entropy, mean and first-token pooling) and the per-row MSE, each
# logged loss against a double-precision recomputation from the global
# batch, in a layout of every group combination the heads sum over: one
# rank (and 2 micro-batches), tp 2 without sp (its ranks hold the same
# rows: counted once) and with sp, Ulysses 2, Ring 2 (zigzag), tp 2 + sp x
# Ulysses 2, each of tp + sp, Ulysses and Ring x dp 2, and dp 2 with 2
# micro-batches.
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/tests/test_heads"
heads() { # heads NP ARGS...: tests/test_heads on NP ranks
  np=$1; shift
  want "np=$np $*" || return 0
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-120} sh "$LAUNCH" "$np" "$PROG" "$@" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  check "np=$np $*: $(grep -E '[0-9]+ passed, [0-9]+ failed \(all ranks\)' "$TMPD/out" | sed 's/.*: //' | head -n 1) (exit $rc)" [ "$rc" = 0 ]
}
heads 1
heads 1 --micro 2
heads 2 --tp 2
heads 2 --tp 2 --sp
heads 2 --ulysses 2
heads 2 --ring 2
heads 2 --dp 2 --micro 2
heads 4 --tp 2 --sp --dp 2
heads 4 --ulysses 2 --dp 2
heads 4 --ring 2 --dp 2 --micro 2
heads 4 --tp 2 --sp --ulysses 2
finish
