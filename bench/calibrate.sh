#!/bin/sh
# Calibration for the simulation (docs/simulation.md): runs a program of the
# real build (StarPU executing the codelets) so that StarPU records every
# codelet's history-based performance model at the sizes the run meets, and
# its bus files (the per-rank platform starpu_smpirun merges in), under a
# fixed STARPU_HOSTNAME in a directory of their own (STARPU_PERF_MODEL_DIR):
# a simulated run of the same layout and shape (bench/sim.sh, same
# --calibration and --host) then finds a time for every task.
#
# usage: bench/calibrate.sh [--build DIR] [--calibration DIR] [--host NAME]
#          [--np N] [--runs K] [--keep-first-step] [--cpu-time]
#          PROGRAM [ARGS...]
#   --build DIR        the real build (default: build in the source tree)
#   --calibration DIR  where the models go (default: $SW_SIM_CALIBRATION,
#                      else ~/.cache/starweave/calibration)
#   --host NAME        the name they are recorded under (default:
#                      $SW_SIM_HOST, else starweave-<hostname>)
#   --np N             ranks (mpirun; default 1)
#   --runs K           runs of the program (default 1); StarPU trusts a
#                      history model once it has 10 samples of a size
#                      (STARPU_CALIBRATE_MINIMUM): give the program enough
#                      steps, or runs, for that
#   --keep-first-step  record the first step of each run too (left out by
#                      default: its one-time costs, first touches and
#                      kernel generation, are not a later step's)
#   --cpu-time         record each task's time on its core, its time off the
#                      CPU taken out (the library's SW_CALIBRATE_CPU_TIME):
#                      for runs whose ranks' workers outnumber the cores,
#                      simulated on a platform whose nodes share them
#                      (bench/sim-platform.sh --cores); by default a task's
#                      time is the clock's, waits for the core included
#   PROGRAM            examples/gpt_train ... (relative to the build) or a path
# e.g. bench/calibrate.sh --np 2 examples/gpt_train --tp 2 --sp --steps 6
# Every sample of the later steps is kept: StarPU would drop one 50 % off
# its size's mean, and on shared cores the slow ones are real
# (docs/simulation.md, "StarPU's calibration drops the slow samples");
# STARPU_HISTORY_MAX_ERROR=PCT in the environment restores such a filter.
# Calibrate on a quiet machine: the times recorded are the simulation's.
set -eu
me=calibrate
die2() { echo "$me: error: $*" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
calib=${SW_SIM_CALIBRATION:-${HOME:?HOME is not set}/.cache/starweave/calibration}
host=${SW_SIM_HOST:-starweave-$(hostname)}
np=1 runs=1 skip_first=1 cpu_time=0
need() { [ $# -ge 2 ] || die2 "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need "$@"; build=$2; shift ;;
    --calibration) need "$@"; calib=$2; shift ;;
    --host) need "$@"; host=$2; shift ;;
    --np) need "$@"; np=$2; shift ;;
    --runs) need "$@"; runs=$2; shift ;;
    --keep-first-step) skip_first=0 ;;
    --cpu-time) cpu_time=1 ;;
    -h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) die2 "unknown option '$1' (see --help)" ;;
    *) break ;;
  esac
  shift
done
[ $# -ge 1 ] || die2 "no program given (see --help)"
case "$np" in ''|*[!0-9]*|0) die2 "--np must be a positive integer (got '$np')" ;; esac
case "$runs" in ''|*[!0-9]*|0) die2 "--runs must be a positive integer (got '$runs')" ;; esac
prog=$1
shift
[ -f "$build/config.h" ] || die2 "no build in $build"
if grep -q '^#define STARWEAVE_SIMGRID 1' "$build/config.h"; then
  die2 "$build is a simulation build: calibration runs the real one (--build DIR)"
fi
case "$prog" in /*) ;; *) [ -x "$build/$prog" ] && prog="$build/$prog" ;; esac
[ -x "$prog" ] || die2 "program '$prog' not found in $build"

mkdir -p "$calib"
# Each rank records into a directory of its own, merged into $calib at the
# end (bench/perfmodel_merge.py): StarPU 1.3 overwrites a model file with
# what its process knows, so with one directory the last rank to exit
# would drop the sizes only the others ran (a pipeline's stages).
stage="$calib/.ranks"
rm -rf "$stage"
mkdir -p "$stage"
cat > "$stage/rank-env.sh" <<'EOS'
#!/bin/sh
STARPU_PERF_MODEL_DIR="$SW_CALIBRATE_STAGE/rank${OMPI_COMM_WORLD_RANK:-0}"
export STARPU_PERF_MODEL_DIR
if [ "$SW_CALIBRATE_OFF_CPU" = 1 ]; then
  mkdir -p "$STARPU_PERF_MODEL_DIR"
  SW_CALIBRATE_CPU_TIME="$STARPU_PERF_MODEL_DIR/off-cpu"
  export SW_CALIBRATE_CPU_TIME
fi
exec "$@"
EOS
export SW_CALIBRATE_STAGE="$stage" STARPU_HOSTNAME="$host" SW_CALIBRATE_OFF_CPU=$cpu_time
# and StarPU's cost per task here (rank 0 measures it at start, each run
# anew: the last run's is kept; on 2 ranks or more also with a StarPU-MPI
# receive pending), which the simulation charges per task (bench/sim.sh)
export SW_CALIBRATE_TASK_COST="$stage/task-cost"
# record every run's samples (STARPU_CALIBRATE=1 adds to the history), all
# of them (no filter unless the environment sets one), but the first step's
export STARPU_CALIBRATE=1 STARPU_SILENT=1 STARPU_HISTORY_MAX_ERROR=${STARPU_HISTORY_MAX_ERROR:-1000000}
export SW_CALIBRATE_SKIP_FIRST=$skip_first
. "$top/bench/common.sh"
i=1
while [ "$i" -le "$runs" ]; do
  echo "$me: run $i/$runs: $np rank(s): $prog $*"
  # one rank: not through mpirun, which binds a rank to one core when
  # ranks <= cores (its workers would share it: every task's time doubled
  # at 2 workers -- one rank's simulated W124 step came out 1.96x the real)
  if [ "$np" = 1 ]; then sh "$stage/rank-env.sh" "$prog" "$@" > "$calib/calibrate.log" 2>&1
  else sh "$top/tests/mpi_launch.sh" "$np" sh "$stage/rank-env.sh" "$prog" "$@" > "$calib/calibrate.log" 2>&1; fi ||
    { cat "$calib/calibrate.log"; echo "$me: the run failed" >&2; exit 1; }
  if [ "$skip_first" = 1 ] && ! grep -q 'recorded no samples (SW_CALIBRATE_SKIP_FIRST=1)' "$calib/calibrate.log"; then
    echo "$me: warning: run $i did not say that it left out its first step (a starweave program says so when its second step begins): with one step, nothing of it was recorded; run more steps or give --keep-first-step" >&2
  fi
  i=$((i + 1))
done
# the bus: rank 0's; the codelets: every rank's and what $calib held
mkdir -p "$calib/bus"
cp -p "$stage/rank0/bus/$host".* "$calib/bus/" 2>/dev/null || true
(cd "$stage/rank0" && find codelets -type f -name "*.$host") > "$stage/files"
r=1
while [ "$r" -lt "$np" ]; do
  (cd "$stage/rank$r" && find codelets -type f -name "*.$host") >> "$stage/files"
  r=$((r + 1))
done
# --cpu-time: each rank's samples less their time off the CPU
r=0
while [ "$cpu_time" = 1 ] && [ "$r" -lt "$np" ]; do
  [ -f "$stage/rank$r/off-cpu" ] || die2 "rank $r recorded no time off the CPU (not a starweave program, or an old build): --cpu-time cannot be had"
  python3 "$top/bench/perfmodel_merge.py" --off-cpu "$stage/rank$r/off-cpu" "$stage/rank$r" "$host" ||
    { echo "$me: cannot take rank $r's time off the CPU out of its samples" >&2; exit 1; }
  r=$((r + 1))
done
sort -u "$stage/files" | while read -r f; do
  set --
  [ -f "$calib/$f" ] && set -- "$calib/$f"
  r=0
  while [ "$r" -lt "$np" ]; do
    [ -f "$stage/rank$r/$f" ] && set -- "$@" "$stage/rank$r/$f"
    r=$((r + 1))
  done
  mkdir -p "$(dirname "$calib/$f")"
  python3 "$top/bench/perfmodel_merge.py" "$calib/$f.tmp" "$@" && mv "$calib/$f.tmp" "$calib/$f" ||
    { echo "$me: cannot merge $f" >&2; exit 1; }
done || exit 1
if [ -s "$stage/task-cost" ]; then cp "$stage/task-cost" "$calib/task-cost.$host"
else echo "$me: warning: the program recorded no cost per task (not a starweave program, or an old build): the simulation will charge StarPU's fixed costs only" >&2; fi
rm -rf "$stage"
[ -r "$calib/bus/$host.config" ] ||
  { echo "$me: StarPU wrote no bus calibration $calib/bus/$host.config" >&2; exit 1; }
n=$(ls "$calib/codelets/"*/ 2>/dev/null | grep -c "\.$host\$" || true)
cost=$(sed -n '1s/ .*//p' "$calib/task-cost.$host" 2>/dev/null || true)
polled=$(sed -n '2s/ .*//p' "$calib/task-cost.$host" 2>/dev/null || true)
[ -z "$cost" ] || cost="$cost us${polled:+; $polled us while a StarPU-MPI receive is pending}"
echo "$me: $n codelet model(s), the bus${cost:+ and the cost per task ($cost)} of host '$host' in $calib"
echo "$me: simulate with: bench/sim.sh --calibration $calib --host $host --platform PREFIX examples/... (same shape and layout)"
