#!/bin/sh
# The DiT model (examples/dit_train) in every layout against one rank: the
# losses of 3 steps (weights N(0, 0.2) and adaLN weights N(0, 0.1), so that
# attention is far from uniform and every branch counts) at relative 1e-5,
# and the last step's reduced gradients (each parameter's sum of squares
# and of |g| over the ranks holding distinct parts: tests/encoder_compare.sh)
# within 1e-4 (sums of squares 2e-4), for Ulysses 2 and 4 and Ring 2 (spatial attention on a
# frame split, temporal attention after the all-to-all), tp 2 with and
# without sp, tp 2 + sp x Ulysses 2, dp 2 (and ZeRO-1, 2, 3; Ulysses 2 with ZeRO-3), Ulysses 2 x dp 2 (the
# per-token loss summed over both), full recomputation
# every 1 and every 2 blocks, 2 micro-batches (and with Ulysses 2 and full
# recomputation), offload of the saved sets (1 rank; Ulysses 2 with 2
# micro-batches), full recomputation with offload (Open-Sora's checkpoint
# offload: the kept inputs; 1 rank, every 2; Ulysses 2; and on 1 rank under a
# 1 MiB main-RAM budget: the same losses, bytes to the disk node and back); pipeline stages (pp 2 with 2
# micro-batches, pp 2 x Ulysses 2 with full recomputation, pp 2 x 2 interleaved chunks of a 4-block model
# against one rank's 4 blocks, pp 4 with 4 micro-batches: the driver moves the timestep embedding between
# stages, and sums three stages' gradients of it on the first); the bytes every
# group sent = the traffic model on every rank (dit_train --counters) for Ulysses 2, tp 2 + sp, dp 2,
# tp 2 + sp x Ulysses 2 and pp 2; every block's saved bytes registered = the memory
# model on every rank (dit_train --memory-report: 1 rank, Ulysses 2, tp 2 +
# sp, full recomputation every 2, pp 2 x 2 chunks); in those runs and in dp 2 with ZeRO-3,
# 2 micro-batches and offload (their loss runs with --memory-report), the
# whole model's bytes from the shapes (parameter state, blocks, the model's
# own tensors, the layers' sw_*_bytes) = what StarPU's allocator counts in
# main RAM on every rank, to the byte, at creation, and the growth over
# the steps = the layers' scratch (with offload StarPU's main-RAM copies
# of the offloaded tensors are not modelled: creation only); the bad input refused (exit 2 on every rank, the
# rule once): frames or patches per frame not divisible by ulysses x ring,
# a patch size that does not divide height or width, a conditioning
# length of 0, blocks not divisible by the pipeline stages, a checkpoint of
# another model, --save-every without --save, an offload budget below two
# blocks' saved sets (1 and 2 MiB: the run hung at its end). Checkpoints: 3 steps saved and
# resumed to 6 = 6 at once bit for bit on one rank; dp 2 ZeRO-3's re-sharded
# into pp 2 within 1e-5. --dtype bf16 on
# one rank: losses within 2^-7 of fp32's, GEMMs on bf16 operands counted.
. "${top_srcdir:-.}/tests/common.sh"
DIT="$top_builddir/examples/dit_train"
. "$top_srcdir/tests/encoder_compare.sh" # grads, close_grads
ARGS="--steps 3 --init-std 0.2 --adaln-std 0.1"
losses() { # losses FILE -> the step losses, one per line
  sed -n 's/^step *[0-9]*  loss \([0-9.e+-]*\).*/\1/p' "$1"
}
SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$DIT" $ARGS --save "$TMPD/ck1" > "$TMPD/ref" 2>&1 || cat "$TMPD/ref"
losses "$TMPD/ref" > "$TMPD/ref.loss"
grads "$TMPD/ref" > "$TMPD/ref.grads"
check "1 rank: 3 losses ($(tr '\n' ' ' < "$TMPD/ref.loss")), $(wc -l < "$TMPD/ref.grads") gradients" \
  [ "$(wc -l < "$TMPD/ref.loss")" = 3 -a "$(wc -l < "$TMPD/ref.grads")" -gt 40 ]
whole() { # whole "what" NP FILE: on every rank StarPU's main-RAM bytes (dit_train --memory-report) = the model's
  # to the byte: at creation, and what the steps added (but where the line names what it does not model: offload)
  res=$(awk -v np="$2" '/^memory: rank [0-9]+ created: allocator/ { c++; if ($6 != $9) bad++; s = s " " $6 ($6 != $9 ? " (model " $9 ")" : "") }
    /^memory: rank [0-9]+ after [0-9]+ steps: allocator grew/ { a++; u = /not modelled/; if ($9 != $12 && !u) bad++
      g = g " " $9 (u ? " (offloaded copies not modelled: model " $12 ")" : $9 != $12 ? " (model " $12 ")" : "") }
    END { printf "%d of %d ranks, %d off: created%s, grown%s", c, np, bad, s, g; exit !(c == np && a == np && !bad) }' "$3")
  ok=$?
  [ "$ok" = 0 ] || grep '^memory: rank [0-9]* \(created\|after\)' "$3"
  check "$1: the whole model's bytes = StarPU's main-RAM count per rank, at creation and after the steps ($res)" [ "$ok" = 0 ]
}
same() { # same NP ARGS...: dit_train on NP ranks, its 3 losses = one rank's ($TMPD/$REF, default ref) at relative 1e-5 (with --memory-report: and whole)
  np=$1; shift
  want "np=$np $*" || return 0
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$DIT" $ARGS "$@" > "$TMPD/out" 2>&1
  rc=$?
  losses "$TMPD/out" > "$TMPD/out.loss"
  ref="$TMPD/${REF:-ref}"
  worst=$(paste "$ref.loss" "$TMPD/out.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > w) w = r; n++ }
    END { if (n != 3) print "missing"; else printf "%.1e", w }')
  grads "$TMPD/out" > "$TMPD/out.grads"
  ok=false
  [ "$rc" = 0 ] && [ "$worst" != missing ] && awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }' \
    && close_grads "$ref.grads" "$TMPD/out.grads" > /dev/null && ok=true
  $ok || cat "$TMPD/out"
  check "np=$np $*: losses $(tr '\n' ' ' < "$TMPD/out.loss")= 1 rank's, worst relative $worst; $(wc -l < "$TMPD/out.grads") gradient \
digests within 1e-4 of 1 rank's $(close_grads "$ref.grads" "$TMPD/out.grads" || true) (exit $rc)" $ok
  case " $* " in *" --memory-report "*) whole "np=$np $*" "$np" "$TMPD/out" ;; esac
}
same 2 --ulysses 2
same 4 --ulysses 4
same 2 --ring 2
same 2 --tp 2 --sp
same 2 --tp 2
same 4 --tp 2 --sp --ulysses 2
same 2 --dp 2
same 2 --dp 2 --zero 1
same 2 --dp 2 --zero 2
same 2 --dp 2 --zero 3 --memory-report --save "$TMPD/ckz"
same 2 --ulysses 2 --zero 3
same 4 --ulysses 2 --dp 2
same 1 --recompute full
same 1 --recompute full --recompute-every 2
same 1 --recompute none
same 1 --micro 2 --memory-report
same 2 --ulysses 2 --micro 2 --recompute full
same 1 --offload --memory-report
same 2 --ulysses 2 --micro 2 --offload
same 1 --recompute full --recompute-every 2 --offload
same 2 --ulysses 2 --recompute full --offload
# pipeline stages: the timestep embedding sc from the first stage to the other, its gradient back
same 2 --pp 2 --micro 2
same 4 --pp 2 --ulysses 2 --micro 2 --recompute full
# interleaved chunks: 2 stages x 2 chunks of a 4-block model against one rank's 4 blocks
SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$DIT" $ARGS --layers 4 > "$TMPD/ref4" 2>&1 || cat "$TMPD/ref4"
losses "$TMPD/ref4" > "$TMPD/ref4.loss"
grads "$TMPD/ref4" > "$TMPD/ref4.grads"
REF=ref4 same 2 --layers 4 --pp 2 --pp-virtual 2 --micro 2
# pp 4: three stages' gradients of the timestep embedding received one after the other through the first
# stage's one scratch and summed into its own (each stage's zeroed before its first backward of the micro-batch)
REF=ref4 same 4 --layers 4 --pp 4 --micro 4
# Open-Sora's checkpoint offload under a main-RAM budget below the kept inputs (4 blocks of 2048 tokens x 2
# sequences): the same losses as without offload, StarPU's main-RAM peak within 1 MiB, bytes to the disk node and back
if want "offload budget"; then
  big="--steps 3 --init-std 0.2 --adaln-std 0.1 --layers 4 --frames 8 --height 32 --width 32 --batch 2 --recompute full"
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$DIT" $big > "$TMPD/noff" 2>&1 || cat "$TMPD/noff"
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$DIT" $big --offload --offload-budget-mb 1 --memory-report > "$TMPD/off" 2>&1 \
    || cat "$TMPD/off"
  a=$(losses "$TMPD/noff" | tr '\n' ' '); b=$(losses "$TMPD/off" | tr '\n' ' ')
  set -- $(sed -n 's/^memory: rank 0 NUMA 0: peak \([0-9.]*\) MiB used (of \([0-9]*\)), in \([0-9.]*\) MiB, out \([0-9.]*\) MiB$/\1 \2 \3 \4/p' "$TMPD/off")
  check "full recomputation + offload under 1 MiB: losses ($b) = without offload ($a); main RAM peak ${1:-?} MiB (of ${2:-?}), ${4:-?} MiB to the disk node, ${3:-?} MiB back" \
    awk -v a="$a" -v b="$b" -v p="${1:-9}" -v m="${2:-0}" -v i="${3:-0}" -v o="${4:-0}" \
      'BEGIN { exit !(a != "" && a == b && p <= m && m == 1 && i > 0 && o > 0) }'
fi
# checkpoints (the registry's, checkpoint.h): 3 steps saved then resumed to 6 = 6 steps at once, bit for bit
# on one rank; the dp 2 ZeRO-3 run's checkpoint re-sharded into pp 2 x 2 micro-batches within 1e-5
if want "checkpoint"; then
  ARGS6="--steps 6 --init-std 0.2 --adaln-std 0.1"
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$DIT" $ARGS6 > "$TMPD/six" 2>&1 || cat "$TMPD/six"
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$DIT" $ARGS6 --resume "$TMPD/ck1" > "$TMPD/res1" 2>&1 || cat "$TMPD/res1"
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$DIT" $ARGS6 --resume "$TMPD/ckz" --pp 2 --micro 2 > "$TMPD/resz" 2>&1 || cat "$TMPD/resz"
  last3() { sed -n 's/^step *\([456]\)  loss \([0-9.e+-]*\).*/\2/p' "$1" | tr '\n' ' '; }
  a=$(last3 "$TMPD/six"); b=$(last3 "$TMPD/res1"); z=$(last3 "$TMPD/resz")
  check "checkpoint: 3 steps + resume to 6 = 6 steps, bit for bit (steps 4-6: $b; at once: $a)" [ -n "$a" -a "$a" = "$b" ]
  check "checkpoint: dp 2 ZeRO-3's re-sharded into pp 2 (steps 4-6: $z) = 6 steps at once within 1e-5" \
    awk -v a="$a" -v b="$z" 'BEGIN { n = split(a, x); m = split(b, y); if (n != 3 || m != 3) exit 1
      for (i = 1; i <= 3; i++) { d = (x[i] - y[i]) / x[i]; if (d < 0) d = -d; if (d > 1e-5) exit 1 } }'
fi
# bf16 GEMM operands on one rank: the losses within bf16's precision (2^-7 relative) of fp32's, not identical,
# and the GEMMs that read bf16 operands counted
if want "bf16"; then
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$DIT" $ARGS --dtype bf16 --counters > "$TMPD/bf16" 2>&1 || cat "$TMPD/bf16"
  n16=$(sed -n 's/^counters: rank 0:.* gemm_bf16=\([0-9]*\).*/\1/p' "$TMPD/bf16")
  out=$(losses "$TMPD/bf16" | paste "$TMPD/ref.loss" - | awk '{ n++; r = ($2 - $1) / $1; if (r < 0) r = -r; if (r > w) w = r; if ($1 != $2) d++ }
    END { printf "%d steps, worst relative difference %.3g, %d differ", n, w, d; exit !(n == 3 && w <= 1 / 128 && d > 0) }')
  check "--dtype bf16 vs fp32 losses: $out; ${n16:-no} GEMMs on bf16 operands" [ $? = 0 -a "${n16:-0}" -gt 0 ]
fi
traffic() { # traffic NP ARGS...: the bytes sent = the model, every group of every rank
  np=$1; shift
  want "traffic np=$np $*" || return 0
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$DIT" --steps 2 --adaln-std 0.05 --counters "$@" > "$TMPD/out" 2>&1
  rc=$?
  ok=false
  [ "$rc" = 0 ] && traffic_exact "$TMPD/out" "$np" > "$TMPD/bad" && ok=true
  $ok || cat "$TMPD/out" "$TMPD/bad"
  check "traffic np=$np $*: bytes sent = model on every group ($(sed -n 's/^traffic: rank 0 \([a-z_]*\) group: sent \([0-9]*\) bytes .*/\1 \2/p' "$TMPD/out" | awk '$2 > 0' | tr '\n' ';')) (exit $rc)" $ok
}
traffic 2 --ulysses 2
traffic 2 --tp 2 --sp
traffic 2 --dp 2
traffic 4 --tp 2 --sp --ulysses 2
traffic 2 --pp 2 --micro 2
memory() { # memory NP ARGS...: every block's saved bytes on every rank = the memory model (sw_blocks_saved_bytes),
  # and the whole model's bytes = StarPU's main-RAM count (whole)
  np=$1; shift
  want "memory np=$np $*" || return 0
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$DIT" --steps 1 --memory-report "$@" > "$TMPD/out" 2>&1
  rc=$?
  blocks=$(echo " $* " | sed -n 's/.* --layers \([0-9]*\) .*/\1/p'); pp=$(echo " $* " | sed -n 's/.* --pp \([0-9]*\) .*/\1/p')
  # a line per block and rank; with pp stages each rank's own blocks non-zero, the others' 0 and 0
  res=$(awk -v want="$((${blocks:-2} * np))" -v held="$((${blocks:-2} * np / ${pp:-1}))" -v pp="${pp:-1}" '/^memory: rank [0-9]+ block [0-9]+ saved model/ {
      n++; if ($8 != $11) bad++; if ($8 > 0) nz++; s = s " " $8 }
    END { printf "%d of %d blocks, %d of %d held, %d off:%s", n, want, nz, held, bad, s; exit !(n == want && (pp == 1 || nz == held) && !bad) }' "$TMPD/out")
  ok=$?
  [ "$rc" = 0 ] && [ "$ok" = 0 ] || cat "$TMPD/out"
  check "memory np=$np $*: saved bytes registered = model per block and rank ($res) (exit $rc)" [ "$rc" = 0 -a "$ok" = 0 ]
  whole "memory np=$np $*" "$np" "$TMPD/out"
}
memory 1
memory 2 --ulysses 2
memory 2 --tp 2 --sp
memory 1 --recompute full --recompute-every 2
memory 2 --pp 2 --pp-virtual 2 --layers 4 --micro 2
bad() { # bad NP "message" ARGS...
  np=$1; msg=$2; shift 2
  want "bad input: $msg" || return 0
  refused "$np" "$msg" "dit_train $*" "$DIT" --steps 1 "$@"
}
bad 2 "--frames (3) must be divisible by ulysses x ring (2)" --ulysses 2 --frames 3
bad 2 "patches per frame ((6/2) x (6/2) = 9) must be divisible by ulysses x ring (2)" --ulysses 2 --height 6 --width 6
bad 2 "--patch (3) must divide --height (8) and --width (8)" --patch 3
bad 2 "--cond-len must be at least 1 (got 0)" --cond-len 0
bad 2 "the blocks (3) must be divisible by the pipeline stages times their chunks (pp 2 x 1)" --pp 2 --layers 3
bad 1 "--dtype expects fp32 or bf16, got 'fp16'" --dtype fp16
bad 2 "--pp-virtual must be at least 1 (got 0)" --pp 2 --pp-virtual 0
bad 1 "checkpoint $TMPD/ck1/step-00000003 does not match this run: layers 2 in the checkpoint, 3 here" --steps 6 \
  --layers 3 --resume "$TMPD/ck1"
bad 1 "--save-every N needs --save DIR and N >= 0 (2)" --save-every 2
# an offload budget below two blocks' saved sets (1.21 MiB each here): StarPU's requests for the
# offloaded sets never found room, the steps ended and the destroy waited for them forever
bad 1 "offload-budget-mb (1) must hold two blocks' saved activations (2 x 1.21 MiB)" --offload --offload-budget-mb 1
bad 1 "offload-budget-mb (2) must hold two blocks' saved activations (2 x 1.21 MiB)" --offload --offload-budget-mb 2
finish
