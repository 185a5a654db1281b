#!/bin/sh
# Bad input: a clear message naming the rule and the values, exit status 2, on every rank.
. "${top_srcdir:-.}/tests/common.sh"
expect() { # expect "pattern" args...
  pattern=$1; shift
  timeout 60 "$GPT_TRAIN" --steps 1 "$@" > "$TMPD/out" 2>&1
  rc=$?
  if [ "$rc" = 2 ] && grep -q -- "$pattern" "$TMPD/out"; then
    echo "PASS $* -> exit 2: $(grep -- "$pattern" "$TMPD/out" | head -n 1)"; pass=$((pass + 1))
  else
    echo "FAIL $* -> exit $rc, expected 2 and '$pattern':"; cat "$TMPD/out"; fail=$((fail + 1))
  fi
}
: > "$TMPD/empty"
expect "hidden (100) must be divisible by heads (3)" --hidden 100 --heads 3
expect "layers must be positive (layers = 0)" --layers 0
expect "batch must be positive (batch = -4)" --batch -4
expect "seq (128) must not exceed the positions of the model (max-pos = 64)" --seq 128 --max-pos 64
expect "cannot open data file '/nonexistent/corpus.txt'" --data /nonexistent/corpus.txt
expect "is empty" --data "$TMPD/empty"
# an unknown flag is named as unknown, with a value after it or as the last
# argument; a known flag without its value (at the end, or before the next flag)
expect "gpt_train: unknown option --bogus; see --help" --bogus 1
expect "gpt_train: unknown option --bogus; see --help" --bogus
expect "gpt_train: unknown option -x; see --help" -x
expect "gpt_train: --seed needs a value; see --help" --seed
expect "gpt_train: --layers needs a value; see --help" --layers --sp
expect_bad 2 "gpt_train: unknown option --foo; see --help" --foo
expect_bad 2 "gpt_train: --tp needs a value; see --help" --tp
expect "expects an integer, got 'abc'" --steps abc
expect "dropout must be in \[0, 1) (dropout = 1.5)" --dropout 1.5
expect "model must be gpt2 or llama (model = bert)" --model bert
expect "clip-grad must not be negative (clip-grad = -1)" --clip-grad -1
# a planner's machine file: a flag of two values (coll_offload) named with its value and line
printf 'gemm_gflops 10\ncoll_offload 2\n' > "$TMPD/machine"
expect "machine file '$TMPD/machine' line 2: coll_offload must be 0 or 1 (2)" --plan --plan-ranks 2 --plan-machine "$TMPD/machine"
printf 'gemm_gflops 10\ngemm_shared 1.5\n' > "$TMPD/machine"
expect "machine file '$TMPD/machine' line 2: gemm_shared must be at most 1 (a fraction of the rate) (1.5)" --plan --plan-ranks 2 --plan-machine "$TMPD/machine"
# the planner's simulated runs at two depths (--sim-layers A,B), extrapolated to the model's: the depths' rules
expect "sim-layers must be two depths A,B with 1 <= A < B (sim-layers = 2,1)" --plan --plan-ranks 2 --simulate 1 --sim-layers 2,1
expect "sim-layers must be two depths A,B with 1 <= A < B (sim-layers = 1,2,3)" --plan --plan-ranks 2 --simulate 1 --sim-layers 1,2,3
expect "sim-layers' depths (1, 2) must be below the model's layers (2)" --plan --plan-ranks 2 --simulate 1 --sim-layers 1,2 --layers 2
expect "sim-layers sets the depths of --simulate N's runs: give --simulate (simulate = 0)" --plan --plan-ranks 2 --sim-layers 1,2
# --sim-ranks' stand-in: whole nodes of the world, with --simulate
expect "sim-ranks must go with --simulate and divide the world into whole nodes: a positive divisor of plan-ranks (8) and a multiple of plan-ranks-per-node (2) (sim-ranks = 3, simulate = 1)" --plan --plan-ranks 8 --plan-ranks-per-node 2 --plan-nodes 4 --simulate 1 --sim-ranks 3
expect "sim-ranks must go with --simulate and divide the world into whole nodes: a positive divisor of plan-ranks (8) and a multiple of plan-ranks-per-node (4) (sim-ranks = 2, simulate = 1)" --plan --plan-ranks 8 --plan-ranks-per-node 4 --plan-nodes 2 --simulate 1 --sim-ranks 2
expect "sim-ranks must go with --simulate" --plan --plan-ranks 4 --sim-ranks 2
expect "sim-estimate applies to the simulated runs: give --simulate N or --simulate-verified" --plan --plan-ranks 2 --sim-estimate
# the same rule checked by every rank of an MPI launch: all exit 2, no hang
MPIRUN=${MPIRUN:-mpirun}
timeout 120 "$MPIRUN" --oversubscribe -np 2 "$GPT_TRAIN" --hidden 100 --heads 3 > "$TMPD/out" 2>&1
rc=$?
n=$(grep -c "must be divisible" "$TMPD/out")
ok=false
[ "$rc" = 2 ] && [ "$n" = 1 ] && ok=true
check "mpirun -np 2 with a bad flag: exit 2 without hanging (rc $rc), message printed once ($n times)" $ok
expect "--comm expects auto, mpi or nccl, got 'gloo'" --comm gloo
expect "--device expects any, cuda or cpu, got 'gpu'" --device gpu
expect "--device cuda needs CUDA workers (ncuda = 0)" --device cuda --ncuda 0
# tensors that cannot fit (about 100 GiB per rank): refused with the model's bytes before any allocation
expect_bad 1 "the model needs at least" --seq 100000 --batch 64
expect_bad 2 "the model needs at least" --seq 100000 --batch 64 --tp 2 --sp
# a memory budget per rank: refused before any allocation with the worst rank's bytes (pp 2: stage 0
# holds 2 micro-batches and needs 13.83 MiB, stage 1 9.70 MiB), on every rank; the plan alone allocates nothing
expect_bad 1 "of the memory budget per rank (--memory-budget-mb)" --memory-budget-mb 1
expect_bad 2 "the model needs at least 13.8 MiB on rank 0 (parameters, gradients and AdamW moments 5.0 MiB, saved activations 8.5 MiB, logits 0.0 MiB, other tensors 0.3 MiB), more than the 12.0 MiB of the memory budget" \
  --pp 2 --grad-accum 4 --seq 256 --batch 8 --memory-budget-mb 12
expect_bad 1 "memory-budget-mb must not be negative (memory-budget-mb = -1)" --memory-budget-mb -1
if want "memory plan"; then
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 2 "$GPT_TRAIN" --pp 2 --grad-accum 4 --seq 256 --batch 8 --memory-plan \
    --memory-budget-mb 14 > "$TMPD/out" 2>&1
  rc=$?
  ok=false
  [ "$rc" = 0 ] && grep -q "rank 0: the model needs 13.83 MiB" "$TMPD/out" &&
    grep -q "rank 1: the model needs 9.70 MiB" "$TMPD/out" && ok=true
  $ok || cat "$TMPD/out"
  check "--memory-plan, pp 2 under a budget of 14 MiB: exit $rc, stage 0 needs 13.83 MiB, stage 1 9.70 MiB" $ok
fi
# rank 0 cannot write the log: every rank stops (the others do not wait for it)
expect_bad 1 "cannot write log '/nonexistent/dir/log.csv': No such file or directory" --log /nonexistent/dir/log.csv
expect_bad 2 "cannot write log '/nonexistent/dir/log.csv': No such file or directory" --tp 2 --log /nonexistent/dir/log.csv
# GPU requests where there is no GPU (or fewer GPUs than ranks): refused on every rank
ngpu=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
if [ "$ngpu" -lt 2 ]; then
  expect_bad 2 "--comm nccl: " --tp 2 --comm nccl
else
  echo "(--comm nccl on 2 ranks not refused here: $ngpu GPUs)"
fi
if [ "$ngpu" = 0 ]; then
  expect_bad 2 "--device cuda needs a CUDA worker on every rank" --tp 2 --device cuda
  expect "--ncuda needs a CUDA worker on every rank" --ncuda 1
fi
finish
