#!/usr/bin/env python3
"""Trains grad_models.py's perceptron in numpy (float64, its backward pass
derived by hand, torch's optimizer formulas from
test/models/reference_optimizers.py) and compares the weights with a
model paxrun --train --save wrote.

  mlp_reference.py MODEL DATA_DIR TRAINED --steps N --loss mse|cross-entropy
                   --optimizer sgd|adam|adamw [--lr ..] [--momentum ..]
                   [--nesterov] [--weight-decay ..] [--beta1 ..] [--beta2 ..]
                   [--adam-eps ..] [--clip-norm ..]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "models"))
from reference_optimizers import Optimizer, clipped  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("trained")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--loss", required=True)
    Optimizer.add_arguments(ap)
    ap.add_argument("--clip-per-shard", type=int, default=0,
                    help="clip each of K batch shards' gradients on its own "
                         "(what clipping before aggregation would do)")
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args()
    w = {t.name: nh.to_array(t).astype(np.float64)
         for t in onnx.load(a.model).graph.initializer}
    x = nh.to_array(onnx.load_tensor(f"{a.data}/input_0.pb")).astype(np.float64)
    labels = nh.to_array(onnx.load_tensor(f"{a.data}/input_1.pb"))
    opt = Optimizer.from_args(a)
    for _ in range(a.steps):
        h = x @ w["W1"] + w["b1"]
        r = np.maximum(h, 0)
        y = r @ w["W2"] + w["b2"]
        if a.loss == "mse":
            dy = 2 * (y - labels) / y.size
        else:
            p = np.exp(y - y.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            p[np.arange(len(labels)), labels] -= 1
            dy = p / len(labels)
        dh = (dy @ w["W2"].T) * (h > 0)

        def grads(rows):
            return {"b2": dy[rows].sum(0), "W2": r[rows].T @ dy[rows],
                    "b1": dh[rows].sum(0), "W1": x[rows].T @ dh[rows]}

        if a.clip_per_shard:
            shards = [clipped(grads(rows), a.clip_norm) for rows in
                      np.array_split(np.arange(len(x)), a.clip_per_shard)]
            g = {k: sum(s[k] for s in shards) for k in shards[0]}
            w = opt.step(w, g, clip=False)
        else:
            w = opt.step(w, grads(slice(None)))
    got = {t.name: nh.to_array(t).astype(np.float64)
           for t in onnx.load(a.trained).graph.initializer}
    worst = 0.0
    for k, v in w.items():
        err = np.abs(got[k] - v).max() / max(np.abs(v).max(), 1e-12)
        worst = max(worst, err)
    print(f"{len(w)} weights after {a.steps} steps, within {worst:.1e} of "
          f"the numpy reference")
    return 0 if worst <= a.tol else 1


if __name__ == "__main__":
    sys.exit(main())
