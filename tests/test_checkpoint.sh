#!/bin/sh
# Checkpoint/resume (gpt_train --save/--resume), dropout on, in five layouts
# (one rank; 2 ranks with tp 2 + sp, with ring 2, with dp 2 + ZeRO-1, and
# that with bf16 GEMMs):
# 10 uninterrupted steps against 5 steps + save + resume + 5 steps: the
# logged losses of steps 6-10 are identical and every rank's checkpoint
# after step 10 (parameters and AdamW moments) is identical byte for byte.
# Every run must exit 0 and write what it should (fresh files per case).
# A corrupt, truncated or mismatched (model, or parallel layout) checkpoint
# is refused with a message and exit 2 on every rank; kill -9 during saves
# leaves the latest checkpoint loadable.
. "${top_srcdir:-.}/tests/common.sh"
ARGS="--dropout 0.1 --layers 2 --hidden 64 --heads 4 --seq 32 --batch 4 --quiet"
train() { # train NP OUT ARGS...: gpt_train on NP ranks, output in OUT; its exit status
  np=$1; out=$2; shift 2
  if [ "$np" = 1 ]; then "$GPT_TRAIN" $ARGS "$@" > "$out" 2>&1
  else SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$GPT_TRAIN" $ARGS "$@" > "$out" 2>&1; fi
}
ran() { # ran WHAT NP OUT ARGS...: train, and a check that it exited 0
  what=$1; shift
  train "$@"
  rc=$?
  [ "$rc" = 0 ] || cat "$2"
  check "$what: exit $rc" [ "$rc" = 0 ]
}
same_ckpts() { # same_ckpts DIR_A DIR_B NP STEP: every rank's file exists in both and is identical
  for r in $(seq 0 $(($3 - 1))); do
    f=$(printf 'step-%08d/rank-%05d.ckpt' "$4" "$r")
    [ -s "$1/$f" ] && [ -s "$2/$f" ] && cmp -s "$1/$f" "$2/$f" || return 1
  done
}
case=0
for layout in "1" "2 --tp 2 --sp" "2 --ring 2" "2 --dp 2 --zero 1" "2 --dp 2 --zero 1 --dtype bf16"; do
  set -- $layout; np=$1; shift
  case=$((case + 1)); d="$TMPD/layout$case"; mkdir "$d"
  ran "np=$np $*: 10 steps" "$np" "$d/full.out" "$@" --steps 10 --save "$d/ck_full" --log "$d/full.csv"
  ran "np=$np $*: 5 steps + save" "$np" "$d/a.out" "$@" --steps 5 --save "$d/ck" --log "$d/a.csv"
  ran "np=$np $*: resume to step 10" "$np" "$d/b.out" "$@" --steps 10 --resume "$d/ck" --save "$d/ck" --log "$d/b.csv"
  [ -f "$d/full.csv" ] && tail -n +7 "$d/full.csv" | cut -d, -f1,2 > "$d/want"
  [ -f "$d/b.csv" ] && tail -n +2 "$d/b.csv" | cut -d, -f1,2 > "$d/got"
  check "np=$np $*: losses of steps 6-10 after resume equal the uninterrupted run ($(tr '\n' ' ' < "$d/got"))" \
    sh -c "[ \$(wc -l < '$d/want') = 5 ] && cmp -s '$d/want' '$d/got'"
  check "np=$np $*: every rank's checkpoint after step 10 equals the uninterrupted run's, byte for byte" \
    same_ckpts "$d/ck_full" "$d/ck" "$np" 10
done

expect_refused() { # expect_refused NP CKPT_DIR "message" ARGS...
  np=$1; ck=$2; msg=$3; shift 3
  case=$((case + 1)); out="$TMPD/refused$case.out"
  train "$np" "$out" --steps 12 --resume "$ck" --log "$TMPD/refused$case.csv" "$@"
  rc=$?
  ok=false
  [ "$rc" = 2 ] && grep -q -F -- "$msg" "$out" && ok=true
  $ok || cat "$out"
  check "refused ($*): exit $rc, '$(grep -m 1 -F -- "$msg" "$out" | sed 's/^starweave: error: //')'" $ok
}
# the ring 2 layout's checkpoint into another split of the same ranks
expect_refused 2 "$TMPD/layout3/ck" "does not match this run: ulysses 1 in the checkpoint, 2 here" --ulysses 2
ck="$TMPD/ck3"
ran "np=1: 3 steps + save" 1 "$TMPD/ck3.out" --steps 3 --save "$ck" --log "$TMPD/ck3.csv"
f="$ck/step-00000003/rank-00000.ckpt"
cp "$f" "$TMPD/good"
expect_refused 1 "$ck" "does not match this run: hidden 64 in the checkpoint, 128 here" --hidden 128
expect_refused 2 "$ck" "does not match this run: number of ranks 1 in the checkpoint, 2 here" --dp 2
# one byte flipped in the middle
size=$(wc -c < "$f")
printf '\377' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2> /dev/null
expect_refused 1 "$ck" "is corrupt (checksum mismatch)"
cp "$TMPD/good" "$f"
truncate -s $((size - 100)) "$f"
expect_refused 1 "$ck" "is truncated"
rm -rf "$ck"
expect_refused 1 "$ck" "cannot open"

# kill -9 while saving every step: the latest checkpoint stays loadable and
# the resumed run logs the step after it
for delay in 2 3 4; do
  ck="$TMPD/kill$delay"
  "$GPT_TRAIN" $ARGS --steps 100000 --save "$ck" --save-every 1 --log "$TMPD/kill$delay.csv" > /dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  last=$(sed -n 's/^step-0*//p' "$ck/latest" 2> /dev/null)
  train 1 "$TMPD/resumed$delay.out" --steps $((${last:-0} + 1)) --resume "$ck" --log "$TMPD/resumed$delay.csv"
  rc=$?
  ok=false
  [ "$rc" = 0 ] && [ -n "$last" ] && [ "$(tail -n +2 "$TMPD/resumed$delay.csv" | cut -d, -f1)" = $((last + 1)) ] && ok=true
  $ok || cat "$TMPD/resumed$delay.out"
  check "kill -9 after ${delay} s of saving every step: resumed from step ${last:-none} (exit $rc)" $ok
done
finish
