#!/bin/sh
# Results must not depend on the StarPU scheduler nor on the number of workers:
# the losses of 3 training steps (with dropout) are bit-identical.
. "${top_srcdir:-.}/tests/common.sh"
args="--layers 2 --hidden 64 --heads 4 --seq 16 --batch 4 --steps 3 --dropout 0.1 --quiet"
ref=""
for sched in eager lws ws dmda random; do
  for ncpus in 1 2; do
    log="$TMPD/$sched-$ncpus.csv"
    if ! timeout 300 "$GPT_TRAIN" $args --sched "$sched" --ncpus "$ncpus" --log "$log" > "$TMPD/out" 2>&1; then
      cat "$TMPD/out"; check "gpt_train under $sched with $ncpus workers runs" false; continue
    fi
    losses=$(cut -d, -f2 "$log" | tail -n +2 | tr '\n' ' ')
    echo "$sched x$ncpus: $losses"
    [ -n "$ref" ] || ref=$losses
    check "$sched with $ncpus workers gives the same losses" [ "$losses" = "$ref" ]
  done
done
finish
