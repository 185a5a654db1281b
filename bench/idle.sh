#!/bin/sh
# Idle workers spinning (StarPU's default, SW_IDLE_SLEEP_US=0) against
# sleeping 100 us between looks for work while the rank has StarPU-MPI
# point-to-point requests outstanding (starweave's default when ranks share
# a node): gpt_train's step time on 2 ranks, the two settings interleaved
# `rounds` times. Layout: the flags after steps (default --tp 2 --sp, whose
# collectives MPI runs; --ring 2 shifts point-to-point).
# usage: bench/idle.sh [rounds] [steps] [gpt_train flags]   (run from the build directory or set BUILD)
set -eu
rounds=${1:-3}
steps=${2:-20}
[ $# -ge 2 ] && shift 2 || shift $#
[ $# -gt 0 ] || set -- --tp 2 --sp
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
[ -x "$BUILD/examples/gpt_train" ] || { echo "idle: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== machine: $(nproc) cores; mpirun -np 2 gpt_train $* --steps $steps"
for i in $(seq "$rounds"); do
  for us in 0 100; do
    SW_IDLE_SLEEP_US=$us sh "$here/../tests/mpi_launch.sh" 2 "$BUILD/examples/gpt_train" "$@" --steps "$steps" \
      --quiet --log "$tmp/log.csv" > "$tmp/out" 2>&1 || cat "$tmp/out"
    printf 'round %d  idle sleep %3d us  %s ms/step\n' "$i" "$us" "$(sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$tmp/out")"
  done
done
