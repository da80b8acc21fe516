"""The attention op equals the unfused graph, forward and backward.

Three attention blocks as exporters write them, each with trainable Q, K,
V and output projections:

  eager  GPT-2's eager attention: Q.K^T / sqrt(d), a causal `where` mask
         with a finite fill, an additive padding mask, softmax, P.V;
  sdpa   torch's SDPA export: Q and K^T each scaled by d^-1/4, an additive
         mask from Where(mask, 0, -inf) with a fully masked query row,
         softmax, the Where(IsNaN(p), 0, p) guard, P.V;
  cross  cross-attention with heads merged into the batch ([B*H, S, d]),
         queries and keys of different lengths, the scale after the matmul.

For each, paxc compiles `--loss=mse --gradients` plans with the attention
op (the default) and without it (--fuse-attention=false), on one device
and on four with forced strategies (the heads split; seeded random splits
of every op, the gradients' reduction dims included), and paxrun runs them
on the same inputs (one also on the CUDA backend's row kernels, run on the
host: --backend=cuda-emulated). Every output (the block's output, the loss, every
weight's gradient) of every fused plan must equal the unfused one-device
run within 1e-6 of the tensor's largest magnitude; rows that are fully
masked are left out of the gradient check of `sdpa` (the unfused softmax's
gradient is NaN there, the fused one's zero).

  attention_equal.test.py DIR         writes the models and their inputs
  attention_equal.test.py DIR --check compiles, runs and compares
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

B, S, H, D = 2, 8, 4, 4
M = H * D
SK = 6  # cross: the keys' length


def weights(rng, names):
    return [numpy_helper.from_array(
        (0.4 * rng.standard_normal((M, M))).astype(np.float32), n)
        for n in names]


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def heads(x, tag, seq, perm):
    """[B, seq, M] -> [B, H, seq, D] (or with perm (0, 2, 3, 1): K^T)."""
    return [
        helper.make_node("Reshape", [x, "shape4_" + tag], [x + "_4"]),
        helper.make_node("Transpose", [x + "_4"], [x + "_h"], perm=perm),
    ]


def projections(src_q, src_kv):
    return [helper.make_node("MatMul", [src_q, "wq"], ["q"]),
            helper.make_node("MatMul", [src_kv, "wk"], ["k"]),
            helper.make_node("MatMul", [src_kv, "wv"], ["v"])]


def merge(out, seq):
    return [helper.make_node("Transpose", [out], ["o_t"], perm=(0, 2, 1, 3)),
            helper.make_node("Reshape", ["o_t", "shape3"], ["o_m"]),
            helper.make_node("MatMul", ["o_m", "wo"], ["y"])]


def eager_model(rng):
    causal = np.tril(np.ones((S, S), bool))[None, None]
    pad = np.zeros((B, 1, 1, S), np.float32)
    pad[1, 0, 0, 6:] = -1e9
    nodes = projections("x", "x")
    nodes += heads("q", "q", S, (0, 2, 1, 3)) + heads("k", "q", S, (0, 2, 3, 1))
    nodes += heads("v", "q", S, (0, 2, 1, 3))
    nodes += [
        helper.make_node("MatMul", ["q_h", "k_h"], ["s"]),
        helper.make_node("Div", ["s", "root_d"], ["s1"]),
        helper.make_node("Where", ["causal", "s1", "fill"], ["s2"]),
        helper.make_node("Add", ["s2", "pad"], ["s3"]),
        helper.make_node("Softmax", ["s3"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v_h"], ["o"]),
    ] + merge("o", S)
    inits = weights(rng, ["wq", "wk", "wv", "wo"]) + [
        const("causal", causal), const("pad", pad),
        const("root_d", np.float32(np.sqrt(D))),
        const("fill", np.float32(np.finfo(np.float32).min)),
        const("shape4_q", np.array([B, S, H, D], np.int64)),
        const("shape3", np.array([B, S, M], np.int64))]
    return nodes, inits, [("x", [B, S, M])], [B, S, M]


def sdpa_model(rng):
    mask = np.tril(np.ones((S, S), bool))[None, None].repeat(B, 0)
    mask[1, 0, 3, :] = False  # a fully masked query row
    nodes = projections("x", "x")
    nodes += heads("q", "q", S, (0, 2, 1, 3)) + heads("k", "q", S, (0, 2, 3, 1))
    nodes += heads("v", "q", S, (0, 2, 1, 3))
    nodes += [
        helper.make_node("Mul", ["q_h", "quarter"], ["qs"]),
        helper.make_node("Mul", ["k_h", "quarter"], ["ks"]),
        helper.make_node("Where", ["mask", "zero", "minus_inf"], ["bias"]),
        helper.make_node("MatMul", ["qs", "ks"], ["s"]),
        helper.make_node("Add", ["s", "bias"], ["s1"]),
        helper.make_node("Softmax", ["s1"], ["p"], axis=-1),
        helper.make_node("IsNaN", ["p"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "p"], ["p1"]),
        helper.make_node("MatMul", ["p1", "v_h"], ["o"]),
    ] + merge("o", S)
    inits = weights(rng, ["wq", "wk", "wv", "wo"]) + [
        const("mask", mask), const("zero", np.float32(0)),
        const("minus_inf", np.float32(-np.inf)),
        const("quarter", np.float32(D ** -0.25)),
        const("shape4_q", np.array([B, S, H, D], np.int64)),
        const("shape3", np.array([B, S, M], np.int64))]
    return nodes, inits, [("x", [B, S, M])], [B, S, M]


def cross_model(rng):
    nodes = projections("x", "mem")
    for n, seq in (("q", S), ("k", SK), ("v", SK)):
        nodes += [
            helper.make_node("Reshape", [n, f"shape4_{n}"], [n + "_4"]),
            helper.make_node("Transpose", [n + "_4"], [n + "_t"],
                             perm=(0, 2, 1, 3)),
            helper.make_node("Reshape", [n + "_t", f"shape3h_{n}"],
                             [n + "_h"])]
    nodes += [
        helper.make_node("Transpose", ["k_h"], ["k_ht"], perm=(0, 2, 1)),
        helper.make_node("MatMul", ["q_h", "k_ht"], ["s"]),
        helper.make_node("Mul", ["s", "scale"], ["s1"]),
        helper.make_node("Softmax", ["s1"], ["p"], axis=2),
        helper.make_node("MatMul", ["p", "v_h"], ["o3"]),
        helper.make_node("Reshape", ["o3", "shape4_o"], ["o"]),
    ] + merge("o", S)
    inits = weights(rng, ["wq", "wk", "wv", "wo"]) + [
        const("scale", np.float32(D ** -0.5)),
        const("shape4_q", np.array([B, S, H, D], np.int64)),
        const("shape4_k", np.array([B, SK, H, D], np.int64)),
        const("shape4_v", np.array([B, SK, H, D], np.int64)),
        const("shape3h_q", np.array([B * H, S, D], np.int64)),
        const("shape3h_k", np.array([B * H, SK, D], np.int64)),
        const("shape3h_v", np.array([B * H, SK, D], np.int64)),
        const("shape4_o", np.array([B, H, S, D], np.int64)),
        const("shape3", np.array([B, S, M], np.int64))]
    return nodes, inits, [("x", [B, S, M]), ("mem", [B, SK, M])], [B, S, M]


MODELS = {"eager": eager_model, "sdpa": sdpa_model, "cross": cross_model}


def write(out):
    rng = np.random.default_rng(5)
    for name, build in MODELS.items():
        nodes, inits, inputs, yshape = build(rng)
        graph = helper.make_graph(
            nodes, name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
             for n, s in inputs],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, yshape)],
            inits)
        model = helper.make_model(graph,
                                  opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, f"{out}/{name}.onnx")
        os.makedirs(f"{out}/{name}/in", exist_ok=True)
        tensors = [rng.standard_normal(s).astype(np.float32)
                   for _, s in inputs]
        tensors.append(rng.uniform(-1, 1, yshape).astype(np.float32))
        for i, t in enumerate(tensors):
            onnx.save_tensor(numpy_helper.from_array(t),
                             f"{out}/{name}/in/input_{i}.pb")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def outputs(d):
    return [numpy_helper.to_array(onnx.load_tensor(f))
            for f in sorted(glob.glob(f"{d}/output_*.pb"),
                            key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]


def plans(out, name):
    """(label, paxc flags) of every plan: one device, heads split, and
    seeded random splits of every op."""
    model = f"{out}/{name}.onnx"
    base = [model, "--loss=mse", "--gradients", "--quiet"]
    result = [("1 device", [])]
    for fuse in ("true", "false"):
        strategy = f"{out}/{name}_{fuse}.json"
        run(["paxc", *base, "--gpus=4", f"--fuse-attention={fuse}",
             "--emit=strategy", "-o", strategy])
        for pattern, seed in (("channel", 1), ("random", 1), ("random", 2),
                              ("random", 3)):
            forced = f"{out}/{name}_{fuse}_{pattern}{seed}.json"
            run([sys.executable, FORCE, strategy, pattern, "--gpus=4",
                 f"--seed={seed}", "-o", forced])
            result.append((f"4 devices, {pattern} {seed}",
                           ["--gpus=4", f"--strategy={forced}"], fuse))
    # The CUDA backend's row kernels (forward and both gradients), run on
    # the host.
    result.append(("4 devices, random 1, cuda-emulated",
                   ["--gpus=4", f"--strategy={out}/{name}_true_random1.json"],
                   "true", ["--backend=cuda-emulated"]))
    return base, result


def compare(name, label, got, want, skip_rows):
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            sys.exit(f"{name} {label}: output {i} has shape {g.shape}, "
                     f"expected {w.shape}")
        if skip_rows and i > 0:
            keep = np.isfinite(w)
            g, w = g[keep], w[keep]
        scale = max(float(np.max(np.abs(w))), 1e-30) if w.size else 1.0
        err = float(np.max(np.abs(g - w))) / scale if w.size else 0.0
        if not np.isfinite(err) or err > 1e-6:
            sys.exit(f"{name} {label}: output {i} differs by {err:.3g} of "
                     f"its largest magnitude")
        worst = max(worst, err)
    return worst


def check(out):
    for name in MODELS:
        base, variants = plans(out, name)
        data = f"{out}/{name}/in"
        run(["paxc", *base, "--fuse-attention=false", "-o",
             f"{out}/{name}_ref.paxplan"])
        run(["paxrun", f"{out}/{name}_ref.paxplan", "--inputs", data,
             "--outputs", f"{out}/{name}_ref"])
        want = outputs(f"{out}/{name}_ref")
        worst = 0.0
        for v in variants:
            label, flags = v[0], v[1]
            fuse = v[2] if len(v) > 2 else "true"
            plan = f"{out}/{name}_{label.replace(' ', '_').replace(',', '')}_{fuse}.paxplan"
            run(["paxc", *base, *flags, f"--fuse-attention={fuse}", "-o", plan])
            dst = f"{out}/{name}_{label.replace(' ', '_').replace(',', '')}_{fuse}"
            run(["paxrun", plan, "--inputs", data, "--outputs", dst,
                 *(v[3] if len(v) > 3 else [])])
            worst = max(worst, compare(name, f"{label} fuse={fuse}",
                                       outputs(dst), want, name == "sdpa"))
        print(f"{name}: {len(variants)} plans equal the unfused one-device "
              f"run, largest difference {worst:.2g} of the tensor's "
              f"largest magnitude")


FORCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                     "..", "tools", "models", "force_strategy.py")

if __name__ == "__main__":
    if "--check" in sys.argv:
        check(sys.argv[1])
    else:
        write(sys.argv[1])
