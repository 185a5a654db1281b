#!/bin/sh
# Generation with a KV cache (tests/test_generate.c): GPT-2 and LLaMA (with
# grouped-query attention) on 1 rank and tp 2: greedy decoding with the
# cache = feeding the whole sequence again at every position, token for
# token over 64 tokens (logits 1e-4), the same tokens on every rank,
# sampling reproducible and the same on every rank; tp 2's greedy tokens =
# 1 rank's. Misuse: a token outside the vocabulary, more positions than
# max_len: exit 2 on every rank, the message once.
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/tests/test_generate"
for model in "gpt2" "llama --kv-heads 2"; do
  for np in 1 2; do
    SW_TEST_TIMEOUT=180 sh "$LAUNCH" $np "$PROG" --model $model > "$TMPD/out$np" 2>&1
    rc=$?
    cat "$TMPD/out$np"
    check "np=$np $model: $(grep -E '^[0-9]+ passed' "$TMPD/out$np") (exit $rc)" [ "$rc" = 0 ]
  done
  t1=$(grep '^tokens:' "$TMPD/out1"); t2=$(grep '^tokens:' "$TMPD/out2")
  check "$model: tp 2's greedy tokens = 1 rank's ($(echo "$t1" | wc -w) words)" [ -n "$t1" -a "$t1" = "$t2" ]
done
refused 2 "sw_gpt_generator_feed: token 1 is 1048576, outside the vocabulary [0, 96)" "test_generate --misuse token" \
  "$PROG" --misuse token
refused 2 "sw_gpt_generator_feed: 73 positions after 0: at least 1, at most max_len (72) in all" \
  "test_generate --misuse length" "$PROG" --misuse length
finish
