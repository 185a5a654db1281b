#!/bin/sh
# The design's test: examples/custom_model.c, a model written from the
# public headers alone (a parallel-block transformer, RMSNorm, untied head,
# no biases, dropout), gets every strategy without a line changed. Its
# losses over 6 AdamW steps in each layout match one rank's within relative
# 1e-5 (SPEC's bound for losses); causal and, with --bidirectional, not.
# The traffic model it sums from its layers equals the bytes its sends
# carried, exactly, on every group of every rank; the counters show that
# each layout ran its own collectives (sp gathers, Ulysses all-to-alls,
# Ring shifts), and bidirectional losses differ from causal ones.
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
              "4 --ulysses 2 --ring 2" "1 --recompute-full" "2 --tp 2 --sp --recompute-full" "2 --dp 2 --zero 3"; do
  set -- $layout; np=$1; shift
  got=$(losses "$np" "$@")
  check "np=$np $*: losses ($got) = 1 rank's within 1e-5" close "$ref" "$got"
  cp "$TMPD/out" "$TMPD/out.$np$(echo "$*" | tr -d ' -')"
  [ "$np" = 1 ] && continue
  # the bytes its sends carried on each group of each rank (counted where
  # they leave) = the traffic model summed from its layers, to the byte
  check "np=$np $*: bytes sent = traffic model on every group of every rank" traffic_exact "$TMPD/out" "$np"
done
# the layouts ran what they name: sequence parallelism gathers and
# reduce-scatters over TP where plain TP all-reduces; Ulysses runs
# all-to-alls, Ring shifts K/V, ZeRO-1 reduce-scatters the gradients
o=$TMPD/out.
check "tp 2: no all-gather, no reduce-scatter on any rank" \
  [ "$(counter_max ${o}2tp2 allgather)" = 0 -a "$(counter_max ${o}2tp2 reduce_scatter)" = 0 ]
check "tp 2 + sp: all-gathers ($(counter_min ${o}2tp2sp allgather)) and reduce-scatters on every rank" \
  [ "$(counter_min ${o}2tp2sp allgather)" -gt 0 -a "$(counter_min ${o}2tp2sp reduce_scatter)" -gt 0 ]
check "ulysses 2: all-to-alls on every rank ($(counter_min ${o}2ulysses2 alltoall)), no ring shift" \
  [ "$(counter_min ${o}2ulysses2 alltoall)" -gt 0 -a "$(counter_max ${o}2ulysses2 ring_shift)" = 0 ]
check "ring 2: ring shifts on every rank ($(counter_min ${o}2ring2 ring_shift)), no all-to-all" \
  [ "$(counter_min ${o}2ring2 ring_shift)" -gt 0 -a "$(counter_max ${o}2ring2 alltoall)" = 0 ]
check "dp 2 + ZeRO-1: reduce-scatters on every rank ($(counter_min ${o}2dp2zero1 reduce_scatter))" \
  [ "$(counter_min ${o}2dp2zero1 reduce_scatter)" -gt 0 ]
# non-causal attention (--bidirectional, as a video DiT's): Ring attention then computes every tile
causal=$ref
ref=$(losses 1 --bidirectional)
check "1 rank, bidirectional: 6 losses ($ref)" [ "$(echo $ref | wc -w)" = 6 ]
# from step 1 on the loss must differ from causal attention's (every token sees the future)
differ() { ! close "$1" "$2"; }
check "1 rank, bidirectional: losses differ from causal ($causal)" differ "$ref" "$causal"
for layout in "2 --ring 2" "4 --ulysses 2 --ring 2" "2 --tp 2 --sp"; do
  set -- $layout; np=$1; shift
  got=$(losses "$np" --bidirectional "$@")
  check "np=$np $* --bidirectional: losses ($got) = 1 rank's within 1e-5" close "$ref" "$got"
done
finish
