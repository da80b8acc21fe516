#!/usr/bin/env python3
"""Memory and communication of training steps in fp32 and bf16: for
GPT-2 XL, Llama-7B and Llama-2-70B (tools/models/paxmodels.py, batch 1024)
on dgx-h100 clusters of 64 and 1024 GPUs, paxc's report (`--mode=train
--emit=report`, Adam) in each precision, twice: with the levers fixed
(`--zero=1 --microbatches=1 --recompute=all`, no memory limit: the same
strategy family in both precisions) and as the search chooses them under
the default 72 GiB limit. Prints a Markdown table: per-device peak,
bytes per device per step (resharding and gradient synchronization), the
predicted and simulated step, and bf16's ratio to fp32 per column.

  bench/precision_memory.py [--bin build/bin] [--work DIR] [--gpus 64,1024]
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [("GPT-2 XL", "gpt2-xl", ["--seq", "1024"]),
          ("Llama-7B", "llama", ["--seq", "2048"]),
          ("Llama-2-70B", "llama2-70b", [])]
FIXED = ["--zero=1", "--microbatches=1", "--recompute=all", "--mem-limit=100000"]


def report(paxc, model, gpus, precision, levers):
    cmd = [paxc, model, "--cluster=dgx-h100", f"--gpus={gpus}", "--mode=train",
           f"--precision={precision}", "--emit=report", "--quiet", *levers]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return {"error": r.stderr.strip().splitlines()[-1][:120]}
    t = r.stdout

    def get(pat):
        m = re.search(pat + r"\s+([0-9.]+) (ms|s|GiB|MiB)", t)
        return float(m.group(1)) * (1000 if m.group(2) == "s" else 1)
    return {"peak": get(r"memory per device:"),
            "comm": get(r"communication:"),
            "step": get(r"predicted step time:"),
            "sim": get(r"simulated step time:")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default="/tmp/pax-precision-memory")
    ap.add_argument("--gpus", default="64,1024")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    paxc = os.path.join(a.bin, "paxc")
    print("| model | GPUs | levers | fp32 peak GiB | bf16 peak GiB | ratio | "
          "fp32 comm MiB/step | bf16 comm MiB/step | ratio | fp32 step ms "
          "(sim.) | bf16 step ms (sim.) | ratio (sim.) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, preset, extra in MODELS:
        path = os.path.join(a.work, preset + ".onnx")
        if not os.path.exists(path):
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models",
                                                         "paxmodels.py"),
                            preset, "--batch", "1024", *extra, "--weights",
                            "constant-of-shape", "-o", path], check=True,
                           capture_output=True)
        for gpus in a.gpus.split(","):
            for label, levers in (("fixed", FIXED), ("searched", [])):
                f, b = (report(paxc, path, gpus, p, levers) for p in ("fp32", "bf16"))
                if "error" in f or "error" in b:
                    print(f"| {name} | {gpus} | {label} | {f.get('error', '')} "
                          f"| {b.get('error', '')} | | | | | | | |", flush=True)
                    continue
                ratio = lambda k: f"{b[k] / f[k]:.2f}x"
                print(f"| {name} | {gpus} | {label} | {f['peak']:.1f} | "
                      f"{b['peak']:.1f} | {ratio('peak')} | {f['comm']:.0f} | "
                      f"{b['comm']:.0f} | {ratio('comm')} | {f['step']:.0f} "
                      f"({f['sim']:.0f}) | {b['step']:.0f} ({b['sim']:.0f}) | "
                      f"{ratio('step')} ({ratio('sim')}) |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
