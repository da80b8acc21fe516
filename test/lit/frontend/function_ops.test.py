"""Checks of function_ops.test (and resize, convtranspose): outputs
against onnxruntime's; training losses that fall and agree between device
counts.

  function_ops.test.py same WANT.pb GOT.pb ...
  function_ops.test.py train ONE.txt FOUR.txt [RATIO]
"""
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def load(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t).astype(np.float64)


def losses(path):
    return [float(m.group(1)) for m in
            re.finditer(r"step \d+: loss ([0-9.eE+-]+)", open(path).read())]


if sys.argv[1] == "same":
    want = load(sys.argv[2])
    got = [load(p) for p in sys.argv[3:]]
    ok = sum(bool(np.allclose(g, want, rtol=1e-5, atol=1e-5)) for g in got)
    print(f"equal to onnxruntime's within 1e-05: {ok} of {len(got)}")
else:
    one, four = losses(sys.argv[2]), losses(sys.argv[3])
    # The last loss below this share of the first (default: a 10% fall).
    ratio = float(sys.argv[4]) if len(sys.argv) > 4 else 0.9
    print("losses:", one)
    print("the loss falls:", "yes" if len(one) > 1 and one[-1] < ratio * one[0] else "NO")
    same = len(one) == len(four) and all(
        abs(a - b) <= 1e-5 * max(1.0, abs(a)) for a, b in zip(one, four))
    print("four devices equal one within 1e-05:", "yes" if same else "NO")
