#!/bin/sh
# Misuse of the public API (tests/test_misuse.c): each case stops the
# program with exit 2 on every rank and its rule and value printed once,
# on one rank and on two (dp 2).
. "${top_srcdir:-.}/tests/common.sh"
T="$top_builddir/tests/test_misuse"
misuse() { # misuse NP CASE "message"
  refused "$1" "$3" "$2" "$T" "$2"
}
for np in 1 2; do
  misuse $np target "sw_gpt_load_micro_batch: target 1256 at position 2 of sequence 1 is outside [0, vocab 256)"
  misuse $np ignore "sw_gpt_load_micro_batch: target -100 at position 1 of sequence 1 is outside [0, vocab 256)"
  misuse $np ignore-other "sw_gpt_load_micro_batch: target 1256 at position 2 of sequence 1 is outside [0, vocab 256) and is not the ignore index -100"
  misuse $np ignore-valid "ignore-index (5) must be outside [0, vocab 256): it would drop a real token"
  misuse $np token "sw_gpt_load_micro_batch: token -1 at position 4 of sequence 1 is outside [0, vocab 256)"
  misuse $np micro "sw_gpt_load_micro_batch: micro-batch 1 is outside [0, grad-accum 1)"
  misuse $np head-unallocated "sw_seq_head_forward: parameters: must be allocated first"
  misuse $np head-null "sw_seq_head_forward: in: must be a tensor [l, h] (NULL)"
  misuse $np head-targets "sw_seq_head_forward: targets: must be [B, outputs] = [$((4 / np)),1] ([$((4 / np)),3])"
  misuse $np duplicate 'sw_params_add: name: "h0.ln_w" is already registered (parameter 0)'
done
finish
