#!/bin/sh
# A masked LM of one's own: examples/encoder_mlm.c, a BERT-style encoder
# (learned positions, token types from an extra table sw_embedding_table_*,
# pre-LayerNorm blocks, bidirectional attention) with the LM head counting
# only the ~15 % masked positions (ignore index -100), trained 3 AdamW
# steps under tp 2 + sp, dp 2, dp 2 with 2 micro-batches, Ulysses 2 and
# Ring 2 (zigzag): the losses match one rank's within relative 1e-5, the
# gradient norm before clipping and every parameter's reduced, clipped
# gradient (sum of squares and of |g| over the ranks holding distinct parts,
# the token-type table's included) within 1e-4, and the traffic model equals
# the bytes sent on every group of every rank. The ignore index ran: step
# 1's loss differs from the loss with every position's target counted
# (--no-mask-ignore), and the losses equal those of row weights 1 on the
# masked positions and 0 elsewhere with every target real (--mask-weights).
# Key padding (--pad: sequences of 18 to 32 tokens, the rest a PAD token
# with ignored targets, their keys masked): tp 2 + sp, dp 2 (with 2
# micro-batches: other lengths per micro-batch), Ulysses 2 and Ring 2 (a
# zigzag chunk wholly padded for some sequences) match one rank's padded
# run as above; the padded loss differs from the unpadded one, and another
# PAD token changes no loss or gradient norm (the padded keys are masked).
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/examples/encoder_mlm"
. "$top_srcdir/tests/encoder_compare.sh"
if runs 1; then
  ref=$(losses "$TMPD/out"); grads "$TMPD/out" > "$TMPD/ref.grads"; ref1=$ref; cp "$TMPD/ref.grads" "$TMPD/ref1.grads"
  check "1 rank: 3 losses and gradient norms ($ref), $(wc -l < "$TMPD/ref.grads") gradients, tte's among them" \
    [ "$(echo $ref | wc -w)" = 6 -a "$(wc -l < "$TMPD/ref.grads")" -gt 20 -a "$(grep -c '^tte ' "$TMPD/ref.grads")" = 1 ]
  padref= ; runs 1 --pad && { padref=$(losses "$TMPD/out"); grads "$TMPD/out" > "$TMPD/pad.grads"; }
  check "1 rank --pad: 3 losses and gradient norms ($padref)" [ "$(echo $padref | wc -w)" = 6 ]
  for layout in "2 --tp 2 --sp" "2 --dp 2" "2 --dp 2 --micro 2" "2 --ulysses 2" "2 --ring 2" "1 --micro 2" \
      "2 --tp 2 --sp --pad" "2 --dp 2 --pad" "2 --dp 2 --micro 2 --pad" "2 --ulysses 2 --pad" "2 --ring 2 --pad"; do
    want "$layout" || continue
    set -- $layout; np=$1; shift
    ref=$ref1; cp "$TMPD/ref1.grads" "$TMPD/ref.grads"
    case "$layout" in *--pad) ref=$padref; cp "$TMPD/pad.grads" "$TMPD/ref.grads" ;; esac
    runs "$np" "$@" || { check "np=$np $*: ran" false; continue; }
    got=$(losses "$TMPD/out"); grads "$TMPD/out" > "$TMPD/got.grads"
    check "np=$np $*: losses, gradient norms ($got) = 1 rank's within 1e-5, 1e-4" close_losses "$ref" "$got"
    check "np=$np $*: every gradient = 1 rank's within 1e-4 ($(close_grads "$TMPD/ref.grads" "$TMPD/got.grads"))" \
      close_grads "$TMPD/ref.grads" "$TMPD/got.grads"
    [ "$np" = 1 ] || check "np=$np $*: bytes sent = traffic model on every group of every rank" traffic_exact "$TMPD/out" "$np"
  done
  ref=$ref1
  if want "key padding" && [ -n "$padref" ] && runs 1 --pad 9; then
    l1=$(echo $ref | cut -d' ' -f1); p1=$(echo $padref | cut -d' ' -f1); got=$(losses "$TMPD/out")
    check "key padding ran: step 1 loss padded ($p1) differs from unpadded ($l1)" \
      awk -v a="$l1" -v b="$p1" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d > 1e-4 * a) }'
    check "key padding: another PAD token changes no loss or gradient norm ($got = $padref): its keys are masked" \
      [ "$got" = "$padref" ]
  fi
  if want "ignore index" && runs 1 --no-mask-ignore; then
    l1=$(echo $ref | cut -d' ' -f1); a1=$(losses "$TMPD/out" | cut -d' ' -f1)
    check "ignore index ran: step 1 loss over the masked positions ($l1) differs from every target counted ($a1)" \
      awk -v a="$l1" -v b="$a1" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d > 1e-4 * a) }'
  fi
  if want "ignore index" && runs 1 --mask-weights; then
    got=$(losses "$TMPD/out")
    check "ignore index = row weights 1 on the masked positions, 0 elsewhere, every target real: losses, norms ($got) within 1e-5, 1e-4" \
      close_losses "$ref" "$got"
  fi
else
  check "1 rank: ran" false
fi
want "help" && check "--help prints the usage and exits 0" sh -c "'$PROG' --help | grep -q 'usage: .*encoder_mlm'"
finish
