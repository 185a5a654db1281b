#!/bin/sh
# The pictures in docs/: the main job (mpirun -np 2 gpt_train --tp 2 --sp,
# 60 steps) traced, its step 2 as a Gantt chart (a track per worker and per
# communication lane of each rank, colored by phase) and its loss curve.
# usage: bench/pictures.sh [outdir]   (run from the build directory or set BUILD; default outdir: ../docs)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
out=${1:-$here/../docs}
[ -x "$BUILD/examples/gpt_train" ] || { echo "pictures: run from the build directory (or set BUILD)" >&2; exit 2; }
command -v gnuplot > /dev/null || { echo "pictures: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 2; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
STARPU_SILENT=1 sh "$here/../tests/mpi_launch.sh" 2 "$BUILD/examples/gpt_train" --tp 2 --sp --steps 60 --quiet \
  --log "$tmp/gpt_train.csv" --trace "$tmp/trace.json" | grep -E '^(gpt_train|overlap: +[0-9]+ +(all|2) )'
/usr/bin/python3 "$here/plot_trace.py" "$tmp/trace.json" --step 2 --gantt "$out/gantt-tp2-sp.png" \
  --loss "$tmp/gpt_train.csv" --loss-out "$out/loss.png"
