#!/usr/bin/env python3
"""Decoding throughput: paxrun's loop (--decode-steps, the caches fed
back) against onnxruntime running the same step in a Python loop, in the
same run, on this machine's CPU, one device and one thread each
(PAX_THREADS=1; onnxruntime intra_op_num_threads=1). Prints steps per
second of each and paxrun's ratio.

  bench/decode_loop.py [--bin build/bin] [--steps 64] [--layers 4]
      [--width 256] [--heads 8] [--cache 128] [--vocab 1000] [--batch 4]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FEEDBACK = "next_token=input_ids,next_position=position,present_*=past_*"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--steps", type=int, default=64)
    sizes = dict(layers=4, width=256, heads=8, cache=128, vocab=1000, batch=4)
    for k, v in sizes.items():
        ap.add_argument(f"--{k}", type=int, default=v)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gen = [sys.executable, os.path.join(ROOT, "tools", "models", "decode_model.py"), tmp,
               "--steps", str(a.steps), "--time"]
        for k in sizes:
            gen += [f"--{k}", str(getattr(a, k))]
        ort = subprocess.run(gen, capture_output=True, text=True, check=True).stdout
        plan = os.path.join(tmp, "step.paxplan")
        subprocess.run([os.path.join(a.bin, "paxc"), os.path.join(tmp, "model.onnx"), "-o",
                        plan, "--quiet"], check=True)
        pax = subprocess.run([os.path.join(a.bin, "paxrun"), plan, "--inputs",
                              os.path.join(tmp, "in"), f"--decode-steps={a.steps}",
                              "--feedback", FEEDBACK, "--threads=1"],
                             capture_output=True, text=True, check=True).stdout
    ort_rate = float(re.search(r"\(([0-9.]+) steps/s\)", ort).group(1))
    pax_rate = float(re.search(r"after the first, ([0-9.]+) steps/s", pax).group(1))
    print(f"decode step: {a.layers} layers, width {a.width}, {a.heads} heads, cache "
          f"{a.cache}, vocab {a.vocab}, batch {a.batch}; {a.steps} steps")
    print(f"onnxruntime loop: {ort_rate:.1f} steps/s ({ort_rate * a.batch:.1f} tokens/s)")
    print(f"paxrun loop:      {pax_rate:.1f} steps/s ({pax_rate * a.batch:.1f} tokens/s), "
          f"{pax_rate / ort_rate:.2f}x onnxruntime")


if __name__ == "__main__":
    main()
