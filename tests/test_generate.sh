#!/bin/sh
# Generation with a KV cache (tests/test_generate.c): GPT-2 and LLaMA (with
# grouped-query attention) on 1 rank and tp 2: greedy decoding with the
# cache = feeding the whole sequence again at every position, token for
# token over 64 tokens (logits 1e-4), the same tokens on every rank,
# sampling reproducible and the same on every rank, every sampled token
# the inverse CDF recomputed on the host from the logits (temperature 0.5,
# 1, 2; top-k 5, 8, all); tp 2's greedy tokens = 1 rank's. The sampler
# alone (--sampler) on flat logits with padding at 1 rank and tp 2: tokens
# = the recomputation at temperature 0, 0.5, 1, 2 and top-k 1, 5, all,
# every id below the vocabulary, draws that differ by position, tp 2's =
# 1 rank's. gpt_train: samples while training, --generate from a
# checkpoint (tp 2 = 1 rank). Misuse: a token outside the vocabulary, more
# positions than max_len, --generate without a checkpoint, generation with
# pp, --prompt-text without --generate or with the byte vocabulary, a text
# prompt without it: exit 2 on every rank, the message once.
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/tests/test_generate"
for model in "gpt2" "llama --kv-heads 2"; do
  want "$model" || continue
  for np in 1 2; do
    SW_TEST_TIMEOUT=180 sh "$LAUNCH" $np "$PROG" --model $model > "$TMPD/out$np" 2>&1
    rc=$?
    cat "$TMPD/out$np"
    check "np=$np $model: $(grep -E '^[0-9]+ passed' "$TMPD/out$np") (exit $rc)" [ "$rc" = 0 ]
  done
  t1=$(grep '^tokens:' "$TMPD/out1"); t2=$(grep '^tokens:' "$TMPD/out2")
  check "$model: tp 2's greedy tokens = 1 rank's ($(echo "$t1" | wc -w) words)" [ -n "$t1" -a "$t1" = "$t2" ]
done
# sw_lm_sample alone on fixed, flat logits (test_generate --sampler): every token = the inverse CDF recomputed
# on the host, ids below the vocabulary (96 at tp 2: the second rank holds only padding; 200), draws that
# differ by position; tp 2's tokens = 1 rank's
if want "sampler"; then
  for np in 1 2; do
    SW_TEST_TIMEOUT=120 sh "$LAUNCH" $np "$PROG" --sampler > "$TMPD/samp$np" 2>&1
    rc=$?
    [ "$rc" = 0 ] || cat "$TMPD/samp$np"
    check "np=$np --sampler: $(grep -E '^[0-9]+ passed' "$TMPD/samp$np") (exit $rc)" [ "$rc" = 0 ]
  done
  s1=$(grep '^sampled:' "$TMPD/samp1"); s2=$(grep '^sampled:' "$TMPD/samp2")
  check "--sampler: tp 2's tokens = 1 rank's ($(echo "$s1" | wc -w) words)" [ -n "$s1" -a "$s1" = "$s2" ]
fi
want "gpt_train" || { finish; exit; }
# gpt_train: samples while training (--sample-every), and --generate from a checkpoint: tp 2 = 1 rank
SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" --layers 2 --steps 4 --sample-every 2 --sample-len 16 --quiet \
  --log "$TMPD/log.csv" --save "$TMPD/ck" > "$TMPD/out" 2>&1
rc=$?
n=$(grep -c '^sample (step [24]): .* | .' "$TMPD/out")
[ "$rc" = 0 ] && [ "$n" = 2 ] || cat "$TMPD/out"
check "gpt_train --sample-every 2, 4 steps: a sample after steps 2 and 4 ($n) (exit $rc)" [ "$rc" = 0 -a "$n" = 2 ]
for np in 1 2; do
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" $np "$GPT_TRAIN" --layers 2 --tp $np --resume "$TMPD/ck" --generate "The cat" \
    --sample-len 24 --sample-temperature 0 > "$TMPD/gen$np" 2>&1 || cat "$TMPD/gen$np"
done
g1=$(grep '^The cat | ' "$TMPD/gen1"); g2=$(grep '^The cat | ' "$TMPD/gen2")
check "gpt_train --resume --generate, greedy: tp 2's continuation = 1 rank's ('$g1')" [ -n "$g1" -a "$g1" = "$g2" ]
refused 1 "--generate needs trained parameters: --resume DIR or --load-weights FILE" "gpt_train --generate without --resume" \
  "$GPT_TRAIN" --generate "x"
# a prompt of 300 bytes is 300 positions, never cut: beyond the model's 64 learned ones, refused
refused 1 "sw_gpt_generator_create: batch (1) and max_len (324) must be positive, max_len at most the learned positions (max-pos 64)" \
  "gpt_train --generate with a prompt longer than the positions" "$GPT_TRAIN" --layers 2 --resume "$TMPD/ck" \
  --generate "$(printf '%0300d' 0)" --sample-len 24
# --prompt-text's rules on the flags (the encoder itself: tests/test_bpe.sh, which needs node)
refused 1 "--prompt-text needs --generate TEXT" "gpt_train --prompt-text without --generate" "$GPT_TRAIN" --prompt-text
refused 1 "--prompt-text encodes TEXT with GPT-2's BPE: it needs a vocabulary above 256 (vocab = 256;" \
  "gpt_train --prompt-text with the byte vocabulary" "$GPT_TRAIN" --resume "$TMPD/ck" --generate "x" --prompt-text
refused 1 "--generate: with a vocabulary of 1000 the prompt is token ids in [0, 1000) separated by spaces ('The cat'; text needs --prompt-text)" \
  "gpt_train --generate text with a vocabulary above 256" "$GPT_TRAIN" --vocab 1000 --resume "$TMPD/ck" --generate "The cat"
refused 2 "generation needs every layer and whole parameter values on each rank, and whole sequences: not pp (2)" \
  "gpt_train --pp 2 --sample-every 1" "$GPT_TRAIN" --pp 2 --steps 1 --sample-every 1 --log "$TMPD/log.csv"
refused 2 "sw_gpt_generator_feed: token 1 is 1048576, outside the vocabulary [0, 96)" "test_generate --misuse token" \
  "$PROG" --misuse token
refused 2 "sw_gpt_generator_feed: 73 positions after 0: at least 1, at most max_len (72) in all" \
  "test_generate --misuse length" "$PROG" --misuse length
finish
