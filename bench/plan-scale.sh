#!/bin/sh
# The planner at scale (docs/planner.md, issue 44): GPT-2 1.5B and LLaMA-7B
# on 64 and 512 ranks (8 per node) under a per-rank memory budget -- the
# planner's choice beside hand-written layouts from Megatron-LM's and
# torchtitan's documentation, each priced by the same estimate with the
# fewest micro-batches that fit the budget (or dropped, with its need at the
# fewest legal). The global batch is the sequences per rank times the
# ranks, at most the largest power of 2 gpt_train accepts
# (seq*batch*4*hidden must fit in 32 bits): the table says which. FAST ESTIMATE,
# not the simulated task graph: the simulation helper has no calibration of
# these shapes' sizes yet (docs/simulation.md), so every figure here is the
# planner's formula on the machine file given -- labelled as such.
# usage: bench/plan-scale.sh [--build DIR] [--machine FILE] [--calibration DIR|none]
#          [--worlds "64 512"] [--layers L] [--simulate N [--sim-layers A,B] [--sim-ranks R] [--sim-build DIR]]
#   --layers L  every model with L layers instead of its own 48 / 32 (what
#               bench/sim-scale.sh --layers simulates: the estimate beside it)
#   --calibration DIR  the GEMM rate from StarPU's history model of sw_gemm
#               in DIR -- the calibration bench/sim-scale.sh simulates with
#               (default $SW_SIM_SCALE_CALIBRATION, else
#               ~/.cache/starweave/calibration-scale, where it holds one);
#               none, or no such calibration: the typed rate below
#   --simulate N  the planner's top N also through the simulated task graph
#               (gpt_train --plan --simulate N on the calibration above,
#               host 'scale', regression estimates for the sizes it lacks,
#               the nvlink-ib preset): one more row, the planner's choice by
#               the simulated graph, SIMULATED; --sim-layers A,B simulates
#               each at A and B layers and extrapolates to the model's depth
#               (EXTRAPOLATED: docs/planner.md); --sim-build DIR the
#               simulation build (default build-sim). LLaMA-7B's 32 layers
#               on 64 ranks at 1,2: some 7 minutes a layout on a 2-core VM;
#               --sim-ranks R: worlds above R simulated as R-rank STAND-INS
#               (gpt_train --sim-ranks: the data-parallel group and the
#               batch cut, every rank's shapes kept; 512 ranks take 30+
#               minutes a pass, 64 a few)
#   (SW_PLAN_SCALE_MODELS=REGEX: only the models whose name matches)
# Default machine (printed): 8 ranks per node of one CPU core each, the GEMM
# rate measured by the calibration (else typed: this VM's quiet rate, 149
# GFLOP/s per worker, BENCHMARKS.md headline), bench/sim-platform.sh's
# nvlink-ib links (ASSUMPTIONS), the other figures typed or measured as each
# line says.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build machine="" worlds="64 512" layers="" me=plan-scale.sh simulate=0 sim_layers="" sim_build=$top/build-sim sim_ranks=
cal=${SW_SIM_SCALE_CALIBRATION:-$HOME/.cache/starweave/calibration-scale}
. "$top/bench/common.sh"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --machine) machine=$2; shift 2 ;;
    --calibration) cal=$2; shift 2 ;;
    --worlds) worlds=$2; shift 2 ;;
    --layers) layers=$2; shift 2
      case $layers in ''|*[!0-9]*|0) echo "plan-scale: --layers wants a positive integer (got '$layers')" >&2; exit 2 ;; esac ;;
    --simulate) simulate=$2; shift 2
      case $simulate in ''|*[!0-9]*) echo "plan-scale: --simulate wants a count of layouts (got '$simulate')" >&2; exit 2 ;; esac ;;
    --sim-layers) sim_layers=$2; shift 2 ;;
    --sim-ranks) sim_ranks=$2; shift 2
      case $sim_ranks in ''|*[!0-9]*|0) echo "plan-scale: --sim-ranks wants a positive count of ranks (got '$sim_ranks')" >&2; exit 2 ;; esac ;;
    --sim-build) sim_build=$2; shift 2 ;;
    -h|--help) usage_from "$0"; exit 0 ;;
    *) echo "plan-scale: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plan-scale.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ -z "$machine" ]; then
  machine=$tmp/machine
  cat > "$machine" <<'M'
gemm_gflops 149 measured on this VM: BENCHMARKS.md headline 2026-11-26 (onednn, W124 tile, one worker, quiet)
cores 8 typed: 8 ranks per node, one core each
intra_gbs 300 typed: ASSUMPTION, bench/sim-platform.sh's nvlink-ib preset
intra_us 1 typed: ASSUMPTION, nvlink-ib
inter_gbs 50 typed: ASSUMPTION, nvlink-ib (400 Gb/s InfiniBand)
inter_us 5 typed: ASSUMPTION, nvlink-ib
task_us 20 typed: ASSUMPTION
gemm_half_rows 8 typed: ASSUMPTION (a GEMM of 8 rows at half the rate)
adam_ns 8 typed: ASSUMPTION (8 ns per parameter per worker)
p2p_spin 0 typed: a core per progression thread besides the workers
elem_ns 1.07 measured on this VM: gpt_train --plan's activation pass (an RMSNorm forward, one worker), 2026-11-29, the core's other thread busy
coll_offload 1 typed: the collectives MPI runs (bench/sim-scale.sh's --collective-algo mpi), or NCCL on GPUs, progress beside the workers
gemm_shared 1 typed: each simulated core runs at the calibration's rate, whatever its neighbours do (the calibration's own runs shared this VM's core: their rate has it)
M
  # the calibration's GEMM rate (gpt_train --plan reads StarPU's history model of sw_gemm under
  # STARPU_PERF_MODEL_DIR where the machine file gives none): the rate the simulation runs its GEMMs at
  if [ "$cal" != none ] && ls "$cal"/codelets/45/sw_gemm.* > /dev/null 2>&1; then
    sed -i '/^gemm_gflops /d' "$machine"
    STARPU_PERF_MODEL_DIR=$cal
    export STARPU_PERF_MODEL_DIR
  fi
fi
# model | budget MiB per rank | sequences per rank | flags. LLaMA-7B: 1 per
# rank (torchtitan's 8 would be a global batch whose [seq x batch, 4
# hidden] tensor passes 32 bits: gpt_train refuses seq*batch*4*hidden >=
# 2^32; at 512 ranks the cap below binds: 64 sequences)
models() {
  cat <<'X'
GPT-2 1.5B|16384|8|--model gpt2 --layers 48 --hidden 1600 --heads 25 --seq 1024 --max-pos 1024 --vocab 50257
LLaMA-7B|40960|1|--model llama --layers 32 --hidden 4096 --heads 32 --kv-heads 32 --ffn 11008 --seq 2048 --max-pos 2048 --vocab 32000
X
}
# hand-written layouts: model | source | flags (sw_plan_flags' form; DP = the world over the other degrees)
hands() {
  cat <<'X'
GPT-2 1.5B|Megatron-LM (arXiv 2104.04473 Table 1, its 1.7B row: TP 1, PP 1, data parallel; full activation recomputation)|--tp 1 --ulysses 1 --ring 1 --dp DP --pp 1 --zero 0 --grad-accum 1 --recompute full
GPT-2 1.5B|Megatron-LM's distributed optimizer (ZeRO-1) on the same layout|--tp 1 --ulysses 1 --ring 1 --dp DP --pp 1 --zero 1 --grad-accum 1 --recompute full
GPT-2 1.5B|torchtitan (FSDP over every rank = ZeRO-3, selective activation checkpointing, train_configs' default)|--tp 1 --ulysses 1 --ring 1 --dp DP --pp 1 --zero 3 --grad-accum 1 --recompute selective
LLaMA-7B|torchtitan train_configs/llama2_7b.toml (tensor_parallel_degree 1, data_parallel_degree -1 under FSDP = ZeRO-3, selective AC, batch 8, seq 2048)|--tp 1 --ulysses 1 --ring 1 --dp DP --pp 1 --zero 3 --grad-accum 1 --recompute selective
LLaMA-7B|Megatron-LM's rule of thumb (tensor parallel inside a node: TP 8 with sequence parallelism, distributed optimizer = ZeRO-1, selective recomputation)|--tp 8 --sp --ulysses 1 --ring 1 --dp DP --pp 1 --zero 1 --grad-accum 1 --recompute selective
LLaMA-7B|torchtitan's 2D parallelism (FSDP = ZeRO-3 across nodes, tensor parallel 8 with sequence parallelism inside a node: docs/composability, llama3_70b.toml's tensor_parallel_degree 8; selective AC)|--tp 8 --sp --ulysses 1 --ring 1 --dp DP --pp 1 --zero 3 --grad-accum 1 --recompute selective
X
}
echo "bench/plan-scale.sh: FAST ESTIMATE (not simulated)$([ "$simulate" = 0 ] || echo "; the planner's top $simulate also SIMULATED, a row of its own"), $(date -u +%Y-%m-%dT%H:%MZ); the machine, as the planner reads it:"
# shellcheck disable=SC2046 # the first model's flags are words
"$build/examples/gpt_train" --plan --plan-ranks 8 --plan-machine "$machine" --plan-top 1 \
  $(models | head -n 1 | cut -d '|' -f 4) --batch 8 2>&1 | sed -n 's/^plan: machine: /  /p'
printf '| model | ranks | budget MiB/rank | batch | layout | source | predicted ms/step | MiB/rank |\n|---|---|---|---|---|---|---|---|\n'
models | awk -F '|' -v re="${SW_PLAN_SCALE_MODELS:-.}" '$1 ~ re' | while IFS='|' read -r name budget per flags; do
  label=$name
  [ -z "$layers" ] || { flags=$(echo "$flags" | sed "s/--layers [0-9]*/--layers $layers/"); label="$name ($layers layers)"; }
  for n in $worlds; do
    # the global batch: per rank x ranks, capped at the largest power of 2 with seq*batch*4*hidden < 2^32
    seq=$(echo "$flags" | sed 's/.*--seq \([0-9]*\).*/\1/') hid=$(echo "$flags" | sed 's/.*--hidden \([0-9]*\).*/\1/')
    cap=1
    while [ $((seq * cap * 2 * 4 * hid)) -le 4294967295 ]; do cap=$((cap * 2)); done
    batch=$((per * n)); bnote=$batch
    [ "$batch" -le "$cap" ] || { batch=$cap; bnote="$cap (not $((per * n)): 32 bits)"; }
    t0=$(date +%s)
    # shellcheck disable=SC2086
    rm -f "$tmp/list"
    sim=""
    standin=
    [ -z "$sim_ranks" ] || [ "$n" -le "$sim_ranks" ] || standin=$sim_ranks
    [ "$simulate" = 0 ] || sim="--simulate $simulate ${sim_layers:+--sim-layers $sim_layers} --sim-build $sim_build
      --sim-calibration $cal --sim-estimate --sim-preset nvlink-ib ${standin:+--sim-ranks $standin}"
    SW_SIM_HOST=scale "$build/examples/gpt_train" --plan --plan-ranks-per-node 8 --plan-nodes $((n / 8)) --plan-machine "$machine" \
      --plan-mem-mib "$budget" --plan-top 3 --plan-list "$tmp/list" $flags --batch "$batch" $sim > "$tmp/out" 2>&1 || true
    best=$(grep -m1 '^plan: *1 ' "$tmp/out" || true)
    if [ -n "$best" ]; then
      ms=$(echo "$best" | awk '{ print $3 }') mib=$(echo "$best" | awk '{ print $9 }')
      lay=$(echo "$best" | sed 's/^plan: *1 *\([^ ]* *\)\{7\}//')
      echo "| $label | $n | $budget | $bnote | \`$lay\` | the planner ($(($(date +%s) - t0)) s) | **$ms** | $mib |"
    else
      echo "| $label | $n | $budget | $bnote | - | the planner: $(grep -m1 'error' "$tmp/out" || tail -n 1 "$tmp/out") | - | - |"
    fi
    if [ "$simulate" != 0 ]; then # the planner's choice by the simulated graph: its row of the simulated table
      srow=$(grep -m1 '^plan: simulated: *1 ' "$tmp/out" || true)
      if [ -n "$srow" ]; then
        sms=$(echo "$srow" | awk '{ print $6 }') est=$(echo "$srow" | awk '{ print $4 }')
        slay=$(echo "$srow" | sed 's/^plan: simulated: *\([^ ]* *\)\{5\}//; s/ (extrapolated.*//')
        mib=$(awk -F '\t' -v f="$slay" '$2 == f { split($3, w, " "); printf "%.3f", w[2] / 1048576; exit }' "$tmp/list")
        echo "| $label | $n | $budget | $bnote | \`$slay\` | the planner by the simulated graph (top $simulate of the estimate${sim_layers:+, EXTRAPOLATED from --sim-layers $sim_layers}${standin:+, each a STAND-IN of $standin ranks}; the estimate's rank $est) | **$sms** SIMULATED | ${mib:--} |"
        grep '^plan: simulated: ' "$tmp/out" | sed 's/^/    /'
      else
        echo "| $label | $n | $budget | $bnote | - | the planner by the simulated graph: none simulated ($(grep -m1 -e 'error' -e '^plan: simulated: *- ' "$tmp/out" || tail -n 1 "$tmp/out")) | - | - |"
      fi
    fi
    hands | while IFS='|' read -r hname src hflags; do
      [ "$hname" = "$name" ] || continue
      rest=$((n))
      for d in $(echo "$hflags" | sed -n 's/.*--tp \([0-9]*\).*--ulysses \([0-9]*\) --ring \([0-9]*\).*--pp \([0-9]*\).*/\1 \2 \3 \4/p'); do
        rest=$((rest / d))
      done
      # the micro-batches: the fewest that fit the budget (the documents leave the micro-batch size to the
      # user); none fits: the fewest legal one (dropped, its need); none legal: one micro-batch's verdict
      got="" gotf="" drop="" dropf="" first="" firstf=""
      for K in 1 2 4 8; do
        hf=$(echo "$hflags" | sed "s/--dp DP/--dp $rest/; s/--grad-accum 1/--grad-accum $K/")
        row=$(awk -F '\t' -v f="$hf" '$2 == f { print; exit }' "$tmp/list" 2> /dev/null)
        [ -n "$first" ] || { first=${row:-none}; firstf=$hf; }
        case $row in
          fits*) got=$row gotf=$hf; break ;;
          dropped*) [ -n "$drop" ] || { drop=$row; dropf=$hf; } ;;
        esac
      done
      if [ -n "$got" ]; then row=$got hf=$gotf; elif [ -n "$drop" ]; then row=$drop hf=$dropf; else row=$first hf=$firstf; fi
      case $row in
        fits*) ms=$(echo "$row" | sed 's/.*, \([0-9.]*\) ms\/step/\1/'); need=$(echo "$row" | sed 's/.*need \([0-9]*\) bytes.*/\1/')
          echo "| $label | $n | $budget | $bnote | \`$hf\` | $src | $ms | $(awk -v b="$need" 'BEGIN { printf "%.3f", b / 1048576 }') |" ;;
        dropped*) echo "| $label | $n | $budget | $bnote | \`$hf\` | $src | does not fit: $(echo "$row" | cut -f3) | - |" ;;
        illegal*) echo "| $label | $n | $budget | $bnote | \`$hf\` | $src | refused: $(echo "$row" | cut -f3) | - |" ;;
        *) echo "| $label | $n | $budget | $bnote | \`$hf\` | $src | not in the planner's space | - |" ;;
      esac
    done
  done
done
