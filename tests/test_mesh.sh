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
# a rank of 2 workers bound to one core (mpirun's default where the ranks
# are no more than the cores, one rank included): sw_init says they share
# it; tests/mpi_launch.sh runs such ranks unbound, and nothing is said
if [ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ]; then
  STARPU_NCPU=2 timeout 120 ${MPIRUN:-mpirun} -np 1 -x STARPU_NCPU "$PROG" > "$TMPD/bound" 2>&1 < /dev/null
  rc1=$?
  STARPU_NCPU=2 sh "$LAUNCH" 1 "$PROG" > "$TMPD/unbound" 2>&1
  rc2=$?
  n1=$(grep -c "2 CPU worker(s) share 1 core(s)" "$TMPD/bound") n2=$(grep -c "CPU worker(s) share" "$TMPD/unbound")
  check "2 workers on 1 rank: bound by mpirun, said $n1 time(s) (exit $rc1); by mpi_launch.sh, said $n2 time(s) (exit $rc2)" \
    eval '[ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [ "$n1" = 1 ] && [ "$n2" = 0 ]'
fi
expect_bad() { # expect_bad NP DIMS "message"
  refused "$1" "$3" "--dims $2" "$PROG" --dims "$2"
}
expect_bad 3 tp=2,dp=2 "world size (3) must equal tp*ulysses*ring*dp*pp (2*1*1*2*1 = 4)"
expect_bad 2 tp=0,dp=2 "tp must be at least 1 (tp = 0)"
expect_bad 2 ring=2,pp=2 "world size (2) must equal tp*ulysses*ring*dp*pp (1*1*2*1*2 = 4)"
finish
