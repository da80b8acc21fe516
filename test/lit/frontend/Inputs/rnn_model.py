"""A bidirectional RNN (hidden 4, Tanh forward and Sigmoid backward,
clip 2.5, biases and an initial state as weights) followed by a forward
Relu RNN reading its output; y = the second RNN's last state plus the sum
of the first's outputs over time.

  rnn_model.py OUT.onnx [tanh]

With `tanh`, every activation is Tanh (ONNX's reference RNN, which the
gradient check runs in float64, has no other).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(14)
tanh = len(sys.argv) > 2 and sys.argv[2] == "tanh"


def const(name, shape, scale=0.5):
    return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)


inits = [const("w", (2, 4, 3)), const("r", (2, 4, 4)), const("b", (2, 8)),
         const("h0", (2, 2, 4)), const("w2", (1, 4, 8)), const("r2", (1, 4, 4)),
         numpy_helper.from_array(np.array([5, 2, 8], np.int64), "shape"),
         numpy_helper.from_array(np.array([0], np.int64), "zero")]
n = helper.make_node
nodes = [
    n("RNN", ["x", "w", "r", "b", "", "h0"], ["y1", "h1"], name="bi",
      hidden_size=4, direction="bidirectional",
      activations=["Tanh", "Tanh" if tanh else "Sigmoid"],
      clip=2.5),
    n("Transpose", ["y1"], ["y1t"], perm=[0, 2, 1, 3]),
    n("Reshape", ["y1t", "shape"], ["seq"]),
    n("RNN", ["seq", "w2", "r2"], ["", "h2"], name="relu", hidden_size=4,
      activations=["Tanh" if tanh else "Relu"]),
    n("ReduceSum", ["y1", "zero"], ["ysum"], keepdims=0),
    n("Add", ["h2", "ysum"], ["y"]),
]
graph = helper.make_graph(
    nodes, "rnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 4])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
print("wrote", sys.argv[1])
