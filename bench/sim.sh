#!/bin/sh
# Runs a starweave program of the simulation build under SimGrid's smpirun
# (docs/simulation.md) on a platform of bench/sim-platform.sh, with the
# codelets' calibration of bench/calibrate.sh, and prints the simulated
# ms/step beside the wall time the simulation took.
#
# usage: bench/sim.sh [--build DIR] [--calibration DIR] [--host NAME]
#          --platform PREFIX [--np N] PROGRAM [ARGS...]
#   --build DIR        the simulation build (configure --with-starpu=<the
#                      SimGrid StarPU>; default: $SW_SIM_BUILD, else
#                      build-sim in the source tree)
#   --calibration DIR  StarPU's performance models and bus files recorded by
#                      bench/calibrate.sh (STARPU_PERF_MODEL_DIR; default:
#                      $SW_SIM_CALIBRATION, else ~/.cache/starweave/calibration)
#   --host NAME        the name they were recorded under (STARPU_HOSTNAME;
#                      default: $SW_SIM_HOST, else starweave-<hostname>)
#   --platform PREFIX  PREFIX.xml and PREFIX.hosts (bench/sim-platform.sh)
#   --np N             simulated ranks (default: the hostfile's lines); a
#                      platform with fewer hosts than ranks is refused
#   --estimate         task sizes the calibration lacks get a regression
#                      estimate from the sizes it measured (a first pass
#                      lists them; bench/perfmodel_merge.py --estimate),
#                      each printed as an ESTIMATE; the calibration itself
#                      is not changed. Without it such a size stops the run.
#   --list-args ARGS   added to the program's arguments in --estimate's
#                      first pass only, e.g. '--steps 1': that pass only
#                      lists the sizes, and one step of gpt_train runs them
#                      all; a size it missed stops the run proper (exit 2,
#                      named)
#   PROGRAM            examples/gpt_train, ... (relative to the build) or a path
# Prints the simulated ms/step, the wall time, and the peak host memory
# of the simulation's processes (anonymous MiB, sampled every second).
# Environment: SW_SIM_MIN_AVAIL_MIB (1024): the simulation is stopped (exit
# 2, its figures said) when this machine's available memory falls under
# it; MALLOC_MMAP_THRESHOLD_=131072: less host memory for more CPU time
# (docs/simulation.md, "Host memory"); SW_SIM_FOLD_DIR, SW_SIM_STACK_KIB,
# SW_SIM_CFG, SW_SIM_SMPI_FACTORS: docs/simulation.md and this script's comments.
# Exit status: the program's; 2 for bad input (a platform too small, a
# missing calibration: the message says what to calibrate) and for a
# simulation stopped by the memory guard.
set -eu
me=sim
die2() { echo "$me: error: $*" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
build=${SW_SIM_BUILD:-$top/build-sim}
calib=${SW_SIM_CALIBRATION:-${HOME:?HOME is not set}/.cache/starweave/calibration}
host=${SW_SIM_HOST:-starweave-$(hostname)}
platform="" np="" estimate=0 list_args=""
need() { [ $# -ge 2 ] || die2 "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need "$@"; build=$2; shift ;;
    --calibration) need "$@"; calib=$2; shift ;;
    --host) need "$@"; host=$2; shift ;;
    --platform) need "$@"; platform=$2; shift ;;
    --np) need "$@"; np=$2; shift ;;
    --estimate) estimate=1 ;;
    --list-args) need "$@"; list_args=$2; shift ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) die2 "unknown option '$1' (see --help)" ;;
    *) break ;;
  esac
  shift
done
[ $# -ge 1 ] || die2 "no program given (see --help)"
prog=$1
shift
[ -n "$platform" ] || die2 "--platform PREFIX is required (bench/sim-platform.sh writes PREFIX.xml and PREFIX.hosts)"
[ -r "$platform.xml" ] || die2 "platform $platform.xml cannot be read"
[ -r "$platform.hosts" ] || die2 "hostfile $platform.hosts cannot be read"
hosts=$(grep -c . "$platform.hosts" || true)
[ -n "$np" ] || np=$hosts
case "$np" in ''|*[!0-9]*|0) die2 "--np must be a positive integer (got '$np')" ;; esac
# SMPI would place the extra ranks on hosts again (or stop); the platform
# is meant to give every rank its own host: refuse before starting
[ "$hosts" -ge "$np" ] ||
  die2 "the platform has fewer hosts than ranks: $platform.hosts lists $hosts host(s) for $np rank(s) (bench/sim-platform.sh --nodes N --ranks-per-node R gives N x R)"

config="$build/config.h"
[ -f "$config" ] || die2 "no simulation build in $build (configure --with-starpu=<autotools/build-starpu.sh --simgrid's prefix> there; docs/simulation.md)"
grep -q '^#define STARWEAVE_SIMGRID 1' "$config" ||
  die2 "$build is not a simulation build (its StarPU has no SimGrid; docs/simulation.md)"
smpirun=$(command -v smpirun || true)
[ -n "$smpirun" ] || die2 "smpirun not found (Debian package: libsimgrid-dev)"
case "$prog" in /*) ;; *) [ -x "$build/$prog" ] && prog="$build/$prog" ;; esac
[ -x "$prog" ] || die2 "program '$prog' not found in $build"

# a platform whose nodes' workers share their cores (bench/sim-platform.sh
# --cores) needs the StarPU patched to read that (autotools/build-starpu.sh
# --simgrid applies autotools/starpu-simgrid-cores.patch); another would
# give every worker a core of its own without a word
if grep -q starweave_cores "$platform.xml" && ! grep -qa '(property starweave_cores of' "$prog"; then
  die2 "$platform.xml shares a node's cores between its workers (bench/sim-platform.sh --cores), which the StarPU $prog was linked with does not read: rebuild it with autotools/build-starpu.sh --simgrid (it applies autotools/starpu-simgrid-cores.patch), then make in $build"
fi

# the calibration: the codelets' models and StarPU's bus files
busxml="$calib/bus/$host.config"
[ -r "$busxml" ] && ls "$calib/codelets/"*/*".$host" > /dev/null 2>&1 ||
  die2 "no calibration for host '$host' in $calib (no $busxml, or no codelet model): run bench/calibrate.sh (it records the codelets and the bus under that name)"

export STARPU_PERF_MODEL_DIR="$calib" STARPU_HOSTNAME="$host"
# the simulation needs no calibration of its own, and must not record any
export STARPU_CALIBRATE=0
# The runtime's cost per task: the real run pays it for every task (its
# scheduling, its data's handling, its callbacks). bench/calibrate.sh
# measured it (task-cost.HOST: StarPU tasks doing nothing on one worker);
# the simulation charges that figure on the worker's clock after each task
# (SW_SIM_TASK_US), in place of StarPU's fixed simulated costs of its
# submission and input fetch, which the figure includes. Not StarPU's
# charge of its scheduler's time (STARPU_SIMGRID_SCHED_COST=1): it measures
# the simulating process's thread, which runs every simulated actor, and
# made the simulated step differ from one run to the next -- 21-31 ms for
# a step of 2.1 (docs/simulation.md, "The same step every time"). Without
# the file (a calibration of an older bench/calibrate.sh), StarPU's fixed
# costs only.
# While a rank has point-to-point requests outstanding, the figure its
# second line gives (measured with a StarPU-MPI receive pending, on 2 ranks
# or more: the progression thread polls on the worker's core) is charged
# instead (SW_SIM_TASK_POLLED_US, set empty: the first figure throughout;
# docs/simulation.md, "The cost per task while a request is pending").
export STARPU_SIMGRID_SCHED_COST="${STARPU_SIMGRID_SCHED_COST:-0}"
task_cost=""
if [ -z "${SW_SIM_TASK_US:-}" ] && [ -r "$calib/task-cost.$host" ]; then
  task_cost=$(sed -n '1s/ .*//p' "$calib/task-cost.$host")
  case "$task_cost" in ''|*[!0-9.]*) die2 "$calib/task-cost.$host does not start with a number of microseconds (bench/calibrate.sh writes it)" ;; esac
  export SW_SIM_TASK_US="$task_cost"
  polled=$(sed -n '2s/ .*//p' "$calib/task-cost.$host")
  case "$polled" in *[!0-9.]*) die2 "the second line of $calib/task-cost.$host does not start with a number of microseconds (bench/calibrate.sh writes it)" ;; esac
  [ -z "$polled" ] || [ -n "${SW_SIM_TASK_POLLED_US+set}" ] || export SW_SIM_TASK_POLLED_US="$polled"
fi
if [ -n "${SW_SIM_TASK_US:-}" ]; then
  case "$SW_SIM_TASK_US" in *[!0-9.]*|.|*.*.*) die2 "SW_SIM_TASK_US must be a number of microseconds (got '$SW_SIM_TASK_US')" ;; esac
  export STARPU_SIMGRID_TASK_SUBMIT_COST="${STARPU_SIMGRID_TASK_SUBMIT_COST:-0}"
  export STARPU_SIMGRID_FETCHING_INPUT_COST="${STARPU_SIMGRID_FETCHING_INPUT_COST:-0}"
  from="SW_SIM_TASK_US, given"
  [ -z "$task_cost" ] || from="measured by bench/calibrate.sh: $calib/task-cost.$host"
  echo "$me: cost per task ${SW_SIM_TASK_US} us ($from), charged after each task${SW_SIM_TASK_POLLED_US:+; ${SW_SIM_TASK_POLLED_US} us while the rank has point-to-point requests outstanding}"
else
  echo "$me: no cost per task in $calib (task-cost.$host: calibrate again with bench/calibrate.sh): StarPU's fixed simulated costs only (1 us per submission and per input fetch)"
fi
log=$(mktemp "${TMPDIR:-/tmp}/sw-sim.XXXXXX")
est=""
fold=""
trap 'rm -f "$log"; [ -z "$est" ] || rm -rf "$est"; [ -z "$fold" ] || rm -rf "$fold"' EXIT
t0=$(date +%s.%N)
# What starpu_smpirun runs, on the whole platform of bench/sim-platform.sh
# (starpu_smpirun would put each rank's StarPU hosts in zones without
# routes to the others: the collectives that tasks start could not leave
# their rank). Privatization: each rank has its own copy of the globals;
# no host code is charged (only the codelets' models and SMPI's network).
# Folded allocations map one block of SMPI's shared file per blocksize of
# each allocation: 64 MiB blocks (SW_SIM_FOLD_BLOCK), since with SMPI's 1
# MiB a GPT of 350M parameters on 8 ranks passed vm.max_map_count.
# SMPI maps them with MAP_POPULATE: the kernel fills a page-table entry
# per 4 KiB of every rank's folded bytes, the system half of a big run's
# CPU time. SW_SIM_FOLD_DIR=DIR (a tmpfs mounted with huge=always,
# docs/simulation.md "Where the wall time goes") puts SMPI's file there
# (bench/sim_fold.c, preloaded): 2 MiB pages, 512 times fewer entries.
# (SMPI's own smpi/shared-malloc-hugepage wants 2 MiB blocks: a VMA per
# 2 MiB folded, past vm.max_map_count at these sizes.)
# Each SimGrid actor's stack (contexts/stack-size, KiB): every rank's
# threads, and an actor per pending StarPU-MPI request, each holding its
# stack while the request waits. starpu_smpirun passes `ulimit -s` (8 MiB
# here); a Ulysses layout keeps thousands of requests pending, and their
# stacks were most of its simulation's memory (docs/simulation.md, "Not
# done yet"). 256 KiB, or SW_SIM_STACK_KIB (the same simulated steps from
# 64 KiB to 8 MiB: docs/simulation.md); an actor that outgrows it stops at
# SimGrid's guard page (a segmentation fault), not silently.
stack=${SW_SIM_STACK_KIB:-256}
case "$stack" in '' | *[!0-9]* | 0) die2 "SW_SIM_STACK_KIB must be a positive number of KiB (got '$stack')" ;; esac
# Host memory (docs/simulation.md, "Host memory"): those stacks are zeroed
# allocations (SimGrid 3.32's xbt_malloc0), and glibc raises its mmap
# threshold to the size of each mapped block freed, so once the first
# request's actor has ended the stacks come from the heap, every page
# touched by the zeroing. MALLOC_MMAP_THRESHOLD_=131072 in the caller's
# environment maps each stack and each large buffer on its own instead:
# GPT-2 1.5B Ring 2 x dp 32 at 2 layers on 64 ranks peaked at 8699 MiB
# instead of 14193, the same simulated step, but took 704 s of CPU
# instead of 383 (the fresh pages of SMPI's message copies): not the
# default, a choice for a simulation that would not fit.
if [ -n "${MALLOC_MMAP_THRESHOLD_+set}" ]; then
  case "$MALLOC_MMAP_THRESHOLD_" in '' | *[!0-9]*) die2 "MALLOC_MMAP_THRESHOLD_ must be a number of bytes (got '$MALLOC_MMAP_THRESHOLD_')" ;; esac
fi
# A simulation that would exhaust this machine's memory is stopped once
# the memory available (MemAvailable) falls under SW_SIM_MIN_AVAIL_MIB
# (1024), with its figures and what to change, exit 2: left alone, the
# kernel kills some process of its choosing, or the machine crawls.
min_avail=${SW_SIM_MIN_AVAIL_MIB:-1024}
case "$min_avail" in '' | *[!0-9]*) die2 "SW_SIM_MIN_AVAIL_MIB must be a number of MiB (got '$min_avail')" ;; esac
preload=
if [ -n "${SW_SIM_FOLD_DIR:-}" ]; then
  [ -d "$SW_SIM_FOLD_DIR" ] && [ -w "$SW_SIM_FOLD_DIR" ] ||
    die2 "SW_SIM_FOLD_DIR=$SW_SIM_FOLD_DIR is not a writable directory (mount -t tmpfs -o huge=always tmpfs DIR)"
  fold=$(mktemp -d "${TMPDIR:-/tmp}/sw-sim-fold.XXXXXX")
  ${CC:-cc} -O2 -shared -fPIC -o "$fold/sim_fold.so" "$top/bench/sim_fold.c" -ldl ||
    die2 "cannot compile $top/bench/sim_fold.c (for SW_SIM_FOLD_DIR)"
  preload=$fold/sim_fold.so
fi
# No detached sends (smpi/send-is-detached-thresh 0; SMPI detaches every
# send under 64 KiB): SimGrid 3.32 keeps each detached message in flight
# in one list of its maestro and finds it there by a linear search when it
# completes: LLaMA-7B at 256 ranks held 36439 there, and at 512 ranks the
# searches took 95 % of the CPU time (docs/simulation.md, "512 ranks
# end"). A send that is not detached is kept in its sender's
# list instead. MPI does not promise that a send is buffered.
# Open MPI's choice of algorithm for the blocking collectives
# (smpi/coll-selector ompi: the real runs' MPI): SMPI's default ones send
# from every rank to every other at once, and SimGrid's cost of a request
# grows with those its actor has pending -- 5 all-gathers of one integer
# over 512 ranks took 343 s of CPU, 3 s with Open MPI's algorithms
# (bench/sim-colls.sh). The
# blocking collectives are the program's own (the mesh's communicators,
# the gathers of its reports); the step's are non-blocking, which SMPI
# runs one way whatever the selector (docs/simulation.md).
# The network is the platform's figures as written (smpi/bw-factor and
# smpi/lat-factor 1 at every size): SMPI's default factors, fitted to a
# Gigabit Ethernet cluster, multiply a link's latency by up to 11.6 (every
# message of 64 KiB or more) and its bandwidth by 0.34-0.94, so a preset's
# 1 us or a measured 16 us was not what the messages paid
# (docs/simulation.md, "Accuracy, the network as the platform says").
# SW_SIM_SMPI_FACTORS=smpi keeps SMPI's defaults, to compare. SW_SIM_CFG:
# more SimGrid options, after these (e.g. '--cfg=smpi/ois:0:1e-4:0', a
# CPU overhead of 100 us per MPI_Isend on the sending actor).
case "${SW_SIM_SMPI_FACTORS:-1}" in
  1) factors="--cfg=smpi/bw-factor:0:1 --cfg=smpi/lat-factor:0:1" ;;
  smpi) factors= ;;
  *) die2 "SW_SIM_SMPI_FACTORS must be 1 or smpi (got '$SW_SIM_SMPI_FACTORS')" ;;
esac
# A refusal (the program's rules, its memory check) MPI_Aborts, which
# stalls SMPI: the simulation ends with status 0 and SimGrid's list of the
# actors left waiting. The program's message and exit 2 instead.
refused() { # LOG
  msg=$(grep -m 1 '^starweave: error: ' "$1") || return 0
  echo "$msg" >&2
  die2 "the simulated program refused (above; every rank exits 2 in a real run)"
}
# SMPI maps each block of every folded allocation (and each actor's stack)
# as a mapping of its own: a big run passes the kernel's default
# vm.max_map_count (65530), SimGrid aborts with a hint among its own
# options. The rule and the value, and the machine setting that lifts it.
out_of_maps() { # LOG
  said=$(grep -m 1 -e 'Could not map folded virtual memory' -e 'max_map_count' "$1") || return 0
  echo "$said" | cut -c1-200 >&2
  maps=$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 65530)
  more=$((maps * 4 > 1048576 ? maps * 4 : 1048576))
  die2 "the simulation ran out of memory mappings: vm.max_map_count is $maps, and SMPI maps every ${SW_SIM_FOLD_BLOCK:-67108864}-byte block of each rank's folded memory on its own; raise it (as root: sysctl -w vm.max_map_count=$more; it resets at reboot) or simulate fewer layers or ranks"
}
run_sim() { # OUT: the simulation, its output in OUT
  ${preload:+env LD_PRELOAD="$preload"} "$smpirun" -platform "$platform.xml" -hostfile "$platform.hosts" -np "$np" "$prog" "$@" \
    --cfg=smpi/privatization:yes --cfg=smpi/simulate-computation:no --cfg=contexts/stack-size:"$stack" \
    --cfg=smpi/shared-malloc-blocksize:"${SW_SIM_FOLD_BLOCK:-67108864}" --cfg=smpi/send-is-detached-thresh:0 \
    --cfg=smpi/coll-selector:ompi --log=smpi_coll.thres:warning --log=smpi_colls.thres:warning \
    $factors ${SW_SIM_CFG:-} --log=xbt_cfg.thres:warning
}
# The simulation's host memory: every second while it runs, the RssAnon of
# its processes summed (SMPI runs every rank in one process; the folded
# data's shared pages are not anonymous and not counted), the peak kept in
# mem_peak (KiB); the malloc threshold that process's environment carries
# in mem_env (read back); MemAvailable under SW_SIM_MIN_AVAIL_MIB stops it
# (mem_stopped: the KiB left).
mem_peak=0 mem_env='' mem_stopped=''
kids() { # PID: its descendants' PIDs (shell builtins over /proc: no procps, no process forked per entry)
  set -- "$1"
  found=
  while [ $# -gt 0 ]; do
    for st in /proc/[0-9]*/stat; do
      read -r l 2>/dev/null < "$st" || continue
      l=${l##*) }
      l=${l#* }
      [ "${l%% *}" = "$1" ] || continue
      c=${st#/proc/}
      c=${c%/stat}
      found="$found $c"
      set -- "$@" "$c"
    done
    shift
  done
  echo "$found"
}
kib() { # FILE KEY: kv = the KiB figure of KEY in a /proc file (0 when gone; no subshell)
  kv=0
  while read -r k v _; do
    [ "$k" = "$2" ] && { kv=$v; return; }
  done 2>/dev/null < "$1"
}
sampled() { # CMD...: runs it, its host memory sampled and guarded as above; its exit status
  "$@" &
  spid=$!
  n=0
  while kill -0 "$spid" 2>/dev/null; do
    # the process tree looked up each second of the first five, then every
    # tenth (it settles once the simulation has started; a look-up reads
    # every /proc entry)
    [ "$n" -ge 5 ] && [ $((n % 10)) != 0 ] || procs=$(kids "$spid")
    n=$((n + 1))
    sum=0 big=0 bigp=
    for p in $procs; do
      kib "/proc/$p/status" RssAnon:
      sum=$((sum + kv))
      [ "$kv" -le "$big" ] || { big=$kv; bigp=$p; }
    done
    [ "$sum" -le "$mem_peak" ] || mem_peak=$sum
    if [ -n "$bigp" ] && [ -z "$mem_env" ]; then # read once ('-': not set)
      mem_env=$(tr '\0' '\n' < "/proc/$bigp/environ" 2>/dev/null | sed -n 's/^MALLOC_MMAP_THRESHOLD_=//p')
      mem_env=${mem_env:--}
    fi
    kib /proc/meminfo MemAvailable:
    avail=$kv
    if [ "$avail" -lt $((min_avail * 1024)) ]; then
      mem_stopped=$avail
      # shellcheck disable=SC2046 # PIDs are words
      kill -TERM $(kids "$spid") 2>/dev/null
      sleep 1
      # shellcheck disable=SC2046
      kill -KILL $(kids "$spid") 2>/dev/null
      break
    fi
    sleep 1
  done
  wait "$spid"
}
out_of_memory() { # after a sampled run: the guard's stop, said (exit 2)
  [ -n "$mem_stopped" ] || return 0
  die2 "stopped: the simulation held $((mem_peak / 1024)) MiB of this machine's memory and left $((mem_stopped / 1024)) MiB available, under SW_SIM_MIN_AVAIL_MIB=$min_avail: simulate fewer layers (bench/sim-scale.sh --extrapolate) or ranks (--stand-in), or set MALLOC_MMAP_THRESHOLD_=131072 (less memory, more CPU time: docs/simulation.md, \"Host memory\")"
}
nest=0
if [ "$estimate" = 1 ]; then
  # Sizes never calibrated (src/core/sim_model.c): a first pass lists every
  # footprint the run needs and lacks (SW_SIM_MISSING), each such task
  # taking the time of one measured size of its codelet meanwhile
  # (SW_SIM_SUBSTITUTE: the task graph does not depend on the times);
  # then each is given a regression estimate in a copy of the
  # calibration, which the run proper uses.
  est=$(mktemp -d "${TMPDIR:-/tmp}/sw-sim-est.XXXXXX")
  mkdir "$est/cal" "$est/pass1"
  cp -R "$calib/codelets" "$calib/bus" "$est/cal/"
  cp -R "$calib/codelets" "$calib/bus" "$est/pass1/"
  for f in "$est/cal/codelets/"*/*".$host"; do
    awk -v s="$(basename "$f" ".$host")" '/^# hash/ { h = 1; next } h && NF == 8 && $8 > 0 { print s, $1; exit }' "$f"
  done > "$est/substitute"
  : > "$est/missing"
  # that pass writes no trace (--trace FILE): nobody reads it, and its
  # records and their gathering to rank 0 cost wall time (more with the
  # ranks); the trace adds no task, so the list is the same
  pass1() {
    n=$#
    while [ "$n" -gt 0 ]; do
      case "$1" in
        --trace) [ "$n" -lt 2 ] || { shift; n=$((n - 1)); } ;;
        --trace=*) ;;
        *) set -- "$@" "$1" ;;
      esac
      shift
      n=$((n - 1))
    done
    STARPU_PERF_MODEL_DIR="$est/pass1" SW_SIM_MISSING="$est/missing" SW_SIM_SUBSTITUTE="$est/substitute" \
      run_sim "$@" $list_args
  }
  rc=0
  sampled pass1 "$@" > "$est/pass1.log" 2>&1 || rc=$?
  out_of_memory
  refused "$est/pass1.log"
  out_of_maps "$est/pass1.log"
  [ "$rc" = 0 ] || {
    grep '^starweave: simulation:' "$est/pass1.log" >&2 ||
      { tail -n 20 "$est/pass1.log" >&2; echo "$me: the first pass (listing the sizes to estimate) failed" >&2; }
    exit 2
  }
  for sym in $(cut -d' ' -f1 "$est/missing" | sort -u); do
    f=$(ls "$est/cal/codelets/"*/"$sym.$host" 2>/dev/null | head -n 1)
    [ -n "$f" ] || die2 "codelet '$sym' has no calibration at all under host '$host' in $calib: nothing to fit a regression on; run bench/calibrate.sh with a layout that runs it"
    python3 "$top/bench/perfmodel_merge.py" --estimate "$est/missing" "$sym" "$f" > "$est/est.$sym" ||
      die2 "no regression for codelet '$sym' (above)"
    sed "s/^/$me: /" "$est/est.$sym"
  done
  nest=$(sort -u "$est/missing" | grep -c . || true)
  export STARPU_PERF_MODEL_DIR="$est/cal"
fi
set +e
sampled run_sim "$@" > "$log" 2>&1
rc=$?
set -e
out_of_memory
refused "$log"
out_of_maps "$log"
t1=$(date +%s.%N)
# StarPU warns at every task whose history model has fewer than 10
# samples of its size (it uses them anyway): one line per model instead
# (and two lines that are no news: SMPI reports MPI_THREAD_SINGLE, whose
# limits src/core/sim_smpi.cc lifts; SMPI does not time host code, as intended)
# StarPU-MPI's end under SMPI: its receives of message envelopes stay
# posted on the communicators whose last envelope came before the end, and
# SMPI's MPI_Cancel does not wake the SimGrid actors StarPU-MPI left waiting
# for them, so after the program's main returned SimGrid reports a deadlock
# of those actors alone (each rank's SMPI process and its "wait for mpi
# transfer" actors). That report, and only that one, is replaced by a line;
# a deadlock with any other actor still waiting is a real one and kept.
end_only=0
if grep -q 'Deadlock detected' "$log" && grep -q '^simulation: ' "$log" &&
   ! grep '\] Actor [0-9]* (' "$log" | grep -v -e '(wait for mpi transfer@' -e '([0-9]*@StarPU-MPI[0-9]*-rank)' | grep -q .; then
  end_only=1
fi
grep -v -e 'is not calibrated enough' -e '_starpu_mpi_print_thread_level_support' \
  -e 'You did not set the power of the host running the simulation' "$log" |
  if [ "$end_only" = 1 ]; then
    awk '/Deadlock detected/ { print "sim: after the program ended: StarPU-MPI'"'"'s envelope receives left waiting at its shutdown (SMPI'"'"'s MPI_Cancel does not end them; SimGrid calls it a deadlock; harmless)"; skip = 1; next }
         skip && (/ker_engine\/INFO/ || /^Backtrace/ || /^  ->/ || /^$/ || /Stalling SMPI instance/) { next }
         { skip = 0; print }'
  else cat; fi || true
weak=$(sed -n 's/.*model \([^ ]*\) is not calibrated enough for .* size \([0-9]*\) .*(only \([0-9]*\) measurements).*/\1 size \2: \3 samples/p' "$log" | sort -u)
if [ -n "$weak" ]; then
  echo "$me: models with fewer than 10 samples of a size (used anyway; calibrate with more steps or --runs):"
  echo "$weak" | sed "s/^/$me:   /"
fi
# a task without a calibrated time: src/core/sim_model.c names it and exits 2
# (StarPU's own assertion, for a codelet outside SW_PERFMODEL, names only
# the codelet)
if grep -q '^starweave: simulation: codelet' "$log"; then
  exit 2
fi
miss=$(sed -n 's/.*Codelet \([^ ]*\) does not have a perfmodel.*/\1/p' "$log" | head -n 1)
if [ -n "$miss" ]; then
  die2 "codelet '$miss' has no calibrated time for a size this run needs (host '$host', $calib): run bench/calibrate.sh with this shape and layout (the real build records every codelet's size it runs)"
fi
[ "$rc" -eq 0 ] || { echo "$me: the simulated run failed (exit $rc)" >&2; exit "$rc"; }
# SimGrid ends a deadlocked simulation with status 0: any deadlock but the
# harmless one of StarPU-MPI's end (above) fails the run
if [ "$end_only" = 0 ] && grep -q 'Deadlock detected' "$log"; then
  echo "$me: the simulation deadlocked: SimGrid's list of the actors left waiting is above" >&2
  exit 1
fi
sim=$(sed -n 's/^simulation: \([0-9.]*\) simulated ms\/step.*/\1/p' "$log" | tail -n 1)
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
[ "$nest" = 0 ] ||
  echo "$me: $nest task size(s) took regression ESTIMATES (listed above as ESTIMATE), not measured times: an estimate, not a calibration"
echo "$me: $np simulated rank(s) on $platform.xml: ${sim:-?} simulated ms/step; the simulation took $wall s of wall time"
passes=; [ "$estimate" = 0 ] || passes=", both passes"
if [ "${mem_env:--}" != - ]; then malloc="allocations from $mem_env bytes mapped on their own (MALLOC_MMAP_THRESHOLD_)"
else malloc="glibc's own mmap threshold (MALLOC_MMAP_THRESHOLD_ not set: docs/simulation.md, \"Host memory\")"; fi
echo "$me: host memory: peak $((mem_peak / 1024)) MiB anonymous (the simulation's processes, sampled every second$passes); $malloc"
