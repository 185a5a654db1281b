#!/bin/sh
# The planner's picture (docs/planner.md): predicted ms/step of the best
# layout at each world size (gpt_train --plan, W124 by default; the sizes
# run here on this one node, ranks sharing its cores; the others on nodes
# of this VM's cores, the machine's link figures between them) and this machine's measured points on it: the
# planner's best layout at 1, 2 and 4 ranks run for real (4 steps, steps
# 2.. timed). Writes docs/plan-scaling.png (gnuplot) and prints the table.
# Without --machine this machine is measured once, by a --plan with an
# empty StarPU home (its GEMM measured now, not read from the history
# model of every session's runs, loaded ones included), and its figures
# written to a machine file every size is priced by (one moment's load
# for the whole line, not one per size).
# usage: bench/plan-picture.sh [--build DIR] [--machine FILE] [--worlds "1 2 4 8 16 32 64 128 256 512"]
#          [--run "1 2 4"] [--out PNG] [MODEL FLAGS...]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build machine="" worlds="1 2 4 8 16 32 64 128 256 512" runs="1 2 4" out=$top/docs/plan-scaling.png me=plan-picture.sh
. "$top/bench/common.sh"
plan_options "$0" "--worlds:worlds --run:runs --out:out" "$@"
shift "$plan_shift"
# shellcheck disable=SC2086 # the default model's flags are words
[ $# -gt 0 ] || set -- $w124_flags
command -v gnuplot > /dev/null || { echo "plan-picture: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plan-picture.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cores=$(nproc)
echo "bench/plan-picture.sh: $(date -u +%Y-%m-%dT%H:%MZ), $cores cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -z "$machine" ]; then # measured once: the planner's printed figures as a machine file (their sources kept)
  machine=$tmp/machine
  mkdir "$tmp/home"
  STARPU_HOME=$tmp/home STARPU_PERF_MODEL_DIR="" "$build/examples/gpt_train" --plan --plan-ranks 1 --plan-top 1 "$@" \
    > "$tmp/m" 2>&1 || { cat "$tmp/m"; exit 1; }
  sed -n 's/^plan: machine: //p' "$tmp/m" | awk '
    { src = $0; sub(/^[^:]*: /, "", src) }
    /^GEMM [0-9.e+-]* GFLOP\/s per worker/ { print "gemm_gflops", $2, src }
    /^cores per node/ { sub(/:$/, "", $4); print "cores", $4, src }
    /^intra-node link/ { print "intra_gbs", $3, src; sub(/,/, "", $5); print "intra_us", $5, src }
    /^inter-node link/ { print "inter_gbs", $3, src; print "inter_us", $5, src }
    /^cost per task/ { print "task_us", $4, src }
    /^GEMM at half rate with/ { print "gemm_half_rows", $6, src }
    /^optimizer [0-9.e+-]* ns/ { print "adam_ns", $2, src }
    /^progression thread polling/ { print "p2p_spin", $4, src }' > "$machine"
  echo "bench/plan-picture.sh: the machine, measured once:"; sed 's/^/  /' "$machine"
fi
: > "$tmp/pred"
: > "$tmp/meas"
echo "| ranks | nodes x ranks | predicted ms/step (best layout) | measured ms/step | layout |"
echo "|---|---|---|---|---|"
for n in $worlds; do
  # the sizes run here: one node, this one (4 ranks share its cores); beyond: nodes of this VM's cores
  rpn=$n
  if echo " $runs " | grep -q " $n "; then :; elif [ "$n" -gt "$cores" ]; then rpn=$cores; fi
  # shellcheck disable=SC2086
  "$build/examples/gpt_train" --plan --plan-ranks-per-node "$rpn" --plan-nodes $((n / rpn)) --plan-top 1 \
    ${machine:+--plan-machine "$machine"} "$@" > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
  best=$(grep -m1 '^plan: *1 ' "$tmp/out")
  ms=$(echo "$best" | awk '{ print $3 }')
  lay=$(echo "$best" | sed 's/^plan: *1 *\([^ ]* *\)\{7\}//')
  echo "$n $ms" >> "$tmp/pred"
  meas=-
  if echo " $runs " | grep -q " $n "; then
    ncpus=$((cores / n)); [ "$ncpus" -ge 1 ] || ncpus=1
    # shellcheck disable=SC2086
    if [ "$n" = 1 ]; then "$build/examples/gpt_train" "$@" $lay --ncpus "$ncpus" --steps 4 --log /dev/null > "$tmp/run" 2>&1
    else mpirun --oversubscribe -np "$n" -x OPENBLAS_CORETYPE "$build/examples/gpt_train" "$@" $lay --ncpus "$ncpus" \
      --steps 4 --log /dev/null > "$tmp/run" 2>&1 < /dev/null; fi || { tail -n 5 "$tmp/run"; }
    meas=$(sed -n 's/^gpt_train: loss .* \([0-9.]*\) ms\/step.*/\1/p' "$tmp/run" | tail -n 1)
    [ -n "$meas" ] && echo "$n $meas" >> "$tmp/meas" || meas="(failed)"
  fi
  echo "| $n | $((n / rpn)) x $rpn | $ms | $meas | \`$lay\` |"
done
gnuplot <<G
set terminal pngcairo size 900,560 font ",11" noenhanced
set output "$out"
set title "gpt_train --plan, W124: the best layout's predicted step (fast estimate) and measured here\n1-4 ranks: this 2-core VM (ranks share its cores); 8 and more: nodes of 2 ranks of it, one machine measurement"
set xlabel "ranks"
set ylabel "ms per step"
set logscale xy
set grid
set key top right
plot "$tmp/pred" using 1:2 with linespoints lw 2 pt 7 title "predicted (best layout at each size)", \
     "$tmp/meas" using 1:2 with points pt 9 ps 2 title "measured on this machine (the same layout)"
G
echo "bench/plan-picture.sh: wrote $out"
