#!/usr/bin/env python3
"""CPU inference speed of bf16 and fp16 plans against fp32 in the same run:
BERT-base (tools/models/paxmodels.py, batch 1, 128 tokens) and ResNet-50
(test/models/onnx-light, batch 1; NCHW and --channels-last), one device.
Each plan runs `paxrun PLAN --repeat=N --time`; the median of the runs
after the first ("in all") is its time. Prints a Markdown table with each
precision's speed as a ratio to fp32's (above 1: faster).

  bench/cpu_precision.py [--bin build/bin] [--work DIR] [--repeat 8]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRECISIONS = ["fp32", "bf16", "fp16"]


def bert(work):
    """BERT-base and its inputs (token type ids in range)."""
    path = os.path.join(work, "bert.onnx")
    data = os.path.join(work, "bert-data")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models",
                                                     "paxmodels.py"), "bert",
                        "--batch", "1", "--seq", "128", "--weights",
                        "constant-of-shape", "-o", path],
                       check=True, capture_output=True)
    if not os.path.exists(data):
        subprocess.run([sys.executable, os.path.join(ROOT, "test", "models",
                                                     "make_test_data.py"),
                        path, data, "--seed", "1"], check=True,
                       capture_output=True)
    return path, ["--inputs=" + os.path.join(data, "in")]


def seconds(a, model, precision, flags, feed):
    plan = os.path.join(a.work, f"p-{os.path.basename(model)}-{precision}"
                        f"{'-'.join(flags)}.paxplan")
    subprocess.run([os.path.join(a.bin, "paxc"), model,
                    f"--precision={precision}", *flags, "-o", plan,
                    "--quiet"], check=True)
    r = subprocess.run([os.path.join(a.bin, "paxrun"), plan, *feed,
                        f"--repeat={a.repeat}", "--time"],
                       capture_output=True, text=True, check=True)
    runs = [float(m) for m in re.findall(r"([0-9.]+) s in all", r.stderr + r.stdout)]
    if len(runs) < 2:
        sys.exit(f"paxrun printed no times for {plan}")
    return statistics.median(runs[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-cpu-precision"))
    ap.add_argument("--repeat", type=int, default=8)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    resnet = os.path.join(ROOT, "test", "models", "onnx-light", "light_resnet50.onnx")
    bert_path, bert_feed = bert(a.work)
    cases = [("BERT-base (batch 1, 128 tokens)", bert_path, [], bert_feed),
             ("ResNet-50 (batch 1, NCHW)", resnet, [], ["--random-inputs"]),
             ("ResNet-50, --channels-last", resnet, ["--channels-last"],
              ["--random-inputs"])]
    print("| model | " + " | ".join(PRECISIONS) + " |")
    print("|---|" + "---|" * len(PRECISIONS))
    for name, model, flags, feed in cases:
        t = {p: seconds(a, model, p, flags, feed) for p in PRECISIONS}
        cells = [f"{t['fp32'] * 1e3:.1f} ms"]
        for p in PRECISIONS[1:]:
            cells.append(f"{t[p] * 1e3:.1f} ms ({t['fp32'] / t[p]:.2f}x)")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
