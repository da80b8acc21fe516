#!/usr/bin/env python3
"""Trains grad_models.py's perceptron in numpy (float64, its backward pass
derived by hand, torch's optimizer formulas) and compares the weights with a
model paxrun --train --save wrote.

  mlp_reference.py MODEL DATA_DIR TRAINED --steps N --loss mse|cross-entropy
                   --optimizer sgd|adam|adamw [--lr ..] [--momentum ..]
                   [--nesterov] [--weight-decay ..] [--clip-norm ..]
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper as nh


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("trained")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--loss", required=True)
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--clip-norm", type=float, default=0.0)
    ap.add_argument("--clip-per-shard", type=int, default=0,
                    help="clip each of K batch shards' gradients on its own "
                         "(what clipping before aggregation would do)")
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args()
    w = {t.name: nh.to_array(t).astype(np.float64)
         for t in onnx.load(a.model).graph.initializer}
    x = nh.to_array(onnx.load_tensor(f"{a.data}/input_0.pb")).astype(np.float64)
    labels = nh.to_array(onnx.load_tensor(f"{a.data}/input_1.pb"))
    state = {}
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, a.steps + 1):
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

        def clipped(g):
            norm = np.sqrt(sum((v ** 2).sum() for v in g.values()))
            coef = min(a.clip_norm / (norm + 1e-6), 1.0)
            return {k: v * coef for k, v in g.items()}
        if a.clip_per_shard:
            shards = [clipped(grads(rows)) for rows in
                      np.array_split(np.arange(len(x)), a.clip_per_shard)]
            g = {k: sum(s[k] for s in shards) for k in shards[0]}
        else:
            g = grads(slice(None))
            if a.clip_norm > 0:
                g = clipped(g)
        for k in g:
            d = g[k]
            if a.optimizer == "sgd":
                if a.weight_decay:
                    d = d + a.weight_decay * w[k]
                if a.momentum:
                    buf = a.momentum * state.get(k, 0) + d
                    state[k] = buf
                    d = d + a.momentum * buf if a.nesterov else buf
                w[k] = w[k] - a.lr * d
            else:
                if a.optimizer == "adam" and a.weight_decay:
                    d = d + a.weight_decay * w[k]
                if a.optimizer == "adamw" and a.weight_decay:
                    w[k] = w[k] * (1 - a.lr * a.weight_decay)
                m = b1 * state.get(("m", k), 0) + (1 - b1) * d
                v = b2 * state.get(("v", k), 0) + (1 - b2) * d * d
                state[("m", k)], state[("v", k)] = m, v
                denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
                w[k] = w[k] - a.lr / (1 - b1 ** t) * m / denom
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
