#!/bin/sh
# The simulation (docs/simulation.md): gpt_train (tp 2 + sp, small shape)
# calibrated by a real run of this layout (bench/calibrate.sh), then run by
# bench/sim.sh under starpu_smpirun on 2 simulated nodes of a typed
# platform. Proves the simulation ran: the program says it is simulated,
# prints simulated ms/step (StarPU's simulated clock) and each simulated
# rank's memory model; the simulated time is not the wall time the run took;
# and the network is SMPI's: the same run on a platform with a 1000x slower
# link between the nodes takes more simulated time per step (the collectives'
# MPI calls reach SMPI from their tasks); a message pays the platform's
# latency as written: 1 ms more between the nodes adds about 1 ms per
# collective to the step, at most 1.25 with the step's few other messages
# (SMPI's default factors, which bench/sim.sh sets to 1, charged 1.8 ms);
# links are full duplex unless told half: the slow link's step is more
# than 1.5x longer half duplex. The cost per task with a StarPU-MPI
# request pending: recorded by a 2-rank calibration and charged only while
# a rank has point-to-point requests outstanding (pp 2's step lengthens,
# tp 2 + sp's, with none, does not). Two ranks sharing a node's one core
# (bench/sim-platform.sh --cores) take longer than on a core each. A
# simulated rank's memory is its --memory-budget-mb (1 TiB here), no limit
# without one: a model larger than this machine simulates. Bad input: a
# platform with fewer hosts than ranks, a model larger than its budget, a
# calibration that does not exist, a run past vm.max_map_count, and a shape
# whose sizes were never calibrated are refused with exit 2 and what to do; the
# same shape with --estimate runs on regression estimates, labelled.
# Needs a simulation build (configure --with-starpu=<autotools/build-starpu.sh
# --simgrid's prefix>): this build if it is one, else $SW_SIM_BUILD, else
# build-sim in the source tree; and a real build to calibrate with: this
# build if it is real, else $SW_REAL_BUILD, else build in the source tree.
# Skips, saying which is missing, otherwise.
. "${top_srcdir:-.}/tests/common.sh"
is_sim() { [ -f "$1/config.h" ] && grep -q '^#define STARWEAVE_SIMGRID 1' "$1/config.h"; }
is_real() { [ -f "$1/config.h" ] && ! is_sim "$1" && [ -x "$1/examples/gpt_train" ]; }
top_srcdir=$(cd "$top_srcdir" && pwd)
top_builddir=$(cd "$top_builddir" && pwd)
if is_sim "$top_builddir"; then sim_build=$top_builddir
else sim_build=${SW_SIM_BUILD:-$top_srcdir/build-sim}; fi
if is_real "$top_builddir"; then real_build=$top_builddir
else real_build=${SW_REAL_BUILD:-$top_srcdir/build}; fi
if ! is_sim "$sim_build" || [ ! -x "$sim_build/examples/gpt_train" ]; then
  echo "SKIP: no simulation build in $sim_build (autotools/build-starpu.sh --simgrid, then configure --with-starpu=PREFIX there and make; or set SW_SIM_BUILD; .ci/run does both)"
  exit 77
fi
if ! is_real "$real_build"; then
  echo "SKIP: no real build with examples/gpt_train in $real_build to calibrate with (set SW_REAL_BUILD)"
  exit 77
fi
echo "simulation build: $sim_build; real build (calibration): $real_build"
shape="--layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 --vocab 128"
layout="--tp 2 --sp"
calib=$TMPD/calibration
host=test-sim

# calibration: 10 steps, so that every per-step codelet's size has the 10
# samples StarPU wants before it trusts a history model (each rank records
# on its own, merged: with one file for both, the last rank to exit once
# dropped a size of sw_param_init only the other had run)
t0=$(date +%s)
sh "$top_srcdir/bench/calibrate.sh" --build "$real_build" --calibration "$calib" --host $host --np 2 \
  examples/gpt_train $layout $shape --steps 10 --quiet --log "$TMPD/calib.csv" > "$TMPD/calib" 2>&1
rc=$?
[ "$rc" = 0 ] || cat "$TMPD/calib"
check "calibration by a real run ($(tail -n 2 "$TMPD/calib" | head -n 1); $(($(date +%s) - t0)) s, exit $rc)" \
  [ "$rc" = 0 -a -r "$calib/bus/$host.config" ]

# sim_ms FILE: the simulated ms/step bench/sim.sh printed in FILE
sim_ms() { sed -n 's/^simulation: \([0-9.]*\) simulated ms\/step.*/\1/p' "$1"; }
sim() { # sim OUT PLATFORM [ARGS]: bench/sim.sh of gpt_train, output in $TMPD/OUT
  out=$1 plat=$2; shift 2
  timeout -k 10 300 sh "$top_srcdir/bench/sim.sh" --build "$sim_build" --calibration "$calib" --host $host \
    --platform "$plat" "$@" > "$TMPD/$out" 2>&1
}
sh "$top_srcdir/bench/sim-platform.sh" --nodes 2 --preset eth25 --out "$TMPD/eth" > /dev/null
sh "$top_srcdir/bench/sim-platform.sh" --nodes 2 --preset eth25 --inter-bw 0.003125 --out "$TMPD/slow" > /dev/null
sh "$top_srcdir/bench/sim-platform.sh" --nodes 2 --preset eth25 --inter-lat 1020 --out "$TMPD/lat" > /dev/null
sh "$top_srcdir/bench/sim-platform.sh" --nodes 2 --preset eth25 --inter-bw 0.003125 --duplex half --out "$TMPD/half" > /dev/null
if want "simulated run"; then
  sim fast "$TMPD/eth" examples/gpt_train $layout $shape --steps 3 --log "$TMPD/sim.csv"
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/fast"
  check "bench/sim.sh: gpt_train $layout on 2 simulated nodes ends (exit $rc)" [ "$rc" = 0 ]
  n=$(grep -c 'SIMULATED run' "$TMPD/fast")
  check "the program says once that it is simulated ($n time(s))" [ "$n" = 1 ]
  line=$(grep '^simulation: ' "$TMPD/fast")
  echo "$line"
  ms=$(sim_ms "$TMPD/fast")
  total=$(echo "$line" | sed -n 's/.* in \([0-9.]*\) simulated ms, .*/\1/p')
  wall=$(echo "$line" | sed -n 's/.*simulated ms, \([0-9.]*\) s of wall time.*/\1/p')
  check "simulated ms/step printed and positive (${ms:-none})" awk -v v="${ms:-0}" 'BEGIN { exit !(v > 0) }'
  # The cost per task: measured by the calibration, said, charged (charging none shortens the step), and the
  # same simulated step in every run, with two workers a rank too (StarPU's charge of its scheduler's measured
  # time made that step 21-31 ms from one run to the next)
  cost=$(sed -n '1s/ .*//p' "$calib/task-cost.$host" 2>/dev/null)
  said=$(grep -c "^sim: cost per task $cost us (measured by bench/calibrate.sh" "$TMPD/fast")
  # and where a rank has two workers (one rank, 1 step: only the figure is read)
  sh "$top_srcdir/bench/calibrate.sh" --build "$real_build" --calibration "$TMPD/cal2" --host $host \
    examples/gpt_train $shape --ncpus 2 --steps 1 --quiet --log "$TMPD/calib.csv" > "$TMPD/calib2" 2>&1
  cost2=$(sed -n '1s/ .*//p' "$TMPD/cal2/task-cost.$host" 2>/dev/null)
  [ -n "$cost2" ] || cat "$TMPD/calib2"
  check "the cost per task measured where a rank has two workers too (${cost2:-none} us)" [ -n "$cost2" ]
  sim w2a "$TMPD/eth" examples/gpt_train $layout $shape --steps 3 --ncpus 2
  sim w2b "$TMPD/eth" examples/gpt_train $layout $shape --steps 3 --ncpus 2
  w2a=$(sim_ms "$TMPD/w2a") w2b=$(sim_ms "$TMPD/w2b")
  export SW_SIM_TASK_US=0
  sim none "$TMPD/eth" examples/gpt_train $layout $shape --steps 3
  unset SW_SIM_TASK_US
  none=$(sim_ms "$TMPD/none")
  # tp 2 + sp's collectives are MPI's, run by tasks: no point-to-point request is ever outstanding, so the cost
  # per task with one pending is never charged
  export SW_SIM_TASK_POLLED_US=1000
  sim polled "$TMPD/eth" examples/gpt_train $layout $shape --steps 3
  unset SW_SIM_TASK_POLLED_US
  polled=$(sim_ms "$TMPD/polled")
  check "tp 2 + sp with 1000 us a task while a point-to-point request is pending: ${polled:-none} simulated ms/step, the same as ${ms:-none} (none is)" \
    [ -n "$polled" -a "$polled" = "$ms" ]
  check "the cost per task measured (${cost:-none} us), said ($said), charged (${ms:-none} simulated ms/step, ${none:-none} charging none); two workers a rank twice: ${w2a:-none} and ${w2b:-none} ms/step" \
    eval '[ -n "$cost" ] && [ "$said" = 1 ] && [ -n "$w2a" ] && [ "$w2a" = "$w2b" ] &&
      awk -v z="${none:-0}" -v m="${ms:-0}" "BEGIN { exit !(z > 0 && m > z) }"'
  # wall time has 0.1 s steps: the two agree within that only by chance
  check "the simulated time is not the wall time (3 steps: ${total:-?} simulated ms, ${wall:-?} s of wall time)" \
    awk -v s="${total:-0}" -v w="${wall:-0}" 'BEGIN { d = s - 1000 * w; if (d < 0) d = -d; exit !(s > 0 && d > 100) }'
  n=$(grep -c '^memory: rank [01]: the model needs.*(simulated: no memory limit without --memory-budget-mb)$' "$TMPD/fast")
  check "the memory model of each simulated rank printed, no limit without a budget ($n of 2)" [ "$n" = 2 ]
  # a simulated rank's memory is the budget, not this machine's: 1 TiB, more than this machine has
  sim budget "$TMPD/eth" examples/gpt_train $layout $shape --steps 1 --memory-budget-mb 1048576
  n=$(grep -c '^memory: rank [01]: the model needs.*(this rank may count on 1048576.00 MiB more)$' "$TMPD/budget")
  [ "$n" = 2 ] || cat "$TMPD/budget"
  check "a simulated rank's memory is its budget, 1 TiB on this machine of $(($(getconf _PHYS_PAGES) * $(getconf PAGESIZE) >> 20)) MiB ($n of 2 ranks)" [ "$n" = 2 ]
  n=$(grep -c 'loss (not computed)' "$TMPD/fast")
  check "no loss printed as computed ($n step line(s) say 'not computed')" [ "$n" = 3 ]
  # step_on NAME: the run of the first case on platform $TMPD/NAME (its output in $TMPD/NAME.out, shown if it
  # fails); prints its simulated ms/step (nothing if it failed)
  step_on() {
    sim "$1.out" "$TMPD/$1" examples/gpt_train $layout $shape --steps 3 --log "$TMPD/sim.csv" || cat "$TMPD/$1.out" >&2
    sim_ms "$TMPD/$1.out"
  }
  slow=$(step_on slow)
  check "a 1000x slower link between the nodes: ${slow:-none} simulated ms/step against ${ms:-none}" \
    awk -v a="${slow:-0}" -v b="${ms:-0}" 'BEGIN { exit !(b > 0 && a > 1.5 * b) }'
  # the slow link in both directions at once: full duplex (eth25's), each rank's collective messages to the
  # other cross it side by side; half duplex, they share its bandwidth
  half=$(step_on half)
  check "the slow link half duplex: ${half:-none} simulated ms/step against ${slow:-none} full duplex" \
    awk -v a="${half:-0}" -v b="${slow:-0}" 'BEGIN { exit !(b > 0 && a > 1.5 * b) }'
  # eth25's 20 us between the nodes against 1020: each of the step's collectives (one exchange between the
  # two ranks) pays the extra 1 ms at most once, and most sit on the step's critical path; the step's other
  # messages (its timing and loss reductions) add a few
  lat=$(step_on lat)
  colls=$(sed -n 's/^communication: rank 0 sent .* in \([0-9.]*\) collectives.*/\1/p' "$TMPD/lat.out")
  check "1 ms more latency between the nodes: ${lat:-none} simulated ms/step against ${ms:-none}, ${colls:-no} collectives per step: 0.25-1.25 ms more per collective" \
    awk -v a="${lat:-0}" -v b="${ms:-0}" -v n="${colls:-0}" 'BEGIN { d = (a - b) / n; exit !(n > 0 && b > 0 && d >= 0.25 && d <= 1.25) }'
  # A node's cores (bench/sim-platform.sh --cores; autotools/starpu-simgrid-cores.patch): the two ranks on one
  # node of 2 cores run a worker each on a core of its own, the same step as on two nodes' (but the network);
  # on a node of 1 core their tasks share it: the step is longer, by up to 2x
  sh "$top_srcdir/bench/sim-platform.sh" --nodes 1 --ranks-per-node 2 --cpus 1 --preset eth25 --cores 2 --out "$TMPD/own" > /dev/null
  sh "$top_srcdir/bench/sim-platform.sh" --nodes 1 --ranks-per-node 2 --cpus 1 --preset eth25 --cores 1 --out "$TMPD/shared" > /dev/null
  on_cores() { sim "$1.out" "$TMPD/$1" examples/gpt_train $layout $shape --ncpus 1 --steps 3 || cat "$TMPD/$1.out" >&2; sim_ms "$TMPD/$1.out"; }
  own=$(on_cores own) shared=$(on_cores shared)
  check "2 ranks on a node of 2 cores: ${own:-none} simulated ms/step; on a node of 1 core: ${shared:-none} (1.3-2x)" \
    awk -v a="${shared:-0}" -v b="${own:-0}" 'BEGIN { exit !(b > 0 && a > 1.3 * b && a <= 2.01 * b) }'
fi
# The layouts that move StarPU-MPI's messages or start a collective on one
# rank before the other: pp 2 (activations and gradients between the
# stages; the last stage reaches the tied embedding's all-reduce first) and
# Ulysses 2 (all-to-alls behind gate tasks). Each is calibrated by a real
# run of its own, then simulated: it must end, with its traffic counted.
if want "pipeline and Ulysses"; then
  for lay in "--pp 2 --grad-accum 4:pp" "--ulysses 2:ulysses"; do
    args=${lay%:*} group=${lay##*:}
    shape4=$(echo "$shape" | sed 's/--batch 2/--batch 4/')
    sh "$top_srcdir/bench/calibrate.sh" --build "$real_build" --calibration "$calib-$group" --host $host-$group --np 2 \
      examples/gpt_train $args $shape4 --steps 10 --quiet --log "$TMPD/calib.csv" > "$TMPD/calib-$group" 2>&1 ||
      cat "$TMPD/calib-$group"
    timeout -k 10 300 sh "$top_srcdir/bench/sim.sh" --build "$sim_build" --calibration "$calib-$group" --host $host-$group \
      --platform "$TMPD/eth" examples/gpt_train $args $shape4 --steps 3 --log "$TMPD/sim.csv" > "$TMPD/$group" 2>&1
    rc=$?
    ms=$(sim_ms "$TMPD/$group")
    sent=$(sed -n "s/^communication: rank 0 sent \([0-9.]*\) MiB per step on the $group group.*/\1/p" "$TMPD/$group")
    [ "$rc" = 0 ] && [ -n "$ms" ] && [ -n "$sent" ] || cat "$TMPD/$group"
    check "gpt_train $args simulated on 2 nodes: exit $rc, ${ms:-no} simulated ms/step, rank 0 sent ${sent:-nothing} MiB per step on the $group group" \
      [ "$rc" = 0 -a -n "$ms" -a -n "$sent" ]
    [ "$group" = pp ] || continue
    # the cost per task while a StarPU-MPI request is pending: measured by the 2-rank calibration (its second
    # line), and charged to the tasks that end while the rank has point-to-point requests outstanding -- the
    # pipeline's messages are: 1000 us there lengthens its step
    polled=$(sed -n '2s/ .*//p' "$calib-$group/task-cost.$host-$group")
    SW_SIM_TASK_POLLED_US=1000 timeout -k 10 300 sh "$top_srcdir/bench/sim.sh" --build "$sim_build" \
      --calibration "$calib-$group" --host $host-$group --platform "$TMPD/eth" examples/gpt_train $args $shape4 \
      --steps 3 > "$TMPD/$group-polled" 2>&1 || cat "$TMPD/$group-polled"
    slow=$(sim_ms "$TMPD/$group-polled")
    check "gpt_train $args: the cost per task with a request pending measured (${polled:-none} us), and charged where requests are pending: at 1000 us ${slow:-no} simulated ms/step against ${ms:-no}" \
      eval '[ -n "$polled" ] && awk -v a="${slow:-0}" -v b="${ms:-0}" "BEGIN { exit !(b > 0 && a > 1.2 * b) }"'
  done
fi
# ZeRO-1's all-gather of the updated parameters (sw_allgather_inplace): in
# simulation MPI's, from and into folded memory, where MPI runs the
# collectives -- StarPU-MPI's ring sends, which SMPI copies into a private
# buffer each, took a 64-rank LLaMA-7B run past this machine's memory
# (docs/simulation.md). The trace must show it as MPI's.
if want "ZeRO-1 all-gather"; then
  z1="--dp 2 --zero 1 --collective-algo mpi"
  sh "$top_srcdir/bench/calibrate.sh" --build "$real_build" --calibration "$calib-z1" --host $host-z1 --np 2 \
    examples/gpt_train $z1 $shape --steps 10 --quiet --log "$TMPD/calib.csv" > "$TMPD/calib-z1" 2>&1 || cat "$TMPD/calib-z1"
  timeout -k 10 300 sh "$top_srcdir/bench/sim.sh" --build "$sim_build" --calibration "$calib-z1" --host $host-z1 \
    --platform "$TMPD/eth" examples/gpt_train $z1 $shape --steps 2 --log "$TMPD/sim.csv" --trace "$TMPD/z1.json" > "$TMPD/z1" 2>&1
  rc=$?
  ms=$(sim_ms "$TMPD/z1")
  n=$(grep -o 'allgather_inplace_mpi' "$TMPD/z1.json" 2>/dev/null | wc -l)
  [ "$rc" = 0 ] && [ -n "$ms" ] && [ "$n" -gt 0 ] || cat "$TMPD/z1"
  check "gpt_train $z1 simulated: exit $rc, ${ms:-no} simulated ms/step, $n trace record(s) of MPI's in-place all-gather" \
    [ "$rc" = 0 -a -n "$ms" -a "$n" -gt 0 ]
fi
# The collectives MPI runs, simulated as point-to-point exchanges
# (src/comm/comm_nbc.c): one data-parallel group of 3 ranks (one round: 2
# exchanges per collective, one per peer), of 16 on 2 nodes (recursive
# halving and doubling: 4 exchanges per reduce-scatter or all-gather, 8 per
# all-reduce) and of 12 (a ring: 11 and 22). Their sizes estimated from
# the calibration. Each rank's counters must show that many exchanges per
# collective MPI ran.
if want "collectives at 3, 16 and 12 ranks"; then
  sh "$top_srcdir/bench/sim-platform.sh" --nodes 3 --preset eth25 --out "$TMPD/eth3" > /dev/null
  sh "$top_srcdir/bench/sim-platform.sh" --nodes 2 --ranks-per-node 8 --preset eth25 --out "$TMPD/eth16" > /dev/null
  sh "$top_srcdir/bench/sim-platform.sh" --nodes 2 --ranks-per-node 6 --preset eth25 --out "$TMPD/eth12" > /dev/null
  for run in "3:2:2" "16:4:8" "12:11:22"; do
    np=${run%%:*} rest=${run#*:}
    lo=${rest%%:*} rest=${rest#*:}
    hi=${rest%%:*} args="--dp $np --zero 1"
    t0=$(date +%s)
    sim dp$np "$TMPD/eth$np" --estimate examples/gpt_train $args $(echo "$shape" | sed "s/--batch 2/--batch $np/") \
      --collective-algo mpi --steps 2 --counters
    rc=$?
    ms=$(sim_ms "$TMPD/dp$np")
    bad=$(sed -n 's/^counters: rank \([0-9]*\):.* mpi_collective=\([0-9]*\).* sim_exchange=\([0-9]*\).*/\1 \2 \3/p' "$TMPD/dp$np" |
      awk -v lo=$lo -v hi=$hi '{ n++; if (!($2 > 0 && $3 >= lo * $2 && $3 <= hi * $2)) print "rank " $1 ": " $2 " collectives, " $3 " exchanges" }
        END { if (n != '"$np"') print n + 0 " counter lines" }')
    ex=$(sed -n 's/^counters: rank 0:.* mpi_collective=\([0-9]*\).* sim_exchange=\([0-9]*\).*/\1 collectives, \2 exchanges/p' "$TMPD/dp$np")
    [ "$rc" = 0 ] && [ -n "$ms" ] && [ -z "$bad" ] || cat "$TMPD/dp$np"
    check "gpt_train $args on $np simulated ranks: exit $rc, ${ms:-no} simulated ms/step, rank 0 ${ex:-no counters}, $lo-$hi exchanges per collective on every rank${bad:+ (not: $bad)}, $(($(date +%s) - t0)) s" \
      [ "$rc" = 0 -a -n "$ms" -a -z "$bad" ]
  done
fi
if want "bad input"; then
  sh "$top_srcdir/bench/sim-platform.sh" --nodes 1 --out "$TMPD/one" > /dev/null
  t0=$(date +%s)
  sim small "$TMPD/one" --np 2 examples/gpt_train $layout $shape --steps 1
  rc=$?
  msg="the platform has fewer hosts than ranks: $TMPD/one.hosts lists 1 host(s) for 2 rank(s)"
  n=$(grep -c -F "$msg" "$TMPD/small")
  [ "$rc" = 2 ] && [ "$n" = 1 ] || cat "$TMPD/small"
  check "a platform of 1 host for 2 ranks: exit $rc (expected 2), the rule printed $n time(s), $(($(date +%s) - t0)) s" \
    [ "$rc" = 2 -a "$n" = 1 ]
  sh "$top_srcdir/bench/sim-platform.sh" --nodes 1 --cores 0 --out "$TMPD/nocores" > "$TMPD/nocores.out" 2>&1
  rc=$?
  n=$(grep -c -F -- "--cores must be a positive integer (got '0')" "$TMPD/nocores.out")
  check "a node of 0 cores: exit $rc (expected 2), the rule printed $n time(s)" [ "$rc" = 2 -a "$n" = 1 ]
  SW_SIM_STACK_KIB=8M sim stack "$TMPD/eth" examples/gpt_train $layout $shape --steps 1
  rc=$?
  n=$(grep -c -F "SW_SIM_STACK_KIB must be a positive number of KiB (got '8M')" "$TMPD/stack")
  check "an actor stack size that is not a number of KiB: exit $rc (expected 2), the rule printed $n time(s)" [ "$rc" = 2 -a "$n" = 1 ]
  sim nocal "$TMPD/eth" --host no-such-host examples/gpt_train $layout $shape --steps 1
  rc=$?
  n=$(grep -c "no calibration for host 'no-such-host'" "$TMPD/nocal")
  [ "$rc" = 2 ] && [ "$n" = 1 ] || cat "$TMPD/nocal"
  check "a calibration that does not exist: exit $rc (expected 2), named ($n)" [ "$rc" = 2 -a "$n" = 1 ]
  # a model larger than its budget: the program's refusal (its MPI_Abort
  # stalls SMPI, which ends with status 0 and a list of waiting actors)
  # (with --estimate, in its first pass)
  for est in "" --estimate; do
    sim small "$TMPD/eth" $est examples/gpt_train $layout $shape --steps 1 --memory-budget-mb 1
    rc=$?
    n=$(grep -c '^starweave: error: the model needs at least .* more than the 1.0 MiB of the memory budget per rank' "$TMPD/small")
    dl=$(grep -c -e 'deadlocked' -e 'pass .* failed' "$TMPD/small")
    [ "$rc" = 2 ] && [ "$n" = 1 ] && [ "$dl" = 0 ] || cat "$TMPD/small"
    check "a simulated model larger than its budget (--memory-budget-mb 1${est:+, $est}): exit $rc (expected 2), the rule printed $n time(s), called a deadlock or a failure $dl time(s)" \
      [ "$rc" = 2 -a "$n" = 1 -a "$dl" = 0 ]
  done
  # another shape: its sizes were never run here
  sim nosize "$TMPD/eth" examples/gpt_train $layout $(echo "$shape" | sed 's/--hidden 64/--hidden 128/') --steps 1
  rc=$?
  what=$(sed -n "s/^starweave: simulation: codelet '\([^']*\)' has no calibrated time for a task of [0-9]* bytes.*calibrate this shape.*/\1/p" "$TMPD/nosize" | head -n 1)
  [ "$rc" = 2 ] && [ -n "$what" ] || cat "$TMPD/nosize"
  check "a size never calibrated (--hidden 128): exit $rc (expected 2), the codelet and its size named (${what:-none}), $(($(date +%s) - t0)) s" \
    [ "$rc" = 2 -a -n "$what" ]
  # the same with --estimate: every size the calibration lacks gets a
  # regression estimate from the measured ones, printed as such; with
  # --trace, which the first pass leaves out (bench/sim.sh), the run
  # proper writes it
  sim est "$TMPD/eth" --estimate examples/gpt_train $layout $(echo "$shape" | sed 's/--hidden 64/--hidden 128/') --steps 2 \
    --trace "$TMPD/est.json"
  rc=$?
  n=$(grep -c '^sim: ESTIMATE ' "$TMPD/est")
  ms=$(sim_ms "$TMPD/est")
  said=$(grep -c "^sim: $n task size(s) took regression ESTIMATES" "$TMPD/est")
  [ -s "$TMPD/est.json" ] && tr=written || tr=missing
  [ "$rc" = 0 ] && [ "$n" -gt 0 ] && [ -n "$ms" ] && [ "$said" = 1 ] && [ $tr = written ] || cat "$TMPD/est"
  check "--estimate at --hidden 128: exit $rc, $n size(s) estimated and labelled ($said), ${ms:-no} simulated ms/step, trace $tr" \
    [ "$rc" = 0 -a "$n" -gt 0 -a -n "$ms" -a "$said" = 1 -a $tr = written ]
fi
# A model larger than this machine: its buffers are folded, and StarPU's
# main-RAM limit is the simulated rank's, not this machine's (hwloc's: it
# refused the 70 GiB of a LLaMA-7B rank, "cannot allocate"). 2 ranks of
# some 35 GiB each, on --estimate's sizes, the collectives MPI's as at
# the calibration's small sizes.
if want "larger than this machine"; then
  big=$(echo "$shape" | sed 's/--hidden 64/--hidden 1024/; s/--batch 2/--batch 12288/')
  have=$(($(getconf _PHYS_PAGES) * $(getconf PAGESIZE) >> 20))
  # with the fixed malloc threshold docs/simulation.md's "Host memory" gives
  # a simulation that would not fit: bench/sim.sh reads it back from the
  # simulation's process
  MALLOC_MMAP_THRESHOLD_=131072 sim large "$TMPD/eth" --estimate examples/gpt_train $layout $big --collective-algo mpi --steps 2
  rc=$?
  ms=$(sim_ms "$TMPD/large")
  need=$(sed -n 's/^memory: rank [01]: the model needs \([0-9]*\)\..*/\1/p' "$TMPD/large" | awk '{ s += $1 } END { print s + 0 }')
  [ "$rc" = 0 ] && [ -n "$ms" ] || cat "$TMPD/large"
  check "a model of $need MiB over its 2 ranks simulated on this machine of $have MiB: exit $rc, ${ms:-no} simulated ms/step" \
    [ "$rc" = 0 -a -n "$ms" -a "$need" -gt "$have" ]
  peak=$(sed -n 's/^sim: host memory: peak \([0-9]*\) MiB anonymous.*/\1/p' "$TMPD/large")
  thr=$(sed -n 's/^sim: host memory: .*allocations from \([0-9?]*\) bytes mapped on their own.*/\1/p' "$TMPD/large")
  check "its host memory printed: peak ${peak:-none} MiB anonymous, under this machine's $have; the ranks' malloc threshold ${thr:-none} bytes (131072 expected)" \
    [ "${peak:-0}" -gt 0 -a "${peak:-0}" -lt "$have" -a "$thr" = 131072 ]
  # the memory guard: asked to keep more available than this machine has,
  # the simulation is stopped at its first sample, exit 2, the figures said
  t0=$(date +%s)
  SW_SIM_MIN_AVAIL_MIB=$((have + 1)) sim guard "$TMPD/eth" --estimate examples/gpt_train $layout $big --collective-algo mpi --steps 2
  rc=$?
  n=$(grep -c "^sim: error: stopped: the simulation held [0-9]* MiB of this machine's memory and left [0-9]* MiB available, under SW_SIM_MIN_AVAIL_MIB=$((have + 1)):" "$TMPD/guard")
  [ "$rc" = 2 ] && [ "$n" = 1 ] || cat "$TMPD/guard"
  check "SW_SIM_MIN_AVAIL_MIB above this machine's memory: stopped, exit $rc (expected 2), the figures said $n time(s), $(($(date +%s) - t0)) s" \
    [ "$rc" = 2 -a "$n" = 1 ]
  # the same folded in blocks of one page: some 9 million mappings a rank,
  # past any vm.max_map_count (SimGrid aborts): the rule, the value and the
  # setting to raise, exit 2 (not where the limit is above those)
  if [ "$(cat /proc/sys/vm/max_map_count)" -gt 4000000 ]; then
    echo "not run: past vm.max_map_count ($(cat /proc/sys/vm/max_map_count) here: more than 4 KiB blocks of the model need)"
  else
  SW_SIM_FOLD_BLOCK=4096 sim maps "$TMPD/eth" --estimate examples/gpt_train $layout $big --collective-algo mpi --steps 2
  rc=$?
  n=$(grep -c "^sim: error: the simulation ran out of memory mappings: vm.max_map_count is $(cat /proc/sys/vm/max_map_count).*sysctl -w vm.max_map_count=" "$TMPD/maps")
  [ "$rc" = 2 ] && [ "$n" = 1 ] || cat "$TMPD/maps"
  check "the same folded in 4 KiB blocks, past vm.max_map_count: exit $rc (expected 2), the rule and the setting printed $n time(s)" \
    [ "$rc" = 2 -a "$n" = 1 ]
  fi
fi
# The models written beside the library's (custom_model from the public
# headers alone, and an encoder) simulate as they are: calibrated by a real
# run of their layout, simulated on one worker a rank, they print the line
# bench/sim.sh reads, say once that they are simulated, and their traffic
# equals their model on every rank
if want "other programs"; then
  for prog in custom_model encoder_mlm; do
    sh "$top_srcdir/bench/calibrate.sh" --build "$real_build" --calibration "$calib-$prog" --host $host-$prog --np 2 \
      examples/$prog --tp 2 --sp --steps 10 > "$TMPD/cal-$prog" 2>&1 || cat "$TMPD/cal-$prog"
    STARPU_NCPU=1 timeout -k 10 300 sh "$top_srcdir/bench/sim.sh" --build "$sim_build" --calibration "$calib-$prog" \
      --host $host-$prog --platform "$TMPD/eth" examples/$prog --tp 2 --sp --steps 3 > "$TMPD/sim-$prog" 2>&1
    rc=$?
    ms=$(sim_ms "$TMPD/sim-$prog") n=$(grep -c 'SIMULATED run' "$TMPD/sim-$prog")
    lines=$(grep -c '^traffic: rank .* model ' "$TMPD/sim-$prog")
    off=$(awk '$1 == "traffic:" && $7 != int($NF) { bad++ } END { print bad + 0 }' "$TMPD/sim-$prog")
    [ "$rc" = 0 ] && [ -n "$ms" ] || cat "$TMPD/sim-$prog"
    check "$prog --tp 2 --sp simulated: ${ms:-no} simulated ms/step, said simulated $n time(s), $off of $lines traffic lines off the model (exit $rc)" \
      eval '[ "$rc" = 0 ] && [ -n "$ms" ] && awk -v m="$ms" "BEGIN { exit !(m > 0) }" && [ "$n" = 1 ] && [ "$lines" -gt 0 ] && [ "$off" = 0 ]'
  done
fi
finish
