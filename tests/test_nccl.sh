#!/bin/sh
# The NCCL collectives under mpirun with 2 ranks (tests/test_nccl.c). Skipped
# (exit 77) with the program's reason when the build has no CUDA, a rank has
# no CUDA worker, or the node has fewer GPUs than ranks.
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/tests/test_nccl"
SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-240} sh "$LAUNCH" 2 "$PROG" > "$TMPD/out" 2>&1
rc=$?
skip=$(grep -m 1 '^SKIP:' "$TMPD/out")
if [ -n "$skip" ]; then
  echo "$skip"
  exit 77
fi
[ "$rc" = 0 ] || cat "$TMPD/out"
check "np=2: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1) (exit $rc)" [ "$rc" = 0 ]
finish
