#!/usr/bin/env python3
"""--batch on the PyTorch export corpus (test/models/torch): every export is
compiled with --batch=N (N a multiple of its batch) for 4 devices and run on
its stored inputs repeated N / batch times along the batch dim. Batch rows
are independent, so the outputs must be the stored onnxruntime outputs
repeated the same way (relative L2 at most 1e-4). An export whose graph
bakes the batch in must instead be refused with the node that does and a
hint to export with a dynamic batch; anything else (a crash, a wrong shape,
a wrong value) fails.

  torch_batch.py [--models SUBSTR,...] [--times 2] [--bin build/bin]
                 [--work DIR]

Prints one line per export (rebatched, refused, or FAIL) and a summary;
exits non-zero on any failure.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_matrix  # noqa: E402

ROOT = torch_matrix.ROOT


def repeat_dir(src, dst, prefix, times):
    """Copies src/PREFIX_i.pb to dst, each tensor repeated `times` along dim
    0 (scalars as they are); returns the arrays."""
    os.makedirs(dst, exist_ok=True)
    out, i = [], 0
    while os.path.exists(f"{src}/{prefix}_{i}.pb"):
        t = onnx.load_tensor(f"{src}/{prefix}_{i}.pb")
        a = numpy_helper.to_array(t)
        if a.ndim:
            a = np.concatenate([a] * times, axis=0)
        onnx.save_tensor(numpy_helper.from_array(a, t.name), f"{dst}/{prefix}_{i}.pb")
        out.append(a)
        i += 1
    return out


def one(binary, name, times, work):
    d = os.path.join(torch_matrix.CORPUS, name)
    data = os.path.join(d, "test_data_set_0")
    w = os.path.join(work, name)
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    first = numpy_helper.to_array(onnx.load_tensor(f"{data}/input_0.pb"))
    batch = first.shape[0] * times
    repeat_dir(data, f"{w}/in", "input", times)
    stored, i = [], 0
    while os.path.exists(f"{data}/output_{i}.pb"):
        stored.append(numpy_helper.to_array(onnx.load_tensor(f"{data}/output_{i}.pb")))
        i += 1
    dims = [a for a in torch_matrix.dim_bindings(d) if "batch" not in a]
    plan = f"{w}/p.paxplan"
    r = subprocess.run([f"{binary}/paxc", f"{d}/model.onnx", f"--batch={batch}",
                        "--gpus=4", "--quiet", "-o", plan] + dims,
                       capture_output=True, text=True)
    if r.returncode:
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "?"
        if r.returncode < 0:
            return False, f"FAIL {name}: paxc crashed ({r.returncode}): {msg}"
        refused = ("node '" in msg or "graph output '" in msg) and "dynamic batch" in msg
        return refused, f"{'refused ' if refused else 'FAIL'} {name}: {msg[:240]}"
    r = subprocess.run([f"{binary}/paxrun", plan, "--inputs", f"{w}/in",
                        "--outputs", f"{w}/out"], capture_output=True, text=True)
    if r.returncode:
        return False, f"FAIL {name}: paxrun: {r.stderr.strip()[-240:]}"
    err = 0.0
    for i, want in enumerate(stored):
        got_path = f"{w}/out/output_{i}.pb"
        if not os.path.exists(got_path):
            return False, f"FAIL {name}: output {i} missing"
        got = numpy_helper.to_array(onnx.load_tensor(got_path)).astype(np.float64)
        # Every batch-sized dim of an output (CLIP's image x text logits has
        # two) repeats like the inputs.
        for ax in range(want.ndim):
            if got.ndim == want.ndim and got.shape[ax] == times * want.shape[ax] != want.shape[ax]:
                want = np.concatenate([want] * times, axis=ax)
        if got.shape != want.shape:
            return False, (f"FAIL {name}: output {i} has shape {got.shape}, "
                           f"expected {want.shape}")
        want = want.astype(np.float64)
        err = max(err, np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
    ok = err <= 1e-4
    return ok, f"{'rebatched' if ok else 'FAIL'} {name}: batch {batch}, rel L2 {err:.1e}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="")
    p.add_argument("--times", type=int, default=2)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--work", default=os.path.join(ROOT, "build", "torch-batch"))
    a = p.parse_args()
    names = torch_matrix.exports()
    if a.models:
        names = [n for n in names if any(s in n for s in a.models.split(","))]
    counts = {"rebatched": 0, "refused": 0, "FAIL": 0}
    for name in names:
        ok, line = one(a.bin, name, a.times, a.work)
        print(line, flush=True)
        counts[line.split()[0]] += 1
    print(f"torch_batch.py: {counts['rebatched']} rebatched, {counts['refused']} "
          f"refused with the node and a hint, {counts['FAIL']} failed")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
