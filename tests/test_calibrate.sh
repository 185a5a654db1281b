#!/bin/sh
# The simulation's calibration leaves out the run's first step
# (bench/calibrate.sh; the library's SW_CALIBRATE_SKIP_FIRST=1,
# docs/simulation.md, "The first step left out, every later sample kept"): a
# real run of gpt_train, 3 steps, calibrated (every sample kept, as
# calibrate.sh does) with the first step (--keep-first-step) and without.
# StarPU leaves out a size's first sample: a GEMM size met k times a step
# has 3k - 1 samples with every step and 2k - 1 without the first, in
# every size of sw_gemm's model; the run says how many tasks recorded
# nothing. A value other than 0 or 1 is refused with exit 2 on every rank.
# --cpu-time (the library's SW_CALIBRATE_CPU_TIME): 4 ranks on this
# machine's 2 cores wait for a core in mid-task; each rank says how long its
# samples spent off the CPU, that time (over a tenth of the recorded time
# here) is taken out of its models, and the merged models hold the rest.
# Needs only the real build.
. "${top_srcdir:-.}/tests/common.sh"
shape="--layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 --vocab 128 --steps 3 --quiet"
layout=""
calibrate() { # calibrate NAME [--keep-first-step] (gpt_train $shape $layout)
  name=$1; shift
  sh "$top_srcdir/bench/calibrate.sh" --build "$top_builddir" \
    --calibration "$TMPD/$name" --host test-cal "$@" examples/gpt_train $shape $layout > "$TMPD/$name.out" 2>&1
}
samples() { # samples NAME: "footprint samples" of each size of sw_gemm's model
  awk '/^# hash/ { on = 1; next } on && NF == 8 { print $1, $8 }' "$TMPD/$1/codelets/"*/sw_gemm.test-cal | sort
}
calibrate all --keep-first-step
rc1=$?
calibrate later
rc2=$?
[ "$rc1$rc2" = 00 ] || cat "$TMPD/all.out" "$TMPD/later.out"
said=$(grep -h 'first step' "$TMPD/all/calibrate.log" "$TMPD/later/calibrate.log")
samples all > "$TMPD/all.n" 2>/dev/null
samples later > "$TMPD/later.n" 2>/dev/null
res=$(join "$TMPD/all.n" "$TMPD/later.n" | awk '{ k = $2 - $3; if (k < 1 || $2 != 3 * k - 1 || $3 != 2 * k - 1) bad++
    s = s " " $2 "/" $3 } END { printf "%d sizes, %d off:%s", NR, bad, s; exit !(NR > 0 && !bad) }')
ok=$?
check "sw_gemm's samples of each size with the first step / without (3k-1 / 2k-1): $res (exit $rc1, $rc2)" \
  [ "$ok" = 0 -a "$(wc -l < "$TMPD/all.n")" = "$(wc -l < "$TMPD/later.n")" ]
n=$(echo "$said" | grep -c "the first step's [0-9]* tasks of [0-9]* codelets recorded no samples")
check "the run without it says so, the run with it not: '$said'" [ "$n" = 1 ]
# --cpu-time, on more ranks than cores (4 on 2 here; on a machine of 4 cores or more: SKIP): each rank's
# samples less their time off the CPU, a good part of their time here (over 10 %); the merged models hold
# what was recorded less what was taken out
total_us() { awk '/^# hash/ { on = 1; next } /^#/ { on = 0 } on && NF == 8 { s += $6 } END { printf "%.1f", s }' "$TMPD/$1/codelets/"*/*.test-cal; }
if [ "$(getconf _NPROCESSORS_ONLN)" -lt 4 ]; then
  shape="--layers 2 --hidden 512 --heads 4 --seq 64 --batch 4 --vocab 128 --steps 3 --quiet" layout="--tp 4"
  calibrate oncpu --np 4 --cpu-time
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/oncpu.out"
  off=$(grep -c 'samples spent [0-9.]* ms off the CPU (SW_CALIBRATE_CPU_TIME)' "$TMPD/oncpu/calibrate.log")
  rec=$(sed -n 's/^perfmodel_merge: .*: \([0-9.]*\) us recorded, .*/\1/p' "$TMPD/oncpu.out" | awk '{ s += $1 } END { print s + 0 }')
  took=$(sed -n 's/^perfmodel_merge: .* recorded, \([0-9.]*\) us of it off the CPU.*/\1/p' "$TMPD/oncpu.out" | awk '{ s += $1 } END { print s + 0 }')
  left=$(total_us oncpu 2>/dev/null)
  check "--cpu-time on 4 ranks: $off ranks timed their samples off the CPU; $rec us recorded, $took us of it off the CPU taken out (over 10 %), the models hold ${left:-nothing} us (exit $rc)" \
    awk -v n="$off" -v r="$rec" -v t="$took" -v l="${left:-0}" 'BEGIN { d = l - (r - t); if (d < 0) d = -d
      exit !(n == 4 && r > 0 && t > 0.1 * r && d <= 0.001 * r) }'
else
  echo "SKIP --cpu-time: $(getconf _NPROCESSORS_ONLN) cores: 4 ranks would not wait for one"
fi
# The attention tiles' models know a tile by its work (codelet_util.h: SW_PERFMODEL_BY_WORK): a Ring 2
# step's causal tiles are the diagonal ones (half visible) and an earlier block (all visible), of one shape.
# Each tile's FLOPs count its visible pairs -- the trace's attn_fwd FLOPs of a step sum to the layer's count
# the run prints -- and each kind has a time of its own: sw_attn_fwd's model holds two sizes of the same
# bytes with different FLOPs (one footprint for both made the simulation price every tile alike)
shape="--layers 1 --hidden 64 --heads 4 --seq 32 --batch 2 --vocab 128 --steps 3" layout="--ring 2 --trace $TMPD/ring.json"
calibrate ring --np 2
rc=$?
[ "$rc" = 0 ] || cat "$TMPD/ring.out"
said=$(sed -n 's/^attention: \([0-9.]*\) \.\. [0-9.]* GFLOP per rank and forward.*/\1/p' "$TMPD/ring/calibrate.log" | head -n 1)
traced=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
f = [e["args"]["flops"] for e in ev if e.get("ph") == "X" and e.get("name") == "attn_fwd" and e.get("pid") == 0
     and e.get("args", {}).get("step") == 2]
print("%.7g" % (sum(f) / 1e9))' "$TMPD/ring.json" 2>/dev/null)
kinds=$(awk '/^# hash/ { on = 1; next } /^#/ { on = 0 } on && NF == 8 { n[$2]++ } END { m = 0; for (b in n) if (n[b] > m) m = n[b]; print m + 0 }' \
  "$TMPD/ring/codelets/"*/sw_attn_fwd.test-cal 2>/dev/null)
check "Ring 2: rank 0's attn_fwd tiles of step 2 ${traced:-none} GFLOP, the layer's count ${said:-none}; sizes of one shape in sw_attn_fwd's model: ${kinds:-none} (exit $rc)" \
  eval '[ "$rc" = 0 ] && [ "${kinds:-0}" -ge 2 ] &&
        awk -v t="${traced:-x}" -v s="${said:-x}" "BEGIN { d = t - s; exit !(s + 0 > 0 && t == t + 0 && d * d < 1e-6 * s * s) }"'
refused 2 "SW_CALIBRATE_SKIP_FIRST must be 0 or 1 (SW_CALIBRATE_SKIP_FIRST = yes)" "SW_CALIBRATE_SKIP_FIRST=yes" \
  env SW_CALIBRATE_SKIP_FIRST=yes "$GPT_TRAIN" --tp 2 $shape
finish
