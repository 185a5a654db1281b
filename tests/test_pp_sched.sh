#!/bin/sh
# The pipeline and ZeRO-3 under every StarPU scheduler (issue 43; make
# check-long, make check skips it): pp 2 with 4 micro-batches, pp 2 x 2
# interleaved chunks and dp 2 + ZeRO-3 (dropout on), 3 training steps under
# eager, lws, ws, dmda and random with 1 and 2 CPU workers per rank: the
# logged losses and every rank's checkpoint after step 3 byte for byte
# those of the run under StarPU's default scheduler, every run exiting 0
# within its timeout (no hang), StarPU's banner naming the scheduler and
# workers asked for. tests/test_sched.sh does the same for one rank, tp 2 +
# sp and dp 2 + ZeRO-1.
. "${top_srcdir:-.}/tests/common.sh"
[ -n "${SW_CHECK_LONG:-}" ] || { echo "SKIP: a long test: make check-long runs it (.ci/run does)"; exit 77; }
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
n=0
for layout in "2 --pp 2 --layers 2 --grad-accum 4" "2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 4" \
    "2 --dp 2 --zero 3 --layers 2"; do
  set -- $layout; np=$1; shift
  n=$((n + 1)); ref="$TMPD/ref$n"
  want "np=$np $*" || continue
  train "$np" "$ref" "$@"
  rc=$?
  [ "$rc" = 0 ] || cat "$ref.out"
  check "np=$np $*: reference run (default scheduler): exit $rc" [ "$rc" = 0 ]
  cut -d, -f1,2 "$ref.csv" > "$ref.csv.loss" 2> /dev/null
  echo "np=$np $*: reference losses $(tail -n +2 "$ref.csv.loss" | tr '\n' ' ')"
  for sched in random ws lws eager dmda; do
    for ncpus in 1 2; do
      d="$TMPD/$n-$sched-$ncpus"
      train "$np" "$d" "$@" --sched "$sched" --ncpus "$ncpus"
      rc=$?
      [ "$rc" = 0 ] || cat "$d.out"
      cut -d, -f1,2 "$d.csv" > "$d.csv.loss" 2> /dev/null
      ok=false
      grep -q "starweave: [0-9]* rank(s), $ncpus CPU.* worker(s) per rank, scheduler $sched" "$d.out" &&
        same_run "$rc" "$np" "$ref" "$d" && ok=true
      check "np=$np $* under $sched with $ncpus worker(s) per rank: exit $rc, losses and every rank's checkpoint equal the reference's" $ok
    done
  done
done
finish
