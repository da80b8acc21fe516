#!/usr/bin/env python3
"""Compares the initializers of two ONNX models (two runs' --save outputs).

  same_weights.py A.onnx B.onnx [--tol T]

Both models must hold the same initializers (names, shapes, types). For
each, the error is max|a - b| / max|a| (0 when both are all zeros); it
prints the largest and exits 1 when one is above T (default 1e-5), naming
the tensor. --tol 0 asks for bit-identical weights.
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def weights(path):
    return {t.name: numpy_helper.to_array(t)
            for t in onnx.load(path).graph.initializer}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    a, b = weights(args.a), weights(args.b)
    if a.keys() != b.keys():
        print(f"different initializers: {sorted(a.keys() ^ b.keys())}")
        return 1
    worst, where = 0.0, ""
    for name, x in a.items():
        y = b[name]
        if x.shape != y.shape or x.dtype != y.dtype:
            print(f"{name}: {x.dtype}{list(x.shape)} against {y.dtype}{list(y.shape)}")
            return 1
        if not np.issubdtype(x.dtype, np.floating):
            err = float(np.any(x != y))
        else:
            scale = np.abs(x).max() if x.size else 0.0
            diff = np.abs(x.astype(np.float64) - y).max() if x.size else 0.0
            err = diff / scale if scale > 0 else float(diff > 0)
        if err > worst or not where:
            worst, where = err, name
    if worst > args.tol:
        print(f"{where}: relative error {worst:.2e} above {args.tol:.0e}")
        return 1
    print(f"{len(a)} initializers, largest relative error {worst:.1e} ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
