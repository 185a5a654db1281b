#!/bin/sh
# ZeRO-3's all-gathers beside computation: gpt_train --dp 2 --zero 3 on 2
# ranks (one CPU worker each), traced, with --zero-prefetch 0 (a pool of
# one buffer: a unit's gather waits for the previous unit's release) and 1
# (two buffers: block l + 1 gathered while block l computes). Per rank,
# over the steps after the first: the union of the all-gathers' receive
# intervals (posted to completed), the share of it during which the rank's
# worker computed (forward, backward, recompute or optimizer tasks), and
# ms/step.
# usage: bench/zero_overlap.sh [--steps N] [--help] [-- gpt_train args]
#   (run from the build directory or set BUILD)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-.}
steps=4
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --help|-h) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) echo "zero_overlap.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$BUILD/examples/gpt_train" ] || { echo "zero_overlap.sh: build gpt_train first (make), or set BUILD" >&2; exit 2; }
. "$here/common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "zero_overlap.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
printf '%9s %5s %10s %14s %12s\n' prefetch rank "ms/step" "all-gather ms" "beside compute"
for pf in 0 1; do
  sh "$here/../tests/mpi_launch.sh" 2 "$BUILD/examples/gpt_train" --dp 2 --zero 3 --zero-prefetch "$pf" \
    --layers 4 --hidden 256 --heads 4 --seq 128 --batch 8 --steps "$steps" --ncpus 1 \
    --trace "$tmp/t.json" --log "$tmp/log.csv" "$@" > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
  ms=$(awk -F, 'NR > 2 { s += $3; n++ } END { printf "%.1f", s / n }' "$tmp/log.csv")
  python3 - "$tmp/t.json" "$pf" "$ms" <<'EOF'
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]: out[-1][1] = max(out[-1][1], b)
        else: out.append([a, b])
    return out
compute_phases = {"forward", "backward", "recompute", "optimizer"}
for rank in (0, 1):
    steps = {}
    for e in ev:
        if e.get("ph") != "X" or e.get("pid") != rank: continue
        a = e.get("args", {})
        step = a.get("step", 0)
        if step < 2: continue
        span = (e["ts"], e["ts"] + e["dur"])
        if e.get("cat") == "mpi" and a.get("op") == "allgather_mpi" and a.get("dir") == "recv":
            steps.setdefault("gather", []).append(span)
        elif e.get("cat") in compute_phases:
            steps.setdefault("compute", []).append(span)
    gather, compute = union(steps.get("gather", [])), union(steps.get("compute", []))
    total = sum(b - a for a, b in gather)
    both, j = 0.0, 0
    for a, b in gather:
        for c, d in compute:
            if d > a and c < b: both += min(b, d) - max(a, c)
    print("%9s %5d %10s %14.1f %11.1f%%" % (sys.argv[2], rank, sys.argv[3], total / 1e3, 100 * both / total if total else 0))
EOF
done
