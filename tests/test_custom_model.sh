#!/bin/sh
# The design's test: examples/custom_model.c, a model written from the
# public headers alone (a parallel-block transformer, RMSNorm, untied head,
# no biases, dropout), gets every strategy without a line changed. Its
# losses over 6 AdamW steps in each layout match one rank's within relative
# 1e-5 (SPEC's bound for losses); causal and, with --bidirectional, not.
# The traffic model it sums from its layers equals what its collectives sent.
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/examples/custom_model"
losses() { # losses NP ARGS... -> "l1 l2 ..." (empty on failure)
  np=$1; shift
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-180} sh "$LAUNCH" "$np" "$PROG" --steps 6 "$@" > "$TMPD/out" 2>&1 \
    || { cat "$TMPD/out" >&2; return; }
  awk '$1 == "step" { printf "%s ", $4 }' "$TMPD/out"
}
close() { # close "a1 a2 ..." "b1 b2 ...": same count (6), every pair within relative 1e-5
  echo "$1|$2" | awk -F'|' '{ n = split($1, a, " "); m = split($2, b, " "); if (n != 6 || m != 6) exit 1;
    for (i = 1; i <= n; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > 1e-5 * (a[i] < 0 ? -a[i] : a[i])) exit 1 } }'
}
ref=$(losses 1)
check "1 rank: 6 losses ($ref)" [ "$(echo $ref | wc -w)" = 6 ]
for layout in "2 --tp 2" "2 --tp 2 --sp" "4 --tp 2 --sp --dp 2" "2 --dp 2 --zero 1" "2 --ulysses 2" "2 --ring 2" \
              "4 --ulysses 2 --ring 2" "1 --recompute-full" "2 --tp 2 --sp --recompute-full"; do
  set -- $layout; np=$1; shift
  got=$(losses "$np" "$@")
  check "np=$np $*: losses ($got) = 1 rank's within 1e-5" close "$ref" "$got"
  [ "$np" = 1 ] && continue
  # the bytes its collectives sent per step on each group = the traffic model summed from its layers
  t=$(sed -n 's/^traffic: \([a-z_]*\) group: sent \([0-9]*\) bytes per step, model \([0-9]*\)$/\1 \2 \3/p' "$TMPD/out")
  check "np=$np $*: bytes sent = traffic model on every group ($(echo $t))" \
    sh -c '[ -n "$1" ] && echo "$1" | awk "\$2 != \$3 { exit 1 }"' - "$t"
done
# non-causal attention (--bidirectional, as a video DiT's): Ring attention then computes every tile
ref=$(losses 1 --bidirectional)
check "1 rank, bidirectional: 6 losses ($ref)" [ "$(echo $ref | wc -w)" = 6 ]
for layout in "2 --ring 2" "4 --ulysses 2 --ring 2" "2 --tp 2 --sp"; do
  set -- $layout; np=$1; shift
  got=$(losses "$np" --bidirectional "$@")
  check "np=$np $* --bidirectional: losses ($got) = 1 rank's within 1e-5" close "$ref" "$got"
done
finish
