#!/bin/sh
# Tensor (+ sequence) parallel, context parallel (Ulysses, Ring, USP), data
# parallel and gradient-accumulated GPT-2 and LLaMA under mpirun against the single-rank
# model (tests/test_tp.c: losses of 3 steps, every gradient of the last,
# Ring attention's FLOPs per rank), with and without sp, dropout and zigzag,
# K/V heads split (kv >= tp) and replicated (kv < tp); then the bytes sent
# against the library's traffic model (exact, every group of every rank),
# the collectives and bf16 GEMMs each layout ran (counters), no StarPU
# warning in the default runs, and bad input
# through gpt_train: exit 2 on every rank, the message once, no hang.
. "${top_srcdir:-.}/tests/common.sh"
run 2
run 2 --dropout 0.1
run 2 --sp
run 2 --sp --dropout 0.1 --tp-recompute-allgather
run 2 --kv-heads 4 --sp          # GQA, K/V heads split
run 2 --kv-heads 1 --dropout 0.1 # K/V head replicated on both ranks
run 4 --sp --dropout 0.1
# data parallelism and gradient accumulation (tp = ranks / dp), same global batch
run 1 --grad-accum 2 --dropout 0.1 # two micro-batches against the batch at once
run 2 --dp 2 --dropout 0.1
run 2 --dp 2 --grad-accum 2
run 4 --dp 2 --sp --dropout 0.1     # dp 2 x tp 2
run 2 --dp 2 --zero 1 --dropout 0.1 # ZeRO-1: moments and update sharded, gradients reduce-scattered
run 4 --dp 2 --zero 1 --sp --grad-accum 2
# ZeRO-2 (gradients reduce-scattered per block, only shards kept) and ZeRO-3
# (parameters sharded at rest, each block gathered into the pool before its
# forward and its backward): the shards each rank updates against one rank's
run 2 --dp 2 --zero 2 --dropout 0.1
run 2 --dp 2 --zero 3 --dropout 0.1
run 4 --dp 2 --zero 3 --sp --dropout 0.1          # ZeRO-3 x tp 2 + sp
run 2 --dp 2 --zero 3 --grad-accum 2 --clip-grad 0.01 # shards summed over micro-batches, norm from shards
run 2 --dp 2 --zero 3 --zero-prefetch 2 --recompute full # gathered again for the refill: bit-identical to selective
run 2 --dp 2 --zero 3 --dtype bf16 --grad-accum 2 # GEMM weights gathered as their bf16 copy
# context parallelism (causal attention): Ulysses, Ring with and without
# zigzag, USP, each with tp, and dp x ring
run 2 --ulysses 2 --dropout 0.1
run 2 --ring 2 --dropout 0.1
run 2 --ring 2 --no-zigzag
run 4 --ring 4 --dropout 0.1 --kv-heads 2     # GQA
run 4 --ulysses 2 --ring 2 --dropout 0.1
run 4 --ring 2 --sp --dropout 0.1             # tp 2 x ring 2
run 4 --ring 2 --dp 2 --dropout 0.1           # dp 2 x ring 2
# LLaMA (RMSNorm, rotary positions, SwiGLU, no biases, untied head): the same layouts against one rank
run 1 --model llama --dropout 0.1
run 2 --model llama --sp --dropout 0.1
run 2 --model llama --sp --kv-heads 1             # GQA, the K/V head replicated
run 2 --model llama --ring 2 --dropout 0.1        # zigzag
run 2 --model llama --dp 2 --zero 1 --grad-accum 2
# an ignore index (about a third of the targets -100, unevenly): the mean over the counted rows of the global batch,
# the count summed over micro-batches and the gradient group before the first backward
run 1 --grad-accum 2 --ignore-index -100
run 2 --sp --ignore-index -100
run 2 --dp 2 --grad-accum 2 --ignore-index -100
run 4 --dp 2 --sp --grad-accum 2 --ignore-index -100  # tp 2 + sp x dp 2 x grad-accum 2
run 2 --pp 2 --grad-accum 2 --ignore-index -100       # the head's forward and backward interleave with micro-batches
# global gradient-norm clipping: the norm counted once per element (TP-replicated K/V heads, ZeRO shards, context parallelism)
run 2 --sp --kv-heads 1 --clip-grad 0.01
run 4 --dp 2 --zero 1 --sp --kv-heads 1 --clip-grad 0.01
# bf16 GEMM operands (--dtype bf16): tp 2 + sp and Ulysses against one rank, each step from the same parameters
run 2 --sp --dtype bf16 --dropout 0.1 --kv-heads 2
# the bytes the collectives' sends carried on each group of each rank,
# counted where they leave (the send requests, the MPI calls' arguments),
# equal the library's traffic model (sw_gpt_traffic: the layers', the block
# policy's and the registry's) to the byte, on every group of every rank:
# TP, Ulysses, ring, the gradient group and the world (groups without
# traffic too); and the collectives of each layout ran (gpt_train --counters)
if want "traffic and counters"; then
for args in "2 --tp 2" "2 --tp 2 --sp" "2 --tp 2 --sp --tp-recompute-allgather" \
    "2 --ulysses 2" "2 --ring 2" "2 --dp 2" "2 --dp 2 --zero 1 --clip-grad 1" \
    "2 --dp 2 --zero 2 --grad-accum 2" "2 --dp 2 --zero 3 --grad-accum 2 --clip-grad 1" \
    "2 --dp 2 --zero 3 --grad-accum 2 --clip-grad 1 --dtype bf16"; do
  traffic_case $args
done
o=$TMPD/traffic.
check "tp 2: all-reduces only, no all-gather or reduce-scatter" \
  [ "$(counter_min ${o}2tp2 allreduce)" -gt 0 -a "$(counter_max ${o}2tp2 allgather)" = 0 -a "$(counter_max ${o}2tp2 reduce_scatter)" = 0 ]
check "tp 2 + sp: all-gathers and reduce-scatters on every rank" \
  [ "$(counter_min ${o}2tp2sp allgather)" -gt 0 -a "$(counter_min ${o}2tp2sp reduce_scatter)" -gt 0 ]
check "tp 2 + sp --tp-recompute-allgather: more all-gathers than tp 2 + sp ($(counter_min ${o}2tp2sptprecomputeallgather allgather) > $(counter_max ${o}2tp2sp allgather))" \
  [ "$(counter_min ${o}2tp2sptprecomputeallgather allgather)" -gt "$(counter_max ${o}2tp2sp allgather)" ]
check "ulysses 2: all-to-alls, ring 2: ring shifts" \
  [ "$(counter_min ${o}2ulysses2 alltoall)" -gt 0 -a "$(counter_min ${o}2ring2 ring_shift)" -gt 0 -a "$(counter_max ${o}2ring2 alltoall)" = 0 ]
check "dp 2 + ZeRO-1: gradients reduce-scattered, parameters all-gathered; dp 2 without: neither" \
  [ "$(counter_min ${o}2dp2zero1clipgrad1 reduce_scatter)" -gt 0 -a "$(counter_min ${o}2dp2zero1clipgrad1 allgather)" -gt 0 \
    -a "$(counter_max ${o}2dp2 reduce_scatter)" = 0 -a "$(counter_max ${o}2dp2 allgather)" = 0 ]
# ZeRO-2: the same reduce-scatters and gathers as ZeRO-1 per micro-batch (2
# here); ZeRO-3: every block gathered before each forward and backward (the
# embedding and head too), about 3 x the parameters sent against 2 x
ag2=$(counter_min ${o}2dp2zero2gradaccum2 allgather); ag3=$(counter_min ${o}2dp2zero3gradaccum2clipgrad1 allgather)
rs2=$(counter_min ${o}2dp2zero2gradaccum2 reduce_scatter); rs3=$(counter_min ${o}2dp2zero3gradaccum2clipgrad1 reduce_scatter)
check "ZeRO-2 vs ZeRO-3 (2 micro-batches, 2 steps): all-gathers $ag2 < $ag3, reduce-scatters $rs2 = $rs3 > 0" \
  [ "$ag2" -gt 0 -a "$ag3" -gt "$ag2" -a "$rs2" = "$rs3" -a "$rs2" -gt 0 ]
# ZeRO-3 with bf16: the GEMM weights (not the embedding, which its lookup reads in fp32) gathered as
# bf16, so fewer bytes on the dp group than fp32's gathers, as many collectives
dpb() { sed -n 's/^traffic: rank 0 dp group: sent \([0-9]*\) bytes in \([0-9]*\) collectives.*/\'"$2"'/p' "$1"; }
f=${o}2dp2zero3gradaccum2clipgrad1; b=${f}dtypebf16
check "ZeRO-3 bf16 vs fp32: dp bytes $(dpb $b 1) < $(dpb $f 1), collectives $(dpb $b 2) = $(dpb $f 2)" \
  [ "$(dpb $b 1)" -lt "$(dpb $f 1)" -a "$(dpb $b 2)" = "$(dpb $f 2)" ]
check "main job's small collectives run by MPI (counted by the task that calls it), none by point-to-point requests" \
  [ "$(counter_min ${o}2tp2sp mpi_collective)" -gt 0 -a "$(counter_max ${o}2tp2sp p2p_send)" = 0 ]
# the LM head raises its dx chains everywhere; the linears raise their dx
# GEMMs only where no gradient all-reduce waits on dW (not under dp)
check "tasks raised by sw_set_task_priority: tp 2 + sp $(counter_min ${o}2tp2sp task_priority) (LM head and linears) > dp 2 $(counter_max ${o}2dp2 task_priority) (LM head) > 0" \
  [ "$(counter_min ${o}2tp2sp task_priority)" -gt "$(counter_max ${o}2dp2 task_priority)" -a "$(counter_min ${o}2dp2 task_priority)" -gt 0 ]
fi
# --dtype bf16: every GEMM of the step reads bf16 operands (the linears
# forward and backward, attention, the LM head), none in fp32
if want "bf16 GEMM counters"; then
for dt in fp32 bf16; do
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" --steps 1 --quiet --counters --dtype $dt --log "$TMPD/log.csv" > "$TMPD/gemm.$dt" 2>&1
done
g16=$(counter_values "$TMPD/gemm.bf16" gemm_bf16); g32=$(counter_values "$TMPD/gemm.fp32" gemm_bf16)
n16=$(( $(counter_values "$TMPD/gemm.bf16" gemm_onednn) + $(counter_values "$TMPD/gemm.bf16" gemm_openblas) ))
n32=$(( $(counter_values "$TMPD/gemm.fp32" gemm_onednn) + $(counter_values "$TMPD/gemm.fp32" gemm_openblas) ))
check "--dtype bf16: $g16 of $n16 GEMMs read bf16 operands, as many GEMMs as fp32 ($n32, none bf16: $g32), casts $(counter_values "$TMPD/gemm.bf16" cast_bf16)" \
  [ "$g16" = "$n16" -a "$n16" = "$n32" -a "$g32" = 0 -a "$(counter_values "$TMPD/gemm.bf16" cast_bf16)" -gt 0 ]
fi
expect_bad 2 "heads (6) must be divisible by tp (4)" --tp 4 --heads 6 --hidden 96
expect_bad 2 "heads (4) must be divisible by kv-heads (3)" --tp 2 --kv-heads 3
expect_bad 2 "kv-heads (6) must be divisible by tp (4) when kv-heads >= tp" --tp 4 --heads 12 --hidden 96 --kv-heads 6
expect_bad 2 "seq (63) must be divisible by tp (2) with sequence parallelism" --tp 2 --sp --seq 63
expect_bad 2 "world size (2) must equal tp*ulysses*ring*dp*pp (4*1*1*1*1 = 4)" --tp 4
expect_bad 2 "batch (6) must be divisible by dp*grad-accum (2*2)" --dp 2 --grad-accum 2 --batch 6
expect_bad 2 "ignore-index (7) must be outside [0, vocab 256)" --tp 2 --ignore-index 7
expect_bad 2 "heads (3) must be divisible by tp*ulysses (1*2)" --ulysses 2 --heads 3 --hidden 96
expect_bad 2 "kv-heads (1) must be divisible by tp*ulysses (1*2)" --ulysses 2 --kv-heads 1
expect_bad 2 "seq (62) must be divisible by 2*ring*ulysses (2*2*1) with zigzag" --ring 2 --seq 62
expect_bad 2 "seq (63) must be divisible by ring*ulysses (2*1)" --ring 2 --seq 63 --no-zigzag
expect_bad 2 "world size (2) must equal tp*ulysses*ring*dp*pp (1*2*2*1*1 = 4)" --ulysses 2 --ring 2
expect_bad 2 "--dtype expects fp32 or bf16, got 'fp16'" --tp 2 --dtype fp16
expect_bad 2 "zero must be 0, 1, 2 or 3 (zero = 5)" --dp 2 --zero 5
expect_bad 2 "zero-prefetch must be 0 or more (zero-prefetch = -1)" --dp 2 --zero 3 --zero-prefetch -1
finish
