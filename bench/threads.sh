#!/bin/sh
# Where a run's CPU goes, by kind of thread (docs/planner.md, "The cores
# the threads take"): a gpt_train layout on NP ranks of this machine
# (tests/mpi_launch.sh: oversubscribed, one unbound CPU worker per rank),
# each rank's threads' CPU time read from /proc once a second, then the
# cores each kind kept busy over the run's steady part (from 40 % of the
# run to its last sample): StarPU's CPU workers ("CPU n"), StarPU-MPI's
# progression thread ("MPI"), the rest (the main thread, MPI's own), and
# the run's ms/step (steps 2.., its --log).
#
# usage: bench/threads.sh [--build DIR] [--np N] [--steps S] [gpt_train FLAGS...]
# Default: W124 (bench/w124.sh's shape) on 2 ranks, 8 steps, the build
# in build/. E.g. bench/threads.sh --np 4 --ulysses 4 --zero 1 --grad-accum 2
set -eu
me=threads.sh
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/common.sh"
build=$top/build np=2 steps=8
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need "$@"; build=$2; shift 2 ;;
    --np) need "$@"; posint --np "$2"; np=$2; shift 2 ;;
    --steps) need "$@"; posint --steps "$2"; steps=$2; shift 2 ;;
    -h|--help) usage_from "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ "$steps" -ge 3 ] || die2 "--steps must be at least 3 (the first is not timed; got $steps)"
prog=$build/examples/gpt_train
[ -x "$prog" ] || die2 "no gpt_train in $build/examples (--build DIR)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sw-threads.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "$me: $(cpu_model), $(getconf _NPROCESSORS_ONLN) cores, $np rank(s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$me: $prog $w124_flags $* --ncpus 1 --steps $steps"
# shellcheck disable=SC2086 # the default model's flags are words
sh "$top/tests/mpi_launch.sh" "$np" "$prog" $w124_flags "$@" --ncpus 1 --steps "$steps" --log "$tmp/log.csv" \
  > "$tmp/out" 2>&1 &
run=$!
# one line a second: the time, then NAME=TICKS summed over the ranks' threads of that name's first word
while kill -0 "$run" 2>/dev/null; do
  pids=$(pgrep -x gpt_train || pgrep -f "examples/.libs/lt-gpt_train" || true)
  [ -n "$pids" ] && for p in $pids; do cat /proc/"$p"/task/*/stat 2>/dev/null || true; done |
    awk -v t="$(date +%s.%N)" '{ n = $2; gsub(/[()]/, "", n); c[n] += $14 + $15 }
      END { printf "%s", t; for (k in c) printf " %s=%d", k, c[k]; print "" }' >> "$tmp/series"
  sleep 1
done
wait "$run" || { tail -5 "$tmp/out" >&2; die2 "the run failed (its output's end above)"; }
[ -s "$tmp/series" ] || die2 "no sample of the ranks' threads (the run ended in under a second?)"
ms=$(awk -F, 'NR > 2 { s += $3; n++ } END { if (n) printf "%.1f", s / n }' "$tmp/log.csv")
hz=$(getconf CLK_TCK)
awk -v ms="$ms" -v hz="$hz" '{ t[NR] = $1; for (i = 2; i <= NF; i++) { split($i, kv, "="); v[NR, kv[1]] = kv[2]; k[kv[1]] = 1 } }
  END {
    a = int(NR * 0.4); if (a < 1) a = 1; b = NR - 1; if (b <= a) { print "threads.sh: too few samples"; exit 2 }
    dt = t[b] - t[a]; rest = 0
    for (n in k) if (n != "CPU" && n != "MPI") rest += v[b, n] - v[a, n]
    printf "threads.sh: %s ms/step; cores busy over %.1f s: workers %.2f, progression threads %.2f, other threads %.2f\n",
      ms, dt, (v[b, "CPU"] - v[a, "CPU"]) / hz / dt, (v[b, "MPI"] - v[a, "MPI"]) / hz / dt, rest / hz / dt }' "$tmp/series"
