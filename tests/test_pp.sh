#!/bin/sh
# Pipeline parallelism (pipeline.h): stages of blocks, micro-batches in
# flight under a quota, the step driver.
# - tests/test_tp against the single-rank model (losses of 3 steps 1e-5,
#   every gradient of the last 1e-4, on each stage the parameters it holds):
#   pp 2 and 4 with 1, 4 and 8 micro-batches, pp x tp + sp, pp x dp +
#   ZeRO-1/3, full recomputation, clipping (the tied embedding's norm
#   counted once), LLaMA (untied head); interleaved chunks (--pp-virtual 2)
#   with pp 2, tp + sp; Zero Bubble (tests/test_pp_long.sh, make
#   check-long, has GPipe's quotas, pp x Ring / Ulysses, bf16, more chunks
#   and issue 43's combinations);
# - gpt_train: the bytes sent = the traffic model on every group of every
#   rank, boundary sends counted (2 per micro-batch on a middle stage), the
#   bubble report of --trace; the messages per stage with chunks; with
#   --zero-bubble on one worker, each backward unit's tasks together;
# - examples/custom_model with --pp 2 (and 2 chunks), its model code unchanged: losses =
#   one rank's within 1e-5;
# - bad input: exit 2 on every rank, the rule and the values once.
. "${top_srcdir:-.}/tests/common.sh"
# equivalence (test_tp: tp = ranks / (dp * pp))
run 2 --pp 2
run 2 --pp 2 --grad-accum 4 --dropout 0.1
run 4 --pp 4 --layers 4 --grad-accum 4
run 4 --pp 2 --sp --grad-accum 4 --dropout 0.1          # pp 2 x tp 2 + sp
run 4 --pp 2 --dp 2 --zero 1 --grad-accum 2 --batch 8   # pp 2 x dp 2 + ZeRO-1
run 2 --pp 2 --grad-accum 4 --recompute full --layers 4 --recompute-every 2
run 2 --pp 2 --grad-accum 4 --clip-grad 0.01
run 2 --pp 2 --grad-accum 4 --model llama --dropout 0.1
run 4 --pp 2 --dp 2 --zero 3 --grad-accum 2 --batch 8 # pp 2 x dp 2 + ZeRO-3: the tied embedding summed over both ends, then reduce-scattered
# interleaved chunks (--pp-virtual): stage s runs blocks s and s + pp of 2 pp
run 2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 4 --dropout 0.1
run 4 --pp 2 --pp-virtual 2 --layers 4 --sp --grad-accum 4 --dropout 0.1       # x tp 2 + sp
# Zero Bubble's split (ZB-H1): B and W units, the weight gradients from the kept output gradients
run 2 --pp 2 --grad-accum 4 --zero-bubble --dropout 0.1
# traffic = model, exactly, and the boundary sends counted
if want "traffic and counters"; then
for args in "2 --pp 2 --grad-accum 4" "2 --pp 2 --pp-virtual 2 --layers 4 --grad-accum 4" "4 --pp 4 --layers 4 --grad-accum 2" "4 --pp 2 --tp 2 --sp --grad-accum 2" \
    "4 --pp 2 --dp 2 --grad-accum 2 --clip-grad 1" "4 --pp 2 --dp 2 --zero 3 --grad-accum 2"; do
  traffic_case $args
done
o=$TMPD/traffic.
# pp 4, 2 micro-batches, 2 steps: a middle stage sends its output forward
# and its input's gradient back, 2 x 2 x 2 = 8 messages; the ends half of
# that plus the loss (the last stage to the 3 others: 3 per step)
sends=$(sed -n 's/^counters: rank \([0-9]*\):.* send=\([0-9]*\).*/\1 \2/p' ${o}4pp4layers4gradaccum2 | sort -n | awk '{ printf "%s ", $2 }')
check "pp 4, 2 micro-batches, 2 steps: messages sent per stage ($sends): first 4, middle 8, last 4 + 2 x 3 losses" \
  [ "$sends" = "4 8 8 10 " ]
# pp 2 x 2 chunks, 4 micro-batches, 2 steps: each micro-batch crosses 3 boundaries each way; stage 0 sends
# chunk 0's and chunk 1's outputs and chunk 1's input gradient, stage 1 the other three and the loss
sends=$(sed -n 's/^counters: rank \([0-9]*\):.* send=\([0-9]*\).*/\1 \2/p' ${o}2pp2ppvirtual2layers4gradaccum4 | sort -n | awk '{ printf "%s ", $2 }')
check "pp 2 x 2 chunks, 4 micro-batches, 2 steps: messages sent per stage ($sends): 2 x 3 x 4 = 24, and 2 losses" \
  [ "$sends" = "24 26 " ]
fi
# the bubble report: gpt_train --trace prints, per stage, the share of the
# step without compute beside 1F1B's formula (here 2 stages, 4 micro-batches: 20 %)
if want "bubble report"; then
SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$GPT_TRAIN" --pp 2 --grad-accum 4 --layers 2 --steps 3 --quiet --trace "$TMPD/pp.json" \
  --log "$TMPD/log.csv" > "$TMPD/out" 2>&1
rc=$?
n=$(grep -c '^bubble: stage [01]: [0-9.]*% of the step without compute .* = 20.0%, interleaved .* = 20.0% (v = 1; quota 1F1B)$' "$TMPD/out")
[ "$rc" = 0 ] && [ "$n" = 2 ] || cat "$TMPD/out"
check "gpt_train --pp 2 --trace: a bubble line per stage ($n) beside 1F1B's 20.0% (exit $rc)" [ "$rc" = 0 -a "$n" = 2 ]
# the task priorities in that trace (args.prio): every update task (adamw) at -2, below the backward; the
# forward tasks of each stage on at least 4 priority bases (one per micro-batch's forward unit, in the order
# the schedule computed: sw_set_task_priority_base), every one of them above the update's
prios=$(python3 -c '
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and "prio" in e.get("args", {})]
for r in (0, 1):
    upd = {e["args"]["prio"] for e in ev if e["pid"] == r and e["name"] == "adamw"}
    fwd = {e["args"]["prio"] // 4 for e in ev if e["pid"] == r and e["args"]["phase"] == "forward"}
    print("%s:%d:%d" % (",".join(map(str, sorted(upd))), len(fwd), min(fwd) * 4 if fwd else -99), end=" ")
' "$TMPD/pp.json" 2>&1)
check "gpt_train --pp 2 --trace: per stage the update's priorities:forward bases:lowest forward base ($prios) = -2:>=4:>0" \
  sh -c "echo '$prios' | awk '{ for (i = 1; i <= NF; i++) { split(\$i, a, \":\"); if (a[1] != \"-2\" || a[2] < 4 || a[3] <= 0) exit 1 } exit NF != 2 }'"
fi
# --dw-last (a priority, not Zero Bubble's split): the weight-gradient tasks at priority -1 on both stages (counted by
# task_priority: more tasks prioritised than without), the losses of 3 steps bit for bit the same
if want "dw-last"; then
for f in "" --dw-last; do
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$GPT_TRAIN" --pp 2 --grad-accum 4 --layers 2 --steps 3 --quiet --counters \
    --log "$TMPD/dw$f.csv" $f > "$TMPD/dw$f.out" 2>&1 || cat "$TMPD/dw$f.out"
done
prio() { sed -n 's/^counters: rank \([0-9]*\):.* task_priority=\([0-9]*\).*/\1 \2/p' "$1" | sort -n | awk '{ printf "%s ", $2 }'; }
a=$(prio "$TMPD/dw.out"); b=$(prio "$TMPD/dw--dw-last.out")
check "gpt_train --pp 2 --dw-last: prioritised tasks per stage ($b) more than without ($a)" \
  sh -c "echo '$a|$b' | awk -F'|' '{ split(\$1, x, \" \"); split(\$2, y, \" \"); exit !(y[1] > x[1] && y[2] > x[2]) }'"
check "gpt_train --pp 2 --dw-last: losses of 3 steps identical to without" \
  sh -c "cut -d, -f1,2 '$TMPD/dw.csv' > '$TMPD/a'; cut -d, -f1,2 '$TMPD/dw--dw-last.csv' > '$TMPD/b'; [ \$(wc -l < '$TMPD/a') = 4 ] && cmp -s '$TMPD/a' '$TMPD/b'"
fi
# --zero-bubble: W units after the last forward of the step on each stage (the late_w counter: per step,
# 3 steps), none without the split; the losses bit for bit those without (the same products, summed in the
# same micro-batch order)
if want "zero-bubble"; then
[ -f "$TMPD/dw.out" ] || SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$GPT_TRAIN" --pp 2 --grad-accum 4 --layers 2 --steps 3 --quiet \
  --counters --log "$TMPD/dw.csv" > "$TMPD/dw.out" 2>&1 || cat "$TMPD/dw.out"
SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$GPT_TRAIN" --pp 2 --grad-accum 4 --layers 2 --steps 3 --counters \
  --log "$TMPD/zb.csv" --zero-bubble > "$TMPD/zb.out" 2>&1 || cat "$TMPD/zb.out"
late() { sed -n 's/^counters: rank \([0-9]*\):.* late_w=\([0-9]*\).*/\1 \2/p' "$1" | sort -n | awk '{ printf "%s ", $2 }'; }
a=$(late "$TMPD/dw.out"); b=$(late "$TMPD/zb.out")
check "gpt_train --pp 2 --zero-bubble: W units after the last forward per stage over 3 steps ($b) > 0, without the split ($a) 0" \
  sh -c "echo '$a|$b' | awk -F'|' '{ split(\$1, x, \" \"); split(\$2, y, \" \"); exit !(x[1] == 0 && x[2] == 0 && y[1] > 0 && y[2] > 0) }'"
check "gpt_train --pp 2 --zero-bubble: losses of 3 steps identical to without" \
  sh -c "cut -d, -f1,2 '$TMPD/dw.csv' > '$TMPD/a'; cut -d, -f1,2 '$TMPD/zb.csv' > '$TMPD/b'; [ \$(wc -l < '$TMPD/a') = 4 ] && cmp -s '$TMPD/a' '$TMPD/b'"
# the order of step 3 from step 2's measured costs and the point-to-point hop (sw_pipeline_replan's
# ping-pong of a boundary tensor between the stages): a hop > 0 ms in the costs line
hop=$(sed -n 's/^schedule: costs stage 0 .* hop \([0-9.e+-]*\) ms.*/\1/p' "$TMPD/zb.out")
check "gpt_train --pp 2 --zero-bubble: the re-planned order's costs include a measured hop between the stages (${hop:-none} ms) > 0" \
  awk -v h="${hop:-0}" 'BEGIN { exit !(h > 0) }'
fi
# --zero-bubble, one worker per rank: each backward unit's tasks run together, no task of a later unit (a lower
# priority base) between its first and last (the kept output gradient's copy once ran at StarPU's priority 0, and
# the rest of B, which overwrites it, waited while the worker ran the next units' tasks: docs/simulation.md).
# Excused, and counted apart: a later unit's task begun while a message the unit began during was still being
# completed (its record ends inside the unit). On a loaded core StarPU-MPI's thread releases the message's readers
# one by one, and the rest of the unit waits on the thread, not on its priority (seen with a busy loop at nice -10
# on rank 0's core: W's GEMMs ran while B's kept copy of the received gradient waited for its release).
if want "zero-bubble units"; then
SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$GPT_TRAIN" --pp 2 --grad-accum 4 --layers 2 --steps 3 --quiet --ncpus 1 --zero-bubble \
  --trace "$TMPD/zbu.json" > "$TMPD/zbu.out" 2>&1 || cat "$TMPD/zbu.out"
units=$(python3 -c '
import json, sys
tr = json.load(open(sys.argv[1]))["traceEvents"]
ev = [e for e in tr if e.get("ph") == "X" and "prio" in e.get("args", {}) and e["args"].get("step", 0) >= 2
      and e["tid"] < 100000]
# the messages each stage receives (not the loss, posted with the optimizer): rank, start, end
msg = [(e["pid"], e["ts"], e["ts"] + e["dur"]) for e in tr if e.get("ph") == "X" and e.get("cat") == "mpi"
       and e["args"].get("group") == "pp" and e["args"].get("dir") == "recv" and e["args"].get("phase") != "optimizer"]
units = bad = excused = 0
for r in {e["pid"] for e in ev}:
    for st in {e["args"]["step"] for e in ev}:
        es = sorted((e for e in ev if e["pid"] == r and e["args"]["step"] == st), key=lambda e: e["ts"])
        base = [round(e["args"]["prio"] / 4) if e["args"]["prio"] > 1 else None for e in es]
        for u in {b for b in base if b is not None}:
            at = [i for i, b in enumerate(base) if b == u]
            if all(es[i]["args"]["phase"] == "backward" for i in at):
                units += 1
                t0, t1 = es[at[0]]["ts"], es[at[-1]]["ts"]
                done = max([m[2] for m in msg if m[0] == r and m[1] <= t0 < m[2] <= t1] or [t0])
                late = [es[i]["ts"] for i in range(at[0], at[-1]) if base[i] is not None and base[i] < u]
                excused += sum(t < done for t in late)
                bad += any(t >= done for t in late)
print(units, bad, excused)
' "$TMPD/zbu.json" 2>&1)
check "gpt_train --pp 2 --zero-bubble --ncpus 1: backward units (steps 2, 3; both stages) interleaved with later units' tasks ($units: units, interleaved, tasks excused) = 0" \
  sh -c "echo '$units' | awk '{ exit !(\$1 >= 16 && \$2 == 0) }'"
fi
# a model of one's own: custom_model's blocks unchanged, stages from the driver
if want "custom model"; then
PROG="$top_builddir/examples/custom_model"
losses() { # losses NP ARGS... -> "l1 l2 ..." (empty on failure)
  np=$1; shift
  SW_TEST_TIMEOUT=180 sh "$LAUNCH" "$np" "$PROG" --steps 4 "$@" > "$TMPD/out" 2>&1 || { cat "$TMPD/out" >&2; return; }
  awk '$1 == "step" { printf "%s ", $4 }' "$TMPD/out"
}
close() { # close "a1 a2 ..." "b1 b2 ...": same count (4), every pair within relative 1e-5
  echo "$1|$2" | awk -F'|' '{ n = split($1, a, " "); m = split($2, b, " "); if (n != 4 || m != 4) exit 1;
    for (i = 1; i <= n; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > 1e-5 * (a[i] < 0 ? -a[i] : a[i])) exit 1 } }'
}
ref=$(losses 1 --micro 4)
check "custom_model, 1 rank, 4 micro-batches: 4 losses ($ref)" [ "$(echo $ref | wc -w)" = 4 ]
got=$(losses 2 --pp 2 --micro 4)
check "custom_model --pp 2 --micro 4: losses ($got) = 1 rank's within 1e-5" close "$ref" "$got"
check "custom_model --pp 2: bytes sent = traffic model on every group of every rank" traffic_exact "$TMPD/out" 2
got=$(losses 4 --pp 2 --tp 2 --sp --micro 4)
check "custom_model --pp 2 --tp 2 --sp --micro 4: losses ($got) = 1 rank's within 1e-5" close "$ref" "$got"
ref=$(losses 1 --micro 4 --layers 4)
got=$(losses 2 --pp 2 --pp-virtual 2 --micro 4 --layers 4)
check "custom_model --pp 2 --pp-virtual 2 --micro 4 --layers 4: losses ($got) = 1 rank's ($ref) within 1e-5" close "$ref" "$got"
fi
expect_bad 2 "layers (3) must be divisible by pp (2): each stage runs layers/pp blocks" --pp 2 --layers 3
expect_bad 2 "world size (2) must equal tp*ulysses*ring*dp*pp (1*1*1*1*4 = 4)" --pp 4 --layers 4
expect_bad 2 "pp-inflight must be 0 (1F1B: pp - stage) or at least 1 (pp-inflight = -1)" --pp 2 --pp-inflight -1
expect_bad 2 "layers (2) must be divisible by pp x pp-virtual (2 x 2)" --pp 2 --pp-virtual 2 --layers 2
expect_bad 2 "interleaved chunks need at least pp micro-batches: grad-accum (1) must be at least pp (2) with pp-virtual 2" \
  --pp 2 --pp-virtual 2 --layers 4
expect_bad 2 "pp-virtual (2) needs pipeline stages (pp = 1)" --pp-virtual 2 --dp 2 --batch 4
expect_bad 2 "no order of the pipeline's work fits the in-flight quotas: stage 1 holds 2 chunks' saved sets (pp 2, 2 chunks per stage, 2 micro-batches, pp-inflight 1)" \
  --pp 2 --pp-virtual 2 --layers 4 --grad-accum 2 --pp-inflight 1
expect_bad 2 "zero-bubble needs tp, ulysses, ring and dp 1 (tp 1, ulysses 1, ring 1, dp 2)" --dp 2 --batch 4 --zero-bubble
# two point-to-point channels per chunk between a pair of neighbours (graphs/step/schedule.h), whatever the stages
expect_bad 2 "interleaved chunks per stage (15, pp 2) must be at most 14 (two point-to-point channels each)" \
  --pp 2 --pp-virtual 15 --layers 30 --grad-accum 2
finish
