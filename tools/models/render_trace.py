#!/usr/bin/env python3
"""Draws Chrome/Perfetto traces (paxc --emit=trace, paxrun --trace) as one
PNG, one panel per trace, stacked, each on its own time axis:

  render_trace.py TRACE.json [TRACE.json ...] -o OUT.png [--width W]

In a panel each row is a trace row (a GPU's compute, its links; a device
of paxrun), in the traces' order, and each event a bar from its start to
its end: compute blue, communication orange, weight loads grey, anything
else green. Rows are separated by light lines and panels by a dark band;
a tick on the bottom axis every tenth of the panel's span.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pngimage import write_png  # noqa: E402

COLORS = {"compute": (66, 114, 196), "communication": (237, 125, 49),
          "collective": (237, 125, 49), "load": (150, 150, 150)}
ROW = 14


def panel(events, width):
    rows = sorted({e["tid"] for e in events if e.get("ph") == "X"})
    index = {t: i for i, t in enumerate(rows)}
    spans = [e for e in events if e.get("ph") == "X"]
    t0 = min((e["ts"] for e in spans), default=0)
    t1 = max((e["ts"] + e["dur"] for e in spans), default=1)
    left, right, bottom = 10, 10, 12
    height = ROW * len(rows) + bottom + 4
    img = np.full((height, width, 3), 255, dtype=np.uint8)
    scale = (width - left - right) / max(t1 - t0, 1e-12)
    for r in range(len(rows) + 1):
        img[min(r * ROW, height - 1), left:width - right] = 225
    for e in spans:
        r = index[e["tid"]]
        x0 = left + int((e["ts"] - t0) * scale)
        x1 = max(x0 + 1, left + int((e["ts"] + e["dur"] - t0) * scale))
        img[r * ROW + 2:r * ROW + ROW - 1, x0:x1] = COLORS.get(
            e.get("cat", ""), (84, 170, 84))
    axis = ROW * len(rows) + 2
    img[axis, left:width - right] = 0
    for k in range(11):
        x = left + int((width - left - right - 1) * k / 10)
        img[axis:axis + 6, x] = 0
    return img


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--width", type=int, default=960)
    a = ap.parse_args()
    panels = []
    for path in a.traces:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        panels.append(panel(events, a.width))
        panels.append(np.full((6, a.width, 3), 60, dtype=np.uint8))
    write_png(a.out, np.concatenate(panels[:-1]))
    print(f"render_trace: wrote {a.out} ({len(a.traces)} panel(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
