#!/usr/bin/env python3
"""Seeded inputs for every graph input of a model that has no initializer
(weights fed at run time included), in ONNX's test-data layout, and
onnxruntime's outputs; then compares paxrun's outputs with them.

  make_test_data.py MODEL OUT_DIR [--seed S] [--npy]
      writes OUT_DIR/in/input_N.pb (or .npy) and OUT_DIR/ort/output_N.pb
  make_test_data.py OUT_DIR --compare PAX_DIR
      relative L2 error of PAX_DIR/output_N.(pb|npy); fails above 1e-4
"""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def write(model, out, seed, npy):
    rng = np.random.default_rng(seed)
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    os.makedirs(f"{out}/in", exist_ok=True)
    os.makedirs(f"{out}/ort", exist_ok=True)
    feeds = {}
    for i, inp in enumerate(sess.get_inputs()):
        if "int" in inp.type:
            v = rng.integers(0, 32, size=inp.shape, dtype=np.int64)
            if "mask" in inp.name:
                v = np.ones(inp.shape, dtype=np.int64)
        elif "bool" in inp.type:  # a mask buffer written as an input
            v = rng.random(size=inp.shape) < 0.8
        else:
            v = (rng.uniform(-1, 1, size=inp.shape) * 0.2).astype(np.float32)
        feeds[inp.name] = v
        if npy:
            np.save(f"{out}/in/input_{i}.npy", v)
        else:
            onnx.save_tensor(numpy_helper.from_array(v, inp.name),
                             f"{out}/in/input_{i}.pb")
    for i, o in enumerate(sess.run(None, feeds)):
        onnx.save_tensor(numpy_helper.from_array(o), f"{out}/ort/output_{i}.pb")
    print(f"{len(feeds)} inputs, {i + 1} outputs")


def compare(out, pax):
    worst, i = 0.0, 0
    while os.path.exists(f"{out}/ort/output_{i}.pb"):
        want = numpy_helper.to_array(onnx.load_tensor(f"{out}/ort/output_{i}.pb"))
        if os.path.exists(f"{pax}/output_{i}.npy"):
            got = np.load(f"{pax}/output_{i}.npy")
        else:
            got = numpy_helper.to_array(onnx.load_tensor(f"{pax}/output_{i}.pb"))
        got = got.reshape(want.shape).astype(np.float64)
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        worst = max(worst, err)
        i += 1
    print(f"{i} outputs, relative L2 error {worst:.2e}")
    return 0 if i and worst <= 1e-4 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--npy", action="store_true")
    ap.add_argument("--compare")
    a = ap.parse_args()
    if a.compare:
        return compare(a.paths[0], a.compare)
    write(a.paths[0], a.paths[1], a.seed, a.npy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
