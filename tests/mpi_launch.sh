#!/bin/sh
# Launch an MPI test: tests/mpi_launch.sh NP PROGRAM ARGS...
# Oversubscribed (ranks may outnumber cores), one unbound StarPU CPU worker
# per rank (Debian's StarPU workers spin when idle and, bound, would pile up
# on the same cores), killed after $SW_TEST_TIMEOUT seconds (default 300).
# Note: with np <= cores, mpirun itself binds each rank to one core (its
# default --bind-to core), so a rank's worker, StarPU-MPI thread and main
# thread share that core; the NOBIND settings only stop StarPU from binding
# again. Measured on the 2-core VM (2026-11-22): --bind-to none, or
# a rank's MPI thread on the other core, made collectives slower, and
# OMPI_MCA_mpi_yield_when_idle=1 made every small collective (plain MPI too)
# take 4-16 ms; keep the defaults.
# Exit status: the program's (mpirun passes on the first non-zero one), 124
# on timeout.
if [ $# -lt 2 ]; then
  echo "usage: $0 NP PROGRAM [ARGS...]" >&2
  exit 99
fi
np=$1; shift
limit=${SW_TEST_TIMEOUT:-300}
STARPU_NCPU=${STARPU_NCPU:-1}
STARPU_WORKERS_NOBIND=${STARPU_WORKERS_NOBIND:-1}
STARPU_MPI_NOBIND=${STARPU_MPI_NOBIND:-1}
export STARPU_NCPU STARPU_WORKERS_NOBIND STARPU_MPI_NOBIND
# A rank that exits non-zero (every refusal: exit 2) makes Open MPI's
# mpirun wait before it returns (odls_base_sigkill_timeout, spent twice);
# on one rank there is no other rank to wait for, and 0 returns at once
# with the same exit status. With more ranks it would kill the others at
# once: rank 0, which prints the rule, before it printed it -- so there the
# default stays.
if [ "$np" = 1 ]; then
  OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-0}
  export OMPI_MCA_odls_base_sigkill_timeout
fi
if [ "$(id -u)" = 0 ]; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
# A rank of several workers (STARPU_NCPU > 1) runs unbound: bound to one
# core, its workers shared it (sw_init says so).
bind=
[ "$STARPU_NCPU" -le 1 ] 2>/dev/null || bind="--bind-to none"
# stdin from /dev/null: mpirun forwards stdin, and timeout runs it in a
# process group of its own, where reading a terminal would stop it.
# shellcheck disable=SC2086
timeout -k 10 "$limit" ${MPIRUN:-mpirun} --oversubscribe $bind -np "$np" \
  -x STARPU_NCPU -x STARPU_WORKERS_NOBIND -x STARPU_MPI_NOBIND "$@" < /dev/null
rc=$?
case $rc in
  124|137) echo "mpi_launch: $* on $np rank(s) timed out after ${limit} s" >&2; rc=124 ;;
esac
exit $rc
