#!/bin/sh
# The pipeline and ZeRO-3 under every StarPU scheduler (issue 43; make
# check-long, make check skips it): pp 2 with 4 micro-batches, pp 2 x 2
# interleaved chunks and dp 2 + ZeRO-3 (dropout on), 3 training steps under
# eager, lws, ws, dmda and random with 1 and 2 CPU workers per rank: the
# logged losses and every rank's checkpoint after step 3 byte for byte
# those of the run under StarPU's default scheduler, every run exiting 0
# within its timeout (no hang), StarPU's banner naming the scheduler and
# workers asked for. tests/test_sched.sh runs it (its own layouts: one
# rank, tp 2 + sp and dp 2 + ZeRO-1).
[ -n "${SW_CHECK_LONG:-}" ] || { echo "SKIP: a long test: make check-long runs it (.ci/run does)"; exit 77; }
# The matrix is tests/test_sched.sh's, with these layouts.
SW_SCHED_LAYOUTS="2 --pp 2 --layers 2 --grad-accum 4;2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 4;2 --dp 2 --zero 3 --layers 2" \
  exec sh "${top_srcdir:-.}/tests/test_sched.sh"
