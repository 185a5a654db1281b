#!/bin/sh
# GPT-2 BPE data preparation (tools/prepare-data, installed as
# starweave-prepare-data; the npm package gpt-tokenizer) and gpt_train
# --tokenizer. Skipped with the reason (77)
# where node is absent or the package can be neither loaded nor installed
# (best effort: starweave-prepare-data --install into $SW_NPM_DIR, default
# ~/.cache/starweave/npm). From two small texts the test writes (UTF-8:
# accents, CJK, an emoji, a literal "<|endoftext|>"): the shards' and the
# table's headers, and the tokens decoded by the table give back every
# byte after its end-of-text token (tests/bpe_check.mjs, from llm.c's
# layouts); with --split-blank-lines one document per section; known GPT-2
# ids ("Hello world" = 15496 995, "<|endoftext|>" as text); gpt_train
# --data on the shard with --vocab 50257: the loss falls, and --tokenizer
# prints the sample's prompt as text of the corpus; --generate with ids
# from --encode prints text, and --generate TEXT --prompt-text (1 rank and
# tp 2) the same tokens as those ids. Refused, exit 2 on every rank of 2, the rule
# once: a tokenizer table of another magic, version 3, a truncated header,
# a table cut in a token and after one, a token of length 0, bytes after
# the last token, fewer tokens than --vocab, a missing file. The tool: a missing input, an unwritable output,
# text that is not UTF-8 (exit 2); node or the package missing (exit 3,
# saying how to install).
# SW_TEST_ONLY (tests/mutants.sh) selects: "prepare", "train", "train: prompt
# text" (the text prompts, with train's weights), "prompt text: refused",
# "bad input".
. "${top_srcdir:-.}/tests/common.sh"
PREP="$top_srcdir/tools/prepare-data"
if ! command -v "${SW_NODE:-node}" > /dev/null 2>&1; then
  echo "SKIP: node not found (Debian: apt-get install nodejs npm)"
  exit 77
fi
export SW_NPM_DIR="${SW_NPM_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/starweave/npm}"
if ! sh "$PREP" --encode x > "$TMPD/load.out" 2>&1; then
  echo "test_bpe: installing the tokenizer package into $SW_NPM_DIR (best effort)"
  # one retry at most: an unreachable registry is a skip, not a wait
  npm_config_fetch_retries=${npm_config_fetch_retries:-1} timeout 40 sh "$PREP" --install > "$TMPD/install.out" 2>&1
  rc=$?
  if [ "$rc" != 0 ]; then
    [ "$rc" = 124 ] && echo "npm did not finish in 40 s" >> "$TMPD/install.out"
    why=$(grep -m 1 -i "^npm err" "$TMPD/install.out")
    echo "SKIP: the npm package cannot be installed ($(tail -n 1 "$TMPD/install.out")${why:+: $why})"
    exit 77
  fi
  if ! sh "$PREP" --encode x > "$TMPD/load.out" 2>&1; then
    echo "SKIP: the npm package cannot be loaded after its installation ($(tail -n 1 "$TMPD/load.out"))"
    exit 77
  fi
fi
D="$TMPD/bpe"
mkdir "$D"
# two documents of a few KB: sentences of a small vocabulary, no digits
# (a sample printed as token ids would never read as the corpus' text)
text() { # text SEED SENTENCES
  awk -v s="$1" -v n="$2" 'BEGIN {
    split("the cat sat on mat while a graph of tasks runs every worker café naïve 日本語 😀 weave star", w, " ")
    for (i = 0; i < n; i++) {
      line = ""
      for (k = 0; k < 8; k++) { s = (s * 1103515245 + 12345) % 2147483648; line = line (k ? " " : "") w[1 + int(s / 65536) % 20] }
      printf "%s.%s", line, (i % 5 == 4 ? "\n\n" : "\n")
    }
  }'
}
{ printf 'Hello world! '; text 1 60; } > "$D/one.txt"
{ text 2 50; printf 'A literal <|endoftext|> is text, not the token.\n'; } > "$D/two.txt"

# the files every section uses
t0=$(date +%s)
sh "$PREP" -o "$D/out" --name tiny "$D/one.txt" "$D/two.txt" > "$TMPD/prep.out" 2>&1
rc=$?
t1=$(date +%s)
[ "$rc" = 0 ] || cat "$TMPD/prep.out"
if want "prepare"; then
  check "prepare 2 texts ($(wc -c < "$D/one.txt") + $(wc -c < "$D/two.txt") bytes): exit $rc in $((t1 - t0)) s; $(tail -n 1 "$TMPD/prep.out")" \
    [ "$rc" = 0 ]
  out=$(node "$top_srcdir/tests/bpe_check.mjs" files "$D/out" tiny "$D/one.txt" "$D/two.txt" 2>&1)
  check "shards and table: $out" [ $? = 0 ]
  first=$(echo "$out" | sed -n 's/.*first tokens \([0-9 ]*\);.*/\1/p')
  check "the first document starts with <|endoftext|> Hello world: ${first% *} (50256 15496 995)" \
    [ "${first% *}" = "50256 15496 995" ]
  sh "$PREP" -o "$D/blank" --split-blank-lines --val-tokens 100 "$D/one.txt" > "$TMPD/prep2.out" 2>&1
  out=$(node "$top_srcdir/tests/bpe_check.mjs" files "$D/blank" data --blank "$D/one.txt" 2>&1)
  rc=$?
  grep -q "data_val.bin: 100 tokens" "$TMPD/prep2.out" || rc=1
  check "--split-blank-lines --val-tokens 100: $out" [ "$rc" = 0 ]
  ids=$(sh "$PREP" --encode "Hello world")
  check "--encode 'Hello world': $ids (GPT-2: 15496 995)" [ "$ids" = "15496 995" ]
  ids=$(sh "$PREP" --encode "<|endoftext|>")
  check "--encode '<|endoftext|>' is text: $ids (27 91 437 1659 5239 91 29)" [ "$ids" = "27 91 437 1659 5239 91 29" ]
fi

tool_bad() { # tool_bad STATUS "message" ARGS...: starweave-prepare-data exits STATUS with the message
  st=$1; msg=$2; shift 2
  want "prepare: refused" || return 0
  "$@" > "$TMPD/tool.out" 2>&1
  rc=$?
  ok=false
  [ "$rc" = "$st" ] && grep -q -F -- "$msg" "$TMPD/tool.out" && ok=true
  $ok || cat "$TMPD/tool.out"
  check "prepare refused: exit $rc (expected $st), '$msg'" $ok
}
tool_bad 2 "cannot read input '$D/none.txt': ENOENT" sh "$PREP" -o "$D/x" "$D/none.txt"
tool_bad 2 "cannot write into the output directory '$D/one.txt/out'" sh "$PREP" -o "$D/one.txt/out" "$D/one.txt"
printf 'caf\351\n' > "$D/latin1.txt"
tool_bad 2 "input '$D/latin1.txt' is not UTF-8 text" sh "$PREP" -o "$D/x" "$D/latin1.txt"
tool_bad 3 "node not found ('$D/no-node'): install Node.js (Debian: apt-get install nodejs npm)" \
  env SW_NODE="$D/no-node" sh "$PREP" "$D/one.txt"
mkdir "$D/empty"
tool_bad 3 "cannot be loaded from $D/empty: Cannot find module 'gpt-tokenizer/encoding/r50k_base'; install it: starweave-prepare-data --install" \
  env SW_NPM_DIR="$D/empty" sh "$PREP" "$D/one.txt"

M="--vocab 50257 --layers 2 --hidden 64 --heads 2 --seq 32 --batch 4"
if want "train"; then
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" $M --steps 6 --lr 3e-3 --data "$D/out/tiny_train.bin" \
    --tokenizer "$D/out/gpt2_tokenizer.bin" --sample-every 6 --sample-len 8 --save "$TMPD/ck" --save-weights "$TMPD/w.safetensors" \
    --log "$TMPD/train.csv" > "$TMPD/train.out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/train.out"
  losses=$(tail -n +2 "$TMPD/train.csv" 2>/dev/null | cut -d, -f2 | tr '\n' ' ')
  check "gpt_train --data tiny_train.bin --vocab 50257, 6 steps: exit $rc, losses $losses(the last below the first)" \
    sh -c "[ $rc = 0 ] && echo '$losses' | awk '{ exit !(NF == 6 && \$6 < \$1) }'"
  out=$(node "$top_srcdir/tests/bpe_check.mjs" sample "$TMPD/train.out" "$D/one.txt" "$D/two.txt" 2>&1)
  check "--tokenizer --sample-every 6: $out" [ $? = 0 ]
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" $M --resume "$TMPD/ck" --tokenizer "$D/out/gpt2_tokenizer.bin" \
    --generate "$(sh "$PREP" --encode 'Hello world')" --sample-len 4 > "$TMPD/gen.out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/gen.out"
  check "--generate \"\$(starweave-prepare-data --encode 'Hello world')\" --tokenizer: exit $rc, '$(grep ' | ' "$TMPD/gen.out" | head -n 1)'" \
    grep -q '^Hello world | ' "$TMPD/gen.out"
fi

# --generate TEXT --prompt-text with the train section's weights: rank 0
# runs the encoder (here the source tree's: gpt_train runs from the build
# tree), every rank gets the ids. The text (quotes, $(...), backquotes: one
# argument, no shell: expanded, its ids would differ from those of
# --encode "$P") continues as its ids from --encode do, token for
# token, on 1 rank and on 2 (tp 2); the sample starts with
# the text itself (decoded by --tokenizer). Refused on 2 ranks, exit 2 on
# both, the rule once: no encoder, node missing (the encoder exits 3), no
# ids printed, an id not below --vocab.
P="Hello \"world\", it's \$(id) \`id\` | ;"
gen() { # gen NP OUT ARGS...: gpt_train --generate on NP ranks from the checkpoint, the output in OUT
  np=$1; out=$2; shift 2
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" "$np" "$GPT_TRAIN" $M --load-weights "$TMPD/w.safetensors" --tokenizer "$D/out/gpt2_tokenizer.bin" \
    --sample-len 6 "$@" > "$out" 2>&1
}
sample() { # sample FILE: the sample's lines (from its first " | " to the timing line)
  awk '/ \| / { on = 1 } /^generate: prefill/ { on = 0 } on' "$1"
}
if want "train: prompt text"; then
  ids=$(sh "$PREP" --encode "$P")
  for np in 1 2; do
    tp=; [ "$np" = 2 ] && tp="--tp 2"
    gen "$np" "$TMPD/pids.$np" $tp --generate "$ids"
    rc1=$?
    gen "$np" "$TMPD/ptext.$np" $tp --generate "$P" --prompt-text
    rc2=$?
    [ "$rc1$rc2" = 00 ] || cat "$TMPD/pids.$np" "$TMPD/ptext.$np"
    got=$(sed -n 's/^gpt_train: --prompt-text: [0-9]* token(s) from the encoder .*: //p' "$TMPD/ptext.$np")
    line=$(sample "$TMPD/ptext.$np" | head -n 1)
    ok=false
    case "$line" in "$P | "*) ok=true ;; esac
    [ "$rc1$rc2" = 00 ] && [ "$got" = "$ids" ] && [ -n "$(sample "$TMPD/pids.$np")" ] &&
      [ "$(sample "$TMPD/pids.$np")" = "$(sample "$TMPD/ptext.$np")" ] || ok=false
    check "prompt text: np=$np${tp:+ $tp} --generate TEXT --prompt-text (exit $rc2) = --generate \"\$(--encode TEXT)\" (exit $rc1): ids $got (--encode: $ids), '$line'" $ok
  done
fi
prompt_bad() { # prompt_bad "message" VAR=VALUE... [-- ARGS...]: --generate "$P" --prompt-text refused on 2 ranks
  msg=$1; shift
  want "prompt text: refused: $msg" || return 0
  vars=
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars="$vars $1"; shift; done
  [ $# -gt 0 ] && shift
  refused 2 "$msg" "--prompt-text$vars $*" env $vars "$GPT_TRAIN" $M --tp 2 --load-weights "$TMPD/w.safetensors" --generate "Hello world" \
    --prompt-text --sample-len 2 "$@"
}
prompt_bad "--prompt-text: cannot run the encoder '$D/no-encoder' (\$SW_PREPARE_DATA): No such file or directory" \
  SW_PREPARE_DATA="$D/no-encoder"
prompt_bad "(the source tree's, gpt_train running from the build tree) exited 3 (it must exit 0): starweave-prepare-data: node not found ('$D/no-node')" \
  SW_NODE="$D/no-node"
prompt_bad "--prompt-text: the encoder 'true' (\$SW_PREPARE_DATA) printed no token ids for the prompt 'Hello world'" \
  SW_PREPARE_DATA=true
prompt_bad "--prompt-text: token 0 of the encoded prompt is 15496, not below vocab (1000): every id must be in [0, 1000)" \
  -- --vocab 1000

# bad tokenizer tables, written from the good one
T="$D/out/gpt2_tokenizer.bin"
if [ -f "$T" ]; then
  node -e '
    const fs = require("fs"), [t, d] = process.argv.slice(1), b = fs.readFileSync(t);
    const w = (name, buf) => fs.writeFileSync(`${d}/${name}`, buf);
    const patch = (k, v) => { const c = Buffer.from(b); c.writeInt32LE(v, 4 * k); return c; };
    w("magic.bin", patch(0, 20240329));
    w("version.bin", patch(1, 3));
    w("short.bin", b.subarray(0, 100));
    // cut inside the bytes of the first token of 2 bytes or more after byte
    // 200000 (its index and length in cut.txt), and at the boundary after it
    let i = 0, at = 1024;
    while (at < 200000 || b[at] < 2) { at += 1 + b[at]; i++; }
    w("cut.bin", b.subarray(0, at + b[at]));
    w("boundary.bin", b.subarray(0, at + 1 + b[at]));
    w("cut.txt", `${i} ${b[at]}`);
    w("tail.bin", Buffer.concat([b, Buffer.from([7])]));
    const z = Buffer.from(b); z[1024 + 1 + z[1024]] = 0;      // token 1 of length 0
    w("zero.bin", z);
    const small = [patch(2, 300).subarray(0, 1024)];           // 300 tokens: the first 300 of GPT-2
    at = 1024;
    for (let k = 0; k < 300; k++) { small.push(b.subarray(at, at + 1 + b[at])); at += 1 + b[at]; }
    w("small.bin", Buffer.concat(small));
  ' "$T" "$D"
  B="$M --data $D/out/tiny_train.bin"
  # every rank exits 2 on each table: make check runs the first on two ranks
  # and the others on one; make check-long (SW_CHECK_LONG=1) every one on two
  tn=1
  [ -z "${SW_CHECK_LONG:-}" ] || tn=2
  expect_bad 2 "tokenizer file '$D/magic.bin' is not llm.c's tokenizer table: it must begin with the int32 magic 20240328" \
    $B --tokenizer "$D/magic.bin"
  expect_bad $tn "tokenizer file '$D/version.bin' has version 3: versions 1 and 2 are read" $B --tokenizer "$D/version.bin"
  expect_bad $tn "tokenizer file '$D/short.bin' is truncated: 100 bytes, its header is 256 int32 (1024 bytes)" \
    $B --tokenizer "$D/short.bin"
  read -r cut_i cut_len < "$D/cut.txt"
  expect_bad $tn "tokenizer file '$D/cut.bin' is truncated: token $cut_i of 50257 has $cut_len bytes, the file ends $((cut_len - 1)) bytes after its length" \
    $B --tokenizer "$D/cut.bin"
  expect_bad $tn "tokenizer file '$D/boundary.bin' is truncated: its header counts 50257 tokens, the file ends after $((cut_i + 1))" \
    $B --tokenizer "$D/boundary.bin"
  expect_bad $tn "tokenizer file '$D/zero.bin': token 1 has length 0 (every token has 1 to 255 bytes)" \
    $B --tokenizer "$D/zero.bin"
  expect_bad $tn "tokenizer file '$D/tail.bin' has 1 bytes after its 50257 tokens" $B --tokenizer "$D/tail.bin"
  expect_bad $tn "tokenizer file '$D/small.bin' holds 300 tokens but vocab is 50257: every token needs its bytes" \
    $B --tokenizer "$D/small.bin"
  expect_bad $tn "cannot open tokenizer file '$D/none.bin': No such file or directory" $B --tokenizer "$D/none.bin"
fi
finish
