#!/bin/sh
# Checkpoint/resume (gpt_train --save/--resume), dropout on.
# Bit for bit, in nine layouts (four of them in make check-long only) (one
# rank; 2 ranks with tp 2 + sp, with ring 2, with dp 2 + ZeRO-1, that with
# bf16 GEMMs, 2 pipeline stages of 2 micro-batches (each rank's file
# holding its stage's tensors), that with 2 interleaved chunks per stage,
# dp 2 + ZeRO-2, dp 2 + ZeRO-3 with 2 micro-batches): 10 uninterrupted
# steps against 5 steps + save + resume + 5 steps: the logged losses of
# steps 6-10 are identical and every rank's checkpoint after step 10
# (parameters and AdamW moments) is identical byte for byte (but the save
# id, drawn anew by each save, and the checksum that covers it).
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
# model mismatch, a truncated file, a step whose files are of two saves
# (the save id), a custom model with no model fields whose tensor is
# narrower or shorter (the per-tensor shape check).
# A step committed as a whole: kill -9 during saves (1 rank: resumed from
# the latest, the killed run's log kept; 2 ranks, one killed, into a fresh
# and a used directory: one save id in the latest step, resumed bit for bit
# to its saver's next loss); a rank whose file cannot be written (a
# directory in the way, deterministic) leaves latest and its step as they
# were, into a new step and over a step latest names.
# Every run must exit 0 and write what it should (fresh files per case).
# SW_TEST_ONLY (tests/mutants.sh) selects sections: "bit for bit",
# "re-shard", "refused", "kill -9 1 rank", "injected", "kill during saves".
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
    same_ckpt_file "$1/$f" "$2/$f" || return 1
  done
}
save_ids() { # save_ids STEP_DIR -> the distinct save ids of its rank files, one per line
  for f in "$1"/rank-*.ckpt; do od -An -tx8 -j$SAVE_ID_AT -N8 "$f"; done | sort -u
}
case=0 left=0
# make check runs five of the nine layouts (each costs three launches);
# make check-long (SW_CHECK_LONG=1, .ci/run) and a selection (SW_TEST_ONLY) every one
long_only="[2 --ring 2] [2 --dp 2 --zero 1] [2 --pp 2 --grad-accum 2] [2 --dp 2 --zero 2]"
for layout in "1" "2 --tp 2 --sp" "2 --ring 2" "2 --dp 2 --zero 1" "2 --dp 2 --zero 1 --dtype bf16" \
    "2 --pp 2 --grad-accum 2" "2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 2" "2 --dp 2 --zero 2" \
    "2 --dp 2 --zero 3 --grad-accum 2"; do
  want "bit for bit: $layout" || continue
  if [ -z "${SW_CHECK_LONG:-}${SW_TEST_ONLY:-}" ]; then
    case "$long_only" in *"[$layout]"*) left=$((left + 1)); continue ;; esac
  fi
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

[ "$left" = 0 ] || echo "# $left of the nine layouts left to make check-long (SW_CHECK_LONG=1 runs them)"

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
expect_refused 1 "$R/old" "is in format SWCKPT03, and this starweave reads SWCKPT05"
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

# wait_for SECONDS COMMAND...: polls (every 0.1 s) until COMMAND succeeds; 1 if it never did
wait_for() {
  n=$(($1 * 10)); shift
  while [ "$n" -gt 0 ]; do "$@" 2> /dev/null && return 0; sleep 0.1; n=$((n - 1)); done
  return 1
}
random_ms() { # random_ms MAX -> a random number of milliseconds in [0, MAX), as seconds for sleep
  r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' '); printf '%d.%03d' $((r % $1 / 1000)) $((r % $1 % 1000))
}
log_steps() { tail -n +2 "$1" 2> /dev/null | wc -l; }
at_least_steps() { [ "$(log_steps "$1")" -ge "$2" ]; }
latest_step() { sed -n 's/^step-0*//p' "$1/latest" 2> /dev/null; }
latest_at_least() { l=$(latest_step "$1"); [ -n "$l" ] && [ "$l" -ge "$2" ]; }

# kill -9 while saving every step, once the run has committed step 2 (and
# a random moment later): the latest checkpoint stays loadable, the resumed
# run logs the step after it, and the killed run's log holds every step
# before the last committed one (flushed each step: a killed run keeps what
# it printed)
for try in 1 2 3; do
  want "kill -9 1 rank, try $try" || continue
  ck="$TMPD/kill$try"
  "$GPT_TRAIN" $ARGS $QUIET --steps 100000 --save "$ck" --save-every 1 --log "$TMPD/kill$try.csv" > /dev/null 2>&1 &
  pid=$!
  wait_for 120 latest_at_least "$ck" 2
  sleep "$(random_ms 1000)"
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  last=$(latest_step "$ck")
  logged=$(log_steps "$TMPD/kill$try.csv")
  train 1 "$TMPD/resumed$try.out" --steps $((${last:-0} + 1)) --resume "$ck" --log "$TMPD/resumed$try.csv"
  rc=$?
  ok=false
  [ "$rc" = 0 ] && [ -n "$last" ] && [ "$(tail -n +2 "$TMPD/resumed$try.csv" | cut -d, -f1)" = $((last + 1)) ] && ok=true
  $ok || cat "$TMPD/resumed$try.out"
  check "kill -9 while saving every step (try $try): resumed from step ${last:-none} (exit $rc)" $ok
  check "kill -9 while saving every step (try $try): the killed run's log holds $logged step(s), at least the $((${last:-1} - 1)) before step ${last:-none}" \
    [ -n "$last" -a "$logged" -ge $((${last:-1} - 1)) -a "$logged" -ge 1 ]
done

# A step committed as a whole, on 2 ranks (tp 2 + sp, resumed bit for bit).
SAVED2="--tp 2 --sp"
K="$TMPD/whole"; mkdir "$K"
if want "injected" || want "kill during saves"; then
  # the reference: 13 uninterrupted steps (lr default); and an earlier run
  # (lr 0.003) that saved every step up to 12 into the directory to reuse
  ran "np=2 $SAVED2: 13 steps (reference)" 2 "$K/ref.out" $SAVED2 --steps 13 --log "$K/ref.csv"
  ran "np=2 $SAVED2 --lr 0.003: 12 steps, saving every step (the earlier run)" 2 "$K/used.out" $SAVED2 --lr 0.003 \
    --steps 12 --save "$K/used" --save-every 1 --log "$K/used.csv"
fi
loss_at() { sed -n "s/^$2,\([^,]*\),.*/\1/p" "$1" 2> /dev/null; } # loss_at CSV STEP

# A rank whose file cannot be written (injected, deterministic: a directory
# in place of rank 1's temporary file, both in the step's staging directory
# and in the step's own): the save exits 1 on every rank, `latest` and the
# files of the step it names stay as they were, and a resume loads that
# step (its next loss equals the reference's bit for bit) -- for a new step
# (6, after 3) and for a step that the directory already holds and `latest`
# names (an earlier run's step 3, saved over by another run).
if want "injected"; then
  J="$K/inject"
  ran "injected: np=2 $SAVED2: 3 steps + save" 2 "$K/inj-a.out" $SAVED2 --steps 3 --save "$J" --log "$K/inj-a.csv"
  cp -r "$J" "$K/inject.a"
  for s in 3 6; do
    d=$(printf 'step-%08d' "$s")
    mkdir -p "$J/$d.tmp/rank-00001.ckpt.tmp" "$J/$d/rank-00001.ckpt.tmp"
  done
  unchanged() { # latest names step 3 and its files are the first save's
    cmp -s "$J/latest" "$K/inject.a/latest" && cmp -s "$J/step-00000003/rank-00000.ckpt" \
      "$K/inject.a/step-00000003/rank-00000.ckpt" && cmp -s "$J/step-00000003/rank-00001.ckpt" \
      "$K/inject.a/step-00000003/rank-00001.ckpt"
  }
  train 2 "$K/inj-b.out" $SAVED2 --steps 6 --resume "$J" --save "$J" --save-every 3 --log "$K/inj-b.csv"
  rc=$?
  ok=false
  [ "$rc" = 1 ] && grep -q "cannot create .*rank-00001.ckpt.tmp: Is a directory" "$K/inj-b.out" && unchanged && ok=true
  $ok || cat "$K/inj-b.out"
  check "injected: saving step 6 with rank 1's file blocked: exit $rc (1), the reason printed ($(grep -m 1 -o 'cannot create [^:]*: Is a directory' "$K/inj-b.out")), latest and step 3 unchanged" $ok
  train 2 "$K/inj-c.out" $SAVED2 --lr 0.003 --steps 3 --save "$J" --log "$K/inj-c.csv"
  rc=$?
  ok=false
  [ "$rc" = 1 ] && unchanged && ok=true
  $ok || cat "$K/inj-c.out"
  check "injected: another run saving step 3 (which latest names) with rank 1's file blocked: exit $rc (1), latest and step 3 unchanged" $ok
  ran "injected: resume after the failed saves" 2 "$K/inj-d.out" $SAVED2 --steps 4 --resume "$J" --log "$K/inj-d.csv"
  got=$(loss_at "$K/inj-d.csv" 4) want4=$(loss_at "$K/ref.csv" 4)
  check "injected: the resume loaded the first run's step 3: loss of step 4 $got = the uninterrupted run's $want4" \
    [ -n "$got" -a "$got" = "$want4" ]
fi

# kill -9 of one rank during saves (every step) at a random moment after
# the run's first save is committed, into a fresh directory and into a copy
# of the earlier run's (other lr, every step 1-12 saved, latest step 12):
# the step `latest` names is one save (one save id in every rank's file),
# and a resume from it logs the next step's loss of the run that saved it
# (the reference or the earlier run), bit for bit.
rank_pids() { # rank_pids PID -> the gpt_train processes below PID (libtool's wrapper execs it)
  ps -eo pid=,ppid=,comm= | awk -v root="$1" '{ parent[$1] = $2; comm[$1] = $3 }
    END { for (p in parent) if (comm[p] ~ /gpt_train$/) { q = p; while (q in parent && q != root) q = parent[q]; if (q == root) print p } }'
}
committed_since() { [ -s "$1/latest" ] && ! cmp -s "$1/latest" "$2"; }
for try in fresh1 fresh2 used1 used2; do
  want "kill during saves: $try" || continue
  ck="$K/k$try"
  case $try in used*) cp -r "$K/used" "$ck" ;; esac
  cp "$ck/latest" "$K/k$try.latest0" 2> /dev/null || : > "$K/k$try.latest0"
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$GPT_TRAIN" $ARGS $QUIET $SAVED2 --steps 12 --save "$ck" --save-every 1 \
    --log "$K/k$try.csv" > "$K/k$try.out" 2>&1 &
  pid=$!
  wait_for 120 committed_since "$ck" "$K/k$try.latest0"
  sleep "$(random_ms 1500)"
  victim=$(rank_pids "$pid" | tail -n 1)
  [ -n "$victim" ] && kill -9 "$victim" 2> /dev/null
  wait "$pid" 2> /dev/null
  last=$(latest_step "$ck")
  ids=$(save_ids "$ck/$(printf 'step-%08d' "${last:-0}")" 2> /dev/null | wc -l)
  train 2 "$K/r$try.out" $SAVED2 --steps $((${last:-0} + 1)) --resume "$ck" --log "$K/r$try.csv"
  rc=$?
  got=$(loss_at "$K/r$try.csv" $((${last:-0} + 1)))
  ref=$(loss_at "$K/ref.csv" $((${last:-0} + 1))) earlier=$(loss_at "$K/used.csv" $((${last:-0} + 1)))
  ok=false
  [ "$rc" = 0 ] && [ -n "$last" ] && [ "$ids" = 1 ] && [ -n "$got" ] && { [ "$got" = "$ref" ] || [ "$got" = "$earlier" ]; } && ok=true
  $ok || cat "$K/r$try.out"
  check "kill -9 of rank ${victim:-none} during saves ($try): latest step ${last:-none}, $ids save id(s) in its files, resumed (exit $rc) to loss $got (the reference's $ref, the earlier run's ${earlier:-none})" $ok
done

# A step's files from two saves are refused (the save id), even when they
# hold the same numbers: the same 3 steps saved twice, rank 1's file of one
# put in the other's step
M="$TMPD/mixed"
if want "refused: another save"; then
  ran "np=2 --tp 2: 3 steps + save" 2 "$TMPD/mix1.out" --tp 2 --steps 3 --save "$M" --log "$TMPD/mix1.csv"
  ran "np=2 --tp 2: the same 3 steps + save again" 2 "$TMPD/mix2.out" --tp 2 --steps 3 --save "$M.2" --log "$TMPD/mix2.csv"
  check "the two saves' files are equal but for the save id" same_ckpts "$M" "$M.2" 2 3
  cp "$M.2/step-00000003/rank-00001.ckpt" "$M/step-00000003/rank-00001.ckpt"
fi
expect_refused 2 "$M" "rank-00001.ckpt is of another save than the step's rank 0 file" --tp 2

# A custom model that gives its checkpoints no model fields
# (tests/ckpt_model): only the per-tensor shape check can see another
# width (the columns of "wide", whose rows are fixed) or height ("tall");
# refused with exit 2, the shapes named; the same shape loads.
CM="$top_builddir/tests/ckpt_model"
if want "refused: shape"; then
  mkdir "$TMPD/cm"
  "$CM" save "$TMPD/cm/ck" 8 8 > "$TMPD/cm.out" 2>&1
  rc=$?
  check "ckpt_model: saved (exit $rc)" grep -q "^saved step 1" "$TMPD/cm.out"
  for c in "8 6|parameter wide is [4,8] in the checkpoint (rank-00000.ckpt), [4,6] here" \
           "6 8|parameter tall is [8,8] in the checkpoint (rank-00000.ckpt), [6,8] here" "8 8|"; do
    "$CM" load "$TMPD/cm/ck" ${c%%|*} > "$TMPD/cm.out" 2>&1
    rc=$?
    msg=${c#*|}
    if [ -n "$msg" ]; then
      check "ckpt_model load ${c%%|*}: exit $rc (2), '$msg' printed $(grep -c -F -- "$msg" "$TMPD/cm.out") time(s)" \
        [ "$rc" = 2 -a "$(grep -c -F -- "$msg" "$TMPD/cm.out")" = 1 ]
    else
      check "ckpt_model load ${c%%|*}: exit $rc, loaded" grep -q "^loaded step 1" "$TMPD/cm.out"
    fi
  done
fi
finish
