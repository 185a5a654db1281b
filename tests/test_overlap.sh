#!/bin/sh
# A GEMM chain and an independent all-reduce, 2 ranks (tests/test_overlap.c):
# submitted together they finish clearly faster than one after the other
# (skipped, with the times, on a node with fewer than 2 cores per rank).
. "${top_srcdir:-.}/tests/common.sh"
SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-240} sh "$top_srcdir/tests/mpi_launch.sh" 2 "$top_builddir/tests/test_overlap" > "$TMPD/out" 2>&1
rc=$?
cat "$TMPD/out"
if [ "$rc" = 77 ]; then
  grep -m 1 '^SKIP' "$TMPD/out"
  exit 77
fi
check "overlap np=2: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1) (exit $rc)" [ "$rc" = 0 ]
finish
