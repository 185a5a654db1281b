#!/bin/sh
# A machine without AVX-512 falls back cleanly: with oneDNN capped at AVX2
# (ONEDNN_MAX_CPU_ISA=AVX2, as on the AVX2-only machines of this kind),
# every GEMM form of test_gemm and every bf16 GEMM of test_bf16 still
# matches its double-precision reference with each backend; the oneDNN
# backend reports the capped ISA and bf16 widened to fp32 (no bf16
# products without AVX512-BF16); auto picks OpenBLAS; and gpt_train's
# banner and its --dtype bf16 line say so. The event counters show what
# computed the GEMMs: in test_gemm's oneDNN round and gpt_train --gemm
# onednn, oneDNN all of them and OpenBLAS none; in test_bf16's oneDNN round
# and gpt_train --gemm onednn --dtype bf16 too (every bf16 GEMM widened to
# fp32 for oneDNN's fp32 matmul); with --gemm auto, OpenBLAS all and oneDNN
# none.
# Skips where oneDNN is not built.
. "${top_srcdir:-.}/tests/common.sh"
if ! "$top_builddir/tests/test_gemm" > "$TMPD/plain" 2>&1 || ! grep -q '\[onednn ' "$TMPD/plain"; then
  grep -q '^SKIP .*onednn' "$TMPD/plain" && { echo "SKIP: built without oneDNN"; exit 77; }
  cat "$TMPD/plain"
  check "test_gemm without a cap" false
  finish
  exit 1
fi
export ONEDNN_MAX_CPU_ISA=AVX2
for t in test_gemm test_bf16; do
  "$top_builddir/tests/$t" > "$TMPD/$t" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/$t"
  check "$t with ONEDNN_MAX_CPU_ISA=AVX2: $(grep -E '^[0-9]+ passed' "$TMPD/$t") (exit $rc)" [ "$rc" = 0 ]
  # the oneDNN backend's descriptions: no AVX-512 ISA, bf16 widened
  grep -o '\[onednn ([^]]*)\]' "$TMPD/$t" | sort -u > "$TMPD/$t.desc"
  check "$t: the oneDNN backend reports $(head -n 1 "$TMPD/$t.desc")" \
    sh -c "[ -s '$TMPD/$t.desc' ] && ! grep -q avx512 '$TMPD/$t.desc' && ! grep -q 'bf16 native' '$TMPD/$t.desc'"
  # the counters of its oneDNN round (the program checks them too)
  line=$(grep -m 1 -E '^(PASS|FAIL) (bf16 )?gemm with onednn: counters ' "$TMPD/$t")
  blas=$(echo "$line" | sed -n 's/.*counters gemm_openblas=\([0-9]*\) .*/\1/p')
  dnn=$(echo "$line" | sed -n 's/.*counters .* gemm_onednn=\([0-9]*\) .*/\1/p')
  # fp32, and bf16 without AVX512-BF16 widened to fp32: oneDNN computed them
  check "$t, oneDNN round: gemm_openblas=$blas gemm_onednn=$dnn (oneDNN all, OpenBLAS none)" \
    sh -c "[ -n '$dnn' ] && [ '$dnn' -gt 0 ] && [ '$blas' = 0 ]"
done
args="--layers 1 --hidden 32 --heads 2 --vocab 300 --seq 8 --batch 2 --steps 1 --log $TMPD/log.csv --counters"
train() { # train NAME ARGS...: gpt_train on one rank, its output in $TMPD/NAME
  name=$1; shift
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" $args "$@" > "$TMPD/$name" 2>&1
}
gemms() { # gemms NAME -> "gemm_openblas=N gemm_onednn=N gemm_bf16=N gemm_widened=N" of that run
  echo "gemm_openblas=$(counter_max "$TMPD/$1" gemm_openblas) gemm_onednn=$(counter_max "$TMPD/$1" gemm_onednn)" \
       "gemm_bf16=$(counter_max "$TMPD/$1" gemm_bf16) gemm_widened=$(counter_max "$TMPD/$1" gemm_widened)"
}
computed() { # computed NAME BACKEND: in that run BACKEND computed GEMMs, the other backend none
  other=onednn; [ "$2" = onednn ] && other=openblas
  n=$(counter_max "$TMPD/$1" "gemm_$2"); z=$(counter_max "$TMPD/$1" "gemm_$other")
  [ -n "$n" ] && [ "$n" -gt 0 ] && [ "$z" = 0 ]
}
train auto
rc=$?
banner=$(grep -m 1 'CPU GEMM' "$TMPD/auto")
check "gpt_train --gemm auto, capped: exit $rc, banner '$banner' names openblas" \
  sh -c "[ $rc = 0 ] && echo '$banner' | grep -q 'CPU GEMM openblas'"
check "gpt_train --gemm auto, capped: counters $(gemms auto) (OpenBLAS computed the GEMMs, oneDNN none)" \
  computed auto openblas
train onednn --gemm onednn
rc=$?
[ "$rc" = 0 ] || cat "$TMPD/onednn"
onednn_ran() { [ "$rc" = 0 ] && grep -q 'CPU GEMM onednn' "$TMPD/onednn" && computed onednn onednn; }
check "gpt_train --gemm onednn, capped: exit $rc, counters $(gemms onednn) (oneDNN computed the GEMMs, OpenBLAS none)" \
  onednn_ran
train bf16 --gemm onednn --dtype bf16
rc=$?
banner=$(grep -m 1 'CPU GEMM' "$TMPD/bf16")
[ "$rc" = 0 ] || cat "$TMPD/bf16"
check "gpt_train --gemm onednn --dtype bf16, capped: exit $rc, banner '$banner' without AVX-512, bf16 said to widen" \
  sh -c "[ $rc = 0 ] && echo '$banner' | grep -q 'CPU GEMM onednn' && ! echo '$banner' | grep -q avx512 &&
         grep -q 'widen' '$TMPD/bf16'"
widened() { # every GEMM of the bf16 run was bf16, and oneDNN computed them all (widened), OpenBLAS none
  bf=$(counter_max "$TMPD/bf16" gemm_bf16)
  [ -n "$bf" ] && [ "$bf" -gt 0 ] && [ "$(counter_max "$TMPD/bf16" gemm_onednn)" = "$bf" ] &&
    [ "$(counter_max "$TMPD/bf16" gemm_widened)" = "$bf" ] && computed bf16 onednn
}
check "gpt_train --gemm onednn --dtype bf16, capped: counters $(gemms bf16) (all bf16, all widened; oneDNN all, \
OpenBLAS none)" widened
finish
