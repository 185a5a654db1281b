#!/bin/sh
# The DiT (examples/dit_train) at 1, 2 and 4 ranks: step time, and how much
# of the all-to-all time runs beside compute.
# Layouts: one rank (1 and 2 CPU workers), Ulysses 2 and 4 (spatial attention
# on a frame split, temporal attention after the all-to-all of its Q/K/V and
# back), tp 2 + sp, dp 2, pipeline stages (pp 2: one block a stage, the
# timestep embedding sent from the first stage), and bf16 GEMM operands on one
# rank -- every rank with one CPU worker (tests/mpi_launch.sh) unless said. Step time: the mean of steps 2..N as dit_train prints it.
# All-to-all: from a trace of the same run (dit_train --trace; last step,
# rank 0): "a2a ms" is the union of the intervals in which an all-to-all
# message of that rank is in flight (the trace's transfer records, from the
# send's start to the receive's completion, in or out); "beside compute" the
# share of that time in which one of its CPU workers runs a compute task
# (not a communication task); "a2a/step" the all-to-all time over the step's
# wall time. With one worker per rank on a 2-core machine "beside compute"
# says whether the graph keeps the rank's core busy while its all-to-all is
# on the wire.
# Ranks unbound (MPIRUN, default "mpirun --bind-to none"): with np <= cores
# mpirun binds each rank to a core, and on 2026-11-26, with another
# engineer's make check loading the 2 cores (load average 12), a bound
# 2-rank run stalled 25-120 s in one step (a spinning StarPU worker and its
# rank's MPI thread on one shared core), unbound 0.5-0.9 s.
# GANTT=FILE.png: the Gantt picture of Ulysses 2's traced step (autotools/gantt-png.py).
# usage: bench/dit.sh [steps]   (run from the build directory or set BUILD)
set -eu
steps=${1:-6}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
[ -x "$BUILD/examples/dit_train" ] || { echo "dit: run from the build directory (or set BUILD)" >&2; exit 2; }
. "$here/common.sh"
MPIRUN=${MPIRUN:-mpirun --bind-to none}
export MPIRUN
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="--frames 8 --height 32 --width 32 --channels 4 --patch 2 --hidden 128 --heads 4 --layers 2 --cond-len 16 --batch 2"
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), no GPU"
echo "== model: $model (2048 tokens a sample: 8 frames x 256 patches), $steps steps (the first not timed)"
a2a() { # a2a TRACE STEP: rank 0's all-to-all time, its share beside compute, its share of the step
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
step = int(sys.argv[2])
def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]: out[-1][1] = max(out[-1][1], b)
        else: out.append([a, b])
    return out
def inter(x, y):
    i = j = 0; t = 0.0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if b > a: t += b - a
        if x[i][1] < y[j][1]: i += 1
        else: j += 1
    return t
X = [e for e in ev if e.get("ph") == "X" and e.get("args", {}).get("step") == step]
A = union([(e["ts"], e["ts"] + e["dur"]) for e in X if e.get("cat") == "transfer" and e["args"].get("op", "").startswith("alltoall")
           and 0 in (e["args"].get("src"), e["args"].get("dst"))])
C = union([(e["ts"], e["ts"] + e["dur"]) for e in X if e["pid"] == 0 and e["tid"] < 100000 and e.get("cat") not in ("comm", "offload")])
W = [(e["ts"], e["ts"] + e["dur"]) for e in X if e["pid"] == 0]
wall = (max(b for a, b in W) - min(a for a, b in W)) if W else 0
ta = sum(b - a for a, b in A)
print("a2a %.1f ms, beside compute %.0f%%, a2a/step %.0f%%" % (ta / 1e3, 100 * inter(A, C) / ta if ta else 0, 100 * ta / wall if wall else 0))
PY
}
run() { # run NAME NP ARGS...
  name=$1; np=$2; shift 2
  SW_TEST_TIMEOUT=600 sh "$here/../tests/mpi_launch.sh" "$np" "$BUILD/examples/dit_train" --steps "$steps" $model "$@" > "$tmp/out" 2>&1 || { cat "$tmp/out"; return; }
  ms=$(sed -n 's/^mean step time (steps 2 .. [0-9]*): \([0-9.]*\) ms/\1/p' "$tmp/out")
  SW_TEST_TIMEOUT=600 sh "$here/../tests/mpi_launch.sh" "$np" "$BUILD/examples/dit_train" --steps 3 $model "$@" --trace "$tmp/t.json" > "$tmp/trace" 2>&1 || { cat "$tmp/trace"; return; }
  case "$*" in *ulysses*) a=$(a2a "$tmp/t.json" 3) ;; *) a="no all-to-all" ;; esac
  if [ -n "${GANTT:-}" ] && [ "$*" = "--ulysses 2" ]; then # the Gantt picture of that step
    /usr/bin/python3 "$here/../autotools/gantt-png.py" "$tmp/t.json" --step 3 --out "$GANTT" > /dev/null
  fi
  printf '%-28s ms/step %8s   %s\n' "$name" "${ms:-FAILED}" "$a"
}
run "1 rank, 1 worker" 1
STARPU_NCPU=2 run "1 rank, 2 workers" 1
run "ulysses 2 (2 ranks)" 2 --ulysses 2
run "tp 2 + sp (2 ranks)" 2 --tp 2 --sp
run "dp 2 (2 ranks)" 2 --dp 2
run "ulysses 4 (4 ranks)" 4 --ulysses 4
run "tp 2 + sp x ulysses 2 (4)" 4 --tp 2 --sp --ulysses 2
run "pp 2, 2 micro-batches (2)" 2 --pp 2 --micro 2
STARPU_NCPU=2 run "1 rank, 2 workers, bf16" 1 --dtype bf16
