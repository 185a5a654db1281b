#!/bin/sh
# Collective bandwidth (SPEC "collectives (CPU backend)"): starweave's
# task-graph collectives (StarPU-MPI detached requests + reduction tasks)
# against one task calling MPI_Allreduce and against plain MPI collectives
# from the main thread, same data, same run, 2 ranks by default.
# Goal: all-reduce of 64 MiB on 2 ranks >= 0.8x MPI_Allreduce's bandwidth.
# usage: bench/collectives.sh [ranks] [iters] [collectives flags...]
#   (run from the build directory or set BUILD; e.g. --algo ring|direct, --small-kib X)
# Launched through tests/mpi_launch.sh: oversubscribed, one unbound StarPU
# CPU worker per rank.
set -eu
np=${1:-2}
iters=${2:-5}
[ $# -ge 2 ] && shift 2 || shift $#
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
SIZES=${SIZES:-0.0009765625,0.0625,0.25,1,16,64}   # 1 KiB .. 64 MiB
[ -x "$BUILD/examples/collectives" ] || { echo "collectives: run from the build directory (or set BUILD)" >&2; exit 2; }
export STARPU_SILENT=1
echo "== machine: $(nproc) cores shared by $np ranks, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "== $here/../tests/mpi_launch.sh $np $BUILD/examples/collectives --sizes $SIZES --iters $iters $*"
out=$(mktemp)
sh "$here/../tests/mpi_launch.sh" "$np" "$BUILD/examples/collectives" --sizes "$SIZES" --iters "$iters" "$@" | tee "$out"
echo "== all-reduce of the largest size: starweave / MPI_Allreduce bus bandwidth (goal >= 0.8 on 2 ranks)"
awk '$1 == "allreduce" && $2 == "starweave" { b = $4; r = $7 } END { if (b != "") printf "allreduce %s bytes: ratio %s -> %s\n", b, r, (r >= 0.8 ? "met" : "not met") }' "$out"
rm -f "$out"
