#!/bin/sh
# The heads of heads.h in a model of one's own: examples/encoder_regress.c,
# a BERT-style encoder (learned positions, pre-LayerNorm blocks,
# bidirectional attention) with a pooled head -- MSE on a per-sequence
# float target, or (--classes 3) cross-entropy over classes, mean or
# (--pool-first) first-token pooling; or (--per-token) a replicated linear
# and the per-row MSE (sw_row_mse) on a float target per token, the linear
# on this rank's l rows (its gradient summed over TP under sp) or
# (--per-token-gathered) on all T rows gathered over TP (not summed: the
# replicated linear takes its gradient's rule from its rows); or (--pad)
# padded sequences, key padding on and the mean over each sequence's
# valid positions -- trained 3 AdamW steps under tp 2 +
# sp, dp 2, dp 2 with 2 micro-batches, Ulysses 2 and Ring 2 (zigzag) (and
# on 4 ranks: the mean-pooled MSE under tp 2 + sp x Ulysses 2, the per-row
# MSE under Ulysses 2 x dp 2): the
# losses match one rank's within relative 1e-5, the global gradient norm
# before clipping and every parameter's reduced, clipped gradient (its sum
# of squares and of |g| over the ranks holding distinct parts) within 1e-4, and the traffic model equals the bytes sent on every
# group of every rank (the pooling's all-reduce and the loss's over dp).
# Padding: the padded mean-pooled loss differs from the unpadded one, and
# another PAD token id changes no loss and no gradient.
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/examples/encoder_regress"
. "$top_srcdir/tests/encoder_compare.sh"
for variant in "" "--classes 3" "--pool-first" "--classes 3 --pool-first" "--per-token" "--per-token-gathered" "--pad"; do
  want "$variant" || continue
  runs 1 $variant || { check "1 rank $variant: ran" false; continue; }
  ref=$(losses "$TMPD/out"); grads "$TMPD/out" > "$TMPD/ref.grads"
  check "1 rank $variant: 3 losses and gradient norms ($ref), $(wc -l < "$TMPD/ref.grads") gradients" \
    [ "$(echo $ref | wc -w)" = 6 -a "$(wc -l < "$TMPD/ref.grads")" -gt 20 ]
  case "$variant" in *pool-first*) layouts="2 --tp 2 --sp|2 --ring 2|2 --ulysses 2" ;;
    *gathered) layouts="2 --tp 2 --sp|4 --tp 2 --sp --ulysses 2" ;; # T rows differ from l rows under sp only
    *) layouts="2 --tp 2 --sp|2 --dp 2|2 --dp 2 --micro 2|2 --ulysses 2|2 --ring 2|1 --micro 2" ;; esac
  # 4 ranks: the pooled head under tp 2 + sp x Ulysses 2 (pooling over SW_GROUP_TP_SP), the per-row MSE under
  # Ulysses 2 x dp 2 (its loss summed over SW_GROUP_SP_DP)
  case "$variant" in "") layouts="$layouts|4 --tp 2 --sp --ulysses 2" ;; --per-token) layouts="$layouts|4 --ulysses 2 --dp 2" ;; esac
  IFS='|'; set -- $layouts; unset IFS
  for layout; do
    set -- $layout; np=$1; shift
    runs "$np" $variant "$@" || { check "np=$np $* $variant: ran" false; continue; }
    got=$(losses "$TMPD/out"); grads "$TMPD/out" > "$TMPD/got.grads"
    check "np=$np $* $variant: losses, gradient norms ($got) = 1 rank's within 1e-5, 1e-4" close_losses "$ref" "$got"
    check "np=$np $* $variant: every gradient = 1 rank's within 1e-4 ($(close_grads "$TMPD/ref.grads" "$TMPD/got.grads"))" \
      close_grads "$TMPD/ref.grads" "$TMPD/got.grads"
    [ "$np" = 1 ] || check "np=$np $* $variant: bytes sent = traffic model on every group of every rank" \
      traffic_exact "$TMPD/out" "$np"
  done
done
if want "padding"; then
  if runs 1 && unpadded=$(losses "$TMPD/out") && runs 1 --pad && padded=$(losses "$TMPD/out") \
      && grads "$TMPD/out" > "$TMPD/pad1.grads" && runs 1 --pad 7 && pad7=$(losses "$TMPD/out"); then
    grads "$TMPD/out" > "$TMPD/pad7.grads"
    check "padding: the padded loss ($padded) differs from the unpadded ($unpadded)" \
      sh -c "[ '$(echo $padded | cut -d' ' -f1)' != '$(echo $unpadded | cut -d' ' -f1)' ]"
    check "padding: PAD id 7 gives PAD id 1's losses ($pad7)" close_losses "$padded" "$pad7"
    check "padding: PAD id 7 gives PAD id 1's gradients ($(close_grads "$TMPD/pad1.grads" "$TMPD/pad7.grads"))" \
      close_grads "$TMPD/pad1.grads" "$TMPD/pad7.grads"
  else check "padding: ran" false; fi
fi
want "help" && check "--help prints the usage and exits 0" sh -c "'$PROG' --help | grep -q 'usage: .*encoder_regress'"
want "bad arguments" && refused 2 "--classes (1) must be at least 2" "encoder_regress --classes 1" "$PROG" --steps 1 --dp 2 --classes 1
finish
