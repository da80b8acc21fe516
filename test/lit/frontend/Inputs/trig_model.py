"""A model through every inverse trigonometric and hyperbolic function
(each input brought into its domain), with a weight so that gradients
flow: y = sum of asin, acos, atanh, tan of t = 0.9 tanh(h), acosh of
h^2 + 1.5, and asinh, atan, sinh, cosh of h = x w (a matmul).

  trig_model.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(21)
w = numpy_helper.from_array(rng.normal(0, 0.5, (4, 4)).astype(np.float32), "w")
c09 = numpy_helper.from_array(np.array(0.9, np.float32), "c09")
c15 = numpy_helper.from_array(np.array(1.5, np.float32), "c15")
n = helper.make_node
nodes = [n("MatMul", ["x", "w"], ["h"]), n("Tanh", ["h"], ["th"]),
         n("Mul", ["th", "c09"], ["t"]), n("Mul", ["h", "h"], ["h2"]),
         n("Add", ["h2", "c15"], ["u"])]
terms = []
for op, src in [("Asin", "t"), ("Acos", "t"), ("Atanh", "t"), ("Tan", "t"),
                ("Acosh", "u"), ("Asinh", "h"), ("Atan", "h"), ("Sinh", "h"),
                ("Cosh", "h")]:
    nodes.append(n(op, [src], [op.lower()], name=op.lower()))
    terms.append(op.lower())
# Two sums: the CUDA backend's generic kernel takes at most 8 inputs.
nodes.append(n("Sum", terms[:5], ["y1"]))
nodes.append(n("Sum", terms[5:] + ["y1"], ["y"]))
graph = helper.make_graph(
    nodes, "trig", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])], [w, c09, c15])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
print("wrote", sys.argv[1])
