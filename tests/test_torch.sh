#!/bin/sh
# Model test against PyTorch, for GPT-2 and LLaMA: tests/test_gpt_ref exports a
# small model (`--model llama`: GQA, rotary positions, RMSNorm, SwiGLU) --
# initial parameters, tokens, step-1 loss and gradients, losses after 5 AdamW
# steps -- and tests/torch_gpt.py recomputes them with PyTorch (Debian
# python3-torch), with each CPU GEMM backend of the build. PASS/FAIL per
# model and backend; exit 77 (skip) only when torch cannot be
# imported, 99 when an exporter's own reference fails its self-check.
# That SW_GEMM picked the backend named: gpt_train --counters on the same
# model with the same SW_GEMM (the exporter's sw_init reads it the same
# way) must show that backend computed its GEMMs and the other none.
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
top_builddir=${top_builddir:-.}
if [ -z "$top_srcdir" ]; then
    top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
fi
. "$top_srcdir/tests/common.sh"

need_torch

tmpdir=$TMPD
hard=0
computed() { # computed GEMM FILE: the counters in FILE say GEMM computed GEMMs, the other backend none
  other=onednn; [ "$1" = onednn ] && other=openblas
  n=$(counter_max "$2" "gemm_$1"); z=$(counter_max "$2" "gemm_$other")
  [ -n "$n" ] && [ "$n" -gt 0 ] && [ "$z" = 0 ]
}
ran_with() { # ran_with RC GEMM FILE: exit 0, and FILE's counters say GEMM computed
  [ "$1" = 0 ] && computed "$2" "$3"
}
counts() { # counts FILE: its GEMM counters
  echo "gemm_openblas=$(counter_max "$1" gemm_openblas) gemm_onednn=$(counter_max "$1" gemm_onednn)"
}
# with each CPU GEMM backend of the build (oneDNN where built: SKIP otherwise)
for gemm in openblas onednn; do
  for model in gpt2 llama; do
    echo "# model $model, gemm $gemm"
    SW_GEMM=$gemm "$top_builddir/tests/test_gpt_ref" --export "$tmpdir/$model" --model "$model" 2> "$tmpdir/err"
    rc=$?
    cat "$tmpdir/err" >&2
    if [ $rc -eq 2 ] && grep -q 'built without oneDNN' "$tmpdir/err"; then
        echo "SKIP gemm $gemm: $(grep -m 1 'built without' "$tmpdir/err")"
        break
    fi
    SW_GEMM=$gemm SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" --model "$model" --layers 1 --hidden 32 --heads 2 \
      --vocab 300 --seq 8 --batch 2 --steps 1 --log "$tmpdir/log.csv" --counters > "$tmpdir/train" 2>&1
    trc=$?
    [ $trc = 0 ] || cat "$tmpdir/train"
    check "$model, gemm $gemm: gpt_train --model $model with SW_GEMM=$gemm: exit $trc, $(counts "$tmpdir/train") ($gemm \
computed the GEMMs, the other backend none)" ran_with "$trc" $gemm "$tmpdir/train"
    # the exporter's own counters (stderr): the data PyTorch checks came from that backend
    check "$model, gemm $gemm: test_gpt_ref --export: $(counts "$tmpdir/err") ($gemm computed the GEMMs, the other none)" \
      computed $gemm "$tmpdir/err"
    if [ $rc -eq 99 ]; then # its reference failed a self-check: nothing to compare
        echo "ERROR: $top_builddir/tests/test_gpt_ref --export --model $model (gemm $gemm): hard error"
        hard=1
        continue
    elif [ $rc -ne 0 ]; then
        echo "FAIL $model, gemm $gemm: $top_builddir/tests/test_gpt_ref --export --model $model failed (exit $rc)"
        fail=$((fail + 1))
        continue
    fi
    "$TORCH_PYTHON" "$top_srcdir/tests/torch_gpt.py" "$tmpdir/$model"
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "PASS $model, gemm $gemm: starweave matches PyTorch (and the serial C reference)"
        pass=$((pass + 1))
    else
        echo "FAIL $model, gemm $gemm: starweave differs from PyTorch (exit $rc)"
        fail=$((fail + 1))
    fi
  done
done
echo "$pass passed, $fail failed"
[ $hard -eq 1 ] && exit 99
[ "$fail" = 0 ]
