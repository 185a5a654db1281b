#!/bin/sh
# Collectives as graph nodes under mpirun with 2, 3 and 4 ranks (tests/test_comm.c:
# every collective against the plain MPI collective, then a stress test),
# an all-to-all on a dim the group size does not divide (clear message,
# non-zero exit, no hang), and the stress test alone under every StarPU
# scheduler at 3 and 4 ranks, and with the MPI-run collectives' ends
# deferred: it must finish, correct, within the launcher's timeout (no deadlock).
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/tests/test_comm"
for np in 2 3 4; do
  want "collectives np=$np" || continue
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-240} sh "$LAUNCH" "$np" "$PROG" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  check "np=$np: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1) (exit $rc)" [ "$rc" = 0 ]
done
# an all-to-all whose split dim the group size does not divide: every rank stops, with a message
SW_TEST_TIMEOUT=60 sh "$LAUNCH" 3 "$PROG" --bad-alltoall > "$TMPD/out" 2>&1
rc=$?
msg=$(grep -m 1 'not divisible by the group size' "$TMPD/out")
ok=0
[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ -n "$msg" ] && ok=1
[ "$ok" = 1 ] || cat "$TMPD/out"
check "bad all-to-all np=3: exit $rc, ${msg:-no message}" [ "$ok" = 1 ]
for sched in eager lws ws dmda random; do
  for np in 3 4; do
    want "stress np=$np sched=$sched" || continue
    STARPU_SCHED=$sched SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-120} sh "$LAUNCH" "$np" "$PROG" --stress > "$TMPD/out" 2>&1
    rc=$?
    [ "$rc" = 0 ] || cat "$TMPD/out"
    check "stress np=$np sched=$sched: $(grep -E '^PASS stress' "$TMPD/out" | sed 's/.*in \([0-9]* ms\).*/\1/') (exit $rc)" [ "$rc" = 0 ]
  done
done
# the collectives MPI runs with no wait in their task (SW_COMM_SPIN_US=0):
# every one not complete at once ends later, seen by an idle worker or the
# backstop thread, while the graph goes on
for sched in lws dmda; do
  want "deferred sched=$sched" || continue
  SW_COMM_SPIN_US=0 STARPU_SCHED=$sched SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-120} sh "$LAUNCH" 4 "$PROG" --stress > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  d=$(counter_min "$TMPD/out" mpi_deferred)
  check "stress np=4 sched=$sched, ends deferred (SW_COMM_SPIN_US=0; fewest deferred on a rank: ${d:-none}): $(grep -E '^PASS stress' "$TMPD/out" | sed 's/.*in \([0-9]* ms\).*/\1/') (exit $rc)" \
    [ "$rc" = 0 -a "${d:-0}" -gt 0 ]
done
finish
