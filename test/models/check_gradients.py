#!/usr/bin/env python3
"""Checks paxrun's gradients against float64 central differences.

  check_gradients.py MODEL DATA_DIR PAX_DIR --loss mse|cross-entropy
                     [--ignore-index N] [--loss-output NAME]
                     [--samples K] [--tol T]

MODEL is the model as exported (without the loss); DATA_DIR/in holds its
inputs and the labels last (make_test_data.py --loss); PAX_DIR holds
paxrun's outputs of a plan compiled with `paxc --loss=... --gradients`: the
loss, then `grad/NAME` per parameter. The reference is independent of
paxc: the model converted to float64 and run by onnx's reference evaluator,
the loss computed in numpy (make_test_data.loss_value), and each gradient
element estimated by central differences. Every gradient paxrun wrote is
checked, K elements of each (all when it has fewer), each within T times
the largest gradient magnitude of its tensor (default 1e-4; at least a
thousandth of the model's largest gradient: float32's absolute error); the
float initializers without a gradient (paxc's constants, --freeze) are
listed.
"""
import argparse
import glob
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "models"))
from make_test_data import loss_value  # noqa: E402
from onnx_float64 import to_float64  # noqa: E402


class LayerNormalization64(OpRun):
    """ONNX LayerNormalization with its statistics in the input's type (the
    reference evaluator computes them in float32, its stash_type default)."""
    op_domain = ""

    def _run(self, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
        axes = tuple(range(axis % x.ndim, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        y = (x - mean) / np.sqrt(var + epsilon) * scale
        if bias is not None:
            y = y + bias
        return (y.astype(x.dtype),)


LayerNormalization64.__name__ = "LayerNormalization"


class BatchNormalization64(OpRun):
    """ONNX BatchNormalization in the input's type (the reference
    evaluator's version disagrees with onnxruntime's on 4-d inputs): with
    the running statistics, or in training mode (or every node under
    BATCH_STATS) with the batch's mean and population variance over every
    axis but the channels; then it also returns the running statistics
    moved toward them, ONNX's definition."""
    op_domain = ""
    BATCH_STATS = False

    def _run(self, x, scale, bias, mean, var, epsilon=1e-5, momentum=0.9,
             training_mode=0, spatial=1):
        shape = (1, -1) + (1,) * (x.ndim - 2)
        if not (training_mode or self.BATCH_STATS):
            y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
            return ((y * scale.reshape(shape) + bias.reshape(shape)).astype(x.dtype),)
        bmean, bvar = self.batch_stats(x, mean, var, momentum)[2:]
        y = (x - bmean.reshape(shape)) / np.sqrt(bvar.reshape(shape) + epsilon)
        y = y * scale.reshape(shape) + bias.reshape(shape)
        out = (y.astype(x.dtype),) + self.batch_stats(x, mean, var, momentum)[:2]
        return out[:len(self.onnx_node.output)]

    @staticmethod
    def batch_stats(x, mean, var, momentum):
        """The moved running mean and variance, then the batch's."""
        axes = (0,) + tuple(range(2, x.ndim))
        bmean = x.mean(axis=axes)
        shape = (1, -1) + (1,) * (x.ndim - 2)
        bvar = ((x - bmean.reshape(shape)) ** 2).mean(axis=axes)
        return (mean * momentum + bmean * (1 - momentum),
                var * momentum + bvar * (1 - momentum), bmean, bvar)


BatchNormalization64.__name__ = "BatchNormalization"


class LRN64(OpRun):
    """ONNX LRN as its specification and onnxruntime compute it (the
    reference evaluator's version differs from both): the sum of squares
    over channels c - floor((size-1)/2) .. c + ceil((size-1)/2)."""
    op_domain = ""

    def _run(self, x, alpha=1e-4, beta=0.75, bias=1.0, size=1):
        c = x.shape[1]
        lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
        sq = x * x
        total = np.zeros_like(x)
        for i in range(c):
            total[:, i] = sq[:, max(0, i - lo):min(c, i + hi + 1)].sum(axis=1)
        return ((x / (bias + alpha / size * total) ** beta).astype(x.dtype),)


LRN64.__name__ = "LRN"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("pax")
    ap.add_argument("--loss", required=True, choices=["mse", "cross-entropy"])
    ap.add_argument("--ignore-index", type=int)
    ap.add_argument("--loss-output")
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--eps", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batchnorm", choices=["graph", "batch-stats"],
                    default="graph")
    a = ap.parse_args()
    BatchNormalization64.BATCH_STATS = a.batchnorm == "batch-stats"

    model = onnx.load(a.model)
    m64, params = to_float64(model, params_as_inputs=True)
    sess = ReferenceEvaluator(m64, new_ops=[LayerNormalization64,
                                            BatchNormalization64, LRN64])
    names = [i.name for i in model.graph.input
             if i.name not in {t.name for t in model.graph.initializer}]
    feeds = {}
    for k, name in enumerate(names):
        v = numpy_helper.to_array(onnx.load_tensor(f"{a.data}/in/input_{k}.pb"))
        feeds[name] = v.astype(np.float64) if v.dtype == np.float32 else v
    labels = numpy_helper.to_array(
        onnx.load_tensor(f"{a.data}/in/input_{len(names)}.pb"))
    outputs = [o.name for o in model.graph.output]
    which = outputs.index(a.loss_output) if a.loss_output else 0

    def loss(values):
        y = sess.run(None, {**feeds, **values})[which]
        return loss_value(y, labels, a.loss, a.ignore_index)

    got = {}
    for f in glob.glob(f"{a.pax}/output_*.pb"):
        t = onnx.load_tensor(f)
        got[t.name] = numpy_helper.to_array(t).astype(np.float64)
    base = loss(params)
    assert abs(got["loss"] - base) <= 1e-5 * max(1.0, abs(base)), \
        f"loss {got['loss']} against the reference {base}"
    rng = np.random.default_rng(a.seed)
    # A gradient far smaller than the model's largest (a bias a softmax
    # nearly cancels) is checked against a floor: float32 sums carry
    # absolute errors of that size.
    floor = 1e-3 * max(np.abs(g).max() for k, g in got.items()
                       if k.startswith("grad/"))
    worst = 0.0
    checked = 0
    fixed = []
    for name, p in params.items():
        key = "grad/" + name
        if key not in got:
            fixed.append(name)
            continue
        g = got[key]
        assert g.shape == p.shape, f"{key}: shape {g.shape}, parameter {p.shape}"
        idx = rng.permutation(p.size)[:a.samples]
        fd = np.zeros(len(idx))
        for j, i in enumerate(idx):
            plus, minus = p.copy(), p.copy()
            plus.flat[i] += a.eps
            minus.flat[i] -= a.eps
            fd[j] = (loss({**params, name: plus}) -
                     loss({**params, name: minus})) / (2 * a.eps)
        scale = max(np.abs(g).max(), np.abs(fd).max(), floor, 1e-12)
        err = np.abs(g.flat[idx] - fd).max() / scale
        worst = max(worst, err)
        checked += 1
        if err > a.tol:
            print(f"{key}: relative error {err:.2e} over {len(idx)} elements")
            return 1
    print(f"{checked} parameters, loss {base:.6f}, gradients within "
          f"{worst:.1e} of float64 central differences")
    if fixed:
        print("float initializers without a gradient: " + ", ".join(sorted(fixed)))
    # Running statistics a batch-statistics BatchNormalization moved.
    for key in sorted(k for k in got if k.startswith("update/")):
        name = key[len("update/"):]
        node = next(n for n in m64.graph.node if n.op_type == "BatchNormalization"
                    and name in n.input[3:5])
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        x = sess.run([node.input[0]], {**feeds, **params})[0]
        want = BatchNormalization64.batch_stats(
            x, params[node.input[3]], params[node.input[4]],
            attrs.get("momentum", 0.9))[node.input[3:5].index(name)]
        err = np.abs(got[key] - want).max() / max(np.abs(want).max(), 1e-12)
        if err > a.tol:
            print(f"{key}: relative error {err:.2e} against the reference")
            return 1
        print(f"{key}: running statistic within {err:.1e} of the reference")
    extra = [k for k in got if k.startswith("grad/") and k[5:] not in params]
    assert not extra, f"gradients of no initializer: {extra}"
    return 0 if checked else 1


if __name__ == "__main__":
    sys.exit(main())
