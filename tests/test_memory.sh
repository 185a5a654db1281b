#!/bin/sh
# Saved activations measured by StarPU's allocator against the memory model
# (tests/test_memory.c), every recompute mode, one rank and tp 2 + sp: equal
# to the byte; with pipeline stages, what holding 1F1B's and GPipe's
# micro-batches in flight adds, per stage, to the byte (and ZB-H1's, whose
# stages keep a micro-batch's sets until its weight gradients, with the
# output gradients those read); with offload (and
# full recomputation with offload), the whole model's bytes.
. "${top_srcdir:-.}/tests/common.sh"
mem() { # mem NP ARGS...
  np=$1; shift
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$top_builddir/tests/test_memory" "$@" > "$TMPD/out" 2>&1
  rc=$?
  cat "$TMPD/out"
  check "np=$np $*: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1) (exit $rc)" [ "$rc" = 0 ]
}
for np in 1 2; do
  sp=""
  [ "$np" = 2 ] && sp="--sp"
  for mode in none selective full; do mem "$np" $sp --recompute "$mode"; done
  mem "$np" $sp --recompute full --recompute-every 2
done
# offload: the working sets in main RAM (selective: two saved sets; full: two kept inputs' tensors)
mem 1 --offload --recompute selective
mem 1 --offload --recompute full --recompute-every 2
mem 2 --offload --sp --recompute full
# pipeline stages: the in-flight quota's saved activations (1F1B, GPipe)
mem 2 --pp 2
mem 4 --pp 2 --sp
mem 4 --pp 4
mem 2 --pp 2 --pp-virtual 2   # interleaved: chunk c's micro slots from the schedule
mem 4 --pp 2 --pp-virtual 2 --sp
# Zero Bubble's split: the kept output gradients in the block's bytes (model and formula), ZB-H1's slots per stage
mem 1 --zero-bubble
mem 2 --pp 2 --zero-bubble
# ZeRO-2/3 over dp: the parameter state StarPU allocates = the registry's model (shards, pool)
mem 2 --zero 2
mem 2 --zero 3
mem 4 --zero 3
# the LM head's ignore index: its row weights and count in the whole model
mem 2 --zero 3 --ignore-index -100
# ZeRO-3 with bf16: the GEMM weights' packed bf16 rows, and the pool's bf16 part
mem 2 --zero 3 --bf16
finish
