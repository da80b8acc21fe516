#!/usr/bin/env python3
"""Checks `paxc --emit=summary --format=json` against counts made independently.

The expected parameter count is given (--params, the model's published count)
or, for ONNX light models, counted from the file: every ConstantOfShape output
and every float initializer of more than one element is a weight there, except
BatchNormalization's running mean and variance (statistics, not parameters).
Convolution, Gemm and MatMul FLOPs (a multiply-add counts 2) are recomputed
from ONNX's own shape inference and must match paxc's per-op breakdown.
Also: `unsupported_ops` is empty, and the `--emit=ir` text parses back with
paxc-opt and prints identically.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def light_parameters(model):
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    stats = {nd.input[k] for nd in model.graph.node
             if nd.op_type == "BatchNormalization" for k in (3, 4)}
    n = sum(int(np.prod(inits[nd.input[0]])) for nd in model.graph.node
            if nd.op_type == "ConstantOfShape" and nd.output[0] not in stats)
    n += sum(a.size for name, a in inits.items()
             if a.dtype == np.float32 and a.size > 1 and name not in stats)
    return n


def contraction_flops(model):
    """FLOPs of Conv, Gemm and MatMul from ONNX shape inference."""
    model = shape_inference.infer_shapes(model)
    shapes = {}
    for vi in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    for t in model.graph.initializer:
        shapes[t.name] = list(t.dims)
    const_shapes = {nd.output[0]: [int(v) for v in numpy_helper.to_array(
        next(i for i in model.graph.initializer if i.name == nd.input[0]))]
        for nd in model.graph.node if nd.op_type == "ConstantOfShape"
        and any(i.name == nd.input[0] for i in model.graph.initializer)}
    shapes.update(const_shapes)
    flops = {"conv": 0.0, "gemm": 0.0, "matmul": 0.0}
    for nd in model.graph.node:
        if nd.op_type == "Conv":
            w, y = shapes[nd.input[1]], shapes[nd.output[0]]
            flops["conv"] += 2.0 * np.prod(y, dtype=float) * np.prod(w[1:], dtype=float)
        elif nd.op_type == "Gemm":
            y, a = shapes[nd.output[0]], shapes[nd.input[0]]
            trans_a = any(at.name == "transA" and at.i for at in nd.attribute)
            flops["gemm"] += 2.0 * y[0] * y[1] * (a[0] if trans_a else a[1])
        elif nd.op_type == "MatMul":
            y, a = shapes[nd.output[0]], shapes[nd.input[0]]
            flops["matmul"] += 2.0 * np.prod(y, dtype=float) * a[-1]
    return {k: v for k, v in flops.items() if v}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("--params", type=int, help="expected parameter count")
    ap.add_argument("--paxc", default="paxc")
    ap.add_argument("--paxc-opt", default="paxc-opt")
    ap.add_argument("--batch", type=int,
                    help="run paxc with --batch=N; contraction FLOPs must scale by N/batch")
    args = ap.parse_args()

    extra = [f"--batch={args.batch}"] if args.batch else []
    # The importer's counts, with attention chains left as their matmuls
    # and each bias add its own op.
    out = subprocess.run([args.paxc, args.model, "--emit=summary", "--format=json", "--quiet",
                          "--fuse-attention=false", "--fuse-bias=false"] + extra,
                         check=True, capture_output=True, text=True).stdout
    summary = json.loads(out)
    model = onnx.load(args.model)
    failures = []

    want = args.params if args.params is not None else light_parameters(model)
    if summary["parameters"] != want:
        failures.append(f"parameters: paxc {summary['parameters']}, expected {want}")
    scale = 1.0
    if args.batch:
        first = model.graph.input[0].type.tensor_type.shape.dim[0].dim_value
        scale = args.batch / first
    for kind, flops in contraction_flops(model).items():
        flops *= scale
        got = summary["flops_by_op"].get(kind, 0)
        if abs(got - flops) > 1e-9 * flops:
            failures.append(f"{kind} flops: paxc {got:.6g}, expected {flops:.6g}")
    if summary["unsupported_ops"]:
        failures.append(f"unsupported ops: {summary['unsupported_ops']}")

    with tempfile.TemporaryDirectory() as tmp:
        first, second = os.path.join(tmp, "a.pir"), os.path.join(tmp, "b.pir")
        subprocess.run([args.paxc, args.model, "--emit=ir", "--quiet", "-o", first] + extra, check=True)
        subprocess.run([args.paxc_opt, first, "-o", second], check=True)
        if open(first).read() != open(second).read():
            failures.append("the IR does not print identically after a parse")

    name = os.path.basename(args.model)
    for f in failures:
        print(f"FAIL {name}: {f}")
    if not failures:
        print(f"ok {name}: parameters {summary['parameters']}, flops {summary['flops']:.4g}, "
              f"ops {summary['compute_ops']}, ir round trip")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
