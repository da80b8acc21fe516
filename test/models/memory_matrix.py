#!/usr/bin/env python3
"""Predicted against measured memory: for static exports of the PyTorch
corpus (test/models/torch), the cost model's per-device peak that paxc
writes into a plan against the peak of live buffers paxrun measures
running it, over inference and training plans (SGD with momentum), on 4
and 8 devices, with the searched strategy (dp) and a random forced one.
Prints one line per plan and how many are within --within (default 5%).

  memory_matrix.py [--bin DIR] [--work DIR] [--only NAME,...]
                   [--gpus 4,8] [--strategies dp,random]
                   [--modes infer,train] [--within 0.05]

Exits 1 when a plan does not compile or run, or one is outside --within
with --strict.
"""
import argparse
import json
import os
import re
import sys

from train_matrix import last_line, run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
FORCE = os.path.join(ROOT, "tools", "models", "force_strategy.py")
MODES = {"infer": [],
         "train": ["--mode=train", "--loss=cross-entropy", "--lr=0.05",
                   "--momentum=0.9"]}
DEFAULT_MODELS = ("gpt2_eager_ts,bert_eager_ts,llama_eager_ts,t5_ts,"
                  "resnet_ts,mobilenet_v2_ts,swin_ts")


def ratio(text):
    """The cost model's peak over the measured one (paxrun's run line)."""
    m = re.search(r"the cost model's peak [0-9.]+ MiB \(([0-9.]+)x the "
                  r"measured\)", text)
    return float(m.group(1)) if m else None


def plan(a, paxc, model, work, gpus, strategy, mode):
    """Compiles one plan; (path, error)."""
    base = os.path.join(work, f"{mode}_g{gpus}_{strategy}")
    flags = [*MODES[mode], f"--gpus={gpus}"]
    if strategy == "random":
        r = run([paxc, model, *flags, "--emit=strategy", "-o",
                 base + ".search.json", "--quiet"])
        if r.returncode == 0:
            r = run([sys.executable, FORCE, base + ".search.json", "random",
                     f"--gpus={gpus}", f"--seed={gpus}", "-o", base + ".json"])
        if r.returncode:
            return None, last_line(r.stderr)
        flags.append(f"--strategy={base}.json")
    r = run([paxc, model, *flags, "-o", base + ".paxplan", "--quiet"])
    return (base + ".paxplan", None) if r.returncode == 0 else (
        None, last_line(r.stderr))


def measure(paxrun, path, data):
    r = run([paxrun, path, "--inputs", data])
    if r.returncode:
        return None, last_line(r.stderr)
    got = ratio(r.stdout)
    return (got, None) if got else (None, "no peak ratio in: " +
                                    last_line(r.stdout))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default="/tmp/pax-memory-matrix")
    ap.add_argument("--only", default=DEFAULT_MODELS)
    ap.add_argument("--gpus", default="4,8")
    ap.add_argument("--strategies", default="dp,random")
    ap.add_argument("--modes", default="infer,train")
    ap.add_argument("--within", type=float, default=0.05)
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args()
    paxc, paxrun = (os.path.join(a.bin, t) for t in ("paxc", "paxrun"))
    ratios, failed = [], []
    for name in a.only.split(","):
        model = os.path.join(HERE, "torch", name, "model.onnx")
        if not os.path.exists(model):
            failed.append(f"{name}: no model at {model}")
            continue
        work = os.path.join(a.work, name)
        os.makedirs(work, exist_ok=True)
        data = os.path.join(work, "data")
        r = run([sys.executable, os.path.join(HERE, "make_test_data.py"),
                 model, data, "--seed", "3", "--loss", "cross-entropy"])
        if r.returncode:
            failed.append(f"{name}: make_test_data.py: {last_line(r.stderr)}")
            continue
        for mode in a.modes.split(","):
            for gpus in (int(g) for g in a.gpus.split(",")):
                for strategy in a.strategies.split(","):
                    what = f"{name} {mode} {gpus} {strategy}"
                    path, err = plan(a, paxc, model, work, gpus, strategy, mode)
                    if path:
                        got, err = measure(paxrun, path, data + "/in")
                    if err:
                        failed.append(f"{what}: {err}")
                        print(f"FAIL  {what}: {err}", flush=True)
                        continue
                    ratios.append(got)
                    near = abs(got - 1) <= a.within
                    print(f"{'ok  ' if near else 'off '}  {what}: predicted/"
                          f"measured {got:.3f}", flush=True)
    if ratios:
        near = sum(1 for r in ratios if abs(r - 1) <= a.within)
        print(f"memory matrix: {near} of {len(ratios)} plans within "
              f"{a.within:.0%} (from {min(ratios):.3f} to {max(ratios):.3f}), "
              f"{len(failed)} failed")
    for f in failed:
        print("failed:", f)
    off = any(abs(r - 1) > a.within for r in ratios)
    return 1 if failed or (a.strict and off) else 0


if __name__ == "__main__":
    sys.exit(main())
