#!/bin/sh
# The headline table of BENCHMARKS.md from one command: W124 against PyTorch
# and the GEMM roofline, bf16 against fp32, the 64 MiB and 1 KiB all-reduce
# against plain MPI, tp 2 + sp and dp 2 against one rank, the memory model
# against the bytes measured. It runs the other bench scripts (or the same
# command lines as they do) with settings that fit about 6-7 minutes on a
# 2-core machine, reads their output, and prints one Markdown table on
# standard output, after a line naming the date, the CPU, its ISA, the core
# count and the commit. Progress goes to standard error.
#
# Pieces:
#   W124 fp32       bench/sgemm_peak 1024 and gpt_train W124 --profile
#                   (bench/w124.sh's command lines), PyTorch beside it
#                   (bench/torch_gpt.py, as w124.sh runs it)
#   bf16            bench/ab.sh: fp32 and --dtype bf16 --gemm onednn
#                   interleaved, medians; only where the CPU has AVX512-BF16
#                   or AMX and oneDNN runs bf16 natively (sgemm_peak says)
#   collectives     bench/collectives.sh 2 ITERS at 1 KiB and 64 MiB
#   tp 2 + sp       bench/tp.sh (interleaved, medians): the main job's small
#                   model, and W124
#   dp 2            bench/dp.sh run 3 times (weak scaling; each run has one of
#                   each layout, so they alternate), medians
#   memory          gpt_train --memory-report: W124 one rank, and the main
#                   job's model with tp 2 + sp on 2 ranks
# A piece that fails or runs past its time limit prints its row as
# "failed (reason)" and the script goes on; the exit status is 1 if any
# piece failed.
set -u
usage() {
  cat <<'EOF'
usage: sh bench/headline.sh [options]
  --build DIR     build directory holding examples/gpt_train (default: the
                  source tree's build/; DIR is taken from the current directory)
  --no-torch      do not run PyTorch (also skipped, and said so in its row,
                  when TORCH_PYTHON, default /usr/bin/python3, cannot import
                  torch)
  --quick         fewer steps and repetitions (a smoke test of the script,
                  about 2 minutes; its figures are not the table's)
  --log-dir DIR   keep every piece's raw output in DIR (default: a temporary
                  directory, removed at the end)
  -h, --help      this text
Environment: TORCH_PYTHON, W124_DATA (as bench/w124.sh), OPENBLAS_CORETYPE
(bench/common.sh sets it from the CPU flags when unset).
Prints the Markdown table on standard output; progress on standard error.
EOF
}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=
torch=1
quick=0
logdir=
while [ $# -gt 0 ]; do
  case $1 in
    --build) [ $# -ge 2 ] || { usage >&2; exit 2; }; build=$2; shift 2;;
    --build=*) build=${1#--build=}; shift;;
    --no-torch) torch=0; shift;;
    --quick) quick=1; shift;;
    --log-dir) [ $# -ge 2 ] || { usage >&2; exit 2; }; logdir=$2; shift 2;;
    --log-dir=*) logdir=${1#--log-dir=}; shift;;
    -h|--help) usage; exit 0;;
    *) echo "headline: unknown option $1" >&2; usage >&2; exit 2;;
  esac
done
if [ -z "$build" ]; then build=$top/build
elif [ -d "$build" ]; then build=$(cd "$build" && pwd)
else echo "headline: no directory $build (--build DIR)" >&2; exit 2; fi
[ -x "$build/examples/gpt_train" ] || { echo "headline: $build/examples/gpt_train not built (--build DIR)" >&2; exit 2; }
[ -x "$build/bench/sgemm_peak" ] || { echo "headline: $build/bench/sgemm_peak not built (make in $build)" >&2; exit 2; }
if [ -n "$logdir" ]; then
  mkdir -p "$logdir" && logdir=$(cd "$logdir" && pwd) || exit 2
  keep=1
else
  logdir=$(mktemp -d) || exit 2
  keep=0
  trap 'rm -rf "$logdir"' EXIT
fi
. "$here/common.sh"
if [ "$(id -u)" = 0 ]; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
data=${W124_DATA:-/usr/share/common-licenses/GPL-3}
if [ -r "$data" ]; then data_opt="--data $data"; data_name=$(basename "$data"); else data_opt='' data_name="synthetic corpus"; fi

if [ "$quick" = 1 ]; then
  w124_steps=4 ab_reps=1 ab_steps=4 coll_iters=5 tp_reps=1 tp_small=10 tp_w124=3 dp_reps=1 dp_small=10 dp_w124=3
else
  w124_steps=10 ab_reps=5 ab_steps=6 coll_iters=10 tp_reps=5 tp_small=30 tp_w124=4 dp_reps=3 dp_small=20 dp_w124=4
fi

# --- the machine -----------------------------------------------------------
model=$(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
[ -n "$model" ] || model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
isa=
for f in avx2 avx512f avx512_bf16 amx_tile; do
  if grep -qw "$f" /proc/cpuinfo; then isa="$isa $f"; else isa="$isa no-$f"; fi
done
isa=${isa# }
has_bf16=0
grep -qw avx512_bf16 /proc/cpuinfo && has_bf16=1
grep -qw amx_tile /proc/cpuinfo && has_bf16=1
commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
# "+modified": tracked code, build or bench files differ from the commit (docs do not count)
if [ "$commit" != unknown ] && [ -n "$(git -C "$top" status --porcelain --untracked-files=no -- src include codelets examples bench tests configure.ac Makefile.am 2>/dev/null)" ]; then
  commit="$commit+modified"
fi
date=$(date -u '+%Y-%m-%d %H:%M UTC')
t_start=$(date +%s)

# --- helpers -----------------------------------------------------------------
say() { echo "headline: $*" >&2; }
# piece NAME LIMIT_S COMMAND...: runs COMMAND (in $build, output to
# $logdir/NAME.out) under a time limit; returns 0 if it exited 0. On failure
# $reason holds why.
piece() {
  name=$1 limit=$2; shift 2
  say "$name: $* (limit ${limit} s)"
  t0=$(date +%s)
  (cd "$build" && timeout -k 10 "$limit" "$@") > "$logdir/$name.out" 2>&1
  rc=$?
  t1=$(date +%s)
  echo "$name $((t1 - t0))" >> "$logdir/times"
  say "$name: exit $rc after $((t1 - t0)) s"
  if [ "$rc" = 0 ]; then reason=; return 0; fi
  last=$(last_line "$logdir/$name.out")
  if { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && [ $((t1 - t0)) -ge "$limit" ]; then
    reason="timed out after ${limit} s"
  elif [ "$rc" -gt 128 ]; then
    reason="killed by signal $((rc - 128)): ${last:-no output}"
  else
    reason="exit $rc: ${last:-no output}"
  fi
  return 1
}
failed() { echo "failed ($1)"; }
# the last line of FILE that is not empty, a "==" heading or a result line,
# shortened, with no "|" (it goes into a table cell)
last_line() { grep -v -e '^[[:space:]]*$' -e '^==' -e 'ms/step' "$1" | tail -n 1 | tr '|' '/' | cut -c1-100; }
num() { case $1 in ''|*[!0-9.]*) return 1;; *) return 0;; esac; }
rows=$logdir/rows
: > "$rows"
row() { # row FIGURE RESULT GOAL COMMAND
  printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" >> "$rows"
}
nfail=0
fail_row() { nfail=$((nfail + 1)); row "$1" "$(failed "$2")" "$3" "$4"; }
w124="--layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 --batch 4 --max-pos 1024"
small="--layers 2 --hidden 128 --heads 4 --seq 64 --batch 8"

# --- W124 fp32: the GEMM roofline and PyTorch (bench/w124.sh's runs) -------
cmd_w124="\`sh ../bench/w124.sh $w124_steps\` (same runs)"
best='' best_be='' bf16_native=0 peak_reason=''
if piece sgemm_peak 120 ./bench/sgemm_peak 1024; then
  best=$(sed -n 's/^sgemm_best_gflops_1core [a-z]* \([0-9.]*\)/\1/p' "$logdir/sgemm_peak.out")
  best_be=$(sed -n 's/^sgemm_best_gflops_1core \([a-z]*\) .*/\1/p' "$logdir/sgemm_peak.out")
  grep -q '^bf16_gflops_1core' "$logdir/sgemm_peak.out" && bf16_native=1
else
  peak_reason=$reason
fi
sw_ms='' gflop=''
# shellcheck disable=SC2086
if piece w124 300 ./examples/gpt_train $w124 $data_opt --steps "$w124_steps" --ncpus 2 --profile --log "$logdir/w124.csv"; then
  sw_ms=$(sed -n 's/.* \([0-9.]*\) ms\/step (steps.*/\1/p' "$logdir/w124.out")
  gflop=$(sed -n 's/.* \([0-9.]*\) GFLOP\/step.*/\1/p' "$logdir/w124.out" | head -n 1)
  gemm_share=$(sed -n 's/.*GEMM share of step time \([0-9.]*%\).*/\1/p' "$logdir/w124.out" | head -n 1)
  backend=$(sed -n 's/.*CPU GEMM \([a-z]*\) .*/\1/p' "$logdir/w124.out" | head -n 1)
  num "$sw_ms" || { sw_ms=; w124_reason="no ms/step in gpt_train's output"; }
else
  w124_reason=$reason
fi
torch_ms='' torch_note=''
if [ "$torch" = 0 ]; then
  torch_note="skipped (--no-torch)"
elif ! "$TORCH_PYTHON" -c 'import torch' > /dev/null 2>&1; then
  torch_note="skipped ($TORCH_PYTHON cannot import torch)"
else
  tver=$("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)
  # shellcheck disable=SC2086
  if piece torch 400 "$TORCH_PYTHON" "$here/torch_gpt.py" --layers 12 --hidden 768 --heads 12 --vocab 50257 --seq 64 \
      --batch 4 --steps "$w124_steps" --threads 2 --lr 1e-3 --beta2 0.999 --weight-decay 0 --dtype fp32 $data_opt; then
    torch_ms=$(sed -n 's/^torch_ms_per_step \([0-9.]*\).*/\1/p' "$logdir/torch.out")
    num "$torch_ms" || { torch_ms=; torch_note="failed (no torch_ms_per_step in its output)"; }
  else
    torch_note=$(failed "$reason")
  fi
fi
if [ -n "$sw_ms" ]; then
  if [ -n "$torch_ms" ]; then
    res=$(awk -v a="$sw_ms" -v b="$torch_ms" -v v="$tver" 'BEGIN { printf "**%.3fx** (%s ms/step against PyTorch %s'"'"'s %s, 2 threads)", a / b, a, v, b }')
    row "W124 fp32 step, starweave / PyTorch" "$res" "<= 0.5x" "$cmd_w124"
  else
    case $torch_note in failed*) nfail=$((nfail + 1));; esac
    row "W124 fp32 step, starweave / PyTorch" "$sw_ms ms/step; PyTorch $torch_note" "<= 0.5x" "$cmd_w124"
  fi
  if [ -n "$best" ] && num "$gflop"; then
    res=$(awk -v f="$gflop" -v g="$best" -v ms="$sw_ms" -v be="$best_be" -v sh="$gemm_share" 'BEGIN { r = f / (2 * g) * 1000;
      printf "**%.2fx** (%s ms/step against %.1f ms: %s GFLOP at %s GFLOP/s per worker, %s tile, 2 workers; GEMM share %s)", ms / r, ms, r, f, g, be, sh }')
    row "W124 fp32 step / GEMM roofline" "$res" "<= 1.3x" "$cmd_w124"
  else
    fail_row "W124 fp32 step / GEMM roofline" "sgemm_peak: ${peak_reason:-no rate in its output}" "<= 1.3x" "$cmd_w124"
  fi
else
  fail_row "W124 fp32 step, starweave / PyTorch" "gpt_train: $w124_reason" "<= 0.5x" "$cmd_w124"
  fail_row "W124 fp32 step / GEMM roofline" "gpt_train: $w124_reason" "<= 1.3x" "$cmd_w124"
fi

# --- bf16 against fp32, interleaved -------------------------------------------
cmd_ab="\`A_ARGS=\"$data_opt\" B_ARGS=\"$data_opt --dtype bf16 --gemm onednn\" sh ../bench/ab.sh . . $ab_reps $ab_steps\`"
if [ -z "$best" ]; then
  fail_row "W124 bf16 / fp32 speed-up" "sgemm_peak, which says whether oneDNN runs bf16 natively: ${peak_reason:-no rate in its output}" ">= 1.6x" "$cmd_ab"
elif [ "$has_bf16" = 0 ]; then
  row "W124 bf16 / fp32 speed-up" "not measured: this CPU has neither AVX512-BF16 nor AMX (\`--dtype bf16\` would widen bf16 operands to fp32)" ">= 1.6x" "$cmd_ab"
elif [ "$bf16_native" = 0 ]; then
  row "W124 bf16 / fp32 speed-up" "not measured: the CPU has AVX512-BF16 or AMX but sgemm_peak found no native bf16 GEMM (oneDNN not built or not using it)" ">= 1.6x" "$cmd_ab"
elif piece ab 400 env A_ARGS="$data_opt" B_ARGS="$data_opt --dtype bf16 --gemm onednn" sh "$here/ab.sh" . . "$ab_reps" "$ab_steps"; then
  line=$(grep '^median A' "$logdir/ab.out")
  a=$(echo "$line" | sed -n 's/^median A \([0-9.]*\) ms.*/\1/p')
  b=$(echo "$line" | sed -n 's/.*, B \([0-9.]*\) ms.*/\1/p')
  if num "$a" && num "$b"; then
    bisa=$(sed -n 's/.*oneDNN [0-9.]*, \([a-z0-9_]*\),.*/\1/p' "$logdir/sgemm_peak.out" | head -n 1)
    res=$(awk -v a="$a" -v b="$b" -v r="$ab_reps" -v i="$bisa" 'BEGIN { printf "**%.2fx** (medians of %d interleaved pairs: fp32 %s, bf16 %s ms/step; oneDNN %s)", a / b, r, a, b, i }')
    row "W124 bf16 / fp32 speed-up" "$res" ">= 1.6x" "$cmd_ab"
  else
    fail_row "W124 bf16 / fp32 speed-up" "no medians in bench/ab.sh's output" ">= 1.6x" "$cmd_ab"
  fi
else
  fail_row "W124 bf16 / fp32 speed-up" "bench/ab.sh: $reason" ">= 1.6x" "$cmd_ab"
fi

# --- collectives, 2 ranks -----------------------------------------------------
cmd_coll="\`SIZES=0.0009765625,64 sh ../bench/collectives.sh 2 $coll_iters\`"
if piece collectives 300 env SIZES=0.0009765625,64 sh "$here/collectives.sh" 2 "$coll_iters"; then
  o=$logdir/collectives.out
  # "allreduce METHOD... BYTES ms/call busbw [sw/MPI]": the method has spaces
  big=$(awk '$1 == "allreduce" && $0 ~ /starweave/ && $(NF-3) == 67108864 { s = $(NF-2); sb = $(NF-1); r = $NF }
    $1 == "allreduce" && $2 == "MPI_Allreduce" && $(NF-2) == 67108864 { m = $(NF-1); mb = $NF }
    END { if (s != "" && m != "") printf "**%.2fx** MPI_Allreduce'"'"'s bus bandwidth (%s against %s GB/s; %s against %s ms)", r, sb, mb, s, m }' "$o")
  small1=$(awk '$1 == "allreduce" && $0 ~ /starweave/ && $(NF-3) == 1024 { s = $(NF-2) }
    $1 == "allreduce" && $2 == "task+MPI_Allreduce" && $(NF-3) == 1024 { t = $(NF-2) }
    $1 == "allreduce" && $2 == "MPI_Allreduce" && $(NF-2) == 1024 { m = $(NF-1) }
    END { if (s != "" && m != "") printf "**%s ms** against MPI_Allreduce %s ms; one task calling MPI_Allreduce (the floor of a graph node): %s ms", s, m, t }' "$o")
  check=$(grep -c '^check: ok' "$o")
  [ "$check" -ge 1 ] || { big=''; small1=''; reason="no 'check: ok' in its output: $(last_line "$o")"; }
  if [ -n "$big" ]; then row "64 MiB all-reduce, 2 ranks" "$big" ">= 0.8x MPI" "$cmd_coll"
  else fail_row "64 MiB all-reduce, 2 ranks" "${reason:-no 64 MiB lines}" ">= 0.8x MPI" "$cmd_coll"; fi
  if [ -n "$small1" ]; then row "1 KiB all-reduce, 2 ranks" "$small1" "at the task's floor" "$cmd_coll"
  else fail_row "1 KiB all-reduce, 2 ranks" "${reason:-no 1 KiB lines}" "at the task's floor" "$cmd_coll"; fi
else
  fail_row "64 MiB all-reduce, 2 ranks" "bench/collectives.sh: $reason" ">= 0.8x MPI" "$cmd_coll"
  fail_row "1 KiB all-reduce, 2 ranks" "bench/collectives.sh: $reason" "at the task's floor" "$cmd_coll"
fi

# --- tp 2 + sp against one rank (interleaved medians) --------------------------
cmd_tp="\`REPS=$tp_reps sh ../bench/tp.sh $tp_small $tp_w124\`"
tp_rows() { # tp_rows TITLE LABEL (the "== TITLE" section of tp.sh's output)
  awk -v t="$1" -v l="$2" '/^== / { in_s = index($0, "== " t) == 1; next }
    in_s && index($0, l) == 1 { match($0, /ms\/step +[0-9.]+/); ms = substr($0, RSTART, RLENGTH); sub(/ms\/step +/, "", ms)
      match($0, /x one rank [0-9.?]+/); x = substr($0, RSTART + 11, RLENGTH - 11); print ms, x }' "$logdir/tp.out"
}
if piece tp 600 env REPS="$tp_reps" sh "$here/tp.sh" "$tp_small" "$tp_w124"; then
  for m in "small model" W124; do
    set -- $(tp_rows "$m" "one rank"); one=${1:-}
    set -- $(tp_rows "$m" "tp 2 + sp"); sp_ms=${1:-} sp_x=${2:-}
    set -- $(tp_rows "$m" "tp 2 ("); tp_x=${2:-}
    if [ "$m" = W124 ]; then fig="W124, tp 2 + sp (2 ranks, 1 worker each) / one rank (2 workers)" goal="<= 1.0x (not slower)"
    else fig="main job (2 layers, h 128, s 64, b 8), tp 2 + sp / one rank" goal="<= 1.3x"; fi
    if num "$one" && num "$sp_ms" && num "$sp_x"; then
      row "$fig" "**${sp_x}x** ($sp_ms against $one ms/step, medians of $tp_reps; tp 2 alone ${tp_x}x)" "$goal" "$cmd_tp"
    else
      fail_row "$fig" "no medians in bench/tp.sh's output" "$goal" "$cmd_tp"
    fi
  done
else
  fail_row "main job, tp 2 + sp / one rank" "bench/tp.sh: $reason" "<= 1.3x" "$cmd_tp"
fi

# --- dp 2 against one rank (weak scaling; medians of dp_reps runs of dp.sh) ----
cmd_dp="\`sh ../bench/dp.sh $dp_small $dp_w124\`"
[ "$dp_reps" -gt 1 ] && cmd_dp="$cmd_dp ($dp_reps runs, medians)"
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
: > "$logdir/dp.all"
dp_ok=0 dp_reason=''
k=1
while [ "$k" -le "$dp_reps" ]; do
  if piece "dp$k" 400 sh "$here/dp.sh" "$dp_small" "$dp_w124"; then
    dp_ok=$((dp_ok + 1)); cat "$logdir/dp$k.out" >> "$logdir/dp.all"
  else
    dp_reason=$reason
  fi
  k=$((k + 1))
done
if [ "$dp_ok" -gt 0 ]; then
  # dp_col LABEL FIELD: the median of ms/step (FIELD ms) or of the overlap share (FIELD hid) over the runs
  dp_col() { awk -v l="$1" -v f="$2" 'index($0, l) == 1 { if (f == "ms") { match($0, /ms\/step +[0-9.]+/); s = substr($0, RSTART, RLENGTH); sub(/ms\/step +/, "", s) }
      else { s = $0; sub(/.*computation /, "", s); sub(/%.*/, "", s) } if (s != "") print s }' "$logdir/dp.all" | median; }
  for m in small W124; do
    if [ "$m" = small ]; then a="one rank, batch 8" b="dp 2, batch 16" fig="dp 2 weak scaling, 4 layers h 128 (batch 8 per rank)"
    else a="one rank, batch 4" b="dp 2, batch 8" fig="dp 2 weak scaling, W124 (batch 4 per rank)"; fi
    one=$(dp_col "$a" ms) two=$(dp_col "$b" ms) hid=$(dp_col "$b" hid)
    if num "$one" && num "$two"; then
      res=$(awk -v a="$one" -v b="$two" -v h="$hid" -v n="$dp_ok" 'BEGIN { printf "**%.2fx** one rank'"'"'s step = %.0f %% efficiency (%s against %s ms/step, medians of %d; communication beside computation %s %%)", b / a, 100 * a / b, b, a, n, h }')
      [ "$dp_ok" = "$dp_reps" ] || res="$res; $((dp_reps - dp_ok)) of $dp_reps runs failed ($dp_reason)"
      row "$fig" "$res" "(none set)" "$cmd_dp"
    else
      fail_row "$fig" "no ms/step in bench/dp.sh's output for it: $(last_line "$logdir/dp.all")" "(none set)" "$cmd_dp"
    fi
  done
else
  fail_row "dp 2 weak scaling" "bench/dp.sh: $dp_reason" "(none set)" "$cmd_dp"
fi

# --- memory model against measured ------------------------------------------------
mem_row() { # mem_row NAME FIGURE COMMAND-TEXT
  # sum of the "memory: rank layer model registered diff" lines
  res=$(awk '$1 == "memory:" && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ { m += $4; r += $5; n++; if ($4 != $5) d++ }
    END { if (n) printf "**%s**: model %d, measured %d bytes of saved activations (%d rank x layer pairs%s)", (m == r ? "equal" : sprintf("%+.4f %%", 100 * (r - m) / m)), m, r, n, (d ? sprintf(", %d differ", d) : ", each equal") }' "$logdir/$1.out")
  if [ -n "$res" ]; then row "$2" "$res" "equal to the byte" "$3"
  else fail_row "$2" "no memory report in gpt_train's output" "equal to the byte" "$3"; fi
}
fig="memory model / measured, W124 one rank (recompute selective)"
cmd="\`./examples/gpt_train $w124 --steps 2 --ncpus 2 --memory-report\`"
# shellcheck disable=SC2086
if piece mem_w124 300 ./examples/gpt_train $w124 --steps 2 --ncpus 2 --quiet --memory-report --log "$logdir/mem.csv"; then
  mem_row mem_w124 "$fig" "$cmd"
else fail_row "$fig" "$reason" "equal to the byte" "$cmd"; fi
fig="memory model / measured, main job tp 2 + sp (2 ranks)"
cmd="\`sh ../tests/mpi_launch.sh 2 ./examples/gpt_train $small --tp 2 --sp --steps 2 --memory-report\`"
# shellcheck disable=SC2086
if piece mem_tp 300 sh "$top/tests/mpi_launch.sh" 2 ./examples/gpt_train $small --tp 2 --sp --steps 2 --quiet --memory-report --log "$logdir/mem.csv"; then
  mem_row mem_tp "$fig" "$cmd"
else fail_row "$fig" "$reason" "equal to the byte" "$cmd"; fi

# --- the table -------------------------------------------------------------------
t_end=$(date +%s)
elapsed=$((t_end - t_start))
gemm=${backend:-?}
echo "$date; $model, $(nproc) cores, ISA: $isa; commit $commit; GEMM $gemm, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; W124 data: $data_name; \`sh bench/headline.sh\`$([ "$quick" = 1 ] && echo ' --quick (smoke test: too few runs for the table)') in $((elapsed / 60)) min $((elapsed % 60)) s"
echo
echo "| Figure | Result | Goal | Command (run in the build directory) |"
echo "|---|---|---|---|"
cat "$rows"
[ "$keep" = 1 ] && say "raw output of each piece in $logdir (seconds per piece: $logdir/times)"
say "$(tr '\n' ' ' < "$logdir/times")"
[ "$nfail" = 0 ]
