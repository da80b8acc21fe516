#!/usr/bin/env python3
"""Seeded inputs for every graph input of a model that has no initializer
(weights fed at run time included), in ONNX's test-data layout, and
onnxruntime's outputs; then compares paxrun's outputs with them.

  make_test_data.py MODEL OUT_DIR [--seed S] [--npy]
                    [--loss cross-entropy|mse [--loss-output NAME]
                     [--ignore-index N]]
      writes OUT_DIR/in/input_N.pb (or .npy) and OUT_DIR/ort/output_N.pb;
      with --loss, as `paxc --loss` compiles the model: seeded labels as
      the last input, and as the only output the loss, computed in float64
      numpy from onnxruntime's output (an independent reference)
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


def save(v, path, npy, name=None):
    if npy:
        np.save(path + ".npy", v)
    else:
        onnx.save_tensor(numpy_helper.from_array(v, name), path + ".pb")


def loss_value(y, labels, kind, ignore=None):
    """The loss paxc --loss appends, in float64: mse, or cross-entropy over
    y's last axis with positions labelled `ignore` left out."""
    y = y.astype(np.float64)
    if kind == "mse":
        return np.mean((y - labels.astype(np.float64)) ** 2)
    keep = np.ones(labels.shape, dtype=bool) if ignore is None else labels != ignore
    shifted = y - y.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp, np.where(keep, labels, 0)[..., None],
                                axis=-1)[..., 0]
    return -picked[keep].sum() / keep.sum()


def loss_of(y, kind, rng, ignore):
    """Seeded labels for output y and the loss over them."""
    if kind == "mse":
        labels = rng.uniform(-1, 1, size=y.shape).astype(np.float32)
    else:
        labels = rng.integers(0, y.shape[-1], size=y.shape[:-1], dtype=np.int64)
        if ignore is not None:
            keep = rng.random(size=labels.shape) < 0.75
            keep.flat[0] = True
            labels = np.where(keep, labels, ignore)
    return labels, loss_value(y, labels, kind, ignore)


def write(model, out, seed, npy, loss=None, loss_output=None, ignore=None):
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
            elif "token_type" in inp.name:  # BERT's segment ids
                v = np.zeros(inp.shape, dtype=np.int64)
        elif "bool" in inp.type:  # a mask buffer written as an input
            v = rng.random(size=inp.shape) < 0.8
        else:
            v = (rng.uniform(-1, 1, size=inp.shape) * 0.2).astype(np.float32)
        feeds[inp.name] = v
        save(v, f"{out}/in/input_{i}", npy, inp.name)
    outputs = sess.run(None, feeds)
    if loss:
        names = [o.name for o in sess.get_outputs()]
        y = outputs[names.index(loss_output) if loss_output else 0]
        labels, value = loss_of(y, loss, rng, ignore)
        save(labels, f"{out}/in/input_{len(feeds)}", npy, "labels")
        outputs = [np.array(value, dtype=np.float32)]
        print(f"{len(feeds) + 1} inputs, loss {float(value):.6f}")
    for i, o in enumerate(outputs):
        onnx.save_tensor(numpy_helper.from_array(o), f"{out}/ort/output_{i}.pb")
    if not loss:
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
    ap.add_argument("--loss", choices=["cross-entropy", "mse"])
    ap.add_argument("--loss-output")
    ap.add_argument("--ignore-index", type=int)
    a = ap.parse_args()
    if a.compare:
        return compare(a.paths[0], a.compare)
    write(a.paths[0], a.paths[1], a.seed, a.npy, a.loss, a.loss_output,
          a.ignore_index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
