#!/bin/sh
# Context parallelism: gpt_train on 4 ranks at a long sequence in every
# split of ulysses x ring = 4 (4 x 1, 2 x 2, 1 x 4 with zigzag, 1 x 4
# without), one rank as the baseline. Per split: step time, the attention
# tasks' time on rank 0 (StarPU profiling: attn_fwd + attn_bwd per step),
# the bytes rank 0 sent on its Ulysses and ring groups with the library's
# traffic model (sw_gpt_traffic), and the attention FLOPs of every rank.
# reference.md's per-layer volumes for comparison, per rank, in elements:
# Ulysses 8 (U-1)/U * b s h / N (4 all-to-alls forward, 4 backward), ring
# (R-1) K/V blocks forward, R-1 backward and R gradient blocks of 2 b s h / N.
# usage: bench/cp.sh [steps] [seq]   (run from the build directory or set BUILD)
set -eu
steps=${1:-5}
seq=${2:-1024}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
[ -x "$BUILD/examples/gpt_train" ] || { echo "cp: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
log=$(mktemp)
trap 'rm -f "$log" "$log.out"' EXIT
model="--layers 2 --hidden 256 --heads 8 --seq $seq --max-pos $seq --batch 1"
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "== model: $model, $steps steps (the first is not timed)"
run() { # run NAME NP ARGS...
  name=$1; np=$2; shift 2
  if [ "$np" = 1 ]; then
    "$BUILD/examples/gpt_train" --steps "$steps" --log "$log" --quiet --profile $model "$@" > "$log.out" 2>&1
  else
    sh "$here/../tests/mpi_launch.sh" "$np" "$BUILD/examples/gpt_train" --steps "$steps" --log "$log" --quiet \
      --profile $model "$@" > "$log.out" 2>&1
  fi
  ms=$(sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$log.out")
  attn=$(awk -v n="$((steps - 1))" '/^profile: attn_(fwd|bwd) /{t += $4} END {printf "%.1f", t / n}' "$log.out")
  printf '%-22s ms/step %8s   rank 0 attention tasks %7s ms/step\n' "$name" "${ms:-FAILED}" "$attn"
  [ -n "$ms" ] || { cat "$log.out"; return; }
  sed -n 's/^communication: /    /p; s/^attention: /    attention FLOPs: /p' "$log.out"
}
run "one rank" 1 --ncpus 1
run "ulysses 4" 4 --ulysses 4
run "ulysses 2 x ring 2" 4 --ulysses 2 --ring 2
run "ring 4 (zigzag)" 4 --ring 4
run "ring 4 (no zigzag)" 4 --ring 4 --no-zigzag
h=256 N=4
awk -v s="$seq" -v h="$h" -v N="$N" 'BEGIN {
  e = s * h / N * 4 * 2;   # b s h / N fp32 elements in bytes, 2 layers
  printf "reference.md, per rank and step (2 layers, fp32): ulysses 4: 8*(3/4) b s h/N = %.3f MiB;", 6 * e / 1048576
  printf " ulysses 2 x ring 2: %.3f MiB + ring %.3f MiB; ring 4: %.3f MiB\n", 8 * 0.5 * e / 1048576, (1 + 1 + 2) * 2 * e / 1048576 / 1, (3 + 3 + 4) * 2 * e / 1048576
}'
