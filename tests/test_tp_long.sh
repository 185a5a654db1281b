#!/bin/sh
# The longer half of tests/test_tp.sh (make check-long; make check skips
# it): more layouts of the parallel GPT and LLaMA against the single-rank
# model (tests/test_tp: losses of 3 steps, every gradient of the last) --
# 4-rank context parallelism, ZeRO-2/3 on 4 ranks, LLaMA's layouts, GQA
# replication, ignore index and clipping with Ring and USP -- and the
# traffic model on more layouts. Moved from test_tp.sh to keep make check
# under its budget; nothing dropped.
. "${top_srcdir:-.}/tests/common.sh"
[ -n "${SW_CHECK_LONG:-}" ] || { echo "SKIP: a long test: make check-long runs it (.ci/run does)"; exit 77; }
run 4 --kv-heads 2               # each K/V head replicated on 2 ranks
run 4 --kv-heads 4 --sp --tp-recompute-allgather
run 4 --dp 4
run 4 --dp 4 --zero 2 --grad-accum 2 --batch 8
run 4 --dp 4 --zero 3
run 4 --ulysses 2 --ring 2 --zero 3               # ZeRO-3 over the sp_dp group (USP)
run 2 --model llama --dp 2 --zero 3 --grad-accum 2
run 4 --ulysses 4
run 4 --ring 4 --no-zigzag
run 4 --ulysses 2 --ring 2 --kv-heads 2 --no-zigzag
run 4 --ulysses 2 --sp --kv-heads 4           # tp 2 x ulysses 2
run 4 --ring 2 --dp 2 --zero 1
run 4 --model llama --sp --kv-heads 2             # each K/V head replicated on 2 ranks
run 4 --model llama --sp --kv-heads 4             # K/V heads split
run 2 --model llama --ulysses 2
run 4 --model llama --ulysses 2 --ring 2          # USP
run 2 --model llama --sp --recompute full --dropout 0.1
run 2 --ring 2 --ignore-index -100
run 4 --ulysses 2 --ring 2 --clip-grad 0.01
run 4 --model llama --sp --kv-heads 2 --clip-grad 0.01
run 2 --ulysses 2 --dtype bf16
# the traffic model, exactly, on more layouts (test_tp.sh has the others and the counters' checks)
if want "traffic and counters"; then
for args in "2 --tp 2 --kv-heads 1 --sp" "2 --ring 2 --no-zigzag" "2 --model llama --tp 2 --sp" \
    "2 --model llama --tp 2 --kv-heads 1 --sp" "2 --tp 2 --sp --recompute full --recompute-every 2 --layers 3" \
    "4 --model llama --tp 4 --sp --kv-heads 2" "4 --tp 2 --sp --dp 2 --zero 1 --grad-accum 2" "4 --ulysses 2 --ring 2" \
    "4 --tp 2 --sp --dp 2 --zero 3 --recompute full --zero-prefetch 2" \
    "4 --tp 2 --sp --dp 2 --grad-accum 2 --ignore-index -100" "2 --ring 2 --ignore-index -100"; do
  traffic_case $args
done
fi
# bf16 against fp32 on one rank: the losses of 6 steps within bf16's precision (2^-7 relative), not identical
if want "bf16 vs fp32 losses"; then
for dt in fp32 bf16; do
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" --steps 6 --dtype $dt --quiet --log "$TMPD/$dt.csv" > "$TMPD/out" 2>&1 ||
    cat "$TMPD/out"
done
out=$(awk -F, 'NR == FNR { if (FNR > 1) a[$1] = $2; next }
  FNR > 1 { n++; r = ($2 - a[$1]) / a[$1]; if (r < 0) r = -r; if (r > w) w = r; if ($2 != a[$1]) d++ }
  END { printf "%d steps, worst relative difference %.3g, %d differ", n, w, d; exit (n == 6 && w <= 1 / 128 && d > 0) ? 0 : 1 }' \
  "$TMPD/fp32.csv" "$TMPD/bf16.csv")
check "gpt_train --dtype bf16 vs fp32 losses: $out" [ $? = 0 ]
fi
# the main job (quick start) and one rank as a user starts them, without the
# launcher's STARPU_* settings and with StarPU not silenced: sw_init's
# default placement of the workers and the StarPU-MPI thread draws no StarPU
# warning. A first run calibrates a new STARPU_HOME's buses (StarPU says so, once).
if want "StarPU warnings"; then
user_env="env -u STARPU_SILENT -u STARPU_NCPU -u STARPU_WORKERS_NOBIND -u STARPU_MPI_NOBIND"
$user_env "$GPT_TRAIN" --steps 1 --log "$TMPD/log.csv" > /dev/null 2>&1 < /dev/null
for job in "gpt_train" "${MPIRUN:-mpirun} --oversubscribe -np 2 gpt_train --tp 2 --sp"; do
  cmd=$(echo "$job" | sed "s|gpt_train|$GPT_TRAIN|")
  timeout -k 10 180 $user_env $cmd --steps 2 --log "$TMPD/log.csv" > "$TMPD/out" 2>&1 < /dev/null
  rc=$?
  n=$(grep -c '\[starpu\]' "$TMPD/out")
  [ "$n" = 0 ] || grep '\[starpu\]' "$TMPD/out"
  ok=false
  [ "$rc" = 0 ] && [ "$n" = 0 ] && ok=true
  check "$job: exit $rc, $n StarPU warning line(s)" $ok
done
fi
finish
