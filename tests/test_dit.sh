#!/bin/sh
# The DiT layers (dit.h) under mpirun against the whole batch's reference
# (tests/test_dit_layers.c): one rank; tp 2 with and without sp (adaLN's
# per-sequence sums over TP only with sp, grid attention's heads split);
# Ulysses 2, Ring 2 (zigzag and not), Ulysses 2 x Ring 2, tp 2 + sp x
# Ulysses 2 (adaLN's sums over the sequence-parallel group,
# cross-attention's queries split and its K/V gradients in parts, temporal
# attention's all-to-all and its traffic model); in every layout the K/V
# projection (sw_cross_kv) into cross-attention: its heads' kv, dW and db
# summed by the registry, dcond's parts, nothing sent; grid attention over a
# zigzag split refused (exit 2 on every rank, the message once).
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
dit 2 --ring 2
dit 4 --ulysses 2 --ring 2
dit 4 --tp 2 --sp --ulysses 2
want "refused" && refused 2 "sw_grid_attention_create: zigzag: the sequence must be split in contiguous blocks" \
  "grid attention with Ring 2 zigzag" "$PROG" --ring 2 --zigzag --refuse
finish
