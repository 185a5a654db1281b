#!/bin/sh
# Misuse of the public API (tests/test_misuse.c): each case stops the
# program with exit 2 on every rank and its rule and value printed once,
# on one rank and on two (dp 2; the model cases: pp 2 or dp 2 ZeRO-3).
# make check runs every case on one rank and a sample of them on two (a
# 2-rank launch costs 2-3 s here: all of them took 90 s of the check's 15
# minutes); make check-long (.ci/run) runs every case on both.
. "${top_srcdir:-.}/tests/common.sh"
# SW_MISUSE_PROG: another build of it (test_memcheck.sh: ASan); SW_MISUSE_NP: the rank counts
T="${SW_MISUSE_PROG:-$top_builddir/tests/test_misuse}"
# the cases of the list below that make check runs on two ranks too: a
# message that depends on the rank count, the registry, the context's groups
np2_sample="target duplicate head-targets norm-shape replicated-rows ctx-grad-group"
long=${SW_CHECK_LONG:+1}
left=0
misuse() { # misuse NP CASE "message"
  want "np=$1 $2" || return 0
  if [ "$1" = 2 ] && [ -n "${in_list:-}" ] && [ -z "$long" ] && [ -z "${SW_TEST_ONLY:-}" ]; then
    case " $np2_sample " in *" $2 "*) ;; *) left=$((left + 1)); return 0 ;; esac
  fi
  refused "$1" "$3" "$2" "$T" "$2"
}
in_list=1
for np in ${SW_MISUSE_NP:-1 2}; do
  misuse $np target "sw_gpt_load_micro_batch: target 1256 at position 2 of sequence 1 is outside [0, vocab 256)"
  misuse $np ignore "sw_gpt_load_micro_batch: target -100 at position 1 of sequence 1 is outside [0, vocab 256)"
  misuse $np ignore-other "sw_gpt_load_micro_batch: target 1256 at position 2 of sequence 1 is outside [0, vocab 256) and is not the ignore index -100"
  misuse $np ignore-valid "ignore-index (5) must be outside [0, vocab 256): it would drop a real token"
  misuse $np token "sw_gpt_load_micro_batch: token -1 at position 4 of sequence 1 is outside [0, vocab 256)"
  misuse $np micro "sw_gpt_load_micro_batch: micro-batch 1 is outside [0, grad-accum 1)"
  misuse $np head-unallocated "sw_seq_head_forward: parameters: must be allocated first"
  misuse $np head-null "sw_seq_head_forward: in: must be a tensor [l, h] (NULL)"
  misuse $np head-targets "sw_seq_head_forward: targets: must be a tensor [$((4 / np)), 1] ([$((4 / np)), 3] given)"
  misuse $np duplicate 'sw_params_add: name: "h0.ln_w" is already registered (parameter 0)'
  # the layers (seq 8, batch 4, h 16, dp = np: T = l = 32/np rows)
  L=$((32 / np))
  misuse $np norm-mean "sw_norm_forward: mean: must be a tensor [$L, 1] (NULL)"
  misuse $np norm-bwd-rstd "sw_norm_backward: rstd: must be a tensor [$L, 1] (NULL)"
  misuse $np norm-shape "sw_norm_forward: y: must be a tensor [$L, 16] ([$L, 8] given)"
  misuse $np linear-shape "sw_linear_forward: x_local: must be a tensor [$L, 16] ([$L, 8] given)"
  misuse $np linear-null "sw_linear_forward: y: must be a tensor [$L, 32] (NULL)"
  misuse $np linear-unallocated "sw_linear_forward: parameters: must be allocated first (sw_params_allocate"
  misuse $np linear-index "sw_linear_forward: parameter index 1000 is out of range [0, 6)"
  misuse $np embed-tokens "sw_embedding_forward: tokens: must be a tensor [$L, 1] (NULL)"
  misuse $np load-targets "sw_ctx_load_tokens: tgt and targets: both or neither"
  misuse $np lm-targets "sw_lm_head_forward: targets: must be a tensor [$L, 1] (NULL)"
  misuse $np lm-shape "sw_lm_head_forward: in: must be a tensor [$L, 16] ([$L, 8] given)"
  misuse $np attn-null "sw_attention_forward: k->qkv: must be a tensor [$L, 48] (NULL)"
  misuse $np blocks-op "sw_blocks_create: ops->backward: must not be NULL"
  misuse $np pipeline-ops "sw_pipeline_create: mops: must not be NULL"
  misuse $np params-index "sw_params_grad: i: parameter index out of range [0, 6) (6)"
  misuse $np key-length "sw_ctx_load_key_lengths: len: every length must be in [1, seq] (len[2] = 9, seq 8)"
  misuse $np replicated-rows "sw_linear_forward: x_local: a replicated linear's rows must be l ($L: this rank's residual rows), T ($L: all of its tokens) or B ($((4 / np)): one per sequence) (3 given)"
  misuse $np ctx-grad-group "sw_ctx_init: sw_params_config.grad_group (world) must be the context's gradient group, dp (dp without ulysses and ring, sp_dp with them: sw_ctx.grad_group)"
  misuse $np ctx-seed "sw_ctx_init: seed: sw_params_config's (5) must equal sw_ctx_config's (1), or be 0 (the context's)"
  misuse $np ctx-grad-accum "sw_ctx_init: grad_accum: sw_params_config's (2) must equal sw_ctx_config's (1), or be 0 (the context's)"
done
in_list=
[ "$left" = 0 ] || echo "# $left of the list's cases on two ranks left to make check-long (SW_CHECK_LONG=1 runs them)"
# tp 2 with sequence parallelism: f gathers [T, h] = [32, 16] from the l = 16 rows
case " ${SW_MISUSE_NP:-1 2} " in *" 2 "*)
misuse 2 gathered-null "sw_linear_forward: x_gathered: must be a tensor [32, 16] (NULL)"
misuse 2 gathered-local "sw_linear_forward: x_gathered: must be a tensor [32, 16] ([16, 16] given)"
# A model of the public layers whose parameters were registered without
# sw_params_set_unit: under pp 2 (the second stage held none of its blocks'
# parameters and refused alone: a hang) and under dp 2 ZeRO-3 (the unit
# never gathered: SIGABRT) both refuse the rule, each rank exiting 2, within
# 10 s. A refusal only one rank sees (the last pipeline stage's head given
# no targets while the first stage waits for its gradient; one rank
# refusing while the other waits in a collective, the last rank or rank 0)
# ends every rank with exit 2 of its own, the message once, no StarPU
# warning after it.
units="register block l's parameters after sw_params_set_unit(p, l)"
each_rank() { # each_rank CASE "message" LIMIT [user]: on 2 ranks, each rank exits 2 itself (a wrapper
  # prints its status and exits 0, so that mpirun does not end the others for it; mpirun's own status is
  # 1 where the ranks ended without MPI_Finalize), the message once, in LIMIT s; with "user", then as a
  # user runs it: mpirun's exit 2, the message once (for a stage and a rank refusing alone: each launch
  # of a model costs seconds)
  want "np=2 $1" || return 0
  start=$(date +%s)
  # (StarPU not silenced, as a user runs it: make check sets STARPU_SILENT)
  SW_TEST_TIMEOUT=60 env -u STARPU_SILENT sh "$LAUNCH" 2 sh -c '"$0" "$@"; echo "rank exit status $?"' "$T" "$1" > "$TMPD/out" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  n2=$(grep -c -x "rank exit status 2" "$TMPD/out")
  n=$(grep -c -F -- "$2" "$TMPD/out")
  ok=false
  [ "$rc" != 124 ] && [ "$n2" = 2 ] && [ "$n" = 1 ] && [ "$took" -lt "$3" ] && ! grep -q 'unregistered' "$TMPD/out" && ok=true
  $ok || cat "$TMPD/out"
  check "np=2 $1: $n2 of 2 ranks exit 2, '$2' printed $n time(s) (expected 1), in $took s (under $3)" $ok
  [ "${4:-}" = user ] && misuse 2 "$1" "$2"
}
each_rank units-pp "sw_blocks_create: the parameters' units name 0 block(s), the model has 2: $units" 10 user
each_rank units-zero3 "sw_blocks_create: the parameters' units name 0 block(s), the model has 2: $units" 10
# ZeRO-3 (dp 2): block 1 reads block 0's up weight, whose unit is not gathered
each_rank zero3-other-unit "sw_linear_forward: parameter 3 'h0.up_w' is not gathered: under ZeRO-3 a block reads only its own unit's parameters" 30
# under load the model's start and first step take most of it: no hang, not a time to beat
each_rank stage-head "sw_lm_head_forward: targets: must be a tensor [16, 1] (NULL)" 30
each_rank one-rank "sw_params_set_unit: unit -5 is neither a block index" 30 user
each_rank rank0-only "sw_params_set_unit: unit -5 is neither a block index" 30 ;;
esac
finish
