#!/usr/bin/python3
"""Pictures of a starweave run, drawn by gnuplot (Debian gnuplot-nox).

  plot_trace.py TRACE.json --step N --gantt OUT.png   Gantt chart of one step
  plot_trace.py --loss LOG.csv --loss-out OUT.png     loss curve of gpt_train's CSV log

TRACE.json is gpt_train --trace's Chrome/Perfetto file. One track per
worker and per communication lane of every rank, tasks colored by phase
(forward, backward, optimizer, communication), time in ms from the step's
first event. Only Python's standard library and gnuplot are needed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

PHASE_COLORS = {  # gnuplot rgb
    "forward": "#3b75af",
    "backward": "#d1495b",
    "optimizer": "#66a61e",
    "comm": "#f0a202",
    "recompute": "#8e6c8a",
    "offload": "#7f7f7f",
    "none": "#b0b0b0",
}


def gnuplot(script):
    with tempfile.NamedTemporaryFile("w", suffix=".gp", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        subprocess.run(["gnuplot", path], check=True)
    finally:
        os.unlink(path)


def gantt(trace_path, step, out):
    with open(trace_path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {}     # (pid, tid) -> track name
    ranks = {}     # pid -> process name
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "process_name":
            ranks[e["pid"]] = e["args"]["name"]
    boxes = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("step") == step
             and ranks.get(e["pid"], "").startswith("rank")]
    if not boxes:
        sys.exit(f"plot_trace: no event of step {step} in {trace_path}")
    t0 = min(e["ts"] for e in boxes)
    tracks = sorted({(e["pid"], e["tid"]) for e in boxes})
    row = {t: i for i, t in enumerate(reversed(tracks))}
    data = tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False)
    for e in boxes:
        phase = e.get("args", {}).get("phase", "none")
        if e["tid"] >= 100000 and phase != "comm":
            phase = "comm"  # requests: communication lane
        x0 = (e["ts"] - t0) / 1e3
        x1 = x0 + e["dur"] / 1e3
        y = row[(e["pid"], e["tid"])]
        color = int(PHASE_COLORS.get(phase, PHASE_COLORS["none"])[1:], 16)
        data.write(f"{(x0 + x1) / 2} {y} {x0} {x1} {y - 0.4} {y + 0.4} {color}\n")
    data.close()
    ytics = ", ".join(f'"{ranks[p]} {names.get((p, t), t)}" {row[(p, t)]}' for p, t in tracks)
    keys = "".join(
        f'set object {i + 1} rect from screen {0.12 + 0.13 * i},0.015 to screen {0.14 + 0.13 * i},0.04 '
        f'fc rgb "{c}" fs solid noborder\n'
        f'set label {i + 1} "{p}" at screen {0.145 + 0.13 * i},0.028 font ",10"\n'
        for i, (p, c) in enumerate(list(PHASE_COLORS.items())[:4]))
    wall = max((e["ts"] + e["dur"] - t0) / 1e3 for e in boxes)
    height = max(360, 28 * len(tracks) + 140)
    gnuplot(f"""
set terminal pngcairo size 1400,{height} font ",11" noenhanced
set output "{out}"
set title "starweave: step {step} of {os.path.basename(trace_path)} ({len(boxes)} tasks and requests, {wall:.1f} ms)"
set xlabel "ms from the step's first event"
set xrange [0:{wall * 1.01}]
set yrange [-0.7:{len(tracks) - 0.3}]
set ytics ({ytics}) font ",10"
set grid xtics
set bmargin 5
set lmargin 24
unset key
{keys}
plot "{data.name}" using 1:2:3:4:5:6:7 with boxxyerror fs solid 1.0 noborder lc rgb variable
""")
    os.unlink(data.name)
    print(f"plot_trace: Gantt chart of step {step} ({len(tracks)} tracks) -> {out}")


def loss_curve(log, out):
    gnuplot(f"""
set terminal pngcairo size 900,500 font ",11" noenhanced
set output "{out}"
set datafile separator ","
set title "gpt_train loss ({os.path.basename(log)})"
set xlabel "step"
set ylabel "cross-entropy"
set grid
unset key
plot "{log}" every ::1 using 1:2 with linespoints pt 7 ps 0.5 lw 2
""")
    print(f"plot_trace: loss curve -> {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", nargs="?", help="gpt_train --trace JSON file")
    ap.add_argument("--step", type=int, default=2, help="step to draw (default 2: step 1 warms up)")
    ap.add_argument("--gantt", help="Gantt chart PNG to write")
    ap.add_argument("--loss", help="gpt_train CSV log")
    ap.add_argument("--loss-out", help="loss curve PNG to write")
    a = ap.parse_args()
    if not (a.trace and a.gantt) and not (a.loss and a.loss_out):
        ap.error("give TRACE.json --gantt OUT.png, and/or --loss LOG.csv --loss-out OUT.png")
    if a.trace and a.gantt:
        gantt(a.trace, a.step, a.gantt)
    if a.loss and a.loss_out:
        loss_curve(a.loss, a.loss_out)


if __name__ == "__main__":
    main()
