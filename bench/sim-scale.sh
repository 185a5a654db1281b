#!/bin/sh
# Scale by simulation (docs/simulation.md, "Scale"): GPT-2 1.5B and
# LLaMA-7B shapes on 8, 64 and 512 simulated ranks (nodes of 8) in the
# layouts a user would try -- tp 8 + sp inside a node; pp across nodes,
# 1F1B and interleaved; dp with ZeRO-1 and ZeRO-3; their combinations --
# run by bench/sim.sh --estimate: each simulated rank computes at this
# machine's calibrated per-core rates (one CPU worker per rank), and every
# task size the calibration never ran (all of these shapes' sizes: they
# cannot run here) takes a regression ESTIMATE from the sizes measured
# (bench/perfmodel_merge.py --estimate, printed by sim.sh). The network is
# a typed preset: ASSUMPTIONS. Prints per layout: simulated ms/step, each
# stage's bubble (min..max over the stages, from the simulated trace)
# against 1F1B's (p-1)/(m+p-1), the share of communication hidden behind
# compute, the memory model's bytes per rank, the number of estimated
# sizes, and the wall time the simulation took.
#
# usage: bench/sim-scale.sh [--build DIR] [--sim-build DIR] [--models LIST]
#          [--ranks LIST] [--layers L] [--micro K] [--preset P]
#          [--only REGEX] [--steps N] [--no-trace] [--extrapolate A,B] [--stand-in R] [--out FILE]
#   --models LIST  gpt2-1.5b llama-7b (default both)
#   --ranks LIST   world sizes among 8 64 512 (default "8 64")
#   --layers L     layers simulated (default 16; "full": each model's own,
#                  48 and 32, which take the longest; a layout's step grows
#                  with its layers per stage, said in the output)
#   --micro K      micro-batches of one sequence per pipeline and step (16)
#   --only REGEX   the layouts whose names match: LLaMA-7B tp8sp pp8 pp8v2
#                  dp8z1 dp8z3 (8 ranks) tp8pp8 tp8pp8v2 tp8dp8z1 tp8dp8z3
#                  (64) tp8pp8dp8z1 tp8dp64z1 (512; the latter Megatron's
#                  layout there); GPT-2 1.5B (25 heads: no tp 8)
#                  pp8 pp8v2 dp8z1 dp8z3, pp8dp8z1 pp8v2dp8z1 dp64z3,
#                  pp8dp64z1 dp512z1 (512); the 64-rank comparison of
#                  bench/plan-scale.sh (1 sequence of 2048 per rank for
#                  LLaMA-7B, 8 of 1024 for GPT-2 1.5B): LLaMA-7B
#                  planner-dp64z3 (the planner's since 2026-11-29 04:00;
#                  before: planner-tp8dp8z2m2; at 1 layer since 11:00
#                  planner-tp2spdp32z3) megatron-tp8spdp8z1m2sel
#                  (at 1 layer one micro-batch fits: megatron-tp8spdp8z1sel)
#                  torchtitan-dp64z3sel (its 2D layout:
#                  torchtitan-tp8spdp8z3sel), GPT-2 1.5B planner-dp64z3m8
#                  (before: planner-dp64z3m4sel; the planner's top 3 by the
#                  simulated graph: planner-ring2dp32z3m4sel);
#                  and its 512-rank one (LLaMA-7B 64 sequences, GPT-2 1.5B
#                  512: 32 bits cap them): LLaMA-7B planner-tp2u4dp64z3
#                  (before: planner-tp16spdp32z3, and before it prices
#                  the norms planner-tp16dp32z3) torchtitan-tp8spdp64z3sel
#                  (Megatron's: tp8dp64z1), GPT-2 1.5B planner-dp512z3
#                  (before: planner-dp512z2) megatron-dp512z1full
#                  torchtitan-dp512z3sel
#   --steps N      simulated steps (2: the second is the one measured)
#   --no-trace     no trace (the bubble and hidden columns stay empty):
#                  the ranks' trace records, gathered to rank 0 at the
#                  end, take gigabytes of this machine's memory at full
#                  depth (LLaMA-7B's 32 layers at 64 ranks); 512 ranks
#                  are never traced
#   --extrapolate A,B  each layout simulated at A and at B layers (rounded
#                  up to its pipeline's blocks, pp x virtual chunks) and
#                  its step and memory extrapolated linearly to --layers
#                  (EXTRAPOLATED, said on its row; the bubble and hidden
#                  columns are B's): LLaMA-7B's dp 64 ZeRO-3 at 2 and 4
#                  layers gave its 32 layers' simulated step to 0.1 ms
#                  (BENCHMARKS.md, "Extrapolated from two depths") in a
#                  quarter of the time
#   --stand-in R   worlds above R ranks simulated as R-rank STAND-INS (R a
#                  multiple of 8): each layout's data-parallel group and
#                  the global batch cut by world / R, so that every rank
#                  keeps its shapes and every other group its size (the
#                  data-parallel collectives span fewer ranks; ZeRO's
#                  shards, the optimizer's update and the MiB/rank column
#                  are the stand-in's); said on its row. A 512-rank pass
#                  takes 30+ minutes here, a 64-rank stand-in a few; at 1
#                  layer GPT-2 1.5B's dp 512 simulated 10463.8 ms/step,
#                  10460.1 on 64 (BENCHMARKS.md, "A data-parallel group of
#                  512")
#   --out FILE     the table also as CSV (for bench/sim-pictures.sh; its
#                  last columns the two depths of --extrapolate and host MiB)
# Each run's wall time, CPU time (both passes of --estimate), the load
# average at its end and the peak host memory bench/sim.sh sampled ("host
# MiB": with --extrapolate, the deeper run's) are printed: on a shared
# machine the CPU time is the measure. SW_SIM_FOLD_DIR (bench/sim.sh: a huge=always tmpfs) cuts the
# kernel's share of it.
# Calibration: ~/.cache/starweave/calibration-scale (SW_SIM_SCALE_CALIBRATION),
# host 'scale'; what is missing is calibrated first by small real runs of
# each model kind and layout family (bench/calibrate.sh): run those on a
# quiet machine, their times are the simulation's.
set -eu
me=sim-scale
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/common.sh"
build=$top/build sim_build=$top/build-sim ranks="8 64" preset=nvlink-ib layers=16 micro=16 only= steps=2 out=
models="gpt2-1.5b llama-7b" traced=1 extra= standin=
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need "$@"; build=$2; shift ;;
    --sim-build) need "$@"; sim_build=$2; shift ;;
    --models) need "$@"; models=$2; shift ;;
    --ranks) need "$@"; ranks=$2; shift ;;
    --preset) need "$@"; preset=$2; shift ;;
    --layers) need "$@"; layers=$2; shift ;;
    --micro) need "$@"; micro=$2; shift ;;
    --only) need "$@"; only=$2; shift ;;
    --steps) need "$@"; steps=$2; shift ;;
    --out) need "$@"; out=$2; shift ;;
    --no-trace) traced=0 ;;
    --extrapolate) need "$@"; extra=$2; shift ;;
    --stand-in) need "$@"; standin=$2; shift ;;
    -h|--help) usage_from "$0"; exit 0 ;;
    *) die2 "unknown option '$1' (see --help)" ;;
  esac
  shift
done
[ "$layers" = full ] || case "$layers" in '' | *[!0-9]* | 0) die2 "--layers: a positive integer or full (got '$layers')" ;; esac
posint --micro "$micro"; posint --steps "$steps"
[ -z "$standin" ] || { posint --stand-in "$standin"; [ $((standin % 8)) = 0 ] || die2 "--stand-in: whole nodes of 8 ranks (got $standin)"; }
if [ -n "$extra" ]; then
  xa=${extra%%,*} xb=${extra#*,}
  case "$xa:$xb" in *[!0-9:]* | :* | *: | 0:* | *:0) die2 "--extrapolate: two depths A,B with 1 <= A < B (got '$extra')" ;; esac
  [ "$xa" -lt "$xb" ] || die2 "--extrapolate: two depths A,B with 1 <= A < B (got '$extra')"
fi
sim_builds "$build" "$sim_build"
cal=${SW_SIM_SCALE_CALIBRATION:-$HOME/.cache/starweave/calibration-scale}
host=scale
calibrate() { # NAME ARGS: one real calibration run (2 ranks, 11 steps) unless done
  name=$1; shift
  [ -f "$cal/done.$name" ] && return 0
  t0=$(date +%s)
  # GPT-2 medium's pp 2 run takes 5-10 minutes: past mpi_launch's 300 s
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-1800} \
  sh "$top/bench/calibrate.sh" --build "$build" --calibration "$cal" --host "$host" --np 2 examples/gpt_train "$@" \
    --ncpus 1 --collective-algo mpi --steps 11 --quiet --log /dev/null > "$cal/calibrate-$name.out" 2>&1 ||
    { tail -n 5 "$cal/calibrate-$name.out"; die2 "calibration $name failed"; }
  echo "$me: calibrated $name in $(($(date +%s) - t0)) s, load $(cut -d' ' -f1 /proc/loadavg): $*" | tee "$cal/done.$name"
}
mkdir -p "$cal"
# GPT-2 medium's sizes at seq 512 (the largest this machine runs in
# minutes), and small shapes for the codelets only the other layouts and
# LLaMA run (the regression scales them: the more sizes measured, the
# better it interpolates)
g2="--model gpt2 --layers 2 --hidden 1024 --heads 16 --vocab 50257 --seq 512 --max-pos 1024"
small="--layers 2 --hidden 256 --heads 4 --vocab 2048 --seq 128"
calibrate gpt2-pp2 $g2 --pp 2 --grad-accum 4 --batch 4
calibrate gpt2-tp2 --model gpt2 $small --tp 2 --sp --batch 2
calibrate gpt2-z3 --model gpt2 $small --dp 2 --zero 3 --batch 2
calibrate llama-pp2 --model llama $small --pp 2 --grad-accum 4 --batch 4
calibrate llama-tp2 --model llama $small --tp 2 --sp --batch 2
calibrate llama-z3 --model llama $small --dp 2 --zero 3 --batch 2
# without recomputation attention keeps its probabilities (sw_attn_probs_fwd
# and _bwd, which the layouts above never run): the planner's LLaMA-7B layout
calibrate llama-tp2-norc --model llama $small --tp 2 --recompute none --batch 2
# both kinds of attention tile at the models' sequences and head dims
# (1024 x 64, 2048 x 128): the tiles above are of 128 rows, and their
# rate, extrapolated 16x to LLaMA-7B's 2048 tokens, made the tiles keeping
# the probabilities slower per FLOP than the flash tiles (recomputing
# them), where at these sizes they are faster. Each at FLOPs of its own:
# the regression knows a tile by its FLOPs
long="--layers 1 --hidden 1024 --vocab 2048 --batch 2 --tp 2"
calibrate gpt2-long --model gpt2 --heads 16 --seq 1024 --max-pos 1024 $long --sp
calibrate gpt2-long-norc --model gpt2 --heads 16 --seq 1024 --max-pos 1024 $long --recompute none
calibrate llama-long --model llama --heads 8 --seq 2048 --max-pos 2048 $long --sp
calibrate llama-long-norc --model llama --heads 8 --seq 2048 --max-pos 2048 $long --recompute none

# sim_at NL: $lay of $model on $n ranks simulated at NL layers: rc, wall, cpu, ms, b0, b1, f1, hid, mem, nest, load
sim_at() {
  trace="--trace $work/t.json"
  [ "$sn" -le 64 ] && [ "$traced" = 1 ] || trace= # the trace of 512 ranks: more wall time than the table is worth
  t0=$(date +%s)
  rc=0
  # the CPU time of the simulation (both passes), the measure on a
  # shared machine (the wall time grows with the others' load)
  $timer sh "$top/bench/sim.sh" --build "$sim_build" --calibration "$cal" --host "$host" --platform "$work/p$sn" --estimate --list-args "--steps 1" \
    examples/gpt_train $shape --layers "$1" $lay --ncpus 1 --collective-algo mpi --steps "$steps" \
    --log "$work/s.csv" $trace > "$work/s.out" 2>&1 || rc=$?
  wall=$(($(date +%s) - t0))
  cpu=$(tail -n 1 "$work/cpu.t" 2>/dev/null | awk -F+ 'NF == 2 { printf "%.0f", $1 + $2 }') load=$(cut -d' ' -f1 /proc/loadavg)
  rm -f "$work/cpu.t"
  cp "$work/s.out" "${SW_SIM_SCALE_KEEP:-$work}/$model-$n-$name-l$1.out" 2>/dev/null || true
  [ "$rc" = 0 ] || return 0
  ms=$(sed -n 's/^simulation: \([0-9.]*\) simulated ms\/step.*/\1/p' "$work/s.out")
  bub=$(sed -n 's/^bubble: stage [0-9]*: \([0-9.]*\)%.*/\1/p' "$work/s.out" | sort -g | sed -n '1p;$p' | tr '\n' ' ')
  f1=$(sed -n "s/^bubble: stage [0-9]*: .*1F1B's (p - 1) \/ (m + p - 1) = \([0-9.]*\)%.*/\1/p" "$work/s.out" | head -n 1)
  hid=$(awk '$1 == "overlap:" && $3 == "all" { s += $9; c++ } END { if (c) printf "%.1f", s / c }' "$work/s.out")
  mem=$(sed -n 's/^memory: rank [0-9]*: the model needs \([0-9.]*\) MiB.*/\1/p' "$work/s.out" | sort -g | tail -n 1)
  hostmem=$(sed -n 's/^sim: host memory: peak \([0-9]*\) MiB.*/\1/p' "$work/s.out")
  nest=$(grep -c '^sim: ESTIMATE' "$work/s.out" || true)
  b0=$(echo $bub | cut -d' ' -f1) b1=$(echo $bub | cut -d' ' -f2)
}
at_depth() { # at_depth VALUE-AT-$da VALUE-AT-$db FORMAT: the value extrapolated linearly to $nl layers (empty if one is)
  awk -v a="$1" -v b="$2" -v l="$nl" -v x="$da" -v y="$db" -v f="$3" 'BEGIN { if (a != "" && b != "") printf f, a + (b - a) * (l - x) / (y - x) }'
}
flag_of() { # flag_of "FLAGS" --NAME: its value, 1 without it
  echo " $1 " | awk -v f="$2" '{ for (i = 1; i < NF; i++) if ($i == f) { print $(i + 1); exit } print 1 }'
}
work=$(mktemp -d "${TMPDIR:-/tmp}/sw-scale.XXXXXX")
trap 'rm -rf "$work"' EXIT
timer=
[ ! -x /usr/bin/time ] || timer="/usr/bin/time -f %U+%S -o $work/cpu.t"
echo "$me: SIMULATION on $(cpu_model)'s calibrated per-core rates, one CPU worker per simulated rank; sizes never run here take regression ESTIMATES (sim.sh --estimate); network: preset $preset (typed: ASSUMPTIONS); $layers layers simulated (of 48 / 32), micro-batches of 1 sequence, $micro per pipeline and step (the planner-, megatron- and torchtitan- layouts: bench/plan-scale.sh's batch and micro-batches); $steps steps, the last one measured${extra:+; EXTRAPOLATED: each layout simulated at $xa and $xb layers (rounded up to its pipeline's blocks), its step and memory extrapolated linearly to $([ "$layers" = full ] && echo "each model's depth" || echo "$layers layers")}"
[ -z "$out" ] || echo "model,ranks,layout,ms_step,bubble_min,bubble_max,f1b1,hidden,mem_mib,estimates,wall_s,cpu_s,load,layers,extrapolated_from,host_mib" > "$out"
printf '%-10s %-5s %-22s %11s %15s %7s %7s %10s %5s %7s %7s %5s %8s\n' model ranks layout "sim ms/step" "bubble (stages)" "1F1B" "hidden" "MiB/rank" "est." "wall s" "CPU s" "load" "host MiB"
for model in $models; do
  case "$model" in
    gpt2-1.5b) shape="--model gpt2 --hidden 1600 --heads 25 --vocab 50257 --seq 1024 --max-pos 1024" depth=48 budget=16384 ;;
    llama-7b) shape="--model llama --hidden 4096 --heads 32 --ffn 11008 --vocab 32000 --seq 2048" depth=32 budget=40960 ;;
    *) die2 "unknown model '$model' (gpt2-1.5b, llama-7b)" ;;
  esac
  # bench/plan-scale.sh's 64-rank comparison (issue 44; BENCHMARKS.md, "At
  # scale: the planner against ..."), its global batch (GPT-2 1.5B 8
  # sequences per rank, LLaMA-7B 1) and its layouts: the planner's choice
  # and the hand-written ones of Megatron-LM's and torchtitan's
  # documentation (GPT-2 1.5B: the planner's is torchtitan's; Megatron's
  # do not fit its budget), each simulated rank with plan-scale's budget
  # as its memory (--memory-budget-mb: refused where the model needs more)
  # At 512 ranks (bench/plan-scale.sh --worlds 512): the global batch is
  # capped by 32 bits (GPT-2 1.5B 512 sequences, LLaMA-7B 64); torchtitan's
  # LLaMA-7B dp 512 is refused there (batch 64 < dp 512), its 2D layout
  # (tp 8 + sp inside a node, FSDP across) is not; Megatron's LLaMA-7B
  # layout is tp8dp64z1 below
  case "$model" in
    gpt2*) plan64="planner-dp64z3m8:--dp 64 --zero 3 --grad-accum 8 --recompute none --batch 512
planner-dp64z3m4sel:--dp 64 --zero 3 --grad-accum 4 --recompute selective --batch 512
planner-ring2dp32z3m4sel:--ring 2 --dp 32 --zero 3 --grad-accum 4 --recompute selective --batch 512"
      plan512="planner-dp512z3:--dp 512 --zero 3 --recompute none --batch 512
planner-dp512z2:--dp 512 --zero 2 --recompute none --batch 512
megatron-dp512z1full:--dp 512 --zero 1 --recompute full --batch 512
torchtitan-dp512z3sel:--dp 512 --zero 3 --recompute selective --batch 512" ;;
    *) plan64="planner-tp2spdp32z3:--tp 2 --sp --dp 32 --zero 3 --grad-accum 1 --recompute none --batch 64
planner-dp64z3:--dp 64 --zero 3 --grad-accum 1 --recompute none --batch 64
planner-tp8dp8z2m2:--tp 8 --dp 8 --zero 2 --grad-accum 2 --recompute none --batch 64
megatron-tp8spdp8z1m2sel:--tp 8 --sp --dp 8 --zero 1 --grad-accum 2 --recompute selective --batch 64
megatron-tp8spdp8z1sel:--tp 8 --sp --dp 8 --zero 1 --grad-accum 1 --recompute selective --batch 64
torchtitan-tp8spdp8z3sel:--tp 8 --sp --dp 8 --zero 3 --grad-accum 1 --recompute selective --batch 64
torchtitan-dp64z3sel:--dp 64 --zero 3 --grad-accum 1 --recompute selective --batch 64"
      plan512="planner-tp2u4dp64z3:--tp 2 --ulysses 4 --dp 64 --zero 3 --recompute none --batch 64
planner-tp16spdp32z3:--tp 16 --sp --dp 32 --zero 3 --recompute none --batch 64
planner-tp16dp32z3:--tp 16 --dp 32 --zero 3 --recompute none --batch 64
torchtitan-tp8spdp64z3sel:--tp 8 --sp --dp 64 --zero 3 --recompute selective --batch 64" ;;
  esac
  nl=$layers
  [ "$nl" != full ] || nl=$depth
  for n in $ranks; do
    # the ranks simulated: the world, or its stand-in's (--stand-in)
    sn=$n cut=1
    [ -z "$standin" ] || [ "$n" -le "$standin" ] || { [ $((n % standin)) = 0 ] || die2 "--stand-in $standin does not divide $n ranks"; sn=$standin cut=$((n / standin)); }
    rpn=$((sn < 8 ? sn : 8))
    sh "$top/bench/sim-platform.sh" --nodes $((sn / rpn)) --ranks-per-node $rpn --cpus 1 --preset "$preset" \
      --out "$work/p$sn" > "$work/platform.out"
    k=$micro
    case "$model:$n" in
      # GPT-2 1.5B's 25 heads divide by no tp of a node of 8 (gpt_train
      # refuses tp 8: "heads (25) must be divisible by tp (8)"): no tp
      gpt2*:8) list="pp8:--pp 8 --grad-accum $k --batch $k
pp8v2:--pp 8 --pp-virtual 2 --grad-accum $k --batch $k
dp8z1:--dp 8 --zero 1 --batch 8
dp8z3:--dp 8 --zero 3 --batch 8" ;;
      gpt2*:64) list="pp8dp8z1:--pp 8 --dp 8 --zero 1 --grad-accum $k --batch $((8 * k))
pp8v2dp8z1:--pp 8 --pp-virtual 2 --dp 8 --zero 1 --grad-accum $k --batch $((8 * k))
dp64z3:--dp 64 --zero 3 --batch 64
$plan64" ;;
      gpt2*:512) list="pp8dp64z1:--pp 8 --dp 64 --zero 1 --grad-accum $k --batch $((64 * k))
dp512z1:--dp 512 --zero 1 --batch 512
$plan512" ;;
      *) case "$n" in
      8) list="tp8sp:--tp 8 --sp --batch 1
pp8:--pp 8 --grad-accum $k --batch $k
pp8v2:--pp 8 --pp-virtual 2 --grad-accum $k --batch $k
dp8z1:--dp 8 --zero 1 --batch 8
dp8z3:--dp 8 --zero 3 --batch 8" ;;
      64) list="tp8pp8:--tp 8 --sp --pp 8 --grad-accum $k --batch $k
tp8pp8v2:--tp 8 --sp --pp 8 --pp-virtual 2 --grad-accum $k --batch $k
tp8dp8z1:--tp 8 --sp --dp 8 --zero 1 --batch 8
tp8dp8z3:--tp 8 --sp --dp 8 --zero 3 --batch 8
$plan64" ;;
      512) list="tp8pp8dp8z1:--tp 8 --sp --pp 8 --dp 8 --zero 1 --grad-accum $k --batch $((8 * k))
tp8dp64z1:--tp 8 --sp --dp 64 --zero 1 --batch 64
$plan512" ;;
      *) die2 "--ranks: 8, 64 or 512 (got $n)" ;;
    esac ;;
    esac
    echo "$list" | while IFS=: read -r name lay; do
      [ -z "$only" ] || echo "$name" | grep -Eq "$only" || continue
      case "$name" in planner-* | megatron-* | torchtitan-*) lay="$lay --memory-budget-mb $budget" ;; esac
      said=
      if [ "$cut" != 1 ]; then # the stand-in: dp and the batch cut (after the layout's flags: the last one counts)
        dp=$(flag_of "$lay" --dp) b=$(flag_of "$lay" --batch)
        if [ $((dp % cut)) != 0 ] || [ $((b % cut)) != 0 ]; then
          printf '%-10s %-5s %-22s no %s-rank stand-in: dp %s and batch %s are not multiples of %s\n' "$model" "$n" "$name" "$sn" "$dp" "$b" "$cut"
          continue
        fi
        lay="$lay --dp $((dp / cut)) --batch $((b / cut))" said="  STAND-IN on $sn ranks (dp $((dp / cut)), batch $((b / cut)); MiB/rank the stand-in's)"
      fi
      if [ -n "$extra" ]; then
        # the depths rounded up to the pipeline's blocks (pp x virtual chunks: each stage holds alike)
        q=$(($(flag_of "$lay" --pp) * $(flag_of "$lay" --pp-virtual)))
        da=$(((xa + q - 1) / q * q)) db=$(((xb + q - 1) / q * q))
        [ "$db" -gt "$da" ] || db=$((da + q))
      fi
      from=
      if [ -n "$extra" ] && [ "$db" -lt "$nl" ]; then
        sim_at "$da"
        if [ "$rc" = 0 ]; then
          msa=$ms mema=$mem wa=$wall ca=$cpu
          sim_at "$db"
          # linear in the layers: what the depth does not change plus a block's time (and memory) per layer
          ms=$(at_depth "$msa" "$ms" %.3f) mem=$(at_depth "$mema" "$mem" %.2f)
          wall=$((wa + wall)) cpu=$(awk -v a="$ca" -v b="$cpu" 'BEGIN { if (a != "" && b != "") print a + b }')
          from="$da+$db"
        fi
      else sim_at "$nl"; fi
      if [ "$rc" != 0 ]; then
        printf '%-10s %-5s %-22s failed (exit %s, %s s): %s\n' "$model" "$n" "$name" "$rc" "$wall" \
          "$(grep -v -e 'calibrated enough' -e '^sim: ESTIMATE' "$work/s.out" | tail -n 2 | tr '\n' ' ' | cut -c1-300)"
        continue
      fi
      printf '%-10s %-5s %-22s %11s %15s %7s %7s %10s %5s %7s %7s %5s %8s%s\n' "$model" "$n" "$name" "${ms:-?}" \
        "${b0:+$b0..$b1 %}" "${f1:+$f1 %}" "${hid:+$hid %}" "${mem:-?}" "$nest" "$wall" "${cpu:-?}" "$load" "${hostmem:-?}" \
        "${from:+  extrapolated from $da and $db layers}$said"
      [ -z "$out" ] || echo "$model,$n,$name${said:+ (stand-in $sn)},${ms:-},${b0:-},${b1:-},${f1:-},${hid:-},${mem:-},$nest,$wall,${cpu:-},$load,$nl,$from,${hostmem:-}" >> "$out"
    done
  done
done
