#!/bin/sh
# sw_trace (tests/test_trace.c) on 1 rank and under mpirun on 2 ranks: the
# program checks its own Chrome JSON, Paje and overlap files; here they are
# also read by independent tools where this machine has them: Python's json
# module, pajeng's pj_dump (strict Paje reader) and ViTE's SVG export
# (Debian packages pajeng, vite; each check is skipped when absent).
. "${top_srcdir:-.}/tests/common.sh"
LAUNCH="$top_srcdir/tests/mpi_launch.sh"
PROG="$top_builddir/tests/test_trace"
PY=/usr/bin/python3
for np in 1 2; do
  out="$TMPD/trace$np"
  SW_TEST_TIMEOUT=${SW_TEST_TIMEOUT:-240} sh "$LAUNCH" "$np" "$PROG" "$out" > "$TMPD/out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$TMPD/out"
  grep '^# overlap' "$TMPD/out"
  check "np=$np: $(grep -E '^[0-9]+ passed' "$TMPD/out" | head -n 1) (exit $rc)" [ "$rc" = 0 ]
  if [ -x "$PY" ]; then
    for f in "$out.json" "$out.overlap.json"; do
      check "np=$np: python json.load $(basename "$f")" \
        "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$f"
    done
  else
    echo "# no $PY: python JSON check skipped"
  fi
  if command -v pj_dump > /dev/null 2>&1; then
    check "np=$np: pj_dump reads the Paje file" sh -c "pj_dump '$out.paje' > '$TMPD/pj' 2>&1"
  else
    echo "# no pj_dump (Debian package pajeng): Paje cross-check skipped"
  fi
  if command -v vite > /dev/null 2>&1; then
    # ViTE is a Qt program: offscreen platform, export to SVG, no error reported
    mkdir -p "$TMPD/xdg" && chmod 700 "$TMPD/xdg"
    QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR="$TMPD/xdg" timeout 120 vite -f "$out.paje" -e "$out.svg" \
      > "$TMPD/vite" 2>&1 < /dev/null
    ok=0
    grep -q '0 errors and 0 warnings' "$TMPD/vite" && [ -s "$out.svg" ] && ok=1
    [ "$ok" = 1 ] || cat "$TMPD/vite"
    check "np=$np: ViTE parses the Paje file without errors or warnings and exports it" [ "$ok" = 1 ]
  else
    echo "# no vite: ViTE check skipped"
  fi
done
# gpt_train --tp 2 --sp --trace on 2 ranks: the report shows communication
# running beside computation (overlap > 0 on every rank, whole run)
SW_TEST_TIMEOUT=180 sh "$LAUNCH" 2 "$GPT_TRAIN" --tp 2 --sp --steps 3 --quiet --log "$TMPD/l.csv" \
  --trace "$TMPD/gpt.json" > "$TMPD/out" 2>&1
rc=$?
rows=$(grep -E '^overlap: +[0-9]+ +all ' "$TMPD/out")
echo "$rows"
ok=false
[ "$rc" = 0 ] && [ "$(echo "$rows" | wc -l)" = 2 ] && ! echo "$rows" | awk '{ if ($7 <= 0) bad = 1 } END { exit !bad }' && ok=true
$ok || cat "$TMPD/out"
check "gpt_train --tp 2 --sp --trace, 2 ranks: overlap > 0 on both ranks ($(echo "$rows" | awk '{printf "%s ", $9}')) (exit $rc)" $ok
[ -s "$TMPD/gpt.json.paje" ] && [ -s "$TMPD/gpt.json.overlap.json" ]
check "gpt_train --trace wrote the Paje file and the overlap report" [ $? = 0 ]
# data parallelism: the first gradient bucket's all-reduce starts before
# the last backward GEMM ends (rank 0, step 2; the trace read by Python)
SW_TEST_TIMEOUT=180 sh "$LAUNCH" 2 "$GPT_TRAIN" --dp 2 --layers 4 --bucket-mb 0.2 --steps 3 --quiet \
  --log "$TMPD/l.csv" --trace "$TMPD/dp.json" > "$TMPD/out" 2>&1
rc=$?
if [ -x "$PY" ]; then
  res=$("$PY" - "$TMPD/dp.json" <<'PYEOF'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
xs = [e for e in ev if e.get("ph") == "X" and e["pid"] == 0 and e.get("args", {}).get("step") == 2]
buckets = [e for e in xs if e["tid"] >= 100000 and e["args"].get("group") == "dp" and e["args"].get("phase") == "backward"]
gemms = [e for e in xs if e["tid"] < 100000 and e["args"].get("phase") == "backward" and e["name"].startswith("gemm")]
if not buckets or not gemms:
    print("missing %d %d" % (len(buckets), len(gemms)))
else:
    first = min(e["ts"] for e in buckets)
    last = max(e["ts"] + e["dur"] for e in gemms)
    print("%s %.1f" % ("yes" if first < last else "no", (last - first) / 1e3))
PYEOF
)
  set -- $res
  ok=false
  [ "$rc" = 0 ] && [ "$1" = yes ] && ok=true
  $ok || { echo "$res"; cat "$TMPD/out"; }
  check "gpt_train --dp 2: first bucket all-reduce posted ${2:-?} ms before the last backward GEMM ends (exit $rc)" $ok
else
  echo "# no $PY: bucket overlap check skipped"
fi
finish
