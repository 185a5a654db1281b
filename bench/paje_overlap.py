#!/usr/bin/env python3
"""Overlap of StarPU's data transfers with task execution, from the
paje.trace that starpu_fxt_tool writes (FxT builds of StarPU).

Transfers: the DriverCopy states ("Co", pushed and popped) of every memory
manager container (mm<node>); compute: the intervals in which a worker is in
a task's state (set by the events that carry a codelet name) until its next
state change. Prints, per memory node and in all, the transfer-busy time
(union of its copy intervals) and the share of it during which at least one
worker executed a task.

usage: paje_overlap.py paje.trace [node names as mm0=RAM mm1=disk ...]
"""
import sys


def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def overlap(xs, ys):
    """length of the intersection of two sorted disjoint interval lists"""
    i = j = 0
    n = 0.0
    while i < len(xs) and j < len(ys):
        a = max(xs[i][0], ys[j][0])
        b = min(xs[i][1], ys[j][1])
        if b > a:
            n += b - a
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return n


def main():
    path = sys.argv[1]
    names = dict(a.split("=", 1) for a in sys.argv[2:])
    push, pop, setstate, setname = set(), set(), set(), set()
    defs = {}
    copies = {}     # mm container -> intervals
    stacks = {}     # mm container -> stack of (state, start)
    worker = {}     # worker container -> (executing?, since)
    compute = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("%EventDef"):
                w = line.split()
                defs[w[2]] = w[1]
                continue
            w = line.split()
            if not w or w[0] not in defs:
                continue
            kind = defs[w[0]]
            if kind == "PajePushState" and w[2].startswith("mm"):
                stacks.setdefault(w[2], []).append((w[4], float(w[1])))
            elif kind == "PajePopState" and w[2].startswith("mm"):
                st = stacks.get(w[2])
                if st:
                    s, t0 = st.pop()
                    if s == "Co":
                        copies.setdefault(w[2], []).append((t0, float(w[1])))
            elif kind == "PajeSetState" and len(w) >= 5 and w[3] == "WS":
                t = float(w[1])
                # a task's state carries its codelet and more fields; the
                # driver's own states are one quoted letter
                running = len(w) > 5
                was = worker.get(w[2])
                if was and was[0]:
                    compute.append((was[1], t))
                worker[w[2]] = (running, t)
    comp = union(compute)
    total_x = total_o = 0.0
    allx = []
    for mm in sorted(copies):
        x = union(copies[mm])
        allx += x
        busy = sum(b - a for a, b in x)
        o = overlap(x, comp)
        print("%-8s transfers busy %9.1f ms, %5.1f %% of it beside task execution (%d copies)"
              % (names.get(mm, mm), busy, 100 * o / busy if busy else 0, len(copies[mm])))
    x = union(allx)
    busy = sum(b - a for a, b in x)
    o = overlap(x, comp)
    span = sum(b - a for a, b in comp)
    print("all      transfers busy %9.1f ms, %5.1f %% of it beside task execution; tasks ran %9.1f ms (union over workers)"
          % (busy, 100 * o / busy if busy else 0, span))


main()
