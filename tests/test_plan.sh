#!/bin/sh
# The planner (gpt_train --plan, docs/planner.md): its layouts are exactly
# those gpt_train accepts (every candidate of a grid of shapes run through
# gpt_train's own validation, --check-config: the flags' rules, the world,
# the pipeline's schedule) -- and dit_train --plan's those dit_train
# accepts, its memory per rank the allocator's --, its estimate is
# deterministic for a machine file, its memory per rank is the run's (--memory-plan on 2 ranks), a
# budget nothing fits is refused with the smallest need, exit 2,
# --simulate puts a simulated ms/step beside the estimate (with a
# simulation build; said and skipped without), for gpt_train and dit_train,
# and --verify --simulate-verified puts it beside the measured one too.
. "${top_srcdir:-.}/tests/common.sh"
cat > "$TMPD/machine" <<'M'
# typed figures: the test's, not a measurement
gemm_gflops 10 typed for the test
cores 2
intra_gbs 1
intra_us 20
inter_gbs 0.5
inter_us 40
task_us 20
gemm_half_rows 16
adam_ns 5
p2p_spin 1
M
# a condition of several tests goes to check through eval (check runs one
# command: "check WHAT [ a ] && [ b ]" would test b outside check)
SMALL="--layers 4 --hidden 64 --heads 4 --seq 32 --batch 8 --tiles 2"
# the program planned and judged (gpt_train; dit_train below), its micro-batches' flag, and whether its
# pipeline takes a quota (--pp-inflight: gpt_train's; dit_train runs 1F1B's)
prog=$GPT_TRAIN accum=--grad-accum quota=1
DIT="$top_builddir/examples/dit_train"

# the candidates of a shape on N ranks against gpt_train's verdict; every
# STEP-th (1: all) to keep the test in seconds
crosscheck() { # crosscheck N STEP MODEL-FLAGS...
  n=$1 step=$2; shift 2
  want "crosscheck $n $*" || return 0
  "$prog" --plan --plan-ranks "$n" --plan-machine "$TMPD/machine" --plan-list "$TMPD/list" "$@" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  total=0 legal=0 bad=0 i=0
  while IFS="$(printf '\t')" read -r verdict flags why; do
    i=$((i + 1))
    [ $(( (i - 1) % step )) = 0 ] || continue
    total=$((total + 1))
    # shellcheck disable=SC2086 # the flags are words
    "$prog" --check-config --plan-ranks "$n" "$@" $flags > "$TMPD/check" 2>&1
    c=$?
    case $verdict in
      fits|dropped) legal=$((legal + 1)); [ "$c" = 0 ] || { bad=$((bad + 1)); echo "planner: legal, $(basename "$prog"): exit $c: $flags"; head -n 3 "$TMPD/check"; } ;;
      illegal) [ "$c" = 2 ] || { bad=$((bad + 1)); echo "planner: illegal ($why), $(basename "$prog"): exit $c: $flags"; } ;;
    esac
  done < "$TMPD/list"
  check "$n ranks, $*: $total candidates ($legal legal) judged as $(basename "$prog") judges them (exit $rc)" \
    eval '[ "$rc" = 0 ] && [ "$total" -gt 15 ] && [ "$bad" = 0 ] && [ "$legal" -gt 0 ] && [ "$legal" -lt "$total" ]'
}
crosscheck 2 4 $SMALL
crosscheck 4 24 --model llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 --seq 32 --batch 8 --tiles 2
crosscheck 3 4 --layers 3 --hidden 48 --heads 6 --seq 24 --batch 6 --tiles 2

# The other way: flags drawn without the planner -- every degree tuple of
# 1, 2, 4 whose product is the world, half or twice it, each with one of
# the space's other choices (ZeRO, micro-batches, chunks, quota,
# recomputation, --sp) in turn, three per tuple of the world -- judged by gpt_train; each one it accepts
# must be in the planner's list as legal (after the planner's two
# documented duplicates: ZeRO over a gradient group of 1 is plain training,
# --sp with tp 1 is without it), each one it refuses not legal there.
reverse() { # reverse N MODEL-FLAGS...
  n=$1; shift
  want "reverse $n $*" || return 0
  "$prog" --plan --plan-ranks "$n" --plan-machine "$TMPD/machine" --plan-list "$TMPD/rlist" "$@" > "$TMPD/rout" 2>&1 ||
    cat "$TMPD/rout"
  awk -v n="$n" -v accum="$accum" -v quota="$quota" 'BEGIN {
    i = 0
    for (t = 1; t <= 4; t *= 2) for (u = 1; u <= 2; u *= 2) for (r = 1; r <= 2; r *= 2)
    for (d = 1; d <= 4; d *= 2) for (p = 1; p <= 4; p *= 2) {
      w = t * u * r * d * p
      if (w != n && 2 * w != n && w != 2 * n) continue
      for (c = 0; c < (w == n ? 3 : 1); c++) { # three draws of a tuple of the world, one of another
      K = 2 ^ (i % 4); z = int(i / 4) % 4; v = (p > 1 && i % 3 == 0) ? 2 : 1
      q = (quota && p > 1 && K > 1 && i % 2) ? K : 0; rc = int(i / 2) % 3; sp = (t > 1 && i % 5 < 2)
      f = "--tp " t (sp ? " --sp" : "") " --ulysses " u " --ring " r " --dp " d " --pp " p
      if (v > 1) f = f " --pp-virtual " v
      if (q) f = f " --pp-inflight " q
      f = f " --zero " z " " accum " " K " --recompute " (rc == 0 ? "none" : rc == 1 ? "selective" : "full")
      # the planner lists a duplicate once: ZeRO over a group of 1 as 0, --sp with tp 1 without it
      canon = f
      if (u * r * d == 1) sub(/--zero [0-9]/, "--zero 0", canon)
      print f "\t" canon
      i++
    } } }' > "$TMPD/grid"
  acc=0 ref=0 bad=0
  while IFS="$(printf '\t')" read -r flags canon; do
    # shellcheck disable=SC2086 # the flags are words
    "$prog" --check-config --plan-ranks "$n" "$@" $flags > /dev/null 2>&1
    c=$?
    verdict=$(awk -F '\t' -v f="$canon" '$2 == f { print $1; exit }' "$TMPD/rlist")
    case $c in
      0) acc=$((acc + 1)); case $verdict in fits|dropped) ;; *) bad=$((bad + 1)); echo "$(basename "$prog") accepts, the planner: ${verdict:-not listed}: $flags" ;; esac ;;
      2) ref=$((ref + 1)); case $verdict in fits|dropped) bad=$((bad + 1)); echo "$(basename "$prog") refuses, the planner lists it legal: $flags" ;; esac ;;
      *) bad=$((bad + 1)); echo "$(basename "$prog") --check-config exit $c: $flags" ;;
    esac
  done < "$TMPD/grid"
  check "the other way, $n ranks, $*: of $((acc + ref)) flag sets drawn without the planner $(basename "$prog") accepts $acc, every one listed legal by the planner, refuses $ref, none listed legal" \
    eval '[ "$bad" = 0 ] && [ "$acc" -gt 5 ] && [ "$ref" -gt 5 ]'
}
reverse 4 $SMALL
reverse 2 --model llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 --seq 32 --batch 8 --tiles 2

# dit_train --plan: the same both ways against dit_train's own validation (--check-config: its flags'
# rules, sw_dit_config_check, the world, every rank's model described -- the layers refuse there: whole
# frames per rank, heads over tp); 2 frames on 4 ranks leave Ulysses 4 and Ring 4 to refuse
DSMALL="--frames 4 --height 4 --width 4 --patch 2 --hidden 32 --heads 4 --layers 4 --batch 8"
prog=$DIT accum=--micro quota=0
crosscheck 2 2 $DSMALL
crosscheck 4 12 --frames 2 --height 4 --width 4 --patch 2 --hidden 32 --heads 4 --layers 4 --batch 8
reverse 4 --frames 2 --height 4 --width 4 --patch 2 --hidden 32 --heads 4 --layers 4 --batch 8
prog=$GPT_TRAIN accum=--grad-accum quota=1

# the DiT's memory model of a layout (sw_dit_plan_rank: the model described, nothing allocated) against
# StarPU's allocator in a run of it: the planner's need (the most of any rank) = the most any rank's
# allocator counted at creation = the run's model (sw_dit_bytes), to the byte; two stages of 2
# micro-batches, and Ulysses 2 with ZeRO-3 and full recomputation
dit_memory() { # dit_memory LAYOUT (sw_plan_dit_flags' form)
  want "dit memory $1" || return 0
  "$DIT" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-list "$TMPD/dlist" $DSMALL > "$TMPD/dplan" 2>&1
  planned=$(grep -F "	$1	" "$TMPD/dlist" | sed -n 's/.*need \([0-9]*\) bytes.*/\1/p')
  # shellcheck disable=SC2086
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$DIT" $DSMALL $1 --steps 1 --memory-report > "$TMPD/dmem" 2>&1
  rc=$?
  alloc=$(sed -n 's/^memory: rank [0-9]* created: allocator \([0-9]*\) bytes.*/\1/p' "$TMPD/dmem" | sort -g | tail -n 1)
  model=$(sed -n 's/^memory: rank [0-9]* created: .*, model \([0-9]*\) bytes.*/\1/p' "$TMPD/dmem" | sort -g | tail -n 1)
  [ "$rc" = 0 ] && [ -n "$planned" ] || cat "$TMPD/dplan" "$TMPD/dmem"
  check "dit memory $1: planner ${planned:-none} bytes, the run's allocator at creation ${alloc:-none}, its model ${model:-none} (the most of 2 ranks; exit $rc)" \
    eval '[ "$rc" = 0 ] && [ -n "$planned" ] && [ "$planned" = "$alloc" ] && [ "$planned" = "$model" ]'
}
dit_memory "--tp 1 --ulysses 1 --ring 1 --dp 1 --pp 2 --zero 0 --micro 2 --recompute selective"
dit_memory "--tp 1 --ulysses 2 --ring 1 --dp 1 --pp 1 --zero 3 --micro 2 --recompute full"

if want "deterministic"; then
  "$GPT_TRAIN" --plan --plan-ranks 4 --plan-machine "$TMPD/machine" --plan-top 50 $SMALL > "$TMPD/a" 2>&1
  ra=$?
  "$GPT_TRAIN" --plan --plan-ranks 4 --plan-machine "$TMPD/machine" --plan-top 50 $SMALL > "$TMPD/b" 2>&1
  rows=$(grep -c '^plan: *[0-9]' "$TMPD/a")
  check "the same machine file, the same table ($rows rows, exit $ra)" \
    eval '[ "$ra" = 0 ] && [ "$rows" -ge 8 ] && cmp -s "$TMPD/a" "$TMPD/b" && grep -q "typed for the test" "$TMPD/a"'
fi

# The blocks' activation passes (elem_ns): tensor parallelism without sp
# repeats the norms and residual adds on every rank of the group, with sp
# each rank passes over its share of the rows. Given elem_ns, tp 2's step
# grows twice as much without sp as with it; without elem_ns, not at all.
if want "activation passes"; then
  sed '/^elem_ns/d' "$TMPD/machine" > "$TMPD/m0"
  { cat "$TMPD/m0"; echo "elem_ns 50 typed for the test"; } > "$TMPD/m50"
  for m in m0 m50; do
    "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/$m" --plan-list "$TMPD/l$m" $SMALL > "$TMPD/o$m" 2>&1
  done
  ms() { awk -F '\t' -v f="--tp 2 $2--ulysses 1 --ring 1 --dp 1 --pp 1 --zero 0 --grad-accum 1 --recompute none" \
    '$2 == f { sub(/.*, /, "", $3); sub(/ ms\/step/, "", $3); print $3 }' "$TMPD/l$1"; }
  a0=$(ms m0 "") a1=$(ms m50 "") b0=$(ms m0 "--sp ") b1=$(ms m50 "--sp ")
  check "elem_ns 50: tp 2 without sp ${a0:-?} -> ${a1:-?} ms, with sp ${b0:-?} -> ${b1:-?} ms (twice the rows: twice the growth); the machine line printed" \
    eval 'awk -v a0="$a0" -v a1="$a1" -v b0="$b0" -v b1="$b1" "BEGIN { d = a1 - a0; e = b1 - b0; exit !(a0 > 0 && b0 > 0 && e > 0 && d > 1.99 * e && d < 2.01 * e) }" &&
      grep -q "activation pass 50 ns per element per worker: typed for the test" "$TMPD/om50" &&
      grep -q "norms and residual adds left out (elem_ns not given)" "$TMPD/om0"'
fi

# table_col FILE N FLAGS: field N (4 compute, 5 comm) of the planner's table row of the layout FLAGS
table_col() { awk -v n="$2" -v f="$3" '$1 == "plan:" && substr($0, length($0) - length(f) + 1) == f { print $n }' "$1"; }
# plan_pair TAG "KEY VALUE": the 2-rank table of $SMALL with the test's machine ($TMPD/TAG-base) and with
# that line added to it ($TMPD/TAG-with)
plan_pair() {
  { cat "$TMPD/machine"; echo "$2 typed for the test"; } > "$TMPD/m$1"
  "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-top 1000 $SMALL > "$TMPD/$1-base" 2>&1
  "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/m$1" --plan-top 1000 $SMALL > "$TMPD/$1-with" 2>&1
}

# The data-parallel group's overlap (coll_offload): a rank of one worker whose collectives reduce on it
# hides nothing; with collectives that progress beside the workers (MPI's own, NCCL) the buckets run
# under the backward and ZeRO-3's gathers under the compute, while ZeRO-1's all-gather of the updated
# values, after the optimizer, stays: half its group's traffic
if want "collectives beside the workers"; then
  plan_pair coll "coll_offload 1"
  comm() { table_col "$TMPD/coll-$1" 5 "--tp 1 --ulysses 1 --ring 1 --dp 2 --pp 1 --zero $2 --grad-accum 1 --recompute none"; }
  z0=$(comm base 0) z0o=$(comm with 0) z1=$(comm base 1) z1o=$(comm with 1) z3=$(comm base 3) z3o=$(comm with 3)
  check "dp 2's comm ms, on the workers -> beside them: ZeRO-0 ${z0:-?} -> ${z0o:-?}, ZeRO-1 ${z1:-?} -> ${z1o:-?} (its gather stays), ZeRO-3 ${z3:-?} -> ${z3o:-?}; the machine line printed" \
    eval 'awk -v a="$z0" -v b="$z0o" -v c="$z1" -v d="$z1o" -v e="$z3" -v f="$z3o" "BEGIN { exit !(a > 0 && c > 0 && e > 0 && b < 0.2 * a && d >= 0.5 * c && d < 0.75 * c && f < 0.2 * e) }" &&
      grep -q "collectives progress beside the workers: typed for the test" "$TMPD/coll-with" &&
      grep -q "collectives reduce on the workers" "$TMPD/coll-base"'
fi

# The GEMM tasks as linear.c submits them: under sp the column-parallel forward takes the gathered rows
# rank by rank, tasks of half the rows at tp 2, slower by the rows' dependence (gemm_half_rows 16), so tp
# 2 + sp computes longer than tp 2 (no elem_ns: the norms left out); where the node's workers fill its
# cores (2 ranks of one worker on 2), gemm_shared 0.5 halves the GEMMs' rate: the compute of tp 2 grows
# by more than half (the optimizer's pass keeps its time)
if want "gemm tasks"; then
  plan_pair shared "gemm_shared 0.5"
  cmp_ms() { table_col "$TMPD/shared-$1" 4 "--tp 2 $2--ulysses 1 --ring 1 --dp 1 --pp 1 --zero 0 --grad-accum 1 --recompute none"; }
  a=$(cmp_ms base "") b=$(cmp_ms base "--sp ") c=$(cmp_ms with "")
  check "compute ms: tp 2 ${a:-?}, tp 2 + sp ${b:-?} (its gathered rows' smaller tasks), tp 2 at gemm_shared 0.5 ${c:-?}; the machine line printed" \
    eval 'awk -v a="$a" -v b="$b" -v c="$c" "BEGIN { exit !(a > 0 && b > a && c > 1.5 * a && c <= 2 * a) }" &&
      grep -q "GEMM at 0.5 of the rate while every core of the node computes: typed for the test" "$TMPD/shared-with"'
fi

# The model's other kernels, each given by the machine file: the MLP's activation over the rank's rows of
# ffn / tp (act_ns 100: tp 2 of $SMALL, 4 layers of 256 rows x 128, 13.107 ms; full recomputation's
# forward again, 4/3 of it), the cross-entropy over the last stage's rows of the vocabulary over tp
# (ce_ns: pp 2's last stage holds all of it, twice tp 2's share), the attention's FLOPs at attn_gflops
# instead of the GEMM rate (1 GFLOP/s: tp 2's 6.29 MFLOP take 6.291 ms instead of 0.708 at 10 GFLOP/s
# and 128 of 144 rows' rate), at attn_probs_gflops without recomputation only (the tiles that keep the
# probabilities) -- each growth exact, each machine line printed
if want "other kernels"; then
  plan_pair act "act_ns 100"
  plan_pair ce "ce_ns 100"
  plan_pair attn "attn_gflops 1"
  plan_pair probs "attn_probs_gflops 1"
  grow() { # grow TAG FLAGS: the compute ms the line added, for the layout FLAGS
    awk -v a="$(table_col "$TMPD/$1-base" 4 "$2")" -v b="$(table_col "$TMPD/$1-with" 4 "$2")" 'BEGIN { if (a > 0 && b > 0) printf "%.4f", b - a }'
  }
  tp2="--tp 2 --ulysses 1 --ring 1 --dp 1 --pp 1 --zero 0 --grad-accum 1 --recompute"
  pp2="--tp 1 --ulysses 1 --ring 1 --dp 1 --pp 2 --zero 0 --grad-accum 1 --recompute none"
  an=$(grow act "$tp2 none") af=$(grow act "$tp2 full") ct=$(grow ce "$tp2 none") cp=$(grow ce "$pp2") at=$(grow attn "$tp2 none")
  pn=$(grow probs "$tp2 none") ps=$(grow probs "$tp2 selective")
  check "activation +${an:-?} ms (full recomputation +${af:-?}), cross-entropy tp 2 +${ct:-?} pp 2 +${cp:-?}, attention +${at:-?}, keeping the probabilities +${pn:-?} (selective +${ps:-?}); the machine lines printed" \
    eval 'awk -v an="$an" -v af="$af" -v ct="$ct" -v cp="$cp" -v at="$at" -v pn="$pn" -v ps="$ps" "function near(x, y) { return x > 0.995 * y && x < 1.005 * y }
      BEGIN { a = 6.291456 - 6.291456 / (10 * 128 / 144); exit !(near(an, 13.1072) && near(af, 13.1072 * 4 / 3) && ct > 0 && near(cp, 2 * ct) && near(at, a) && near(pn, a) && ps == 0) }" &&
      grep -q "MLP activation 100 ns per element per worker: typed for the test" "$TMPD/act-with" &&
      grep -q "cross-entropy 100 ns per logit per worker: typed for the test" "$TMPD/ce-with" &&
      grep -q "attention tiles 1 GFLOP/s per worker: typed for the test" "$TMPD/attn-with" &&
      grep -q "MLP activation left out (act_ns not given)" "$TMPD/act-base"'
fi

# The gradient buckets' copies (copy_ns): each micro-batch copies or adds the rank's gradients into the
# buckets; all-reduced ones (dp without ZeRO) are copied back, K + 1 passes over sw_params_buckets_bytes,
# the others only sum micro-batches, K passes (the last micro-batch's gradient adds the others' sum).
# dp 2: 2 passes; with 2 micro-batches 3 (3/2 of it); ZeRO-1 with one micro-batch none (its
# reduce-scatter reads the gradients), with 2 micro-batches 2 (as dp 2's); tp 2 alone none
if want "gradient buckets"; then
  plan_pair bucket "copy_ns 100"
  for m in machine mbucket; do
    "$DIT" --plan --plan-ranks 2 --plan-machine "$TMPD/$m" --plan-top 1000 $DSMALL > "$TMPD/db-$m" 2>&1
  done
  # grow BASE WITH FLAGS: the compute ms copy_ns added to the layout FLAGS
  grow() { awk -v a="$(table_col "$1" 4 "$3")" -v b="$(table_col "$2" 4 "$3")" 'BEGIN { if (a > 0 && b > 0) printf "%.4f", b - a }'; }
  # passes BASE WITH MICRO-FLAG: dp 2, dp 2 with 2 micro-batches, ZeRO-1, ZeRO-1 with 2 (the growths)
  passes() {
    for z in "0 $3 1" "0 $3 2" "1 $3 1" "1 $3 2"; do
      set -- "$1" "$2" "$3" $z
      grow "$1" "$2" "--tp 1 --ulysses 1 --ring 1 --dp 2 --pp 1 --zero $4 $5 $6 --recompute none"; echo
    done | tr '\n' ' '
  }
  # 2, 3, 0 and 2 passes
  passes_ok() { echo "$1" | awk '{ a = $1 } END { exit !(a > 0 && $2 > 1.499 * a && $2 < 1.501 * a && $3 == 0 && $4 > 0.999 * a && $4 < 1.001 * a) }'; }
  g=$(passes "$TMPD/bucket-base" "$TMPD/bucket-with" --grad-accum)
  gt=$(grow "$TMPD/bucket-base" "$TMPD/bucket-with" "--tp 2 --ulysses 1 --ring 1 --dp 1 --pp 1 --zero 0 --grad-accum 1 --recompute none")
  check "copy_ns 100: compute + ms at dp 2, with 2 micro-batches (3/2 of it), with ZeRO-1 (none), with ZeRO-1 and 2 micro-batches (as dp 2's): $g; at tp 2 +${gt:-?}; the machine lines printed" \
    eval 'passes_ok "$g" && [ "$gt" = 0.0000 ] &&
      grep -q "gradient buckets'"'"' copy 100 ns per element and pass per worker: typed for the test" "$TMPD/bucket-with" &&
      grep -q "gradient buckets'"'"' copies left out (copy_ns not given)" "$TMPD/bucket-base"'
  d=$(passes "$TMPD/db-machine" "$TMPD/db-mbucket" --micro)
  check "dit_train, copy_ns 100: the same four growths: $d" passes_ok "$d"
fi

# The DiT's: its MLP's GELU over 4 hidden (act_ns 100: tp 2 of $DSMALL, 4 blocks of 4 frames x 4
# patches x 8 samples = 128 rows x 64, 3.277 ms), its attention at attn_gflops (slower: the step grows),
# its four adaLN modulations and gated residuals per block over 128 rows x 32 (adaln_ns 100, 6.554 ms)
# and its four RMSNorms' three passes (elem_ns 100, 19.661 ms)
if want "dit other kernels"; then
  { cat "$TMPD/machine"; echo "act_ns 100 typed for the test"; } > "$TMPD/dact"
  { cat "$TMPD/machine"; echo "attn_gflops 1 typed for the test"; } > "$TMPD/dattn"
  { cat "$TMPD/machine"; echo "adaln_ns 100 typed for the test"; } > "$TMPD/dada"
  { cat "$TMPD/machine"; echo "elem_ns 100 typed for the test"; } > "$TMPD/delem"
  for m in machine dact dattn dada delem; do
    "$DIT" --plan --plan-ranks 2 --plan-machine "$TMPD/$m" --plan-top 1000 $DSMALL > "$TMPD/d-$m" 2>&1
  done
  dl="--tp 2 --ulysses 1 --ring 1 --dp 1 --pp 1 --zero 0 --micro 1 --recompute none"
  d0=$(table_col "$TMPD/d-machine" 4 "$dl") da=$(table_col "$TMPD/d-dact" 4 "$dl") dt=$(table_col "$TMPD/d-dattn" 4 "$dl")
  dm=$(table_col "$TMPD/d-dada" 4 "$dl") de=$(table_col "$TMPD/d-delem" 4 "$dl")
  check "dit_train, tp 2: compute ${d0:-?} ms, with act_ns 100 ${da:-?} (+3.277), with attn_gflops 1 ${dt:-?}, with adaln_ns 100 ${dm:-?} (+6.554), with elem_ns 100 ${de:-?} (+19.661); the machine lines printed" \
    eval 'awk -v a="$d0" -v b="$da" -v c="$dt" -v m="$dm" -v e="$de" "function near(x, y) { return x > 0.995 * y && x < 1.005 * y }
        BEGIN { exit !(a > 0 && near(b - a, 3.2768) && c > a && near(m - a, 6.5536) && near(e - a, 19.6608)) }" &&
      grep -q "MLP activation 100 ns per element per worker: typed for the test" "$TMPD/d-dact" &&
      grep -q "attention tiles 1 GFLOP/s per worker: typed for the test" "$TMPD/d-dattn" &&
      grep -q "adaLN modulation and gated residual 100 ns per element per worker: typed for the test" "$TMPD/d-dada"'
fi

# This machine measured (no machine file): the other kernels by the library's codelets (SwiGLU's for
# LLaMA), and the GEMM while each other core runs one on a core of its own (a load left on the measuring
# worker's core halves its rate whatever the cores)
if want "measured kernels"; then
  env -u STARPU_PERF_MODEL_DIR "$GPT_TRAIN" --plan --plan-ranks 2 --plan-top 1 --model llama $SMALL > "$TMPD/here" 2>&1
  rc=$?
  others=$(($(getconf _NPROCESSORS_ONLN) - 1))
  check "measured now: both attention tiles, cross-entropy, SwiGLU, adaLN and AdamW by their codelets, tasks with data; the GEMM's $others load(s) each on a core of its own (exit $rc)" \
    eval '[ "$rc" = 0 ] && grep -q "attention tiles .* measured now: sw_attn_fwd and _bwd" "$TMPD/here" &&
      grep -q "keeping the probabilities .* measured now: sw_attn_probs_fwd and _bwd" "$TMPD/here" &&
      grep -q "cross-entropy .* measured now: sw_ce_max" "$TMPD/here" && grep -q "MLP activation .* measured now: sw_swiglu_fwd" "$TMPD/here" &&
      grep -q "optimizer .* measured now: the AdamW codelet" "$TMPD/here" && grep -q "adaLN .* measured now: sw_modulate_fwd" "$TMPD/here" &&
      grep -q "cost per task .* measured now: 2000 StarPU tasks, each reading two 128x128 tiles and writing a temporary" "$TMPD/here" &&
      { [ "$others" = 0 ] || grep -q "ran the same GEMM ($others of them bound each to a core of its own)" "$TMPD/here"; }'
fi

# A calibration given (STARPU_PERF_MODEL_DIR): the attention tiles at its history models' rates, the ones
# the simulated graph runs them at, over every size weighted by its samples, in the estimate's count (forward
# 4 FLOPs per pair, the flash backward 10, the other 8, the estimate's 12 in all) -- not measured now
if want "calibrated attention"; then
  mkdir -p "$TMPD/cal/codelets/45"
  hist() { # hist CODELET "FLOPS MEAN-US SAMPLES"...: a history model of those entries (hash, bytes, flops, mean, dev, sum, sum2, n)
    f="$TMPD/cal/codelets/45/$1.testhost"; shift
    : > "$f"
    h=0
    for e in "$@"; do
      h=$((h + 1))
      # shellcheck disable=SC2086 # the entry's three words
      set -- $e
      printf '%08x\t4096\t%e\t%e\t0\t%e\t0\t%d\n' "$h" "$1" "$2" "$(awk -v m="$2" -v n="$3" 'BEGIN { print m * n }')" "$3" >> "$f"
    done
  }
  # flash: forward 6e9 FLOPs in 4e5 us over its 3 samples (15 GFLOP/s), backward 25: 12 / (4/15 + 10/25) = 18;
  # keeping the probabilities: 40 and 40, 12 / (4/40 + 8/40) = 40
  hist sw_attn_fwd "4e9 2e5 1" "1e9 1e5 2"
  hist sw_attn_bwd "1e10 4e5 5"
  hist sw_attn_probs_fwd "4e9 1e5 1"
  hist sw_attn_probs_bwd "8e9 2e5 1"
  STARPU_PERF_MODEL_DIR="$TMPD/cal" "$GPT_TRAIN" --plan --plan-ranks 2 --plan-top 1 --model llama $SMALL > "$TMPD/cal.out" 2>&1
  rc=$?
  check "a calibration given: the attention tiles at its history models' rates (18 and 40 GFLOP/s), not measured now (exit $rc)" \
    eval '[ "$rc" = 0 ] && grep -q "attention tiles 18 GFLOP/s per worker: measured: StarPU.s history models of sw_attn_fwd and _bwd in $TMPD/cal (15.0 and 25.0" "$TMPD/cal.out" &&
      grep -q "keeping the probabilities (recompute none) 40 GFLOP/s per worker: measured: StarPU.s history models of sw_attn_probs_fwd" "$TMPD/cal.out" &&
      ! grep -q "measured now: sw_attn" "$TMPD/cal.out"'
fi

if want "memory"; then # the planner's need per rank against the run's model (--memory-plan, 2 ranks)
  layout="--tp 1 --ulysses 1 --ring 1 --dp 1 --pp 2 --zero 0 --grad-accum 2 --recompute selective"
  "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-list "$TMPD/list" $SMALL > /dev/null 2>&1
  planned=$(grep -F "	$layout	" "$TMPD/list" | sed 's/.*need \([0-9]*\) bytes.*/\1/')
  # shellcheck disable=SC2086
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$GPT_TRAIN" $SMALL $layout --memory-plan > "$TMPD/mem" 2>&1
  rc=$?
  run=$(sed -n 's/^memory: rank [0-9]*: the model needs \([0-9.]*\) MiB.*/\1/p' "$TMPD/mem" | sort -g | tail -n 1)
  plan_mib=$(awk -v b="${planned:-0}" 'BEGIN { printf "%.2f", b / 1048576 }')
  check "memory per rank: planner $plan_mib MiB ($planned bytes), the run's model $run MiB (exit $rc)" \
    eval '[ "$rc" = 0 ] && [ -n "$planned" ] && [ "$plan_mib" = "$run" ]'
fi

# --simulate: the top layouts through the simulated task graph (each
# calibrated by a real run of its own, then bench/sim.sh), a column of
# simulated ms/step beside the estimate: gpt_train's and dit_train's (its
# simulation build's dit_train prints the line bench/sim.sh reads). Needs a
# simulation build (like tests/test_sim.sh: $SW_SIM_BUILD, else build-sim in
# the source tree) and this real build to calibrate with; without one the
# planner says so and ranks by the estimate (checked always).
is_sim() { [ -f "$1/config.h" ] && grep -q '^#define STARWEAVE_SIMGRID 1' "$1/config.h" && [ -x "$1/examples/$2" ]; }
sim_build=${SW_SIM_BUILD:-$(cd "$top_srcdir" && pwd)/build-sim}
TINY="--layers 2 --hidden 64 --heads 4 --seq 32 --batch 4 --vocab 128"
DTINY="--frames 2 --height 4 --width 4 --patch 2 --hidden 32 --heads 4 --layers 2 --batch 4"
# sim_ready CASE PROGRAM: 0 when the simulation build has PROGRAM and this build is a real one, else says SKIP
sim_ready() {
  if grep -q '^#define STARWEAVE_SIMGRID 1' "$top_builddir/config.h"; then
    echo "SKIP $1: this build is a simulation build (the planner calibrates with a real one)"
  elif ! is_sim "$sim_build" "$2"; then
    echo "SKIP $1: no simulation build with $2 in $sim_build (autotools/build-starpu.sh --simgrid, configure --with-starpu=PREFIX there; or SW_SIM_BUILD)"
  else return 0; fi
  return 1
}
# simulate_top CASE PROGRAM MODEL-FLAGS...: PROGRAM --plan --simulate 1 on $ranks ranks (2); the top row's
# simulated ms/step a number, not the estimate's
ranks=2
simulate_top() {
  case=$1 prog=$2; shift 2
  want "$case" && sim_ready "$case" "$(basename "$prog")" || return 0
  t0=$(date +%s)
  "$prog" --plan --plan-ranks $ranks --plan-machine "$TMPD/machine" --plan-top 3 --simulate 1 --sim-build "$sim_build" \
    "$@" > "$TMPD/sim" 2>&1
  rc=$?
  row=$(grep '^plan: simulated: *1 ' "$TMPD/sim")
  est=$(echo "$row" | awk '{ print $5 }') simms=$(echo "$row" | awk '{ print $6 }')
  [ "$rc" = 0 ] && [ -n "$row" ] || cat "$TMPD/sim"
  check "$(basename "$prog") --plan --simulate 1 on $sim_build: estimate ${est:-none} ms, simulated ${simms:-none} ms/step ($(($(date +%s) - t0)) s, exit $rc)" \
    eval '[ "$rc" = 0 ] && grep -q "layout ($(basename "$prog") flags)" "$TMPD/sim" &&
          awk -v v="${simms:-x}" -v e="${est:-x}" "BEGIN { exit !(v + 0 > 0 && v == v + 0 && v != e) }"'
}
if want "simulate"; then
  # shellcheck disable=SC2086
  "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-top 3 --simulate 1 \
    --sim-build "$TMPD/no-such-build" $TINY > "$TMPD/nosim" 2>&1
  rc=$?
  check "without a simulation build: said, ranked by the estimate alone (exit $rc)" \
    eval '[ "$rc" = 0 ] && grep -q "no simulation build .* ranked by the estimate alone" "$TMPD/nosim" && grep -q "^plan: *1 " "$TMPD/nosim"'
fi
# shellcheck disable=SC2086
simulate_top simulate "$GPT_TRAIN" $TINY
# shellcheck disable=SC2086
simulate_top "dit simulate" "$DIT" $DTINY
# --sim-layers 1,2 on a model of 4 layers: the top layout calibrated once (a real run at 2 layers), simulated at 1
# and 2, its step extrapolated linearly to 4 -- the formula over the two printed steps; then simulated at its
# own 4 layers with that same calibration (--sim-calibration; SW_PLAN_KEEP kept it): the simulated graph's step
# is linear in the layers (a 6-layer model, 2026-11-30: 30.247 extrapolated, 30.245 simulated), within 1 %
if want "simulate layers" && sim_ready "simulate layers" gpt_train; then
  t0=$(date +%s)
  # shellcheck disable=SC2086
  SW_PLAN_KEEP=1 "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-top 3 --simulate 1 \
    --sim-build "$sim_build" --sim-layers 1,2 $TINY --layers 4 > "$TMPD/siml" 2>&1
  rc=$?
  kept=$(sed -n 's/.*logs kept in \(.*\) (SW_PLAN_KEEP)$/\1/p' "$TMPD/siml")
  row=$(grep '^plan: simulated: *1 ' "$TMPD/siml")
  x=$(echo "$row" | awk '{ print $6 }')
  ab=$(echo "$row" | sed -n 's/.*(extrapolated from 1 layers (\([0-9.]*\) ms) and 2 (\([0-9.]*\) ms))$/\1 \2/p')
  [ "$rc" = 0 ] && [ -n "$ab" ] || cat "$TMPD/siml"
  y=
  if [ -n "$kept" ] && [ -d "$kept/cal-0" ]; then
    # shellcheck disable=SC2086
    SW_SIM_HOST=plan-0 "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-top 3 --simulate 1 \
      --sim-build "$sim_build" --sim-calibration "$kept/cal-0" $TINY --layers 4 > "$TMPD/sim4" 2>&1
    y=$(grep '^plan: simulated: *1 ' "$TMPD/sim4" | grep -F -- "$(echo "$row" | sed 's/.*  \(--tp .*\) (extrapolated.*/\1/')" | awk '{ print $6 }')
    [ -n "$y" ] || cat "$TMPD/sim4"
    rm -rf "$kept"
  fi
  check "--simulate 1 --sim-layers 1,2 on 4 layers: 1 and 2 layers simulated (${ab:-none} ms), extrapolated ${x:-none} = a + 3 (b - a); simulated at 4 layers with the same calibration ${y:-none} ms, within 1 % ($(($(date +%s) - t0)) s, exit $rc)" \
    eval '[ "$rc" = 0 ] && grep -q "EXTRAPOLATED: each at 1 and 2 layers" "$TMPD/siml" &&
          echo "$ab $x ${y:-x}" | awk "{ e = \$1 + 3 * (\$2 - \$1); d = \$4 - \$3; if (d < 0) d = -d;
            exit !(NF == 4 && \$3 > 0 && \$3 - e < 0.005 && e - \$3 < 0.005 && \$4 == \$4 + 0 && d < 0.01 * \$4) }"'
fi
# --sim-ranks 2 on a world of 2 nodes x 2: each layout simulated as its stand-in on one node, its dp and the
# batch halved (every rank's shapes kept), calibrated and simulated on 2 ranks -- the kept logs say the ranks,
# the dp and the batch the simulated run had
if want "simulate stand-in" && sim_ready "simulate stand-in" gpt_train; then
  t0=$(date +%s)
  # shellcheck disable=SC2086
  SW_PLAN_KEEP=1 "$GPT_TRAIN" --plan --plan-ranks 4 --plan-ranks-per-node 2 --plan-nodes 2 --plan-machine "$TMPD/machine" \
    --plan-top 3 --simulate 1 --sim-ranks 2 --sim-build "$sim_build" $TINY > "$TMPD/sims" 2>&1
  rc=$?
  kept=$(sed -n 's/.*logs kept in \(.*\) (SW_PLAN_KEEP)$/\1/p' "$TMPD/sims")
  row=$(grep '^plan: simulated: *1 ' "$TMPD/sims")
  dp=$(echo "$row" | sed -n 's/.* --dp \([0-9]*\) .*/\1/p')
  ran=$(grep -m1 '^gpt_train: .* batch [0-9]*, .* rank(s), .*dp [0-9]*,' "$kept/sim-0-l0.log" 2>/dev/null |
    sed -n 's/.* batch \([0-9]*\), .*, \([0-9]*\) rank(s), .*dp \([0-9]*\),.*/batch \1 ranks \2 dp \3/p')
  [ "$rc" = 0 ] && [ -n "$ran" ] || cat "$TMPD/sims"
  rm -rf "$kept"
  check "--simulate 1 --sim-ranks 2 of 4 ranks: the top layout (dp ${dp:-none}) simulated as its stand-in: ${ran:-none} ($(($(date +%s) - t0)) s, exit $rc)" \
    eval '[ "$rc" = 0 ] && grep -q "STAND-INS: the world of 4 ranks simulated on 2 (--sim-ranks)" "$TMPD/sims" &&
          grep -q "platform: 1 node(s) x 2 rank(s)" "$TMPD/sims" && [ -n "$dp" ] && [ $((dp % 2)) = 0 ] &&
          [ "$ran" = "batch 2 ranks 2 dp $((dp / 2))" ]'
fi
# 4 ranks on the machine file's 2 cores: the node's workers share them in the simulation, each layout calibrated
# by its tasks' time on their cores (bench/calibrate.sh --cpu-time), said
ranks=4
rm -f "$TMPD/sim"
# shellcheck disable=SC2086
simulate_top "simulate shared cores" "$GPT_TRAIN" $TINY
if [ -s "$TMPD/sim" ] && want "simulate shared cores"; then
  check "4 ranks on 2 cores: the plan says the workers share them, calibrated with --cpu-time" \
    grep -q "the node's 4 workers sharing its 2 cores.*--cpu-time: the tasks' time on their cores" "$TMPD/sim"
fi
ranks=2

# --verify of one rank of 2 workers: mpirun binds a rank to one core where the ranks are no more than the
# cores, and both workers ran there; such ranks run unbound, said on the verify line
if want "verify one rank"; then
  # shellcheck disable=SC2086
  "$GPT_TRAIN" --plan --plan-ranks 1 --plan-machine "$TMPD/machine" --plan-top 2 --verify 1 --verify-bottom 0 \
    --verify-steps 2 $TINY > "$TMPD/v1" 2>&1
  rc=$?
  check "--verify on 1 rank of 2 workers: run unbound, a measured row (exit $rc)" \
    eval '[ "$rc" = 0 ] && grep -q "2 CPU worker(s) per rank, ranks unbound: mpirun --bind-to none" "$TMPD/v1" && grep -q "^verify: *1 .* --tp 1" "$TMPD/v1"'
  grep -q '^verify: Spearman' "$TMPD/v1" || cat "$TMPD/v1"
fi

# --verify with --simulate-verified: the verified layout (one, the top: --verify 1 --verify-bottom 0) also
# through the simulated graph, calibrated by a real run of its own sizes; its row holds the estimate, the
# simulated and the measured ms/step, and the output says what calibrated the simulated figure. Without a
# simulation build: said, verified against the estimate alone (checked always).
if want "verify simulated"; then
  # shellcheck disable=SC2086
  "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-top 3 --verify 1 --verify-bottom 0 \
    --verify-steps 2 --simulate-verified --sim-build "$TMPD/no-such-build" $TINY > "$TMPD/vnosim" 2>&1
  rc=$?
  check "--simulate-verified without a simulation build: said, verified against the estimate alone (exit $rc)" \
    eval '[ "$rc" = 0 ] && grep -q "no simulation build .* verified against the estimate alone" "$TMPD/vnosim" && grep -q "^verify: *1 .* --tp" "$TMPD/vnosim"'
  if sim_ready "verify simulated" gpt_train; then
    t0=$(date +%s)
    # shellcheck disable=SC2086
    "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-top 3 --verify 1 --verify-bottom 0 \
      --verify-steps 2 --simulate-verified --sim-build "$sim_build" $TINY > "$TMPD/vsim" 2>&1
    rc=$?
    row=$(grep '^verify: *1 .* --tp' "$TMPD/vsim")
    est=$(echo "$row" | awk '{ print $3 }') simms=$(echo "$row" | awk '{ print $4 }') meas=$(echo "$row" | awk '{ print $5 }')
    [ "$rc" = 0 ] && [ -n "$row" ] || cat "$TMPD/vsim"
    check "--verify 1 --simulate-verified on $sim_build: estimate ${est:-none}, simulated ${simms:-none}, measured ${meas:-none} ms/step, the simulated one calibrated by a real run of the layout ($(($(date +%s) - t0)) s, exit $rc)" \
      eval '[ "$rc" = 0 ] && grep -q "each calibrated by a real run of that layout.s own task sizes" "$TMPD/vsim" &&
            awk -v v="${simms:-x}" -v e="${est:-x}" -v m="${meas:-x}" "BEGIN { exit !(v + 0 > 0 && v == v + 0 && v != e && m + 0 > 0 && v != m) }"'
  fi
fi

if want "dit budget"; then
  "$DIT" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-mem-mib 1 $DSMALL > "$TMPD/out" 2>&1
  rc=$?
  check "dit_train: a budget nothing fits: refused with the smallest need and its layout, exit $rc" \
    eval '[ "$rc" = 2 ] && grep -q "no layout fits the memory budget of 1 MiB per rank: the smallest need found is .* MiB.*with --tp" "$TMPD/out"'
  "$DIT" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-top 50 $DSMALL > "$TMPD/a" 2>&1
  ra=$?
  rows=$(grep -c '^plan: *[0-9]' "$TMPD/a")
  check "dit_train --plan: a ranked table ($rows rows, exit $ra)" \
    eval '[ "$ra" = 0 ] && [ "$rows" -ge 8 ] && grep -q "^plan: *1 .*--micro" "$TMPD/a"'
fi

if want "budget"; then
  "$GPT_TRAIN" --plan --plan-ranks 2 --plan-machine "$TMPD/machine" --plan-mem-mib 1 $SMALL > "$TMPD/out" 2>&1
  rc=$?
  check "a budget nothing fits: refused with the smallest need and its layout, exit $rc" \
    eval '[ "$rc" = 2 ] && grep -q "no layout fits the memory budget of 1 MiB per rank: the smallest need found is .* MiB.*with --tp" "$TMPD/out"'
fi
finish
