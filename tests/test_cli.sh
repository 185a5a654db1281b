#!/bin/sh
# One command line for every program (examples/cli.c): each program refuses
# a misspelled flag (the nearest valid one named), a value that is not a
# number, a value outside its range, a choice not among its values, with
# exit 2 and the rule printed once -- before StarPU starts, on every rank of
# an MPI launch; --help exits 0 and lists the flags of the same table.
. "${top_srcdir:-.}/tests/common.sh"
B="$top_builddir/examples"
bad() { # bad "message" PROGRAM ARGS...: one process exits 2, the message once
  msg=$1; prog=$2; shift 2
  want "$prog $*" || return 0
  timeout 60 "$B/$prog" "$@" > "$TMPD/out" 2>&1
  rc=$?
  n=$(grep -c -F -- "$msg" "$TMPD/out")
  ok=false
  [ "$rc" = 2 ] && [ "$n" = 1 ] && ok=true
  $ok || cat "$TMPD/out"
  check "$prog $*: exit $rc (expected 2), '$msg' printed $n time(s)" $ok
}
help() { # help PROGRAM FLAG...: --help exits 0, prints the usage line and lists every FLAG
  prog=$1; shift
  want "$prog --help" || return 0
  timeout 60 "$B/$prog" --help > "$TMPD/out" 2>&1
  rc=$?
  missing=
  for f; do grep -q -- "^  $f\( \|$\)" "$TMPD/out" || missing="$missing $f"; done
  ok=false
  [ "$rc" = 0 ] && grep -q "^usage: .*$prog" "$TMPD/out" && [ -z "$missing" ] && ok=true
  $ok || cat "$TMPD/out"
  check "$prog --help: exit $rc, $(wc -l < "$TMPD/out") lines, lists $*${missing:+ (missing:$missing)}" $ok
}

# the issue's cases: typos, negatives, non-numbers -- all accepted before as something else
bad "dit_train: unknown option --zer (did you mean --zero?); see --help" dit_train --zer 3
bad "custom_model: unknown option --tpp (did you mean --tp?); see --help" custom_model --tpp 2
bad "--pp expects an integer, got 'two'" custom_model --pp two
bad "--steps must be at least 1 (got -1)" encoder_mlm --steps -1
bad "--dp must be at least 1 (got -2)" encoder_regress --dp -2
bad "--layers expects an integer, got '2x'" custom_model --layers 2x
bad "--layers must be in [1, 8] (got 9)" custom_model --layers 9
bad "--lr expects a number, got 'abc'" dit_train --lr abc
bad "--zero must be in [0, 3] (got 4)" dit_train --zero 4
# the encoders have no ZeRO: --zero is refused, not ignored
bad "encoder_mlm: unknown option --zero; see --help" encoder_mlm --dp 2 --zero 3
bad "encoder_regress: unknown option --stepz (did you mean --steps?); see --help" encoder_regress --stepz 3
# choices, values, positional arguments, --name=value
bad "--dtype expects fp32 or bf16, got 'fp16'" dit_train --dtype fp16
bad "--recompute expects none, selective or full, got 'some'" dit_train --recompute some
bad "dit_train: --save needs a value; see --help" dit_train --save --steps 1
bad "dit_train: --trace needs a value; see --help" dit_train --trace
bad "encoder_mlm: unexpected argument '3'; see --help" encoder_mlm --sp 3
bad "encoder_mlm: --sp takes no value (got '1'); see --help" encoder_mlm --sp=1
bad "--steps expects an integer, got 'abc'" encoder_mlm --steps=abc
bad "--pad must be in [0, 255] (got 300)" encoder_mlm --pad 300
bad "--pad must be in [0, 255] (got -1)" encoder_regress --pad -1
bad "gpt_train: unknown option --zer (did you mean --zero?); see --help" gpt_train --zer 3
bad "gpt_train: unknown option --ste (did you mean --steps?); see --help" gpt_train --ste 3
bad "--lr expects a number, got 'abc'" gpt_train --lr abc
bad "--dtype expects fp32 or bf16, got 'fp16'" gpt_train --dtype=fp16
bad "collectives: unknown option --iter (did you mean --iters?); see --help" collectives --iter 3
bad "--iters must be in [1, 100000] (got 0)" collectives --iters 0
bad "--size-mib must be in (0, 4096] (got 0)" collectives --size-mib 0
bad "--group expects world, tp or dp, got 'pp'" collectives --group pp
# every rank of an MPI launch refuses by itself: exit 2, the rule once, no hang
if want "np=2"; then
  refused 2 "dit_train: unknown option --zer (did you mean --zero?); see --help" "dit_train --zer 3" "$B/dit_train" --zer 3
  refused 2 "--steps must be at least 1 (got -1)" "encoder_mlm --steps -1" "$B/encoder_mlm" --steps -1
fi

help gpt_train --model --layers --dtype --steps --data --tp --sp --zero --recompute --offload-budget-mb --ncpus --gemm \
  --trace --save --resume --sample-every --generate --prompt-text --load-weights --weights-format --quiet
help dit_train --frames --zero --dtype --recompute --offload-budget-mb --save --resume --export
help custom_model --steps --layers --bidirectional --tp --sp --zero --pp --pp-virtual --micro --recompute-full
help encoder_mlm --steps --tp --sp --dp --ulysses --ring --micro --no-mask-ignore --mask-weights --pad
help encoder_regress --steps --classes --pool-first --per-token --pad
help collectives --size-mib --sizes --iters --tp --group --no-gather --algo --small-kib --ncpus
finish
