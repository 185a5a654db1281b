#!/bin/sh
# The cost of SMPI's blocking collectives to the simulation itself
# (docs/simulation.md, "512 ranks end"): a small MPI program -- 5
# all-gathers of one integer over MPI_COMM_WORLD, an MPI_Comm_split and a
# barrier, what a starweave program's start-up does -- run by SimGrid's
# smpirun on N simulated ranks (nodes of 8, nvlink-ib) under each
# collective selector, without detached sends (as bench/sim.sh runs), and
# the CPU time each run took (user + system).
# usage: bench/sim-colls.sh [--ranks N] [--selectors "default ompi mpich"]
set -eu
me=sim-colls
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/common.sh"
ranks=512 selectors="default ompi mpich"
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) need "$@"; ranks=$2; shift ;;
    --selectors) need "$@"; selectors=$2; shift ;;
    -h|--help) usage_from "$0"; exit 0 ;;
    *) die2 "unknown option '$1' (see --help)" ;;
  esac
  shift
done
posint --ranks "$ranks"
command -v smpicc > /dev/null && command -v smpirun > /dev/null || die2 "smpicc/smpirun not found (apt-get install libsimgrid-dev)"
[ -x /usr/bin/time ] || die2 "/usr/bin/time not found (apt-get install time)"
work=$(mktemp -d "${TMPDIR:-/tmp}/sw-colls.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat > "$work/colls.c" <<'C'
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int r, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long me = r, *all = malloc(sizeof(long) * (size_t)n);
    for (int i = 0; i < 5; i++) MPI_Allgather(&me, 1, MPI_LONG, all, 1, MPI_LONG, MPI_COMM_WORLD);
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, r % 8, r, &c);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&c);
    free(all);
    MPI_Finalize();
    return 0;
}
C
smpicc -O2 -o "$work/colls" "$work/colls.c" > "$work/cc.out" 2>&1 || { cat "$work/cc.out"; die2 "smpicc failed"; }
rpn=$((ranks < 8 ? ranks : 8))
[ $((ranks % rpn)) = 0 ] || die2 "--ranks must be a multiple of 8 above 8 (got $ranks)"
sh "$top/bench/sim-platform.sh" --nodes $((ranks / rpn)) --ranks-per-node "$rpn" --cpus 1 --preset nvlink-ib --out "$work/p" > /dev/null
echo "$me: $ranks simulated ranks, 5 all-gathers of one integer, a split and a barrier; no detached sends; CPU time of the simulation"
for sel in $selectors; do
  /usr/bin/time -f %U+%S -o "$work/t" smpirun -platform "$work/p.xml" -hostfile "$work/p.hosts" -np "$ranks" "$work/colls" \
    --cfg=smpi/coll-selector:"$sel" --cfg=smpi/send-is-detached-thresh:0 --log=root.thres:critical > "$work/out" 2>&1 ||
    { tail -n 5 "$work/out"; die2 "smpirun failed with selector $sel"; }
  echo "$me: selector $sel: $(awk -F+ '{ printf "%.1f", $1 + $2 }' "$work/t") s of CPU"
done
