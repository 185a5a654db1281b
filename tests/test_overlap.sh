#!/bin/sh
# A GEMM chain and an independent all-reduce, 2 ranks (tests/test_overlap.c).
# Asserted on every machine: one round with both submitted together, traced,
# shows them interleaved on every rank (the all-reduce's first request posted
# before the chain's last GEMM starts, the chain's first GEMM started before
# the all-reduce's last task ends: the graph did not serialise them); and the
# all-reduce's result equals MPI_Allreduce's. Asserted where there are 2
# cores per rank: together they finish clearly faster than one after the
# other; elsewhere (this 2-core VM, CI) the times are printed on a
# "NOT ASSERTED (timing)" line with the reason, and the test still passes or
# fails on the rest.
. "${top_srcdir:-.}/tests/common.sh"
SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-240} sh "$top_srcdir/tests/mpi_launch.sh" 2 "$top_builddir/tests/test_overlap" \
  --trace "$TMPD/overlap.json" > "$TMPD/out" 2>&1
rc=$?
cat "$TMPD/out"
if [ "$rc" = 77 ]; then # StarPU could not start, or fewer than 2 ranks
  grep -m 1 '^SKIP' "$TMPD/out"
  exit 77
fi
check "overlap np=2: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1) (exit $rc)" [ "$rc" = 0 ]
finish
