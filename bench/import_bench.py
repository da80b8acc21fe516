#!/usr/bin/env python3
"""Import speed and memory of paxc on real models.

For each model, runs `paxc MODEL --emit=summary` several times and reports the
best wall time and the peak resident memory. As a baseline measured in the
same run, it times ONNX's own Python toolchain doing less work on the same
file: `onnx.load` plus `onnx.shape_inference.infer_shapes` (no IR, no
folding, no summary). Targets: Llama-7B (1,750 nodes) under 2 s and 500 MB.

  python3 bench/import_bench.py [--paxc build/bin/paxc] [--repeat 5]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "tools", "models", "paxmodels.py")
LIGHT = os.path.join(ROOT, "test", "models", "onnx-light")

BASELINE = """
import sys, onnx
from onnx import shape_inference
m = onnx.load(sys.argv[1])
shape_inference.infer_shapes(m, data_prop=True)
"""


def run(cmd):
    """Wall seconds and peak RSS (MiB) of one run of cmd.

    Peak memory comes from /usr/bin/time: Linux carries a parent's peak RSS
    across fork and exec, so a child started from this (large) Python process
    would report Python's size instead of its own.
    """
    with tempfile.NamedTemporaryFile("r") as rss:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name] + cmd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}: {proc.stderr.decode()}")
        return wall, int(rss.read().split()[-1]) / 1024.0


def best(cmd, repeat):
    runs = [run(cmd) for _ in range(repeat)]
    return min(w for w, _ in runs), max(m for _, m in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--paxc", default=os.path.join(ROOT, "build", "bin", "paxc"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        models = []
        for name in ["gpt2", "bert", "llama", "lstm"]:
            path = os.path.join(tmp, name + ".onnx")
            subprocess.run([sys.executable, GEN, name, "-o", path], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            models.append((name, path))
        for name in ["resnet50", "inception_v2", "densenet121"]:
            models.append((name, os.path.join(LIGHT, f"light_{name}.onnx")))

        print(f"{'model':14} {'nodes':>6} {'paxc s':>8} {'paxc MiB':>9} "
              f"{'onnx s':>8} {'onnx MiB':>9} {'speedup':>8}")
        ok = True
        for name, path in models:
            import onnx
            nodes = len(onnx.load(path, load_external_data=False).graph.node)
            t, mem = best([args.paxc, path, "--emit=summary", "--quiet"], args.repeat)
            bt, bmem = best([sys.executable, "-c", BASELINE, path], args.repeat)
            print(f"{name:14} {nodes:6d} {t:8.3f} {mem:9.1f} {bt:8.3f} {bmem:9.1f} {bt / t:7.1f}x")
            if name == "llama":
                ok = t < 2.0 and mem < 500
                target = (f"llama-7b target (< 2 s, < 500 MiB): "
                          f"{'met' if ok else 'MISSED'} ({t:.3f} s, {mem:.0f} MiB)")
        print(target)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
