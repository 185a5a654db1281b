#!/bin/sh
# The simulation against real runs (docs/simulation.md, "Accuracy"): for
# every layout this machine runs, gpt_train is calibrated by a real run
# (bench/calibrate.sh), run for real R times, and simulated (bench/sim.sh)
# on a platform of this machine (1 node x the layout's ranks); prints the
# median real ms/step, the simulated one, the difference and the cost per
# task the calibration measured (the simulation charges it per task).
#
# usage: bench/sim-accuracy.sh [--build DIR] [--sim-build DIR] [--runs R]
#          [--steps N] [--shape main|w124] [--preset P] [--platform-args A]
#          [--compare A] [--only REGEX]
#   --build DIR      the real build (default: build in the source tree)
#   --sim-build DIR  the simulation build (default: build-sim)
#   --runs R         real runs per layout (5); the median is compared
#   --steps N        steps per run (6); ms/step is the mean of steps 2..N
#   --shape S        main: 2 layers, hidden 128, seq 64, batch 8 (default);
#                    w124: GPT-2 124M at seq 64, batch 4 (bench/w124.sh)
#   --preset P       bench/sim-platform.sh's network preset; default: this
#                    machine's network measured at start (2 ranks of
#                    examples/collectives: one task calling MPI_Allreduce
#                    on 1 KiB gives the latency, MPI_Allreduce's bus
#                    bandwidth on 64 MiB the bandwidth: vm-measured's
#                    figures, in the same hour as the runs)
#   --platform-args A  more of bench/sim-platform.sh's options, after the
#                    preset's (e.g. '--duplex full', '--intra-lat 100
#                    --inter-lat 100')
#   --compare A      simulate each layout's calibration a second time, on
#                    the platform with A's options added too (e.g.
#                    '--intra-bw 2.24 --inter-bw 2.24'), its VAR=VALUE words
#                    in bench/sim.sh's environment (e.g. 'SW_SIM_TASK_POLLED_US=':
#                    no charge of its own while a request is pending), and
#                    print that column (B) beside
#   --calibrate-args A  more of bench/calibrate.sh's options (e.g.
#                    '--cpu-time': the tasks' time on their cores, waits
#                    for a core taken out)
#   --only REGEX     the layouts whose names match (one tp2sp dp2 dp2z3
#                    ulysses2 ring2 pp2 pp2v2)
# Two ranks get one CPU worker each (the machine's 2 cores), one rank two.
# Run it on a quiet machine: the calibration's times are the simulation's.
set -eu
me=sim-accuracy
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build sim_build=$top/build-sim runs=5 steps=6 shape=main preset= only= pargs= compare= cargs=
. "$top/bench/common.sh"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need "$@"; build=$2; shift ;;
    --sim-build) need "$@"; sim_build=$2; shift ;;
    --runs) need "$@"; runs=$2; shift ;;
    --steps) need "$@"; steps=$2; shift ;;
    --shape) need "$@"; shape=$2; shift ;;
    --preset) need "$@"; preset=$2; shift ;;
    --only) need "$@"; only=$2; shift ;;
    --platform-args) need "$@"; pargs=$2; shift ;;
    --compare) need "$@"; compare=$2; shift ;;
    --calibrate-args) need "$@"; cargs=$2; shift ;;
    -h|--help) usage_from "$0"; exit 0 ;;
    *) die2 "unknown option '$1' (see --help)" ;;
  esac
  shift
done
case "$runs$steps" in *[!0-9]*) die2 "--runs and --steps must be positive integers" ;; esac
[ "$steps" -ge 2 ] || die2 "--steps must be at least 2 (the first step is not timed)"
case "$shape" in
  main) args="--layers 2 --hidden 128 --heads 4 --seq 64 --batch 8" ;;
  w124) args="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024" ;;
  *) die2 "--shape must be main or w124 (got '$shape')" ;;
esac
sim_builds "$build" "$sim_build"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d "${TMPDIR:-/tmp}/sw-acc.XXXXXX")
trap 'rm -rf "$work"' EXIT
ms_of() { # mean ms of steps 2.. in gpt_train's CSV log
  awk -F, 'NR > 2 { s += $3; n++ } END { if (n) printf "%.2f", s / n }' "$1"
}
if [ -n "$preset" ]; then
  net="--preset $preset"
else
  sh "$top/tests/mpi_launch.sh" 2 "$build/examples/collectives" --sizes 0.0009765625,64 --iters 9 --no-gather \
    > "$work/net.out" 2>&1 || { cat "$work/net.out"; die2 "the network measurement failed"; }
  lat=$(awk '$1 == "allreduce" && $2 == "task+MPI_Allreduce" && $3 == 1024 { printf "%.1f", $4 * 1000 }' "$work/net.out")
  bw=$(awk '$1 == "allreduce" && $2 == "MPI_Allreduce" && $3 == 67108864 { print $5 }' "$work/net.out")
  [ -n "$lat" ] && [ -n "$bw" ] || { cat "$work/net.out"; die2 "no latency or bandwidth in the network measurement"; }
  net="--preset vm-measured --intra-bw $bw --intra-lat $lat --inter-bw $bw --inter-lat $lat"
  preset="measured now: $bw GB/s, $lat us"
fi
echo "$me: shape $shape ($args), $runs real runs of $steps steps per layout, platform $preset${pargs:+ $pargs}${cargs:+; calibrated with $cargs}${compare:+; B: with $compare too}; $(cpu_model), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
# the B columns, where --compare asks for them
bcols() { [ -z "$compare" ] || printf ' %10s %8s' "$1" "$2"; }
printf '%-9s %-34s %10s %10s %8s%s  %s\n' layout flags "real ms" "sim ms" "sim/real" "$(bcols "B ms" "B/real")" \
  "real runs (ms/step)"
# simulate NAME ARGS: the layout's calibration simulated on this machine's
# platform with ARGS' options, ARGS' VAR=VALUE words in the environment;
# prints simulated ms/step
simulate() {
  opts= envs=
  for w in $2; do case "$w" in *=*) envs="$envs $w" ;; *) opts="$opts $w" ;; esac; done
  sh "$top/bench/sim-platform.sh" --nodes 1 --ranks-per-node "$np" --cpus "$cpus" $net $opts \
    --out "$work/plat-$1" > /dev/null
  env $envs sh "$top/bench/sim.sh" --build "$sim_build" --calibration "$cal" --host acc-$name --platform "$work/plat-$1" \
    examples/gpt_train $args $flags --steps "$steps" --log "$work/s.csv" > "$work/s.out" 2>&1 ||
    { echo "$name: simulation failed:" >&2; grep -v 'calibrated enough' "$work/s.out" | tail -n 5 >&2; return 1; }
  sed -n 's/^simulation: \([0-9.]*\) simulated ms\/step.*/\1/p' "$work/s.out"
}
ratio() { awk -v s="$1" -v r="$2" 'BEGIN { printf "%.2f", s / r }'; }
while read -r name np cpus layout; do
  [ -z "$only" ] || echo "$name" | grep -Eq "$only" || continue
  flags="$layout --ncpus $cpus"
  # 2 layers cannot make 2 stages x 2 chunks: the main shape's pp2v2 has 4
  [ "$shape:$name" != main:pp2v2 ] || flags="$flags --layers 4"
  cal=$work/cal-$name
  sh "$top/bench/calibrate.sh" --build "$build" --calibration "$cal" --host acc-$name --np "$np" $cargs \
    examples/gpt_train $args $flags --steps 12 --quiet --log "$work/cal.csv" > "$work/cal.out" 2>&1 ||
    { echo "$name: calibration failed:"; tail -n 5 "$work/cal.out"; continue; }
  real=
  i=0
  while [ $i -lt "$runs" ]; do
    i=$((i + 1))
    if [ "$np" = 1 ]; then "$build/examples/gpt_train" $args $flags --steps "$steps" --quiet --log "$work/r.csv" > "$work/r.out" 2>&1
    else sh "$top/tests/mpi_launch.sh" "$np" "$build/examples/gpt_train" $args $flags --steps "$steps" --quiet \
      --log "$work/r.csv" > "$work/r.out" 2>&1; fi || { echo "$name: real run failed"; tail -n 5 "$work/r.out"; continue 2; }
    real="$real $(ms_of "$work/r.csv")"
  done
  med=$(echo $real | tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  sim=$(simulate "$name" "$pargs") || continue
  cost=$(sed -n '1s/ .*//p' "$cal/task-cost.acc-$name" 2> /dev/null || true)
  polled=$(sed -n '2s/ .*//p' "$cal/task-cost.acc-$name" 2> /dev/null || true)
  [ -z "$cost" ] || cost="$cost us${polled:+, $polled us with a request pending}"
  b=
  if [ -n "$compare" ]; then
    simb=$(simulate "$name-b" "$pargs $compare") || continue
    b=$(bcols "$simb" "$(ratio "$simb" "$med")")
  fi
  printf '%-9s %-34s %10s %10s %8s%s  %s\n' "$name" "$flags" "$med" "$sim" "$(ratio "$sim" "$med")" "$b" \
    "$real; cost per task ${cost:-not recorded}"
done <<LAYOUTS
one 1 2
tp2sp 2 1 --tp 2 --sp
dp2 2 1 --dp 2
dp2z3 2 1 --dp 2 --zero 3
ulysses2 2 1 --ulysses 2
ring2 2 1 --ring 2
pp2 2 1 --pp 2 --grad-accum 4
pp2v2 2 1 --pp 2 --pp-virtual 2 --grad-accum 4
LAYOUTS
