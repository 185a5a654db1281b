#!/bin/sh
# sw_trace (tests/test_trace.c) on 1 rank and under mpirun on 2 ranks: the
# program checks its own Chrome JSON, Paje, overlap and task graph files;
# here they are also read by independent tools: Python's json module,
# Graphviz's dot, and two Paje readers (Debian packages pajeng and vite,
# which the quick start installs):
#  - pajeng's pj_dump simulates the whole file strictly (exit 0, nothing on
#    stderr), and its dump must hold a Rank container per rank, each with a
#    Worker container and Task states, as many Task states as the trace has
#    tasks and "MPI request" states as requests (the program's counts), a
#    Transfer link per send/receive pair, and only state values that the
#    file defines (pajeng takes an undefined value silently);
#  - ViTE (a Qt program, run headless: QT_QPA_PLATFORM=offscreen) parses the
#    file with "0 errors and 0 warnings" and exports it to a complete SVG
#    with a label per rank and the states drawn.
# A reader that is not installed is reported as a "SKIP <reader>: ..." line,
# or fails the test when SW_REQUIRE_PAJE_READERS=1 (the quick start's check
# sets it: there they were installed). Then gpt_train --trace and --dag on 1
# rank and on 2 (tp 2, sp): its Paje file through pj_dump, its graph
# checked against its trace by Python. ZeRO-3's prefetch and its pool's
# fences from gpt_train's task graph (dp 2, ZeRO-3, prefetch 1 and 0).
. "${top_srcdir:-.}/tests/common.sh"
PROG="$top_builddir/tests/test_trace"
PY=/usr/bin/python3
have_reader() { # have_reader COMMAND PACKAGE: 0 if installed; else a SKIP line, or a FAIL when required
  command -v "$1" > /dev/null 2>&1 && return 0
  if [ "${SW_REQUIRE_PAJE_READERS:-0}" = 1 ]; then
    check "$1 installed (Debian package $2; SW_REQUIRE_PAJE_READERS=1)" false
  else
    echo "SKIP $1: not installed (Debian package $2): its Paje checks not run"
  fi
  return 1
}
have_pj_dump=false have_vite=false
have_reader pj_dump pajeng && have_pj_dump=true
have_reader vite vite && have_vite=true
# pj_dump_check PAJE NP TASKS REQUESTS (TASKS, REQUESTS: -1 for not known):
# prints "ok ..." or "bad: ..." and the dump's summary
pj_dump_check() {
  pj_dump "$1" > "$TMPD/pj" 2> "$TMPD/pj.err"
  pj_rc=$?
  [ -s "$TMPD/pj.err" ] && pj_rc="$pj_rc, stderr: $(head -c 200 "$TMPD/pj.err" | tr '\n' ' ')"
  awk -v np="$2" -v nt="$3" -v nc="$4" -v rc="$pj_rc" '
    NR == FNR { # the Paje file: the names of the entity values it defines
      if ($1 == "%EventDef" && $2 == "PajeDefineEntityValue") vid = $3
      else if (vid != "" && $1 == vid && match($0, /"[^"]*"/)) defined[substr($0, RSTART + 1, RLENGTH - 2)] = 1
      next
    }
    { n = split($0, f, /, /) }
    f[1] == "Container" {
      cur = f[n]
      if (f[3] == "Rank") { r = -1; nranks++; if (f[n] ~ /^rank [0-9]+$/) seen[substr(f[n], 6) + 0]++ }
      else if (f[2] ~ /^rank [0-9]+$/) {
        r = substr(f[2], 6) + 0
        if (f[3] == "Worker") workers[r]++
      } else r = -1
    }
    f[1] == "State" {
      if (f[2] != cur || r < 0) misplaced++
      if (!(f[n] in defined)) { undefined++; if (!bad_value) bad_value = f[n] }
      if (f[3] == "Task") { tasks[r]++; ntasks++ }
      else if (f[3] == "MPI request") { reqs[r]++; nreqs++ }
      else other++
    }
    f[1] == "Link" { nlinks++ }
    END {
      why = ""
      if (rc != "0") why = " exit/stderr " rc
      else for (k = 0; k < np; k++) {
        if (seen[k] != 1) why = why " rank" k ":containers=" seen[k] + 0
        if (workers[k] < 1 || tasks[k] < 1) why = why " rank" k ":workers=" workers[k] + 0 ",tasks=" tasks[k] + 0
        if (np > 1 && reqs[k] < 1) why = why " rank" k ":requests=0"
      }
      if (nranks != np) why = why " rank-containers=" nranks + 0
      if (nt >= 0 && ntasks != nt) why = why " tasks=" ntasks + 0 "(trace " nt ")"
      if (nc >= 0 && (nreqs != nc || 2 * nlinks != nc)) why = why " requests=" nreqs + 0 ",links=" nlinks + 0 "(trace " nc ")"
      if (misplaced || other) why = why " misplaced=" misplaced + 0 ",other=" other + 0
      if (undefined) why = why " undefined-values=" undefined "(\"" bad_value "\")"
      per = ""
      for (k = 0; k < np; k++) per = per (k ? "," : "") tasks[k] + 0 "+" reqs[k] + 0
      printf "%s ranks=%d task-states=%d request-states=%d links=%d per-rank=%s\n", why == "" ? "ok" : "bad:" why,
        nranks, ntasks, nreqs, nlinks, per
    }' "$1" "$TMPD/pj"
}
# vite_check PAJE NP: prints "ok ..." or "bad: ..." (ViTE writes log.txt in
# its working directory: it runs in $TMPD/vite)
vite_check() {
  mkdir -p "$TMPD/vite" && chmod 700 "$TMPD/vite" && rm -f "$TMPD/vite/out.svg"
  (cd "$TMPD/vite" && QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR="$TMPD/vite" timeout 120 vite "$1" -e out.svg) \
    > "$TMPD/vite.out" 2>&1 < /dev/null
  v_rc=$?
  awk -v np="$2" -v rc="$v_rc" '
    NR == FNR { if ($0 ~ /^0 errors and 0 warnings were found during parsing/) clean = 1
                if ($0 ~ /^(ERROR|Warning)/) noisy++
                next }
    /<clipPath id="stateArea">/ && match($0, /M [0-9.]+ /) { left = substr($0, RSTART + 2, RLENGTH - 3) + 0 }
    { rest = $0
      while (match(rest, /<rect x="[0-9.]+"/)) { x = substr(rest, RSTART + 9, RLENGTH - 10) + 0
        if (left > 0 && x >= left) states++
        rest = substr(rest, RSTART + RLENGTH) }
      rest = $0
      while (match(rest, />rank [0-9]+</)) { label[substr(rest, RSTART + 6, RLENGTH - 7) + 0]++; rest = substr(rest, RSTART + RLENGTH) } }
    /<\/svg>/ { closed = 1 }
    END {
      why = ""
      if (rc != 0) why = why " exit " rc
      if (!clean || noisy) why = why " parse-messages"
      if (!closed) why = why " svg-incomplete"
      for (k = 0; k < np; k++) if (!label[k]) why = why " no-label-rank" k
      if (states < np) why = why " states-drawn=" states + 0
      printf "%s state-rectangles=%d\n", why == "" ? "ok" : "bad:" why, states
    }' "$TMPD/vite.out" "$TMPD/vite/out.svg" 2> /dev/null || echo "bad: no SVG"
}
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
  # the program's own counts of the merged trace: "Paje: N states pushed (= T tasks + R requests)"
  set -- $(sed -n 's/.*Paje: [0-9]* states pushed (= \([0-9]*\) tasks + \([0-9]*\) requests).*/\1 \2/p' "$TMPD/out")
  nt=${1:-0} nc=${2:-0}
  if $have_pj_dump; then
    res=$(pj_dump_check "$out.paje" "$np" "$nt" "$nc")
    [ "${res%% *}" = ok ] || head -n 5 "$TMPD/pj.err"
    check "np=$np: pj_dump reads the Paje file strictly: $res" [ "${res%% *}" = ok ]
  fi
  if $have_vite; then
    res=$(vite_check "$out.paje" "$np")
    [ "${res%% *}" = ok ] || cat "$TMPD/vite.out"
    check "np=$np: ViTE (headless) parses the Paje file with 0 errors and 0 warnings and exports it to SVG: $res" \
      [ "${res%% *}" = ok ]
  fi
  if command -v dot > /dev/null 2>&1; then
    for f in "$out.dot" "$out.blocks.dot"; do
      check "np=$np: Graphviz dot -Tsvg reads $(basename "$f")" sh -c "timeout 120 dot -Tsvg '$f' > '$f.svg' 2> '$TMPD/dot' && [ -s '$f.svg' ]"
    done
  else
    echo "# no dot (Debian package graphviz): Graphviz check skipped"
  fi
done
# The task graph of gpt_train's step 1 against the trace of the same run:
# (1) parsed: every line a node "r<rank>_<i>" in submission order or an
# edge between two of them; (2) acyclic, messages included; every solid
# edge from an earlier to a later submission of one rank; (3) per rank, as
# many tasks (boxes) and requests (ellipses) as the trace has task and
# request events of step 1; (4) a forward GEMM of layer 0 -> layer 0's
# attn_fwd (it reads the QKV columns); (5) a backward task of the last
# layer precedes layer 0's attn_bwd along some path (rank 0).
dag_check() { # DOT TRACE_JSON LAYERS
  "$PY" - "$@" <<'PYEOF'
import json, re, sys
from collections import defaultdict, deque
dot, trace, layers = sys.argv[1], sys.argv[2], int(sys.argv[3])
node_re = re.compile(r'^(r(\d+)_(\d+)) \[label="([^"\\]*)(?:\\n[^"]*)?", shape=(\w+),.*\((\w+), layer (-?\d+), step (-?\d+)\)"\];$')
edge_re = re.compile(r'^(r(\d+)_(\d+)) -> (r(\d+)_(\d+))( \[style=dashed[^\]]*\])?;$')
nodes, succ, bad, nsolid, ndashed = {}, defaultdict(list), [], 0, 0
text = open(dot).read()
for line in text.splitlines():
    m = node_re.match(line)
    if m:
        if m.group(1) in nodes or int(m.group(3)) != sum(n["rank"] == int(m.group(2)) for n in nodes.values()):
            bad.append(line)
        nodes[m.group(1)] = dict(rank=int(m.group(2)), op=m.group(4), shape=m.group(5), phase=m.group(6),
                                 layer=int(m.group(7)), step=int(m.group(8)))
        continue
    m = edge_re.match(line)
    if m:
        succ[m.group(1)].append(m.group(4))
        if m.group(7):
            ndashed += 1
        else:
            nsolid += 1
            if m.group(2) != m.group(5) or int(m.group(3)) >= int(m.group(6)):
                bad.append(line)
    elif " -> " in line or re.match(r"r\d", line):
        bad.append(line)
parsed = text.startswith("digraph ") and nodes and not bad and all(b in nodes for a in succ for b in succ[a] + [a])
indeg = defaultdict(int)
for a in succ:
    for b in succ[a]:
        indeg[b] += 1
q, seen = deque(n for n in nodes if indeg[n] == 0), 0
while q:
    n = q.popleft()
    seen += 1
    for b in succ[n]:
        indeg[b] -= 1
        if indeg[b] == 0:
            q.append(b)
trace_n, dag_n = defaultdict(lambda: [0, 0]), defaultdict(lambda: [0, 0])
for e in json.load(open(trace))["traceEvents"]:
    if e.get("ph") == "X" and e.get("cat") != "transfer" and e.get("args", {}).get("step") == 1:
        trace_n[e["pid"]][e["tid"] >= 100000] += 1
for n in nodes.values():
    dag_n[n["rank"]][n["shape"] != "box"] += 1
def reach(a):
    s, q = {a}, deque([a])
    while q:
        for b in succ[q.popleft()]:
            if b not in s:
                s.add(b)
                q.append(b)
    return s
is_ = lambda k, op, phase, layer: nodes[k]["op"].startswith(op) and nodes[k]["phase"] == phase and nodes[k]["layer"] == layer
qkv = any(is_(a, "gemm", "forward", 0) and is_(b, "attn_fwd", "forward", 0) for a in nodes for b in succ[a])
last = [k for k in nodes if nodes[k]["rank"] == 0 and nodes[k]["phase"] == "backward" and nodes[k]["layer"] == layers - 1]
attn0 = {k for k in nodes if nodes[k]["rank"] == 0 and is_(k, "attn_bwd", "backward", 0)}
res = [parsed, seen == len(nodes), dict(dag_n) == dict(trace_n) and all(n["step"] == 1 for n in nodes.values()),
       qkv, bool(last and attn0 & reach(last[0]))]
print("%s nodes=%d tasks=%d requests=%d edges=%d messages=%d per-rank=%s trace=%s" % (
    "ok" if all(res) else "bad:" + ",".join(str(i + 1) for i, r in enumerate(res) if not r), len(nodes),
    sum(v[0] for v in dag_n.values()), sum(v[1] for v in dag_n.values()), nsolid, ndashed,
    sorted(dag_n.items()), sorted(trace_n.items())))
for line in bad[:5]:
    print("#", line)
PYEOF
}
SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" --steps 1 --quiet --log "$TMPD/l.csv" --trace "$TMPD/g1.json" \
  --dag "$TMPD/g1.dot" > "$TMPD/out" 2>&1
rc=$?
grep -q '^gpt_train: task graph of step 1' "$TMPD/out" && [ -s "$TMPD/g1.dot" ]
[ $? = 0 ] && [ "$rc" = 0 ]
ok=$?
[ "$ok" = 0 ] || cat "$TMPD/out"
check "gpt_train --dag, 1 rank: the dot file is written (exit $rc)" [ "$ok" = 0 ]
# Gradient accumulation on 1 rank: the buckets only sum the micro-batches (nothing to all-reduce), so
# each parameter's gradient is copied or added into its bucket once per micro-batch but the last, whose
# gradient adds the others' sum to itself: K copy_flat tasks a parameter and step (K + 1 when the last
# micro-batch also went into the bucket and the bucket was copied back). The trace's copy_flat tasks of
# step 2 at 2 and 3 micro-batches: 2 d and 3 d, d the parameters
nflat() {
  SW_TEST_TIMEOUT=120 sh "$LAUNCH" 1 "$GPT_TRAIN" --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 --batch 6 \
    --grad-accum "$1" --steps 2 --quiet --log "$TMPD/l.csv" --trace "$TMPD/acc$1.json" > "$TMPD/out" 2>&1 &&
    "$PY" -c 'import json, sys
print(sum(e.get("ph") == "X" and e["name"] == "copy_flat" and e["args"].get("step") == 2 for e in json.load(open(sys.argv[1]))["traceEvents"]))' "$TMPD/acc$1.json"
}
n2=$(nflat 2) n3=$(nflat 3)
check "gpt_train --grad-accum 2 and 3, 1 rank: ${n2:-?} and ${n3:-?} copy_flat tasks in step 2 (K a parameter: 2 d and 3 d)" \
  awk -v a="$n2" -v b="$n3" 'BEGIN { d = b - a; exit !(d > 0 && a == 2 * d && b == 3 * d) }'
# gpt_train --tp 2 --sp --trace on 2 ranks: the report shows communication
# running beside computation (overlap > 0 on every rank, whole run)
SW_TEST_TIMEOUT=180 sh "$LAUNCH" 2 "$GPT_TRAIN" --tp 2 --sp --steps 3 --quiet --log "$TMPD/l.csv" \
  --trace "$TMPD/gpt.json" --dag "$TMPD/gpt.dot" > "$TMPD/out" 2>&1
rc=$?
rows=$(grep -E '^overlap: +[0-9]+ +all ' "$TMPD/out")
echo "$rows"
ok=false
[ "$rc" = 0 ] && [ "$(echo "$rows" | wc -l)" = 2 ] && ! echo "$rows" | awk '{ if ($7 <= 0) bad = 1 } END { exit !bad }' && ok=true
$ok || cat "$TMPD/out"
check "gpt_train --tp 2 --sp --trace, 2 ranks: overlap > 0 on both ranks ($(echo "$rows" | awk '{printf "%s ", $9}')) (exit $rc)" $ok
[ -s "$TMPD/gpt.json.paje" ] && [ -s "$TMPD/gpt.json.overlap.json" ]
check "gpt_train --trace wrote the Paje file and the overlap report" [ $? = 0 ]
if $have_pj_dump; then
  # the numbers of tasks and requests from the JSON trace of the same run
  nt=-1 nc=-1
  [ -x "$PY" ] && set -- $("$PY" -c 'import json,sys
x = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e.get("cat") != "transfer"]
print(sum(e["tid"] < 100000 for e in x), sum(e["tid"] >= 100000 for e in x))' "$TMPD/gpt.json") && nt=$1 nc=$2
  res=$(pj_dump_check "$TMPD/gpt.json.paje" 2 "$nt" "$nc")
  [ "${res%% *}" = ok ] || head -n 5 "$TMPD/pj.err"
  check "gpt_train --tp 2 --sp --trace, 2 ranks: pj_dump reads its Paje file strictly: $res" [ "${res%% *}" = ok ]
fi
grep -q '^gpt_train: task graph of step 1' "$TMPD/out" && [ -s "$TMPD/gpt.dot" ]
check "gpt_train --dag, 2 ranks tp 2 sp: the dot file is written" [ $? = 0 ]
if [ -x "$PY" ]; then
  for g in "g1 1 rank" "gpt 2 ranks tp 2 sp"; do
    set -- $g
    res=$(dag_check "$TMPD/$1.dot" "$TMPD/$1.json" 2)
    echo "# $res"
    shift
    check "gpt_train --dag, $*: parsed, acyclic, forward within ranks, nodes = the trace's step 1, QKV GEMM -> attn_fwd, last layer's backward ->* layer 0's ($(echo "$res" | cut -d' ' -f1-6))" \
      [ "${res%% *}" = ok ]
  done
else
  echo "# no $PY: task graph checks of gpt_train skipped"
fi
if command -v dot > /dev/null 2>&1; then
  check "Graphviz dot -Tsvg reads gpt_train's 1-rank graph" sh -c "timeout 300 dot -Tsvg '$TMPD/g1.dot' > '$TMPD/g1.svg' 2> '$TMPD/dot' && [ -s '$TMPD/g1.svg' ]"
fi
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
# ZeRO-3's prefetch, from the task graph (deterministic: its dependencies, not the timing of a run):
# gpt_train --dp 2 --zero 3 on 4 blocks, step 1, every rank. With --zero-prefetch 1 (a pool of 2 slots)
# block l+1's parameter all-gathers (their receives, which write the pool's slot) depend on no forward
# GEMM of block l (they may run while block l computes), and each block's depend on every forward GEMM
# of the block that held its slot before (the pool's claim and release fences); with --zero-prefetch 0
# (1 slot) every block's gathers wait for the previous block's GEMMs.
zero_dag_check() { # DOT LAYERS SLOTS -> "ahead A/N after-slot W/M ..." per rank
  "$PY" - "$@" <<'PYEOF'
import re, sys
from collections import defaultdict, deque
dot, layers, slots = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
node_re = re.compile(r'^(r(\d+)_(\d+)) \[label="([^"\\]*)((?:\\n[^"]*)?)", shape=(\w+),.*\((\w+), layer (-?\d+), step (-?\d+)\)"\];$')
edge_re = re.compile(r'^(r(\d+)_(\d+)) -> (r(\d+)_(\d+))')
nodes, succ = {}, defaultdict(list)
for line in open(dot):
    m = node_re.match(line)
    if m:
        nodes[m.group(1)] = dict(rank=int(m.group(2)), op=m.group(4), rest=m.group(5), shape=m.group(6),
                                 phase=m.group(7), layer=int(m.group(8)))
        continue
    m = edge_re.match(line)
    if m:
        succ[m.group(1)].append(m.group(4))
def reach(a):
    s, q = {a}, deque([a])
    while q:
        for b in succ[q.popleft()]:
            if b not in s:
                s.add(b)
                q.append(b)
    return s
def sel(rank, layer, pred):
    return [k for k, n in nodes.items() if n["rank"] == rank and n["phase"] == "forward" and n["layer"] == layer and pred(n)]
gather = lambda n: n["op"].startswith("allgather") and n["rest"].startswith("\\nrecv from") # writes the slot
gemm = lambda n: n["op"].startswith("gemm") and n["shape"] == "box"
out, missing = [], False
for rank in sorted({n["rank"] for n in nodes.values()}):
    ahead = after = 0
    for l in range(layers):
        g, f = sel(rank, l, gather), sel(rank, l, gemm)
        missing |= not g or not f
    for l in range(layers - 1): # block l+1's gathers reachable from none of block l's forward GEMMs
        g = set(sel(rank, l + 1, gather))
        ahead += not any(g & reach(k) for k in sel(rank, l, gemm))
    for l in range(slots, layers): # block l's gathers after every forward GEMM of block l - slots (same slot)
        g = set(sel(rank, l, gather))
        after += all(g <= reach(k) for k in sel(rank, l - slots, gemm))
    out.append("rank%d ahead %d/%d after-slot %d/%d" % (rank, ahead, layers - 1, after, layers - slots))
print(("missing " if missing or not out else "") + " ".join(out))
PYEOF
}
if [ -x "$PY" ]; then
  for k in 1 0; do
    SW_TEST_TIMEOUT=180 sh "$LAUNCH" 2 "$GPT_TRAIN" --dp 2 --zero 3 --zero-prefetch $k --layers 4 --steps 1 --quiet \
      --log "$TMPD/l.csv" --dag "$TMPD/z$k.dot" > "$TMPD/out" 2>&1
    rc=$?
    res=$(zero_dag_check "$TMPD/z$k.dot" 4 $((k + 1)))
    if [ $k = 1 ]; then expect="rank0 ahead 3/3 after-slot 2/2 rank1 ahead 3/3 after-slot 2/2"
      desc="every next block's gathers independent of the current block's forward GEMMs, each slot's reuse after its previous block's"
    else expect="rank0 ahead 0/3 after-slot 3/3 rank1 ahead 0/3 after-slot 3/3"
      desc="every block's gathers after the previous block's forward GEMMs"; fi
    [ "$rc" = 0 ] && [ "$res" = "$expect" ] || { echo "# $res"; cat "$TMPD/out"; }
    check "gpt_train --dp 2 --zero 3 --zero-prefetch $k --dag, 4 blocks: $desc ($res) (exit $rc)" \
      [ "$rc" = 0 -a "$res" = "$expect" ]
  done
else
  echo "# no $PY: ZeRO-3 prefetch checks skipped"
fi
finish
