#!/usr/bin/env python3
"""One rank's tasks in one step of a starweave trace (gpt_train --trace T: the
Chrome/Perfetto JSON, simulated or real): each worker's idle time between
its tasks and the gaps' median, time and the FLOPs the tasks record per
task name, and the GEMMs grouped by phase and FLOPs with their rate -- what
docs/simulation.md's "What the GEMMs cost in the simulated graph" and "a
Ring step's tiles priced by their work" read from bench/sim.sh --trace.

usage: bench/trace_tasks.py TRACE.json [--rank R] [--step S]   (rank 0, step 2)
"""
import collections
import json
import sys


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    opts = {"--rank": 0, "--step": 2}
    args = argv[2:]
    while args:
        if args[0] not in opts or len(args) < 2 or not args[1].isdigit():
            print(f"trace_tasks: bad argument '{args[0]}' (--rank R, --step S with integers)", file=sys.stderr)
            return 2
        opts[args[0]] = int(args[1])
        args = args[2:]
    rank, step = opts["--rank"], opts["--step"]
    try:
        with open(argv[1]) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        print(f"trace_tasks: cannot read trace '{argv[1]}': {e}", file=sys.stderr)
        return 2
    events = d["traceEvents"] if isinstance(d, dict) else d
    by_name, count, flops = collections.Counter(), collections.Counter(), collections.Counter()
    spans = collections.defaultdict(list)  # worker (the trace's tid) -> its tasks' (start, end)
    gemm = collections.defaultdict(lambda: [0, 0.0, 0.0])  # (phase, flops) -> tasks, ms, flops
    t0, t1 = float("inf"), 0.0
    for e in events:
        a = e.get("args", {})
        # the tasks of this rank and step; the collectives' own records (comm, *_mpi exchanges) left out
        if e.get("ph") != "X" or e.get("pid") != rank or a.get("step") != step:
            continue
        if e.get("cat") == "comm" or "_mpi" in e["name"]:
            continue
        ms = e["dur"] / 1e3
        by_name[e["name"]] += ms
        count[e["name"]] += 1
        flops[e["name"]] += a.get("flops", 0)
        t0, t1 = min(t0, e["ts"]), max(t1, e["ts"] + e["dur"])
        spans[e.get("tid")].append((e["ts"], e["ts"] + e["dur"]))
        if e["name"] == "gemm":
            g = gemm[(a.get("phase"), a.get("flops", 0))]
            g[0] += 1
            g[1] += ms
            g[2] += a.get("flops", 0)
    if not by_name:
        print(f"trace_tasks: no task of rank {rank} in step {step} in '{argv[1]}'", file=sys.stderr)
        return 2
    print(f"rank {rank}, step {step}: tasks busy {sum(by_name.values()):.1f} ms of a {(t1 - t0) / 1e3:.1f} ms span")
    # each worker's idle time between its first and last task of the step, and the gaps between its tasks
    for tid, sp in sorted(spans.items(), key=lambda x: str(x[0])):
        sp.sort()
        gaps = sorted(max(0.0, b[0] - a[1]) for a, b in zip(sp, sp[1:]))
        if gaps:
            print(f"worker {tid}: {len(sp)} tasks, idle {sum(gaps) / 1e3:.1f} ms between them; gap median "
                  f"{gaps[len(gaps) // 2]:.1f} us, 90th percentile {gaps[int(len(gaps) * 0.9)]:.1f} us")
    for name, ms in by_name.most_common():
        fl = f"  {flops[name] / 1e9:10.3f} GFLOP" if flops[name] else ""
        print(f"  {name:32s} {ms:10.1f} ms {count[name]:6d} tasks{fl}")
    if gemm:
        fl = sum(g[2] for g in gemm.values())
        ms = sum(g[1] for g in gemm.values())
        print(f"GEMMs: {fl / 1e12:.3f} TFLOP in {ms:.0f} ms = {fl / ms / 1e6:.1f} GFLOP/s")
        for (phase, flops), (n, ms, fl) in sorted(gemm.items(), key=lambda x: -x[1][1]):
            rate = f"{fl / ms / 1e6:6.1f} GFLOP/s" if ms > 0 else "     - GFLOP/s"
            print(f"  {phase or '-':9s} {flops / 1e9:9.2f} GFLOP x {n:4d}  {ms:9.1f} ms  {rate}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
