#!/bin/sh
# No silent wrong slicing (examples/custom_model.c, a model from the
# public headers): (1) its QKV linear registered as a plain column linear
# (an even split of the rows, not sw_attention_qkv_add: the shapes fit,
# this rank's q, k and v heads are not its rows) once trained to wrong
# losses under tp 2 + sp with exit 0; now sw_attention_forward refuses it on
# every rank (exit 2, both slices named) before the first step. (2) The
# loss a model reads under pp 2: its own loss tensor (sw_lm_head_loss, the
# head made on both stages), read on every rank, equals one rank's losses
# over 6 steps within 1e-5 (it read 0 on the first stage before the driver
# received the step's loss into it). The replicated linear's rows rule is
# tested by test_encoder.sh (--per-token, --per-token-gathered, the pooled
# head) and test_misuse.sh (replicated-rows, ctx-*).
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/examples/custom_model"
close() { # close "a1 a2 ..." "b1 b2 ...": 6 each, every pair within relative 1e-5
  echo "$1|$2" | awk -F'|' '{ n = split($1, a, " "); m = split($2, b, " "); if (n != 6 || m != 6) exit 1;
    for (i = 1; i <= n; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > 1e-5 * (a[i] < 0 ? -a[i] : a[i])) exit 1 } }'
}
if want "qkv-plain"; then
  refused 2 "sw_attention_forward: the QKV linear h0.qkv_w must be registered with the attention's slice and tiles (sw_attention_qkv_add): this TP rank's q, k and v heads are rows [0, 32) [64, 96) [128, 160) of its [192, 64] weight, h0.qkv_w holds rows [0, 96)" \
    "custom_model --tp 2 --sp --qkv-plain" "$PROG" --steps 6 --tp 2 --sp --qkv-plain
fi
if want "loss every rank"; then
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-180} sh "$LAUNCH" 1 "$PROG" --steps 6 > "$TMPD/ref" 2>&1 || cat "$TMPD/ref" >&2
  ref=$(awk '$1 == "step" { printf "%s ", $4 }' "$TMPD/ref")
  check "loss every rank: 1 rank, 6 losses ($ref)" [ "$(echo $ref | wc -w)" = 6 ]
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-180} sh "$LAUNCH" 2 "$PROG" --steps 6 --pp 2 --micro 2 --loss-every-rank > "$TMPD/out" 2>&1 \
    || cat "$TMPD/out" >&2
  for r in 0 1; do
    got=$(awk -v r=$r '$1 == "rank" && $2 == r && $3 == "step" { printf "%s ", $7 }' "$TMPD/out")
    check "loss every rank: --pp 2 --micro 2, rank $r's model loss tensor ($got) = 1 rank's losses within 1e-5" \
      close "$ref" "$got"
  done
fi
finish
