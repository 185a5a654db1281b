#!/bin/sh
# The longer half of tests/test_pp.sh (make check-long; make check skips
# it): more pipeline layouts against the single-rank model (tests/test_tp:
# losses of 3 steps 1e-5, every gradient of the last 1e-4) -- GPipe's
# quota, pp 4 with 1 and 8 micro-batches, pp x Ring, pp x Ulysses, bf16,
# interleaved chunks with 8 micro-batches, GPipe's quota, pp 4, dp +
# ZeRO-1, full recomputation, LLaMA, Zero Bubble -- then the combinations
# of issue 43 (below). Moved from test_pp.sh to keep make check under its
# budget; nothing dropped.
. "${top_srcdir:-.}/tests/common.sh"
[ -n "${SW_CHECK_LONG:-}" ] || { echo "SKIP: a long test: make check-long runs it (.ci/run does)"; exit 77; }
run 2 --pp 2 --grad-accum 8 --batch 8 --pp-inflight 8     # GPipe: every micro-batch in flight
run 4 --pp 4 --layers 4 --grad-accum 8 --batch 8 --dropout 0.1
run 4 --pp 4 --layers 4
run 4 --pp 2 --ring 2 --grad-accum 2 --batch 8 --dropout 0.1   # pp 2 x Ring 2 (zigzag)
run 4 --pp 2 --ulysses 2 --grad-accum 2 --model llama         # pp 2 x Ulysses 2
run 2 --pp 2 --dtype bf16 --grad-accum 2                      # bf16 GEMMs (each step from the reference's parameters)
run 2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 8 --batch 8
run 2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 2 --pp-inflight 2          # GPipe's quota
run 4 --pp 4 --pp-virtual 2 --layers 8 --grad-accum 4
run 4 --pp 2 --pp-virtual 2 --layers 4 --dp 2 --zero 1 --grad-accum 2 --batch 8 # x dp 2 + ZeRO-1
run 2 --pp 2 --pp-virtual 2 --layers 8 --grad-accum 4 --recompute full --recompute-every 2
run 2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 4 --model llama --clip-grad 0.01
run 2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 4 --zero-bubble
# issue 43's combinations against one rank: pp that is not a power of two (3 stages),
# ZeRO-2 with stages, ZeRO-3 with interleaved chunks, ZeRO-3 without prefetch, quotas between 1F1B's and GPipe's
run 3 --pp 3 --layers 3 --grad-accum 4 --dropout 0.1
run 4 --pp 2 --dp 2 --zero 2 --grad-accum 2 --batch 8
run 4 --pp 2 --pp-virtual 2 --layers 4 --dp 2 --zero 3 --grad-accum 2 --batch 8
run 4 --pp 2 --dp 2 --zero 3 --zero-prefetch 0 --grad-accum 2 --batch 8
run 2 --pp 2 --grad-accum 4 --pp-inflight 2
run 3 --pp 3 --layers 3 --grad-accum 6 --batch 6 --pp-inflight 2
finish
