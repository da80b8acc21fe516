#!/usr/bin/env python3
"""Replaces the ConstantOfShape weights of an ONNX light model with seeded
random initializers (scaled so activations stay in range), writes inputs
in ONNX's test-data layout and onnxruntime's outputs, and with --compare
checks paxrun's outputs against them (relative L2 error at most 1e-4).

  randomize_weights.py MODEL OUT_DIR [--seed S]
  randomize_weights.py OUT_DIR --compare
"""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def compare(out):
    worst = 0.0
    i = 0
    while os.path.exists(f"{out}/ort/output_{i}.pb"):
        want = numpy_helper.to_array(onnx.load_tensor(f"{out}/ort/output_{i}.pb"))
        got = numpy_helper.to_array(onnx.load_tensor(f"{out}/pax/output_{i}.pb"))
        got = got.reshape(want.shape)
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        worst = max(worst, err)
        i += 1
    print(f"{i} outputs, relative L2 error {worst:.2e}")
    return 0 if i and worst <= 1e-4 else 1


def random_weights(model, rng):
    """Replaces the ConstantOfShape weights of \\p model, in place, with
    seeded random initializers scaled by fan-in (1-D ones, biases and
    batch-norm parameters and statistics, uniform in [0.5, 1.5))."""
    original_inputs = list(model.graph.input)
    inits = {t.name: t for t in model.graph.initializer}
    keep = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            keep.append(node)
            continue
        shape = numpy_helper.to_array(inits[node.input[0]]).astype(int)
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        if len(shape) == 1:
            values = rng.uniform(0.5, 1.5, shape)
        else:
            values = rng.standard_normal(shape) / np.sqrt(fan_in)
        model.graph.initializer.append(
            numpy_helper.from_array(values.astype(np.float32), node.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(keep)
    # The shape tensors of the removed ConstantOfShape nodes are unused now.
    used = {i for n in model.graph.node for i in n.input}
    kept = [t for t in model.graph.initializer
            if t.name in used or t.name in {o.name for o in model.graph.output}]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    del model.graph.input[:]  # IR 3 lists initializers as inputs; rebuild
    model.graph.input.extend(
        v for v in original_inputs
        if v.name in used and v.name not in {t.name for t in kept})
    return model


def randomize(path, out, seed):
    rng = np.random.default_rng(seed)
    model = random_weights(onnx.load(path), rng)
    os.makedirs(f"{out}/in", exist_ok=True)
    os.makedirs(f"{out}/ort", exist_ok=True)
    onnx.save(model, f"{out}/model.onnx")
    init_names = {t.name for t in model.graph.initializer}
    feeds = {}
    for i, vi in enumerate(v for v in model.graph.input if v.name not in init_names):
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
        onnx.save_tensor(numpy_helper.from_array(feeds[vi.name], vi.name),
                         f"{out}/in/input_{i}.pb")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(f"{out}/model.onnx", options)
    feeds = {k: v for k, v in feeds.items() if k in {i.name for i in sess.get_inputs()}}
    for i, r in enumerate(sess.run(None, feeds)):
        onnx.save_tensor(numpy_helper.from_array(r), f"{out}/ort/output_{i}.pb")


def main():
    if len(sys.argv) == 3 and sys.argv[2] == "--compare":
        return compare(sys.argv[1])
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    randomize(a.model, a.out, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
