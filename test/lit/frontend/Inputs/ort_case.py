"""Writes a test case: a model, its inputs and onnxruntime's outputs.

  save_case(out, model, feeds): OUT/model.onnx, OUT/in/input_K.pb (feeds in
  graph-input order), OUT/ort/output_K.pb (onnxruntime's CPU provider), and
  prints "wrote OUT: onnxruntime's output[s] [shapes]".

  const(name, value): an initializer of a numpy value.
"""
import os

import numpy as np
import onnx
from onnx import numpy_helper


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def save_case(out, model, feeds):
    for d in ("in", "ort"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    onnx.save(model, os.path.join(out, "model.onnx"))
    for k, (name, v) in enumerate(feeds.items()):
        onnx.save_tensor(numpy_helper.from_array(v, name),
                         os.path.join(out, "in", f"input_{k}.pb"))
    import onnxruntime as ort
    ys = ort.InferenceSession(model.SerializeToString(),
                              providers=["CPUExecutionProvider"]).run(None, feeds)
    for k, (v, y) in enumerate(zip(model.graph.output, ys)):
        onnx.save_tensor(numpy_helper.from_array(y, v.name),
                         os.path.join(out, "ort", f"output_{k}.pb"))
    shapes = [list(y.shape) for y in ys]
    if len(ys) == 1:
        print(f"wrote {out}: onnxruntime's output {shapes[0]}")
    else:
        print(f"wrote {out}: onnxruntime's outputs {shapes}")
    return ys
