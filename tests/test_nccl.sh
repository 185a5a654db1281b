#!/bin/sh
# The NCCL collectives under mpirun with 2 ranks (tests/test_nccl.c). Skipped
# (exit 77) with the program's reason when the build has no CUDA, a rank has
# no CUDA worker, or the node has fewer GPUs than ranks -- only when the
# program exited 77 and both ranks said SKIP: a rank that crashed or failed
# beside a skipping one is a failure.
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/tests/test_nccl"
SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-240} sh "$LAUNCH" 2 "$PROG" > "$TMPD/out" 2>&1
rc=$?
nskip=$(grep -c '^SKIP' "$TMPD/out")
if [ "$rc" = 77 ] && [ "$nskip" = 2 ]; then
  grep -m 1 '^SKIP:' "$TMPD/out"
  exit 77
fi
cat "$TMPD/out"
check "np=2: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1) (exit $rc, $nskip of 2 ranks skipped)" \
  eval '[ "$rc" = 0 ] && [ "$nskip" = 0 ]'
finish
