#!/usr/bin/env python3
"""Merges StarPU 1.3 history-based performance model files (bench/calibrate.sh).

usage: perfmodel_merge.py OUT IN...
       perfmodel_merge.py --estimate MISSING SYMBOL FILE
       perfmodel_merge.py --off-cpu OFFCPU DIR HOST

The second form (bench/sim.sh --estimate) adds regression estimates to a
model file for the footprints a simulation needs (estimate_needed below).

Why: each rank of a calibration run writes its models at exit, and StarPU
1.3 overwrites the file with what that process knows (the file as loaded
at its start plus its own samples): the last rank to exit wins, and the
sizes only another rank ran are lost (a pipeline's stages run different
sizes). bench/calibrate.sh gives each rank a directory of its own and
merges them here.

Every file must have the same layout (the same workers, one section of
entries per implementation); the entries of each section are united by
footprint, a footprint seen in several files gets the samples of all:
n, sum and sum2 added, mean = sum / n, dev = sqrt(sum2 / n - mean^2).
OUT may be one of the IN files (read before it is written).

An entry without a sample (n = 0: StarPU noted the size but kept no
measurement -- it happens now and then to a one-off task such as a
parameter's initialisation) would stop a simulation at its first task of
that size; it gets an estimate instead, from the section's measured sizes
by a power law fitted in log-log (mean = c * size^b), printed on stderr as
such, with n = 1.

The third form (bench/calibrate.sh --cpu-time) takes out of one rank's
model files (DIR/codelets/*/SYMBOL.HOST) the time their tasks spent off
the CPU (the library's SW_CALIBRATE_CPU_TIME file, appended by each run:
lines "symbol footprint samples microseconds first-sample's-microseconds",
summed over the lines of a footprint, less the first sample of its first
line where StarPU dropped it, as it does a new size's first): mean = (sum
- off) / n, the deviation kept.
"""
import glob
import math
import os
import sys

HEAD = "# hash\t\tsize\t\tflops\t\tmean (us)\tdev (us)\tsum\t\tsum2\t\tn"


def parse(path):
    """-> (lines, sections): lines with each entry block replaced by a
    placeholder index; sections[i] = {hash: [hash, size, flops, mean, dev, sum, sum2, n]}"""
    with open(path) as f:
        lines = f.read().split("\n")
    out, sections, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("# number of entries") and i + 1 < len(lines):
            count = int(lines[i + 1])
            out.append(line)
            i += 2
            # copy up to the entries' header line (the regression lines between)
            while i < len(lines) and not lines[i].startswith("# hash"):
                out.append(("pre", len(sections), lines[i]))
                i += 1
            if i >= len(lines):
                raise SystemExit(f"{path}: no '# hash' line after '# number of entries'")
            out.append(("head", len(sections), lines[i]))
            i += 1
            entries = {}
            for k in range(count):
                f = lines[i + k].split()
                if len(f) != 8:
                    raise SystemExit(f"{path}: entry line {i + k + 1} has {len(f)} fields, expected 8")
                entries[f[0]] = f
            sections.append(entries)
            i += count
            continue
        out.append(line)
        i += 1
    return out, sections


def combine(a, b):
    n = int(a[7]) + int(b[7])
    s = float(a[5]) + float(b[5])
    s2 = float(a[6]) + float(b[6])
    mean = s / n if n else 0.0
    dev = math.sqrt(max(s2 / n - mean * mean, 0.0)) if n else 0.0
    return [a[0], a[1], a[2], f"{mean:e}", f"{dev:e}", f"{s:e}", f"{s2:e}", str(n)]


def estimate(entries, path):
    """fills the entries without a sample from the measured ones (above)"""
    pts = [(float(e[1]), float(e[3])) for e in entries.values() if int(e[7]) > 0 and float(e[1]) > 0 and float(e[3]) > 0]
    for h, e in entries.items():
        if int(e[7]) > 0 or not pts:
            continue
        size = float(e[1])
        xs = [math.log(x) for x, _ in pts]
        ys = [math.log(y) for _, y in pts]
        n = len(pts)
        mx, my = sum(xs) / n, sum(ys) / n
        vx = sum((x - mx) ** 2 for x in xs)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / vx if vx > 0 else 1.0
        t = math.exp(my + b * (math.log(size) - mx)) if size > 0 else math.exp(my)
        entries[h] = [e[0], e[1], e[2], f"{t:e}", f"{0.0:e}", f"{t:e}", f"{t * t:e}", "1"]
        print(f"perfmodel_merge: {path}: size {e[1]} (footprint {h}) has no sample: estimated {t:.3g} us "
              f"from {n} measured size(s), mean = c * size^{b:.2f}", file=sys.stderr)


def regress(pts, x):
    """time at x from measured (x, time) points: log-log interpolation
    between the two measured neighbours (a power law time = a * x^b fitted
    on them), and beyond the measured range the rate (x per us) of the
    nearest measured end (time proportional to x) -> (time, how)"""
    by = {}
    for px, py in pts:
        by.setdefault(px, []).append(py)
    xs = sorted(by)
    ys = [sum(by[v]) / len(by[v]) for v in xs]
    if x >= xs[-1]:
        return ys[-1] * x / xs[-1], f"rate of the largest measured size ({xs[-1]:.4g}), x{x / xs[-1]:.3g} beyond it"
    if x <= xs[0]:
        return ys[0] * x / xs[0], f"rate of the smallest measured size ({xs[0]:.4g}), x{x / xs[0]:.3g} of it"
    k = next(i for i in range(1, len(xs)) if xs[i] >= x)
    b = math.log(ys[k] / ys[k - 1]) / math.log(xs[k] / xs[k - 1])
    t = ys[k - 1] * (x / xs[k - 1]) ** b
    return t, f"power law between measured {xs[k - 1]:.4g} and {xs[k]:.4g} (exponent {b:.2f})"


def estimate_needed(missing_path, symbol, path):
    """--estimate: adds to the model file `path` of codelet `symbol` an
    entry for every footprint of it listed in missing_path (lines "symbol
    footprint bytes flops", bench/sim.sh --estimate's first pass), its time
    regressed (regress()) on flops where the codelet records flops, else on
    bytes, from the measured entries of the same section; n = 10 (what
    StarPU trusts), so the simulation takes it silently: each is printed on
    stdout as an ESTIMATE."""
    need = {}
    with open(missing_path) as f:
        for line in f:
            w = line.split()
            if len(w) == 4 and w[0] == symbol:
                need[w[1]] = (int(w[2]), float(w[3]))
    if not need:
        return
    lines, sections = parse(path)
    for k, entries in enumerate(sections):
        measured = [e for e in entries.values() if int(e[7]) > 0 and float(e[3]) > 0]
        if not measured:
            raise SystemExit(f"perfmodel_merge: {path}: no measured size to fit a regression for {symbol}: calibrate it")
        for h, (size, flops) in need.items():
            if h in entries:
                continue
            use_flops = flops > 0 and all(float(e[2]) > 0 for e in measured)
            pts = [(float(e[2]) if use_flops else float(e[1]), float(e[3])) for e in measured]
            x = flops if use_flops else float(size)
            if x <= 0:
                x = 1.0
            t, how = regress(pts, x)
            entries[h] = [h, str(size), f"{flops:e}", f"{t:e}", f"{0.0:e}", f"{10 * t:e}", f"{10 * t * t:e}", "10"]
            print(f"ESTIMATE {symbol} footprint {h} ({size} bytes, {flops:.4g} flops): {t:.4g} us, regressed on "
                  f"{'flops' if use_flops else 'bytes'} from {len(measured)} measured size(s): {how}")
    write(path, lines, sections)


def off_cpu(off_path, rank_dir, host):
    """--off-cpu: the samples of a rank's model files less their time off the CPU (above)"""
    offs = {}
    with open(off_path) as f:
        for line in f:
            w = line.split()
            if len(w) == 5:
                off = offs.setdefault(w[0], {})
                n, us, first = off.get(w[1], (0, 0.0, float(w[4])))
                off[w[1]] = (n + int(w[2]), us + float(w[3]), first)
    recorded = taken = 0.0
    for path in sorted(glob.glob(os.path.join(rank_dir, "codelets", "*", "*." + host))):
        off = offs.get(os.path.basename(path)[:-len(host) - 1], {})
        r, t = off_cpu_file(off, path)
        recorded, taken = recorded + r, taken + t
    print(f"perfmodel_merge: {rank_dir}: {recorded:.1f} us recorded, {taken:.1f} us of it off the CPU taken out")


def off_cpu_file(off, path):
    """-> (the file's recorded us, the us taken out)"""
    lines, sections = parse(path)
    if len(sections) != 1:
        raise SystemExit(f"{path}: {len(sections)} sections (workers of several kinds): --cpu-time calibrates "
                         "one kind of CPU worker")
    entries = sections[0]
    recorded = sum(float(e[5]) for e in entries.values())
    taken = 0.0
    for h, (n_off, us, first) in off.items():
        e = entries.get(h)
        if e is None:
            continue
        n, s, dev = int(e[7]), float(e[5]), float(e[4])
        if n_off == n + 1:
            n_off, us = n, us - first
        if n == n_off == 0:
            continue  # the size's one sample, dropped
        if n_off != n:
            raise SystemExit(f"{path}: footprint {h}: {n_off} samples timed off the CPU, {n} recorded: the "
                             "files are not of the same runs")
        # a sample's time off the CPU is its share of the task's (never more), measured by other clocks than
        # StarPU's: beyond the recorded time by under 1 us a sample (a task of no time), none left
        left = s - us if us <= s else 0.0 if us - s < n else -1
        if left < 0:
            raise SystemExit(f"{path}: footprint {h}: {us:.1f} us off the CPU of {s:.1f} us recorded: not a "
                             "time on the CPU")
        mean = left / n
        e[3], e[5], e[6] = f"{mean:e}", f"{left:e}", f"{n * (dev * dev + mean * mean):e}"
        taken += s - left
    if taken:
        write(path, lines, sections)
    return recorded, taken


def write(out_path, lines, merged):
    text = []
    for j, x in enumerate(lines):
        if isinstance(x, tuple):
            kind, k, line = x
            text.append(line)
            if kind == "head":
                for e in merged[k].values():
                    text.append("\t".join(e))
            continue
        text.append(x)
        if x.startswith("# number of entries"):
            # the count of the section that follows (the next placeholder's)
            nxt = next(t for t in lines[j + 1:] if isinstance(t, tuple))
            text.append(str(len(merged[nxt[1]])))
    with open(out_path, "w") as f:
        f.write("\n".join(text))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--estimate":
        estimate_needed(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    if len(sys.argv) == 5 and sys.argv[1] == "--off-cpu":
        off_cpu(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    out_path, inputs = sys.argv[1], sys.argv[2:]
    parsed = [parse(p) for p in inputs]
    layout = [x for x in parsed[0][0] if not isinstance(x, tuple)]
    for p, (lines, _) in zip(inputs[1:], parsed[1:]):
        if [x for x in lines if not isinstance(x, tuple)] != layout:
            raise SystemExit(f"{p}: not the layout of {inputs[0]} (other workers?): not merged")
    lines, sections = parsed[0]
    merged = [dict() for _ in sections]
    for _, secs in parsed:
        for k, entries in enumerate(secs):
            for h, e in entries.items():
                merged[k][h] = combine(merged[k][h], e) if h in merged[k] else e
    for entries in merged:
        estimate(entries, out_path)
    write(out_path, lines, merged)


if __name__ == "__main__":
    main()
