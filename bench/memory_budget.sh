#!/bin/sh
# The longest sequence a W124-class model (GPT-2 124M: 12 layers, hidden
# 768, 12 heads, vocab 50257, batch 1, max-pos = seq) fits in one fixed
# main-RAM budget per rank, on 4 ranks, under tensor parallelism with
# sequence parallelism, under Ulysses / Ring alone, and under Ulysses / Ring
# with ZeRO-3 (its group: ulysses x ring; also with a pool of one buffer,
# --zero-prefetch 0) -- the seed's claim that sequence parallelism matches
# TP-sp's memory only with ZeRO-3.
#   By the memory model: the largest seq (a multiple of --step) whose
#   gpt_train --memory-plan fits every rank (the whole model's need,
#   docs/memory.md), found by doubling then bisection.
#   Confirmed at the edge: a training step at that seq (--memory-report:
#   the need and StarPU's peak per rank; the peak adds the layers' scratch)
#   and gpt_train at seq + step refused before any allocation (exit 2).
# usage: bench/memory_budget.sh [--budget-mb N] [--step S] [--no-runs] [--help]
#   (run from the build directory or set BUILD; the edge runs train at
#   several thousand tokens on 4 ranks: minutes on 2 cores)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
budget=2048
step=256
runs=1
while [ $# -gt 0 ]; do
  case $1 in
    --budget-mb) budget=$2; shift 2 ;;
    --step) step=$2; shift 2 ;;
    --no-runs) runs=0; shift ;;
    --help|-h) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "memory_budget.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$BUILD/examples/gpt_train" ] || { echo "memory_budget.sh: build gpt_train first (make), or set BUILD" >&2; exit 2; }
. "$here/common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shape="--layers 12 --hidden 768 --heads 12 --vocab 50257 --batch 1"
gpt() { # gpt SEQ ARGS...: gpt_train on 4 ranks under the budget, output in $tmp/out
  seq=$1; shift
  SW_TEST_TIMEOUT=1800 sh "$here/../tests/mpi_launch.sh" 4 "$BUILD/examples/gpt_train" $shape --seq "$seq" \
    --max-pos "$seq" --memory-budget-mb "$budget" --log "$tmp/log.csv" "$@" > "$tmp/out" 2>&1
}
fits() { gpt "$1" $layout --memory-plan; } # exit 0: every rank's need within the budget
most() { # the largest of the ranks' figures: most "sed expression"
  sed -n "$1" "$tmp/out" | sort -g | tail -n 1
}
echo "memory_budget.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores; budget $budget MiB per rank, 4 ranks"
printf '%-40s %6s %9s %9s %14s\n' layout "seq" "need MiB" "peak MiB" "seq + $step"
for layout in "--tp 4 --sp" "--ulysses 4" "--ulysses 2 --ring 2" "--ulysses 4 --zero 3" "--ulysses 2 --ring 2 --zero 3" \
    "--ulysses 4 --zero 3 --zero-prefetch 0"; do
  # doubling, then bisection between the last seq that fits (lo) and the first that does not (hi)
  lo=0 hi=$step
  while fits "$hi"; do lo=$hi hi=$((hi * 2)); done
  if ! grep -q "the model needs at least" "$tmp/out"; then cat "$tmp/out"; exit 1; fi
  while [ $((hi - lo)) -gt "$step" ]; do
    mid=$(((lo + hi) / 2 / step * step))
    if fits "$mid"; then lo=$mid; else hi=$mid; fi
  done
  if [ "$lo" = 0 ]; then
    printf '%-40s %6s %9s %9s %14s\n' "$layout" "none" "-" "-" "-"
    continue
  fi
  fits "$lo"
  need=$(most 's/^memory: rank [0-9]*: the model needs \([0-9.]*\) MiB.*/\1/p')
  peak=- refused=-
  if [ "$runs" = 1 ]; then
    gpt "$lo" $layout --steps 1 --memory-report || { cat "$tmp/out"; exit 1; }
    peak=$(most 's/^memory: rank [0-9]*: NUMA 0: peak \([0-9.]*\) MiB used.*/\1/p')
    refused=no
    gpt $((lo + step)) $layout --steps 1 || { [ $? = 2 ] && grep -q "the model needs at least" "$tmp/out" && refused=yes; }
  fi
  printf '%-40s %6s %9s %9s %14s\n' "$layout" "$lo" "$need" "$peak" "refused: $refused"
done
