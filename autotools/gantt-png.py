#!/usr/bin/env python3
"""Gantt chart PNG of one step of a gpt_train --trace file, with Python's
standard library only (zlib): the fallback of autotools/gpu-run.sh where
gnuplot (bench/plot_trace.py's renderer) is missing, e.g. a bare GPU machine.

  gantt-png.py TRACE.json --step N --out OUT.png

One row per worker and request lane of every rank (as bench/plot_trace.py),
tasks colored by phase (forward blue, backward red, optimizer green,
communication orange, recompute purple, offload grey), time in ms from the
step's first event; labels in a small built-in bitmap font.
"""
import argparse
import json
import struct
import sys
import zlib

COLORS = {"forward": (0x3b, 0x75, 0xaf), "backward": (0xd1, 0x49, 0x5b), "optimizer": (0x66, 0xa6, 0x1e),
          "comm": (0xf0, 0xa2, 0x02), "recompute": (0x8e, 0x6c, 0x8a), "offload": (0x7f, 0x7f, 0x7f),
          "none": (0xb0, 0xb0, 0xb0)}

# 3x5 glyphs, rows top to bottom, '#' set
FONT = {
    "0": "### #.# #.# #.# ###", "1": ".#. ##. .#. .#. ###", "2": "### ..# ### #.. ###", "3": "### ..# .## ..# ###",
    "4": "#.# #.# ### ..# ..#", "5": "### #.. ### ..# ###", "6": "### #.. ### #.# ###", "7": "### ..# .#. .#. .#.",
    "8": "### #.# ### #.# ###", "9": "### #.# ### ..# ###", "A": ".#. #.# ### #.# #.#", "B": "##. #.# ##. #.# ##.",
    "C": "### #.. #.. #.. ###", "D": "##. #.# #.# #.# ##.", "E": "### #.. ##. #.. ###", "F": "### #.. ##. #.. #..",
    "G": "### #.. #.# #.# ###", "H": "#.# #.# ### #.# #.#", "I": "### .#. .#. .#. ###", "J": "..# ..# ..# #.# ###",
    "K": "#.# #.# ##. #.# #.#", "L": "#.. #.. #.. #.. ###", "M": "#.# ### ### #.# #.#", "N": "##. #.# #.# #.# #.#",
    "O": "### #.# #.# #.# ###", "P": "### #.# ### #.. #..", "Q": "### #.# #.# ### ..#", "R": "##. #.# ##. #.# #.#",
    "S": "### #.. ### ..# ###", "T": "### .#. .#. .#. .#.", "U": "#.# #.# #.# #.# ###", "V": "#.# #.# #.# #.# .#.",
    "W": "#.# #.# ### ### #.#", "X": "#.# #.# .#. #.# #.#", "Y": "#.# #.# .#. .#. .#.", "Z": "### ..# .#. #.. ###",
    " ": "... ... ... ... ...", ".": "... ... ... ... .#.", ",": "... ... ... .#. #..", ":": "... .#. ... .#. ...",
    "-": "... ... ### ... ...", "_": "... ... ... ... ###", "/": "..# ..# .#. #.. #..", "(": ".#. #.. #.. #.. .#.",
    ")": ".#. ..# ..# ..# .#.", "%": "#.# ..# .#. #.. #.#", "=": "... ### ... ### ...", "+": "... .#. ### .#. ...",
    "?": "### ..# .## ... .#.",
}
SCALE = 2  # pixels per font dot


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def rect(self, x0, y0, x1, y1, rgb):
        x0, x1 = max(0, int(x0)), min(self.w, int(x1))
        y0, y1 = max(0, int(y0)), min(self.h, int(y1))
        if x1 <= x0:
            x1 = min(self.w, x0 + 1)
        row = bytes(rgb) * (x1 - x0)
        for y in range(y0, y1):
            o = (y * self.w + x0) * 3
            self.px[o:o + len(row)] = row

    def text(self, x, y, s, rgb=(0, 0, 0)):
        for ch in s.upper():
            g = FONT.get(ch, FONT["?"]).split()
            for r, bits in enumerate(g):
                for c, b in enumerate(bits):
                    if b == "#":
                        self.rect(x + c * SCALE, y + r * SCALE, x + (c + 1) * SCALE, y + (r + 1) * SCALE, rgb)
            x += 4 * SCALE
        return x

    def png(self, path):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(t, d):
            return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                    + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--step", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    with open(a.trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names, ranks = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "process_name":
            ranks[e["pid"]] = e["args"]["name"]
    boxes = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("step") == a.step
             and ranks.get(e["pid"], "").startswith("rank")]
    if not boxes:
        sys.exit(f"gantt-png: no event of step {a.step} in {a.trace}")
    t0 = min(e["ts"] for e in boxes)
    wall = max(e["ts"] + e["dur"] - t0 for e in boxes) / 1e3
    tracks = sorted({(e["pid"], e["tid"]) for e in boxes})
    row = {t: i for i, t in enumerate(tracks)}
    left, top, rowh, width = 170, 40, 20, 1400
    plotw = width - left - 20
    height = top + rowh * len(tracks) + 70
    c = Canvas(width, height)
    c.text(10, 10, a.title or f"starweave: step {a.step}, {len(boxes)} tasks and requests, {wall:.1f} ms")
    for (p, t), i in row.items():
        y = top + i * rowh
        if i % 2:
            c.rect(left, y, left + plotw, y + rowh, (0xf2, 0xf2, 0xf2))
        label = f"{ranks.get(p, p)} {names.get((p, t), t)}".replace("rank ", "r")[:20]
        c.text(8, y + 5, label)
    for e in boxes:
        phase = e.get("args", {}).get("phase", "none")
        if e["tid"] >= 100000 and phase != "comm":
            phase = "comm"
        x0 = left + (e["ts"] - t0) / 1e3 / wall * plotw
        x1 = left + (e["ts"] + e["dur"] - t0) / 1e3 / wall * plotw
        y = top + row[(e["pid"], e["tid"])] * rowh
        c.rect(x0, y + 3, x1, y + rowh - 3, COLORS.get(phase, COLORS["none"]))
    yb = top + rowh * len(tracks)
    c.rect(left, yb, left + plotw, yb + 1, (0, 0, 0))
    for k in range(11):  # ticks every tenth of the step
        x = left + k * plotw / 10
        c.rect(x, yb, x + 1, yb + 5, (0, 0, 0))
        c.text(int(x) - 8, yb + 8, f"{wall * k / 10:.1f}")
    c.text(left + plotw // 2 - 100, yb + 24, "MS FROM THE STEP'S FIRST EVENT".replace("'", ""))
    x = left
    for p in ("forward", "backward", "optimizer", "comm", "recompute", "offload"):
        c.rect(x, yb + 46, x + 14, yb + 58, COLORS[p])
        x = c.text(x + 20, yb + 48, p) + 20
    c.png(a.out)
    print(f"gantt-png: Gantt chart of step {a.step} ({len(tracks)} tracks, {len(boxes)} boxes) -> {a.out}")


if __name__ == "__main__":
    main()
