#!/bin/sh
# The process mesh under mpirun with 1 to 4 ranks (every factorisation of
# the world size), and a bad mesh: exit 2 on every rank, message once, no hang.
# Ranks started together on a STARPU_HOME StarPU never ran in: one of them
# measures the buses (StarPU says so), the others wait for its files
# (sw_init; measuring all at once, one rank read a file another was writing
# and StarPU aborted).
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/tests/test_mesh"
for np in 1 2 3 4; do
  sh "$LAUNCH" "$np" "$PROG" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  check "np=$np: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1) (exit $rc)" [ "$rc" = 0 ]
done
home="$TMPD/fresh-home"
STARPU_HOME=$home; export STARPU_HOME; unset STARPU_SILENT
sh "$LAUNCH" 4 "$PROG" > "$TMPD/out" 2>&1
rc=$?
n=$(grep -c 'No performance model for the bus, calibrating' "$TMPD/out")
ok=false
[ "$rc" = 0 ] && [ "$n" = 1 ] && ok=true
$ok || cat "$TMPD/out"
check "np=4 on a fresh STARPU_HOME: the buses measured by $n rank(s) (expected 1), exit $rc" $ok
expect_bad() { # expect_bad NP DIMS "message"
  refused "$1" "$3" "--dims $2" "$PROG" --dims "$2"
}
expect_bad 3 tp=2,dp=2 "world size (3) must equal tp*ulysses*ring*dp*pp (2*1*1*2*1 = 4)"
expect_bad 2 tp=0,dp=2 "tp must be at least 1 (tp = 0)"
expect_bad 2 ring=2,pp=2 "world size (2) must equal tp*ulysses*ring*dp*pp (1*1*2*1*2 = 4)"
finish
