#!/usr/bin/env python3
"""Partitioned training equals one device: every static export of the
PyTorch corpus (test/models/torch) trained 3 steps of SGD with momentum on
1 device, then on 2, 4 and 8 devices with the searched strategy (dp), the
data-parallel and expert baselines and a random forced strategy (every op
split at random), on threads or, with --mpi, MPI ranks. For each run: the
losses and the weights after 3 steps equal the one-device run's within
--tol (relative, per tensor: max|a-b| / max|a|), and one step's collectives
move the bytes the cost model predicted (paxrun --comm-stats fails
otherwise). With --microbatches 1,2 every run is repeated with the step's
batch in 2 microbatches (models whose batch 2 does not divide are
skipped). With --zero 0,3 every run is repeated at each ZeRO stage
(paxc --zero). The labelled long test `train_matrix` (`ctest -L long`).
With --corpus=DIR it trains another corpus of the same layout (the model
families: --corpus=test/models/families); the loss is cross-entropy on an
output named `logits`, otherwise the mean squared error, on the first
output where there are several (--loss-output).

  train_matrix.py [--corpus DIR] [--bin DIR] [--work DIR] [--only NAME,...]
                  [--gpus 2,4,8] [--strategies dp,data-parallel,expert,random]
                  [--mpi] [--tol 1e-5] [--microbatches 1,2] [--zero 0,1,2,3]
                  [--precision fp32|bf16|fp16]

A model paxc cannot train (an op without a gradient rule) is skipped and
listed with paxc's error. Exits 1 on any other failure.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
FORCE = os.path.join(ROOT, "tools", "models", "force_strategy.py")
SAME = os.path.join(HERE, "same_weights.py")
TRAIN = ["--mode=train", "--lr=0.05", "--momentum=0.9"]


def loss_flags(entry):
    """The loss of a corpus entry: cross-entropy on logits, else the mean
    squared error; on the first of several outputs."""
    outputs = [o["name"] for o in entry.get("outputs", [])]
    loss = "cross-entropy" if outputs and outputs[0] == "logits" else "mse"
    flags = [f"--loss={loss}"]
    if len(outputs) > 1:
        flags.append(f"--loss-output={outputs[0]}")
    return loss, flags


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def losses(text):
    return [ln for ln in text.splitlines() if ln.startswith("step ")]


class Case:
    """One model's run: the options, tools, paths and one device's result."""

    def __init__(self, a, paxc, launch, model, work, data, one, ratios, train):
        self.a, self.paxc, self.launch, self.train = a, paxc, launch, train
        self.model, self.work, self.data, self.one = model, work, data, one
        self.ratios = ratios


def refused(r):
    """Whether paxc refused a step's microbatches by name (a count that does
    not divide the batch, an op that pairs or folds the batch)."""
    return any(why in r.stderr for why in
               ("do not divide", "pairs the batch", "folds the batch"))


def peak_ratio(text):
    """The cost model's peak over the peak paxrun measured (its run line)."""
    exact = re.search(r"the cost model's peak [0-9.]+ MiB \(([0-9.]+)x the "
                      r"measured\)", text)
    if exact:
        return float(exact.group(1))
    m = re.search(r"peak buffers ([0-9.]+) MiB per device.*the cost model's "
                  r"peak ([0-9.]+) MiB", text)
    return float(m.group(2)) / float(m.group(1)) if m and float(m.group(1)) else 0.0


def check(c, gpus, strategy, micro, zero, want):
    """Trains c.model on gpus devices with strategy, micro microbatches and
    ZeRO stage zero; ("ok" | "FAIL" | "skip", message)."""
    base = os.path.join(c.work, f"g{gpus}_{strategy}_m{micro}_z{zero}")
    flags = [f"--gpus={gpus}", f"--microbatches={micro}"]
    if zero:
        flags.append(f"--zero={zero}")
    if strategy in ("data-parallel", "expert"):
        flags.append(f"--solver={strategy}")
    elif strategy == "random":
        r = run([c.paxc, c.model, *c.train, *flags, "--emit=strategy",
                 "-o", base + ".search.json", "--quiet"])
        if r.returncode == 0:
            r = run([sys.executable, FORCE, base + ".search.json", "random",
                     f"--gpus={gpus}", f"--seed={gpus}", "-o", base + ".json"])
        if r.returncode:
            return ("skip" if refused(r) else "FAIL"), last_line(r.stderr)
        flags.append(f"--strategy={base}.json")
    r = run([c.paxc, c.model, *c.train, *flags, "-o", base + ".paxplan", "--quiet"])
    if r.returncode and refused(r):
        return "skip", last_line(r.stderr)
    if r.returncode == 0:
        r = c.launch(base + ".paxplan", gpus, ["--inputs", f"{c.data}/in", "--comm-stats"])
        memory = peak_ratio(r.stdout)
    if r.returncode == 0:
        r = c.launch(base + ".paxplan", gpus, ["--train", "--steps=3",
                                               f"--data={c.data}/in", f"--save={base}.onnx"])
        got = losses(r.stdout)
    if r.returncode == 0:
        r = run([sys.executable, SAME, c.one + ".onnx", base + ".onnx",
                 "--tol", str(c.a.tol)])
    if r.returncode:
        return "FAIL", last_line(r.stdout) or last_line(r.stderr)
    same = "same losses" if got == want else "losses differ in the last digits"
    c.ratios.append(memory)
    return "ok", f"{last_line(r.stdout)}; {same}; peak predicted/measured {memory:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=os.path.join(HERE, "torch"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default="/tmp/pax-train-matrix")
    ap.add_argument("--only")
    ap.add_argument("--gpus", default="2,4,8")
    ap.add_argument("--strategies", default="dp,data-parallel,expert,random")
    ap.add_argument("--mpi", action="store_true")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--precision", default="fp32",
                    help="paxc --precision of every plan (bf16, fp16: mixed "
                    "precision; give a --tol to match, e.g. 2e-2)")
    ap.add_argument("--microbatches", default="1",
                    help="microbatch counts per step, each run for every strategy")
    ap.add_argument("--zero", default="0",
                    help="ZeRO stages, each run for every strategy and count")
    a = ap.parse_args()
    TRAIN.append(f"--precision={a.precision}")
    paxc, paxrun = os.path.join(a.bin, "paxc"), os.path.join(a.bin, "paxrun")
    mpirun = shutil.which("mpirun") if a.mpi else None
    if a.mpi and not mpirun:
        print("train_matrix.py: --mpi needs mpirun on PATH")
        return 1
    manifest = json.load(open(os.path.join(a.corpus, "manifest.json")))
    only = set(a.only.split(",")) if a.only else None
    counts = {"ok": 0, "skip": 0, "FAIL": 0}
    failed, skipped, ratios = [], [], []
    start = time.time()

    def launch(plan, gpus, args):
        cmd = [paxrun, plan, *args]
        if mpirun:
            cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
                   str(gpus), *cmd]
        return run(cmd)

    for entry in manifest["models"]:
        name = entry["name"]
        model = os.path.join(a.corpus, name, "model.onnx")
        if entry.get("dynamic") or not os.path.exists(model) or (
                only and name not in only):
            continue
        work = os.path.join(a.work, name)
        os.makedirs(work, exist_ok=True)
        data = os.path.join(work, "data")
        loss, flags = loss_flags(entry)
        train = TRAIN + flags
        r = run([sys.executable, os.path.join(HERE, "make_test_data.py"), model,
                 data, "--seed", "3", "--loss", loss] +
                (["--loss-output", entry["outputs"][0]["name"]]
                 if len(entry.get("outputs", [])) > 1 else []))
        if r.returncode:
            counts["FAIL"] += 1
            failed.append(f"{name}: make_test_data.py: {last_line(r.stderr)}")
            continue
        one = os.path.join(work, "one")
        r = run([paxc, model, *train, "-o", one + ".paxplan", "--quiet"])
        if r.returncode:
            counts["skip"] += 1
            skipped.append(f"{name}: {last_line(r.stderr)}")
            print(f"skip  {name}: {last_line(r.stderr)}", flush=True)
            continue
        r = run([paxrun, one + ".paxplan", "--train", "--steps=3",
                 f"--data={data}/in", f"--save={one}.onnx"])
        if r.returncode:
            counts["FAIL"] += 1
            failed.append(f"{name} 1 device: {last_line(r.stderr)}")
            continue
        want = losses(r.stdout)
        for gpus in [int(g) for g in a.gpus.split(",")]:
            for strategy in a.strategies.split(","):
                for micro, zero in [(int(m), int(z))
                                    for m in a.microbatches.split(",")
                                    for z in a.zero.split(",")]:
                    tag = (f"{name} {gpus} {strategy}" +
                           (f" M={micro}" if micro > 1 else "") +
                           (f" ZeRO-{zero}" if zero else ""))
                    status, msg = check(Case(a, paxc, launch, model, work, data, one, ratios,
                                             train),
                                        gpus, strategy, micro, zero, want)
                    counts[status] += 1
                    if status == "FAIL":
                        failed.append(f"{tag}: {msg}")
                    elif status == "skip":
                        skipped.append(f"{tag}: {msg}")
                    print(f"{status:5} {tag}: {msg}", flush=True)
    for line in failed:
        print("FAILED " + line)
    print(f"train matrix: {counts['ok']} passed, {counts['FAIL']} failed, "
          f"{counts['skip']} skipped ({time.time() - start:.0f} s)")
    if ratios:
        near = sum(1 for r in ratios if abs(r - 1) <= 0.05)
        print(f"peak memory, the cost model's over the measured: {near} of "
              f"{len(ratios)} plans within 5% (from {min(ratios):.3f} to "
              f"{max(ratios):.3f})")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
