#!/bin/sh
# Activation memory. Equivalence: recompute none, full and full every 2
# against selective recomputation in the same layout (tests/test_tp.c
# --recompute: each step from the same parameters, the loss and every
# gradient bit for bit with full, within relative 1e-6 with none), on one
# rank and with tp 2 + sp, with dropout. Memory (gpt_train
# --memory-report; tests/test_memory measures through StarPU's allocator):
# the bytes the builder registered = model in every mode; doubling seq doubles selective's bytes (within 2 %), none grows by
# its model's ratio (the seq^2 term), full keeps only every K-th block's
# input. Offload (--offload, StarPU disk node) under a main-RAM budget
# smaller than the saved activations: the same losses (every digit logged)
# and the same checkpoint bytes as without, on one rank, with tp 2 + sp and
# with pp 2 (several micro-batches in flight, each offloaded);
# the memory report shows main RAM within the budget and bytes moved to and
# from the disk node; full recomputation with offload (the kept inputs go)
# likewise, GPT-2 on one rank and tp 2 + sp, LLaMA with tp 2 + sp (make
# check runs five of those nine offload cases, make check-long every one).
# Bad input: exit 2, the message once.
. "${top_srcdir:-.}/tests/common.sh"
for np in 1 2; do
  sp=""
  [ "$np" = 2 ] && sp="--sp"
  run $np $sp --dropout 0.1 --recompute none
  run $np $sp --dropout 0.1 --recompute full
  run $np $sp --dropout 0.1 --recompute full --recompute-every 2
done
run 2 --ulysses 2 --recompute none --kv-heads 2      # probabilities over the whole sequence, a/U heads
run 2 --ring 2 --dropout 0.1 --recompute full        # refilled ring attention

# saved bytes of rank 0's layer L (model, registered by the builder) at a sequence length
mem() { # mem SEQ LAYER ARGS...
  seq=$1; layer=$2; shift 2
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" --steps 1 --log "$TMPD/log.csv" --memory-report --layers 4 \
    --seq "$seq" --batch 2 "$@" > "$TMPD/mem" 2>&1 || { cat "$TMPD/mem"; echo "0 -1"; return; }
  awk -v l="$layer" '$1 == "memory:" && $2 == "0" && $3 == l { print $4, $5 }' "$TMPD/mem"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a / b }'; }
within() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }
quadratic() { within "$1" "$2" "$2" && within "$1" 2.05 100; } # as the model says, and above linear
equal2() { [ "$1" = "$2" ] && [ "$3" = "$4" ]; }
for mode in none selective full; do
  set -- $(mem 64 0 --recompute $mode); m1=$1 b1=$2
  set -- $(mem 128 0 --recompute $mode); m2=$1 b2=$2
  check "recompute $mode, seq 64: registered $b1 = model $m1 bytes" [ "$b1" = "$m1" ]
  check "recompute $mode, seq 128: registered $b2 = model $m2 bytes" [ "$b2" = "$m2" ]
  g=$(ratio "$b2" "$b1"); gm=$(ratio "$m2" "$m1")
  case $mode in
    none) check "recompute none: doubling seq multiplies the saved bytes by $g (model $gm, above 2: seq^2 term)" \
            quadratic "$g" "$gm" ;;
    *) check "recompute $mode: doubling seq multiplies the saved bytes by $g (2 within 2 %)" within "$g" 1.96 2.04 ;;
  esac
done
set -- $(mem 64 0 --recompute full --recompute-every 2); k0=$2
set -- $(mem 64 1 --recompute full --recompute-every 2); k1=$2
set -- $(mem 64 0 --recompute selective); s0=$2
check "recompute full every 2: block 0 keeps its input only ($k0 bytes = 64*2*128*4), block 1 nothing ($k1)" \
  equal2 "$k0" 65536 "$k1" 0
check "recompute full keeps $(ratio "$k0" "$s0") of selective's bytes in block 0" [ "$k0" -lt "$s0" ]

# offload: 4 blocks of 4.02 MiB saved activations (2.51 MiB per rank with tp 2 + sp) against budgets of
# 10 and 6 MiB (none: 4.52 and 2.76 MiB). MiB everywhere: the budget flag, StarPU's STARPU_LIMIT_CPU_MEM
# and the memory report (1048576 bytes).
# LLaMA (2.6 MiB per block and rank with tp 2 + sp): the same under 6 MiB.
# Pipeline stages (2 blocks each, 4 micro-batches of 1 MiB per block): stage 0 holds 2 micro-batches in
# flight (4 MiB of saved activations), each with its own copies on the disk node, under 3 MiB.
# Full recomputation with offload (Open-Sora's checkpoint offload: the kept block inputs go): 8 blocks of seq
# 128, kept inputs of 512 KiB each (256 KiB per rank with tp 2 + sp), 4 (2) MiB in all, under 1 MiB.
# make check runs five of the nine cases (each mode, LLaMA and the pipeline on 2 ranks); make check-long
# (SW_CHECK_LONG=1, .ci/run) and a selection (SW_TEST_ONLY) every one
long_only="[1 selective gpt2] [1 none gpt2] [2 selective llama] [1 full gpt2]"
left=0
for case in "1 selective gpt2" "1 none gpt2" "2 selective gpt2" "2 none gpt2" "2 selective llama" "2 selective gpt2 pp" \
    "1 full gpt2" "2 full gpt2" "2 full llama"; do
  if [ -z "${SW_CHECK_LONG:-}${SW_TEST_ONLY:-}" ]; then
    case "$long_only" in *"[$case]"*) left=$((left + 1)); continue ;; esac
  fi
  set -- $case; np=$1 mode=$2 model=$3 tag=${4:-}
  sp="--tp $np" budget=10 shape="--layers 4"
  [ "$np" = 2 ] && sp="--tp 2 --sp" budget=6
  [ "$tag" = pp ] && sp="--pp 2 --grad-accum 4" budget=3
  [ "$mode" = full ] && budget=1 shape="--layers 8 --seq 128"
  {
    args="--model $model $sp $shape --steps 6 --dropout 0.1 --recompute $mode"
    d="$TMPD/offload-$np-$mode-$model$tag"; mkdir "$d"
    SW_TEST_TIMEOUT=300 sh "$LAUNCH" $np "$GPT_TRAIN" $args --log "$d/a.csv" --save "$d/ck0" > "$d/out" 2>&1
    rc0=$?
    [ "$rc0" = 0 ] || cat "$d/out"
    SW_TEST_TIMEOUT=300 sh "$LAUNCH" $np "$GPT_TRAIN" $args --log "$d/b.csv" --save "$d/ck1" --offload \
      --offload-budget-mb $budget --memory-report > "$d/off" 2>&1
    rc=$?
    [ "$rc" = 0 ] || cat "$d/off"
    check "np=$np $model $mode $tag: without offload exit $rc0, with offload exit $rc" eval '[ "$rc0" = 0 ] && [ "$rc" = 0 ]'
    cut -d, -f1,2 "$d/a.csv" > "$d/a.loss" 2> /dev/null
    cut -d, -f1,2 "$d/b.csv" > "$d/b.loss" 2> /dev/null
    check "np=$np $model $mode $tag, offload under a $budget MiB budget: losses of 6 steps identical to no offload" \
      sh -c "[ \$(wc -l < '$d/a.loss') = 7 ] && cmp -s '$d/a.loss' '$d/b.loss'"
    same=true
    for r in $(seq 0 $((np - 1))); do
      f=$(printf 'step-%08d/rank-%05d.ckpt' 6 "$r")
      same_ckpt_file "$d/ck0/$f" "$d/ck1/$f" || same=false
    done
    check "np=$np $model $mode $tag, offload: every rank's checkpoint after 6 steps identical to no offload" $same
    # rank 0: "NUMA 0: peak P MiB used (of B), in I MiB, out O MiB; Disk 0: ..."; the peak
    # must not exceed the budget at all (StarPU refuses allocations beyond it)
    ram=$(sed -n 's/^memory: rank 0: NUMA 0: peak \([0-9.]*\) MiB used (of \([0-9]*\)), in \([0-9.]*\) MiB, out \([0-9.]*\) MiB.*/\1 \2 \3 \4/p' "$d/off")
    set -- $ram
    check "np=$np $model $mode $tag, offload: main RAM peak ${1:-?} MiB within the budget (${2:-?} MiB); ${4:-?} MiB written to the disk node, ${3:-?} MiB read back" \
      awk -v p="${1:-1e9}" -v b="${2:-0}" -v i="${3:-0}" -v o="${4:-0}" 'BEGIN { exit !(p <= b && b == '"$budget"' && i > 0 && o > 0) }'
  }
done
[ "$left" = 0 ] || echo "# $left of the nine offload cases left to make check-long (SW_CHECK_LONG=1 runs them)"

expect_bad 1 "offload-budget-mb (7) must hold two blocks' saved activations (2 x 4.02 MiB)" --offload --offload-budget-mb 7
expect_bad 1 "offload-budget-mb needs --offload" --offload-budget-mb 10
expect_bad 2 "offload-budget-mb (2) must hold two blocks' saved activations (2 x 2.51 MiB)" --tp 2 --sp --offload --offload-budget-mb 2
expect_bad 1 "--recompute expects none, selective or full, got 'some'" --recompute some
expect_bad 1 "recompute-every (2) needs recompute full (recompute = selective)" --recompute-every 2
expect_bad 1 "recompute-every must be at least 1 (recompute-every = 0)" --recompute full --recompute-every 0
expect_bad 2 "recompute none needs ring = 1 (ring = 2)" --ring 2 --recompute none
finish
