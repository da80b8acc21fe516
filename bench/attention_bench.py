#!/usr/bin/env python3
"""The attention op against the unfused chain on the CPU backend, one device.

For each sequence length, writes a 2-layer GPT (tools/models/paxmodels.py
gpt2: hidden 256, 4 heads, batch 2, seeded random weights), compiles it
twice, with the attention op (paxc's default) and with
`--fuse-attention=false` (Q.K^T, the masks, softmax and P.V as separate
ops, the scores stored), runs both with `paxrun --random-inputs --repeat
--time` alternating for --rounds rounds (the first run of each round a
warm-up), checks that the outputs agree (relative L2 error at most 1e-5),
and prints the median compute seconds of each, their ratio (unfused over
fused: above 1 the attention op is faster) and each plan's peak buffers as
paxrun reports them, measured in this run.

  python3 bench/attention_bench.py [--seqs 256,1024] [--repeat N]
      [--rounds N] [--build DIR] [--work DIR]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
GEN = os.path.join(ROOT, "tools", "models", "paxmodels.py")


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"attention_bench: {' '.join(cmd)} failed:\n{proc.stderr}")
    return proc


def compile_both(build, work, seq):
    model = os.path.join(work, f"gpt_{seq}.onnx")
    run([sys.executable, GEN, "gpt2", "--layers", "2", "--hidden", "256", "--heads", "4",
         "--ffn", "1024", "--seq", str(seq), "--positions", str(seq), "--vocab", "512",
         "--batch", "2", "--weights", "random", "-o", model])
    plans = {}
    for fuse in ("true", "false"):
        plan = os.path.join(work, f"gpt_{seq}_{fuse}.paxplan")
        run([os.path.join(build, "paxc"), model, f"--fuse-attention={fuse}", "-o", plan,
             "--quiet"])
        plans[fuse] = plan
    return plans


def time_plan(build, plan, out, repeat):
    proc = run([os.path.join(build, "paxrun"), plan, "--random-inputs", "--outputs", out,
                f"--repeat={repeat + 1}", "--time"])
    text = proc.stdout + proc.stderr
    times = [float(t) for t in re.findall(r"run \d+: ([0-9.e+-]+) s", text)]
    peak = re.search(r"peak buffers ([0-9.]+) MiB", text)
    if len(times) != repeat + 1 or not peak:
        sys.exit(f"attention_bench: paxrun printed no times or peak:\n{text}")
    return times[1:], float(peak.group(1))


def agree(a, b):
    x = numpy_helper.to_array(onnx.load_tensor(os.path.join(a, "output_0.pb")))
    y = numpy_helper.to_array(onnx.load_tensor(os.path.join(b, "output_0.pb")))
    return float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", default="256,1024")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default="/tmp/pax-attention-bench")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    print("| seq | attention op s | unfused s | unfused / op | peak MiB op | peak MiB unfused |")
    print("|---|---|---|---|---|---|")
    for seq in [int(s) for s in a.seqs.split(",")]:
        plans = compile_both(a.build, a.work, seq)
        times = {"true": [], "false": []}
        peaks = {}
        for _ in range(a.rounds):
            for fuse in ("true", "false"):
                t, peaks[fuse] = time_plan(a.build, plans[fuse],
                                           os.path.join(a.work, f"out_{fuse}"), a.repeat)
                times[fuse] += t
        err = agree(os.path.join(a.work, "out_true"), os.path.join(a.work, "out_false"))
        if err > 1e-5:
            sys.exit(f"attention_bench: outputs differ at seq {seq}: {err:.2e}")
        fused, unfused = statistics.median(times["true"]), statistics.median(times["false"])
        print(f"| {seq} | {fused:.4f} | {unfused:.4f} | {unfused / fused:.2f}x | "
              f"{peaks['true']:.1f} | {peaks['false']:.1f} |")


if __name__ == "__main__":
    main()
