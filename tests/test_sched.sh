#!/bin/sh
# Results must not depend on the StarPU scheduler nor on the number of
# workers: 3 training steps (dropout on) under eager, lws, ws, dmda and
# random with 1 and 2 CPU workers per rank give the logged losses and every
# rank's checkpoint after step 3 (parameters and AdamW moments) byte for
# byte equal to a reference run with StarPU's default scheduler and worker
# count -- on one rank, with tp 2 + sp on 2 ranks and with dp 2 + ZeRO-1 on
# 2 ranks; then the same on one rank with the oneDNN GEMM backend where it
# is built. Every run must exit 0 and write its log and checkpoint, and
# sw_init's banner (the policy and worker count read back from StarPU, the
# GEMM backend in use) must name the scheduler, workers and backend asked for.
# SW_SCHED_LAYOUTS (layouts separated by ';', each "NP FLAGS..."): other
# layouts instead, without the oneDNN runs (tests/test_pp_sched.sh).
. "${top_srcdir:-.}/tests/common.sh"
args="--hidden 64 --heads 4 --seq 16 --batch 4 --steps 3 --dropout 0.1"
train() { # train NP DIR ARGS...: gpt_train on NP ranks, log DIR.csv, checkpoint in DIR; its exit status
  np=$1; d=$2; shift 2
  SW_TEST_TIMEOUT=300 sh "$LAUNCH" "$np" "$GPT_TRAIN" $args --log "$d.csv" --save "$d" "$@" > "$d.out" 2>&1
}
same_run() { # same_run RC NP DIR_A DIR_B: RC 0, 3 steps logged, same losses, every rank's checkpoint identical
  [ "$1" = 0 ] && [ "$(wc -l < "$4.csv.loss")" = 4 ] && cmp -s "$3.csv.loss" "$4.csv.loss" || return 1
  shift
  for r in $(seq 0 $(($1 - 1))); do
    f=$(printf 'step-%08d/rank-%05d.ckpt' 3 "$r")
    same_ckpt_file "$2/$f" "$3/$f" || return 1
  done
}
ran_as() { # ran_as DIR SCHED NCPUS [GEMM]: sw_init's banner, read back from StarPU, names them
  grep -q "starweave: [0-9]* rank(s), $3 CPU.* worker(s) per rank, scheduler $2, CPU GEMM ${4:-}" "$1.out"
}
sched_ok() { # sched_ok DIR SCHED NCPUS GEMM RC NP REF: ran as asked, and the same run as REF
  ran_as "$1" "$2" "$3" "$4" && same_run "$5" "$6" "$7" "$1"
}
n=0
layouts=${SW_SCHED_LAYOUTS:-1 --layers 2;2 --tp 2 --sp --layers 2;2 --dp 2 --zero 1 --layers 2}
IFS=';'
set -f
for layout in $layouts; do
  unset IFS
  set -- $layout; np=$1; shift
  n=$((n + 1)); ref="$TMPD/ref$n"
  want "np=$np $*" || continue
  # the reference: StarPU's default scheduler, the launcher's worker count
  train "$np" "$ref" "$@"
  rc=$?
  [ "$rc" = 0 ] || cat "$ref.out"
  check "np=$np${*:+ $*}: reference run (default scheduler): exit $rc" [ "$rc" = 0 ]
  cut -d, -f1,2 "$ref.csv" > "$ref.csv.loss" 2> /dev/null
  echo "np=$np${*:+ $*}: reference losses $(tail -n +2 "$ref.csv.loss" | tr '\n' ' ')"
  for sched in eager lws ws dmda random; do
    for ncpus in 1 2; do
      d="$TMPD/$n-$sched-$ncpus"
      train "$np" "$d" "$@" --sched "$sched" --ncpus "$ncpus"
      rc=$?
      [ "$rc" = 0 ] || cat "$d.out"
      cut -d, -f1,2 "$d.csv" > "$d.csv.loss" 2> /dev/null
      check "np=$np${*:+ $*} under $sched with $ncpus worker(s) per rank (StarPU's banner says so): exit $rc, losses and every rank's checkpoint equal the reference's" \
        sched_ok "$d" "$sched" "$ncpus" "" "$rc" "$np" "$ref"
    done
  done
done
set +f
if [ -n "${SW_SCHED_LAYOUTS:-}" ]; then finish; exit; fi
# the oneDNN GEMM backend, where built: the same independence with it, on
# one rank; its losses differ from OpenBLAS's in the last bits only
ref="$TMPD/ref1"
train 1 "$TMPD/dnnl" --layers 2 --gemm onednn
rc=$?
if [ "$rc" = 2 ] && grep -q 'built without oneDNN' "$TMPD/dnnl.out"; then
  echo "SKIP oneDNN backend: $(grep -m 1 'built without' "$TMPD/dnnl.out")"
else
  [ "$rc" = 0 ] || cat "$TMPD/dnnl.out"
  cut -d, -f1,2 "$TMPD/dnnl.csv" > "$TMPD/dnnl.csv.loss" 2> /dev/null
  d=$(paste -d, "$ref.csv.loss" "$TMPD/dnnl.csv.loss" | awk -F, 'NR > 1 { r = ($2 - $4) / $2; if (r < 0) r = -r; if (r > w) w = r }
    END { printf "%.3g", w }')
  check "np=1 --gemm onednn: exit $rc, losses within 1e-5 of OpenBLAS's (worst relative difference $d)" \
    sh -c '[ "$1" = 0 ] && awk -v d="$2" "BEGIN { exit !(d <= 1e-5) }"' - "$rc" "$d"
  for sched in eager dmda random; do
    for ncpus in 1 2; do
      d="$TMPD/dnnl-$sched-$ncpus"
      train 1 "$d" --layers 2 --gemm onednn --sched "$sched" --ncpus "$ncpus"
      rc=$?
      [ "$rc" = 0 ] || cat "$d.out"
      cut -d, -f1,2 "$d.csv" > "$d.csv.loss" 2> /dev/null
      check "np=1 --gemm onednn under $sched with $ncpus worker(s) (StarPU's banner says so): exit $rc, losses and checkpoint equal oneDNN's reference" \
        sched_ok "$d" "$sched" "$ncpus" onednn "$rc" 1 "$TMPD/dnnl"
    done
  done
fi
finish
