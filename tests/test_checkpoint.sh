#!/bin/sh
# Checkpoint/resume (gpt_train --save/--resume), dropout on.
# Bit for bit, in nine layouts (one rank; 2 ranks with tp 2 + sp, with
# ring 2, with dp 2 + ZeRO-1, that with bf16 GEMMs, 2 pipeline stages of 2
# micro-batches (each rank's file holding its stage's tensors), that with 2
# interleaved chunks per stage, dp 2 +
# ZeRO-2, dp 2 + ZeRO-3 with 2 micro-batches): 10 uninterrupted
# steps against 5 steps + save + resume + 5 steps: the logged losses of
# steps 6-10 are identical and every rank's checkpoint after step 10
# (parameters and AdamW moments) is identical byte for byte.
# Re-sharding: a checkpoint of tp 2 + sp x dp 2 ZeRO-3 (4 ranks: values and
# moments in row shares) at step 4
# resumed on 1 rank, on tp 2, on dp 4 ZeRO-1 and on pp 2 x tp 2 + sp (the
# tied embedding loaded on both end stages): each prints the re-shard
# line naming both layouts, and its losses of steps 5-8 equal the
# uninterrupted run's within 1e-5 relative; and the one-rank run's
# checkpoint of step 8 resumed on tp 2 + sp (pieces split finer than the
# file's) to step 10, its losses of steps 9-10 checked the same way.
# Refusals, exit 2 on every rank (each rank's status seen), the reason
# printed once, the checkpoint directory left as it was: a checkpoint whose
# pieces do not cover the model (one rank's file replaced by another data-
# parallel replica's: ZeRO-3 rows in no file), a corrupt file that
# another rank than rank 0 verifies, a missing file, an older format, a
# model mismatch, a truncated file; kill -9 during saves leaves the latest
# checkpoint loadable.
# Every run must exit 0 and write what it should (fresh files per case).
# SW_TEST_ONLY (tests/mutants.sh) selects sections: "bit for bit",
# "re-shard", "refused", "kill".
. "${top_srcdir:-.}/tests/common.sh"
ARGS="--dropout 0.1 --layers 2 --hidden 64 --heads 4 --seq 32 --batch 4"
QUIET=--quiet # gpt_train prints only its last line (the re-shard runs print all)
train() { # train NP OUT ARGS...: gpt_train on NP ranks, output in OUT; its exit status
  np=$1; out=$2; shift 2
  if [ "$np" = 1 ]; then "$GPT_TRAIN" $ARGS $QUIET "$@" > "$out" 2>&1
  else SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$GPT_TRAIN" $ARGS $QUIET "$@" > "$out" 2>&1; fi
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
for layout in "1" "2 --tp 2 --sp" "2 --ring 2" "2 --dp 2 --zero 1" "2 --dp 2 --zero 1 --dtype bf16" \
    "2 --pp 2 --grad-accum 2" "2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 2" "2 --dp 2 --zero 2" \
    "2 --dp 2 --zero 3 --grad-accum 2"; do
  want "bit for bit: $layout" || continue
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

# Re-sharding: one checkpoint of 4 ranks at step 4, three other layouts
R="$TMPD/reshard"; mkdir "$R"
SAVED="4 --tp 2 --sp --dp 2 --zero 3"
saved_text="layout 4 ranks: tp 2, ulysses 1, ring 1, dp 2, pp 1, ZeRO-3"
if want "re-shard" || want "refused"; then
  set -- $SAVED; shift
  ran "np=4 $*: 10 steps" 4 "$R/full.out" "$@" --steps 10 --log "$R/full.csv"
  ran "np=4 $*: 4 steps + save" 4 "$R/a.out" "$@" --steps 4 --save "$R/ck" --log "$R/a.csv"
  [ -f "$R/full.csv" ] && tail -n +6 "$R/full.csv" | head -n 4 | cut -d, -f1,2 > "$R/want"
  [ -f "$R/full.csv" ] && tail -n +10 "$R/full.csv" | cut -d, -f1,2 > "$R/want9"
fi
close_losses() { # close_losses WANT GOT: the same steps, each loss within 1e-5 relative
  [ -s "$1" ] && [ "$(cut -d, -f1 "$1")" = "$(cut -d, -f1 "$2")" ] &&
    paste -d, "$1" "$2" | awk -F, '{ d = $2 - $4; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2; if (d > 1e-5 * s) bad++ }
      END { exit bad > 0 }'
}
case=0
for layout in "1 rank: tp 1, ulysses 1, ring 1, dp 1, pp 1, no ZeRO|1" \
              "2 ranks: tp 2, ulysses 1, ring 1, dp 1, pp 1, no ZeRO|2 --tp 2" \
              "4 ranks: tp 1, ulysses 1, ring 1, dp 4, pp 1, ZeRO-1|4 --dp 4 --zero 1" \
              "4 ranks: tp 2, ulysses 1, ring 1, dp 1, pp 2, no ZeRO|4 --pp 2 --tp 2 --sp"; do
  text=${layout%%|*}; set -- ${layout#*|}; np=$1; shift
  want "re-shard: np=$np $*" || continue
  case=$((case + 1)); d="$R/resumed$case"; mkdir "$d"
  # the one-rank run saves at step 8 for the finer split below
  QUIET= ran "re-shard: np=$np $*: resume the np=$SAVED checkpoint to step 8" "$np" "$d/out" "$@" --steps 8 \
    --resume "$R/ck" --log "$d/log.csv" $([ "$np" = 1 ] && echo --save "$R/ck1")
  line="gpt_train: re-sharded the checkpoint from $saved_text to layout $text"
  check "re-shard: np=$np $*: prints '$line'" grep -q -x -F -- "$line" "$d/out"
  [ -f "$d/log.csv" ] && tail -n +2 "$d/log.csv" | cut -d, -f1,2 > "$d/got"
  check "re-shard: np=$np $*: losses of steps 5-8 ($(tr '\n' ' ' < "$d/got" 2> /dev/null)) equal the uninterrupted np=$SAVED run's ($(tr '\n' ' ' < "$R/want")) within 1e-5" \
    close_losses "$R/want" "$d/got"
done
# a finer split than the file's pieces: the one-rank checkpoint of step 8
# (whole tensors) into tp 2 + sp's column and row blocks, to step 10
if want "re-shard: np=1" && want "re-shard: np=2 --tp 2 --sp"; then
  d="$R/finer"; mkdir "$d"
  QUIET= ran "re-shard: np=2 --tp 2 --sp: resume the one-rank checkpoint of step 8 to step 10" 2 "$d/out" --tp 2 --sp \
    --steps 10 --resume "$R/ck1" --log "$d/log.csv"
  line="gpt_train: re-sharded the checkpoint from layout 1 rank: tp 1, ulysses 1, ring 1, dp 1, pp 1, no ZeRO to layout 2 ranks: tp 2, ulysses 1, ring 1, dp 1, pp 1, no ZeRO"
  check "re-shard: np=2 --tp 2 --sp: prints '$line'" grep -q -x -F -- "$line" "$d/out"
  [ -f "$d/log.csv" ] && tail -n +2 "$d/log.csv" | cut -d, -f1,2 > "$d/got"
  check "re-shard: np=2 --tp 2 --sp: losses of steps 9-10 ($(tr '\n' ' ' < "$d/got" 2> /dev/null)) equal the uninterrupted np=$SAVED run's ($(tr '\n' ' ' < "$R/want9")) within 1e-5" \
    close_losses "$R/want9" "$d/got"
fi

# Refusals: every rank exits 2 (each rank reports its status: the wrapper
# itself exits 0, so that mpirun lets every rank finish), the message is
# printed once, and the checkpoint directory (the run also asks to --save
# into it) is left as it was.
digest() { find "$1" -type f | LC_ALL=C sort | xargs cat 2> /dev/null | cksum; }
expect_refused() { # expect_refused NP CKPT_DIR "message" ARGS...
  np=$1; ck=$2; msg=$3; shift 3
  want "refused: $msg" || return 0
  case=$((case + 1)); out="$TMPD/refused$case.out"
  before=$(digest "$ck")
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" sh -c '"$0" "$@"; echo "rank exit status $?"' "$GPT_TRAIN" $ARGS $QUIET \
    --steps 12 --resume "$ck" --save "$ck" --log "$TMPD/refused$case.csv" "$@" > "$out" 2>&1
  n2=$(grep -c -x "rank exit status 2" "$out")
  n=$(grep -c -F -- "$msg" "$out")
  ok=false
  [ "$n2" = "$np" ] && [ "$(grep -c "^rank exit status" "$out")" = "$np" ] && [ "$n" = 1 ] &&
    [ "$(digest "$ck")" = "$before" ] && ok=true
  $ok || cat "$out"
  check "refused ($np rank(s) $*): $n2 of $np rank(s) exit 2, printed $n time(s): '$(grep -m 1 -F -- "$msg" "$out" | sed 's/^starweave: error: //')'; checkpoint unchanged" $ok
}
step4=step-00000004
# the pieces do not cover the model: one rank's file replaced by a copy of
# another data-parallel replica's (tp 0's, not tp 1's): the ZeRO-3 rows of
# tp 1's values and moments that the replaced file held are in no file
cp -r "$R/ck" "$R/hole"
cp "$R/hole/$step4/rank-00002.ckpt" "$R/hole/$step4/rank-00001.ckpt"
expect_refused 2 "$R/hole" "does not cover this run's value of wte [256,64]: 4096 element(s) within rows 128-191, columns 0-63 are in none of its 4 file(s)" --tp 2
expect_refused 1 "$R/hole" "does not cover this run's value of wte [256,64]: 4096 element(s) within rows 128-191"
# one byte flipped in rank 3's file, whose checksum rank 1 of 2 verifies
cp -r "$R/ck" "$R/corrupt"
f="$R/corrupt/$step4/rank-00003.ckpt"
printf '\377' | dd of="$f" bs=1 seek=$(($(wc -c < "$f") / 2)) conv=notrunc 2> /dev/null
expect_refused 2 "$R/corrupt" "rank-00003.ckpt is corrupt (checksum mismatch)" --dp 2
# a file missing; a file of the format before pieces
cp -r "$R/ck" "$R/missing"
rm "$R/missing/$step4/rank-00002.ckpt"
expect_refused 1 "$R/missing" "cannot open $R/missing/$step4/rank-00002.ckpt"
cp -r "$R/ck" "$R/old"
printf 'SWCKPT03' | dd of="$R/old/$step4/rank-00000.ckpt" bs=1 conv=notrunc 2> /dev/null
expect_refused 1 "$R/old" "is in format SWCKPT03, and this starweave reads SWCKPT04"
ck="$TMPD/ck3"
if want "refused"; then
  ran "np=1: 3 steps + save" 1 "$TMPD/ck3.out" --steps 3 --save "$ck" --log "$TMPD/ck3.csv"
fi
f="$ck/step-00000003/rank-00000.ckpt"
cp "$f" "$TMPD/good" 2> /dev/null
expect_refused 1 "$ck" "does not match this run: hidden 64 in the checkpoint, 128 here" --hidden 128
expect_refused 2 "$ck" "does not match this run: seed 1234 in the checkpoint, 7 here" --tp 2 --seed 7
# one byte flipped in the middle; the file truncated; the whole directory gone
size=$(wc -c < "$f")
printf '\377' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2> /dev/null
expect_refused 1 "$ck" "is corrupt (checksum mismatch)"
cp "$TMPD/good" "$f" 2> /dev/null
truncate -s $((size - 100)) "$f"
expect_refused 1 "$ck" "is truncated"
rm -rf "$ck"
expect_refused 1 "$ck" "cannot open"

# kill -9 while saving every step: the latest checkpoint stays loadable and
# the resumed run logs the step after it
for delay in 2 3 4; do
  want "kill -9 after $delay s" || continue
  ck="$TMPD/kill$delay"
  "$GPT_TRAIN" $ARGS $QUIET --steps 100000 --save "$ck" --save-every 1 --log "$TMPD/kill$delay.csv" > /dev/null 2>&1 &
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
