#!/bin/sh
# Checkpoint/resume (gpt_train --save/--resume): 10 steps equal 5 steps +
# save + resume + 5 steps bit for bit in the logged losses (one rank, and
# 2 ranks with tp 2 + sp, and with ring 2; dropout on); a corrupt,
# truncated or mismatched (model, or parallel layout)
# checkpoint is refused with a message and exit 2 on every rank; kill -9
# during saves leaves the latest checkpoint loadable.
. "${top_srcdir:-.}/tests/common.sh"
ARGS="--dropout 0.1 --layers 2 --hidden 64 --heads 4 --seq 32 --batch 4 --quiet"
train() { # train NP ARGS...: gpt_train on NP ranks
  np=$1; shift
  if [ "$np" = 1 ]; then "$GPT_TRAIN" $ARGS "$@"; else SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$GPT_TRAIN" $ARGS "$@"; fi
}
for layout in "1" "2 --tp 2 --sp" "2 --ring 2"; do
  set -- $layout; np=$1; shift
  rm -rf "$TMPD/ck"
  train "$np" "$@" --steps 10 --log "$TMPD/full.csv" > "$TMPD/out" 2>&1 || cat "$TMPD/out"
  train "$np" "$@" --steps 5 --save "$TMPD/ck" --log "$TMPD/a.csv" > "$TMPD/out" 2>&1 || cat "$TMPD/out"
  train "$np" "$@" --steps 10 --resume "$TMPD/ck" --log "$TMPD/b.csv" > "$TMPD/out" 2>&1 || cat "$TMPD/out"
  tail -n 5 "$TMPD/full.csv" | cut -d, -f1,2 > "$TMPD/want"
  tail -n +2 "$TMPD/b.csv" | cut -d, -f1,2 > "$TMPD/got"
  check "np=$np $*: steps 6-10 after resume equal the uninterrupted run ($(tr '\n' ' ' < "$TMPD/got"))" \
    cmp -s "$TMPD/want" "$TMPD/got"
done

expect_refused() { # expect_refused NP "message" ARGS...
  np=$1; msg=$2; shift 2
  train "$np" --steps 12 --resume "$TMPD/ck" --log "$TMPD/c.csv" "$@" > "$TMPD/out" 2>&1
  rc=$?
  ok=false
  [ "$rc" = 2 ] && grep -q -F -- "$msg" "$TMPD/out" && ok=true
  $ok || cat "$TMPD/out"
  check "refused ($*): exit $rc, '$(grep -m 1 -F -- "$msg" "$TMPD/out" | sed 's/^starweave: error: //')'" $ok
}
# the last layout's checkpoint (ring 2) into another split of the same ranks
expect_refused 2 "does not match this run: ulysses 1 in the checkpoint, 2 here" --ulysses 2
rm -rf "$TMPD/ck"
train 1 --steps 3 --save "$TMPD/ck" --log "$TMPD/a.csv" > "$TMPD/out" 2>&1 || cat "$TMPD/out"
f="$TMPD/ck/step-00000003/rank-00000.ckpt"
cp "$f" "$TMPD/good"
expect_refused 1 "does not match this run: hidden 64 in the checkpoint, 128 here" --hidden 128
expect_refused 2 "does not match this run: number of ranks 1 in the checkpoint, 2 here" --dp 2
# one byte flipped in the middle
size=$(wc -c < "$f")
printf '\377' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2> /dev/null
expect_refused 1 "is corrupt (checksum mismatch)"
cp "$TMPD/good" "$f"
truncate -s $((size - 100)) "$f"
expect_refused 1 "is truncated"
rm -rf "$TMPD/ck"
expect_refused 1 "cannot open"

# kill -9 while saving every step: the latest checkpoint stays loadable
for delay in 2 3 4; do
  rm -rf "$TMPD/ck"
  "$GPT_TRAIN" $ARGS --steps 100000 --save "$TMPD/ck" --save-every 1 --log "$TMPD/k.csv" > /dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  last=$(sed -n 's/^step-0*//p' "$TMPD/ck/latest" 2> /dev/null)
  "$GPT_TRAIN" $ARGS --steps $((${last:-0} + 1)) --resume "$TMPD/ck" --log "$TMPD/r.csv" > "$TMPD/out" 2>&1
  rc=$?
  ok=false
  [ "$rc" = 0 ] && [ -n "$last" ] && ok=true
  $ok || cat "$TMPD/out"
  check "kill -9 after ${delay} s of saving every step: resumed from step ${last:-none} (exit $rc)" $ok
done
finish
