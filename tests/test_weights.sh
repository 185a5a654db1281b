#!/bin/sh
# Weight files of other tools (weights.h, docs/weights.md), on tiny models
# (2 layers, hidden 64, seq 32): files written here by tests/weights_files.py
# from the formats' documented layouts (struct + json, random parameters of
# std 0.2 so that attention is far from uniform) load into gpt_train, whose
# step-1 loss equals a PyTorch forward under Hugging Face's conventions
# (Conv1D, rotate_half, repeat_kv) on the same file at relative 1e-5:
#   - GPT-2 safetensors (transformers. prefix, causal-mask buffers) and the
#     same parameters as an llm.c checkpoint (vocab 300 padded to 384);
#   - LLaMA safetensors with grouped-query attention (4 heads, 2 K/V heads),
#     and one without lm_head.weight (tied word embeddings);
#   - tp 2 + sp loads give the 1-rank loss (1e-5), for both models;
# and writing them back is exact:
#   - export of an imported file: every tensor equals the file's bit for bit
#     (GPT-2 safetensors, llm.c, LLaMA), from 1 rank, tp 2, ZeRO-3 and pp 2;
#   - export -> import -> export is the same file, byte for byte, from a
#     trained model too; safetensors -> llm.c -> safetensors as well;
#   - BF16 and F16 safetensors and llm.c's bf16 (version 5) load as the
#     exactly widened values;
# llm.c's bf16 written (--weights-format llmc-bf16):
#   - its header is the fp32 file's with version 5, and every value is the
#     fp32 export's rounded to nearest even (numpy, from the bits), also for
#     ties, subnormals, overflow to inf, NaNs and -0 (whose fp32 export
#     keeps their bits); it is weights_files.py's bf16 file (PyTorch's
#     rounding) byte for byte, the same from tp 2, and bf16 -> import ->
#     bf16 export is the same file;
#   - loaded back, its step-1 loss is PyTorch's on the bf16 values (1e-5)
#     and within bf16's precision (2^-8) of the fp32 model's;
# and broken files are refused (exit 2 on every rank, the message once):
# wrong magic, truncated (both formats), malformed header, missing tensor,
# shape mismatch, unknown dtype, model mismatch (layers, hidden, kind),
# an llm.c version, an unexpected tensor. Exit 77 when torch is absent.
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
top_builddir=${top_builddir:-.}
if [ -z "$top_srcdir" ]; then
    top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
fi
. "$top_srcdir/tests/common.sh"

need_torch
PY="$TORCH_PYTHON $top_srcdir/tests/weights_files.py"
SHAPE="--layers 2 --hidden 64 --heads 4 --vocab 300"
GPT="$SHAPE --seq 32 --batch 2 --data $TMPD/d.bin"
LLAMA="--model llama $SHAPE --kv-heads 2 --ffn 128 --seq 32 --batch 2 --data $TMPD/d.bin"
W=$TMPD
# every file and the PyTorch losses, torch imported once
REF="--data $W/d.bin --seq 32 --batch 2 --heads 4"
$PY batch > "$TMPD/setup" 2>&1 <<EOF
data $W/d.bin --n 2000 --vocab 300
make gpt2 $W/g.st $SHAPE --max-pos 32 --prefix transformer. --extra
make gpt2 $W/g.bin $SHAPE --max-pos 32 --format llmc
make llama $W/l.st $SHAPE --kv-heads 2 --ffn 128 --max-pos 32
make llama $W/tied.st $SHAPE --kv-heads 2 --ffn 128 --max-pos 32 --drop lm_head.weight
make gpt2 $W/bf16.st $SHAPE --max-pos 32 --dtype BF16
make gpt2 $W/f16.st $SHAPE --max-pos 32 --dtype F16
make gpt2 $W/g16.bin $SHAPE --max-pos 32 --format llmc --dtype BF16
make gpt2 $W/sp.bin $SHAPE --max-pos 32 --format llmc --specials
make gpt2 $W/missing.st $SHAPE --max-pos 32 --drop ln_f.bias
make gpt2 $W/shape.st $SHAPE --max-pos 32 --bad-shape h.1.mlp.c_fc.bias
make gpt2 $W/conv.st $SHAPE --max-pos 32 --bad-shape h.1.mlp.c_fc.weight
make gpt2 $W/more.st $SHAPE --max-pos 32 --add h.0.attn.rotary.weight
make gpt2 $W/dtype.st $SHAPE --max-pos 32 --bad-dtype h.0.ln_1.weight
make gpt2 $W/v7.bin $SHAPE --max-pos 32 --format llmc --version 7
make gpt2 $W/extra.st $SHAPE --max-pos 32 --prefix model.
loss $W/g.st gpt2 $REF --out $W/g.st.loss
loss $W/g.bin gpt2 $REF --out $W/g.bin.loss
loss $W/l.st llama $REF --out $W/l.st.loss
loss $W/tied.st llama $REF --out $W/tied.st.loss
loss $W/g16.bin gpt2 $REF --out $W/g16.bin.loss
EOF
check "weights_files.py wrote the files and PyTorch's losses" [ -z "$(grep -v '^0 ' "$TMPD/setup")" ] || cat "$TMPD/setup"
# comparisons of files queued, run at the end by one batch
: > "$TMPD/cmp"
: > "$TMPD/cmp.what"
queue() { # queue WHAT COMMAND...
  echo "$1" >> "$TMPD/cmp.what"
  shift
  echo "$*" >> "$TMPD/cmp"
}

gt() { # gt NP ARGS...: gpt_train on NP ranks, output in $TMPD/out; status
  np=$1; shift
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$GPT_TRAIN" --log "$TMPD/log.csv" "$@" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  return $rc
}
first_loss() { sed -n '2s/^1,\([^,]*\),.*/\1/p' "$TMPD/log.csv"; }
close() { # close A B: |A - B| <= 1e-5 |B|
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(a != "" && d <= 1e-5 * m) }'
}
rel() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.2g", b ? d / (b < 0 ? -b : b) : d }'; }
within() { # within A B TOL: |A - B| <= TOL |B|
  awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(a != "" && d <= t * m) }'
}

# ---- losses against PyTorch
loss_case() { # loss_case WHAT FILE MODEL NP ARGS...
  what=$1 file=$2 model=$3 np=$4; shift 4
  last=
  want "loss $what" || return 0
  gt "$np" --steps 1 --load-weights "$file" "$@"
  rc=$?
  sw=$(first_loss)
  ref=$(cat "$file.loss")
  check "loss $what: starweave $sw, PyTorch $ref (relative $(rel "$sw" "$ref") <= 1e-5) (exit $rc)" close "$sw" "$ref"
  last=$sw
}
same_loss() { # same_loss WHAT A B (both run: SW_TEST_ONLY may have left one out)
  [ -n "$2" ] && [ -n "$3" ] || return 0
  want "loss $1" && check "loss $1: $2 and $3 (relative $(rel "$2" "$3") <= 1e-5)" close "$2" "$3"
}
last=
loss_case "gpt2 safetensors, np=1" "$W/g.st" gpt2 1 $GPT; g1=$last
loss_case "gpt2 llm.c, np=1" "$W/g.bin" gpt2 1 $GPT; b1=$last
loss_case "gpt2 safetensors, np=2 tp 2 sp" "$W/g.st" gpt2 2 $GPT --tp 2 --sp; g2=$last
loss_case "gpt2 llm.c, np=2 tp 2" "$W/g.bin" gpt2 2 $GPT --tp 2; b2=$last
loss_case "llama safetensors GQA, np=1" "$W/l.st" llama 1 $LLAMA; l1=$last
loss_case "llama safetensors GQA, np=2 tp 2 sp" "$W/l.st" llama 2 $LLAMA --tp 2 --sp; l2=$last
loss_case "llama safetensors without lm_head.weight (tied), np=1" "$W/tied.st" llama 1 $LLAMA
same_loss "gpt2: llm.c = safetensors (np=1)" "$b1" "$g1"
same_loss "gpt2 tp 2 = 1 rank (safetensors)" "$g2" "$g1"
same_loss "gpt2 tp 2 = 1 rank (llm.c, padded vocab 512 here, 384 in the file)" "$b2" "$b1"
same_loss "llama tp 2 = 1 rank" "$l2" "$l1"

# ---- exact export
same() { queue "$1" same "$2" "$3"; } # same WHAT A B: every tensor equal
ident() { # ident WHAT A B: the same bytes
  check "$1: $(basename "$2") and $(basename "$3") $(cmp "$2" "$3" > /dev/null 2>&1 && echo identical || echo differ)" cmp -s "$2" "$3"
}
if want "export"; then
  gt 1 $GPT --steps 0 --load-weights "$W/g.st" --save-weights "$W/g1.st"
  same "export gpt2 safetensors np=1 = the file" "$W/g.st" "$W/g1.st"
  gt 1 $GPT --steps 0 --load-weights "$W/g1.st" --save-weights "$W/g2.st"
  ident "export gpt2: export -> import -> export" "$W/g1.st" "$W/g2.st"
  gt 2 $GPT --tp 2 --sp --steps 0 --load-weights "$W/g.st" --save-weights "$W/g3.st"
  ident "export gpt2 np=2 tp 2 = np=1" "$W/g1.st" "$W/g3.st"
  gt 2 $GPT --dp 2 --zero 3 --steps 0 --load-weights "$W/g.st" --save-weights "$W/g4.st"
  ident "export gpt2 np=2 dp 2 ZeRO-3 = np=1" "$W/g1.st" "$W/g4.st"
  gt 2 $GPT --pp 2 --steps 0 --load-weights "$W/g.st" --save-weights "$W/g7.st"
  ident "export gpt2 np=2 pp 2 (the tied wte on both end stages) = np=1" "$W/g1.st" "$W/g7.st"
  gt 1 $GPT --steps 0 --load-weights "$W/g.bin" --save-weights "$W/g1.bin" --weights-format llmc
  same "export gpt2 llm.c np=1 = the file" "$W/g.bin" "$W/g1.bin"
  ident "export gpt2 llm.c: the file's bytes" "$W/g.bin" "$W/g1.bin"
  gt 1 $GPT --steps 0 --load-weights "$W/g1.st" --save-weights "$W/g5.bin" --weights-format llmc
  gt 1 $GPT --steps 0 --load-weights "$W/g5.bin" --save-weights "$W/g6.st"
  ident "export gpt2: safetensors -> llm.c -> safetensors" "$W/g1.st" "$W/g6.st"
  gt 1 $LLAMA --steps 0 --load-weights "$W/l.st" --save-weights "$W/l1.st"
  same "export llama np=1 = the file" "$W/l.st" "$W/l1.st"
  gt 2 $LLAMA --tp 2 --steps 0 --load-weights "$W/l.st" --save-weights "$W/l2.st"
  ident "export llama np=2 tp 2 (GQA heads split) = np=1" "$W/l1.st" "$W/l2.st"
  gt 1 $LLAMA --steps 0 --load-weights "$W/l1.st" --save-weights "$W/l3.st"
  ident "export llama: export -> import -> export" "$W/l1.st" "$W/l3.st"
  # a trained model (2 AdamW steps from starweave's own init), tp 2: out, in, out
  gt 2 $GPT --tp 2 --sp --steps 2 --save-weights "$W/t1.st" --save "$W/ck"
  gt 1 $GPT --steps 0 --load-weights "$W/t1.st" --save-weights "$W/t2.st"
  ident "export trained gpt2 (tp 2) -> import -> export" "$W/t1.st" "$W/t2.st"
  # and its starweave checkpoint converted (--resume, --steps 0) gives the same file
  gt 2 $GPT --tp 2 --steps 0 --resume "$W/ck" --save-weights "$W/t3.st"
  ident "export of a starweave checkpoint (--resume --steps 0) = the run's --save-weights" "$W/t1.st" "$W/t3.st"
fi
if want "dtypes"; then
  for dt in bf16 f16; do
    gt 1 $GPT --steps 0 --load-weights "$W/$dt.st" --save-weights "$W/$dt.f32.st"
    queue "dtypes: $dt file loads as its values widened exactly" widened "$W/$dt.f32.st" "$W/$dt.st"
  done
  gt 1 $GPT --steps 0 --load-weights "$W/g16.bin" --save-weights "$W/g16.f32.st"
  queue "dtypes: llm.c bf16 (version 5) file loads as its values widened exactly" widened "$W/g16.f32.st" "$W/g16.bin"
fi

# ---- llm.c bf16 written (version 5): rounded to nearest even, read back
if want "bf16 export"; then
  gt 1 $GPT --steps 0 --load-weights "$W/g.bin" --save-weights "$W/b1.bin" --weights-format llmc-bf16
  queue "bf16 export: version 5, the fp32 file's header, every value its fp32 one rounded to nearest even" \
    rounded "$W/b1.bin" "$W/g.bin"
  ident "bf16 export = weights_files.py's bf16 file (PyTorch's rounding)" "$W/g16.bin" "$W/b1.bin"
  gt 1 $GPT --steps 0 --load-weights "$W/sp.bin" --save-weights "$W/sp32.bin" --weights-format llmc
  ident "bf16 export: the fp32 export of hard values (NaN payloads, subnormals, -0, inf) keeps their bits" \
    "$W/sp.bin" "$W/sp32.bin"
  gt 1 $GPT --steps 0 --load-weights "$W/sp.bin" --save-weights "$W/sp16.bin" --weights-format llmc-bf16
  queue "bf16 export of hard values (ties, subnormals, overflow, NaNs, -0): rounded to nearest even" \
    rounded "$W/sp16.bin" "$W/sp32.bin"
  gt 1 $GPT --steps 0 --load-weights "$W/b1.bin" --save-weights "$W/b2.bin" --weights-format llmc-bf16
  ident "bf16 export: bf16 -> import -> bf16 export" "$W/b1.bin" "$W/b2.bin"
  gt 2 $GPT --tp 2 --steps 0 --load-weights "$W/g.bin" --save-weights "$W/b3.bin" --weights-format llmc-bf16
  ident "bf16 export np=2 tp 2 = np=1" "$W/b1.bin" "$W/b3.bin"
  gt 1 $GPT --steps 1 --load-weights "$W/b1.bin"
  rc=$?
  sw=$(first_loss) ref=$(cat "$W/g16.bin.loss") f32=$(cat "$W/g.bin.loss")
  check "bf16 export loaded back: told llmc-bf16 (exit $rc)" grep -q "weights loaded from $W/b1.bin (llmc-bf16)" "$TMPD/out"
  check "bf16 export loaded back: loss $sw, PyTorch on the bf16 values $ref (relative $(rel "$sw" "$ref") <= 1e-5)" \
    close "$sw" "$ref"
  check "bf16 export loaded back: loss $sw, the fp32 model's $f32 (relative $(rel "$sw" "$f32") <= 2^-8)" \
    within "$sw" "$f32" 0.00390625
fi

# ---- refused
bad() { # bad NP "message" FILE ARGS...: exit 2 on every rank, the message once
  np=$1 msg=$2 file=$3; shift 3
  want "bad: $msg" || return 0
  if [ "$np" = 2 ]; then
    refused 2 "$msg" "bad: $msg" "$GPT_TRAIN" --steps 1 --log "$TMPD/log.csv" --load-weights "$file" --tp 2 "$@"
    return
  fi
  direct "$msg" --load-weights "$file" "$@"
}
direct() { # direct "message" ARGS...: gpt_train on one rank without mpirun (a singleton: mpirun's
  # abort after an exit 2 costs 2 s) exits 2, the message once
  msg=$1; shift
  STARPU_NCPU=1 STARPU_WORKERS_NOBIND=1 STARPU_MPI_NOBIND=1 timeout -k 10 60 "$GPT_TRAIN" --steps 1 \
    --log "$TMPD/log.csv" "$@" > "$TMPD/out" 2>&1 < /dev/null
  rc=$?
  n=$(grep -c -F -- "$msg" "$TMPD/out")
  [ "$rc" = 2 ] && [ "$n" = 1 ] || cat "$TMPD/out"
  check "np=1 bad: $msg: exit $rc (expected 2), printed $n time(s) (expected 1)" [ "$rc" = 2 -a "$n" = 1 ]
}
# random bytes after a first 9 that no format starts with (random ones were
# taken for a safetensors header length once in 256 runs: byte 8 a '{')
{ printf 'JUNKJUNKJ'; head -c 2991 /dev/urandom; } > "$W/junk"
head -c 200000 "$W/g.st" > "$W/cut.st"
head -c 300000 "$W/g.bin" > "$W/cut.bin"
printf '\100\0\0\0\0\0\0\0{"wte.weight": {"dtype": "F32", "shape": [300, 64]' > "$W/badjson.st"
head -c 64 /dev/zero >> "$W/badjson.st"
bad 2 "wrong magic" "$W/junk" $GPT
bad 1 "truncated: tensor" "$W/cut.st" $GPT
bad 1 "truncated llm.c checkpoint" "$W/cut.bin" $GPT
bad 1 "malformed safetensors header" "$W/badjson.st" $GPT
bad 1 "missing tensor 'ln_f.bias'" "$W/missing.st" $GPT
bad 1 "shape mismatch: tensor 'h.1.mlp.c_fc.bias' is [1, 256]" "$W/shape.st" $GPT
bad 1 "shape mismatch: tensor 'h.1.mlp.c_fc.weight' is [256, 64] in the file, the model's h1.fc_w needs [64, 256]" "$W/conv.st" $GPT
bad 1 "dtype F64" "$W/dtype.st" $GPT
bad 1 "unexpected tensor 'h.0.attn.rotary.weight'" "$W/more.st" $GPT
bad 1 "version 7" "$W/v7.bin" $GPT
bad 2 "layers is 3 here (--layers) but 2 in the file" "$W/g.st" $GPT --layers 3
bad 1 "hidden is 32 here (--hidden) but 64 in the file" "$W/g.bin" $GPT --hidden 32
bad 1 "max-pos is 64 here" "$W/g.st" $GPT --max-pos 64
bad 1 "a llama model (model.embed_tokens.weight), but the model is gpt2" "$W/l.st" $GPT
bad 1 "holds neither GPT-2's wte.weight" "$W/extra.st" $GPT
bad 1 "an llm.c GPT-2 checkpoint, but the model is llama" "$W/g.bin" $LLAMA
want "bad: flags" && direct "weights-format needs --save-weights" --weights-format llmc
want "bad: flags" && direct "llm.c's checkpoint format holds GPT-2 only" $LLAMA --steps 0 --save-weights "$W/x.bin" --weights-format llmc
want "bad: flags" && direct "llm.c's checkpoint format holds GPT-2 only, not llama" $LLAMA --steps 0 --save-weights "$W/x.bin" --weights-format llmc-bf16
want "bad: flags" && direct "--weights-format expects safetensors, llmc or llmc-bf16, got 'bf16'" --save-weights "$W/x.bin" --weights-format bf16
want "bad: flags" && direct "--load-weights and --resume both set the parameters" --load-weights "$W/g.st" --resume "$W"
# the queued comparisons
if [ -s "$TMPD/cmp" ]; then
  $PY batch < "$TMPD/cmp" > "$TMPD/cmp.out" 2>&1
  i=0
  while IFS= read -r what; do
    i=$((i + 1))
    line=$(sed -n "${i}p" "$TMPD/cmp.out")
    check "$what: ${line#* }" [ "${line%% *}" = 0 ]
  done < "$TMPD/cmp.what"
fi
finish
