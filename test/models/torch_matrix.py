#!/usr/bin/env python3
"""Runs the corpus of PyTorch exports (test/models/torch) through paxc and
paxrun and compares every output with the onnxruntime outputs stored next
to each export (relative L2 error at most 1e-4).

  torch_matrix.py [--models SUBSTR,...] [--gpus 1,4] [--cluster default,slow]
                  [--bin build/bin] [--work DIR]

Symbolic dims of dynamic exports are bound from the stored inputs' shapes.
Prints one line per run and a summary; exits non-zero on any failure.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "test", "models", "torch")
SLOW = os.path.join(ROOT, "test", "models", "clusters", "slow.json")


def dim_bindings(model_dir):
    """--dim NAME=VALUE for every symbolic input dim, from the test data."""
    m = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    args, k = [], 0
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        t = onnx.load_tensor(os.path.join(model_dir, "test_data_set_0", f"input_{k}.pb"))
        k += 1
        for d, n in zip(vi.type.tensor_type.shape.dim, t.dims):
            if d.dim_param and f"{d.dim_param}=" not in " ".join(args):
                args += ["--dim", f"{d.dim_param}={n}"]
    return args


def run_one(name, gpus, cluster, binary, work):
    d = os.path.join(CORPUS, name)
    plan = os.path.join(work, f"{name}_{gpus}_{cluster}.paxplan")
    outs = plan + ".out"
    cmd = [f"{binary}/paxc", os.path.join(d, "model.onnx"), "--quiet",
           f"--gpus={gpus}", "-o", plan] + dim_bindings(d)
    if cluster == "slow":
        cmd.append(f"--cluster={SLOW}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return False, "paxc: " + (r.stderr.strip().splitlines() or ["?"])[-1][:200]
    r = subprocess.run([f"{binary}/paxrun", plan, "--inputs",
                        os.path.join(d, "test_data_set_0"), "--outputs", outs],
                       capture_output=True, text=True)
    if r.returncode:
        return False, "paxrun: " + (r.stderr.strip().splitlines() or ["?"])[-1][:200]
    worst, i = 0.0, 0
    while os.path.exists(os.path.join(d, "test_data_set_0", f"output_{i}.pb")):
        want = numpy_helper.to_array(onnx.load_tensor(
            os.path.join(d, "test_data_set_0", f"output_{i}.pb"))).astype(np.float64)
        got = numpy_helper.to_array(onnx.load_tensor(
            os.path.join(outs, f"output_{i}.pb"))).astype(np.float64)
        if got.shape != want.shape:
            return False, f"output {i}: shape {got.shape}, expected {want.shape}"
        worst = max(worst, np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
        i += 1
    return worst <= 1e-4, f"rel L2 {worst:.1e} over {i} outputs"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="")
    p.add_argument("--gpus", default="1,4")
    p.add_argument("--cluster", default="default,slow")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--work", default="")
    a = p.parse_args()
    names = sorted(n for n in os.listdir(CORPUS)
                   if os.path.exists(os.path.join(CORPUS, n, "model.onnx")))
    if a.models:
        names = [n for n in names if any(s in n for s in a.models.split(","))]
    work = a.work or tempfile.mkdtemp(prefix="paxc-torch-")
    failed = passed = 0
    for name in names:
        for g in a.gpus.split(","):
            for c in a.cluster.split(","):
                if g == "1" and c == "slow":
                    continue
                ok, msg = run_one(name, int(g), c, a.bin, work)
                print(f"{'PASS' if ok else 'FAIL'} {name} gpus={g} cluster={c}: {msg}",
                      flush=True)
                passed += ok
                failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
