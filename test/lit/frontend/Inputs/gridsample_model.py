"""A convolution sampled by three GridSample nodes (opset 20) (linear with border
padding, cubic with reflection padding and aligned corners, nearest with
zeros padding) at grids made from weights (0.6 or 1.2 tanh of them, so
some points fall outside), summed: gradients reach the convolution's
weights and the grids'.

  gridsample_model.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(8)


def const(name, v):
    return numpy_helper.from_array(np.asarray(v), name)


inits = [
    const("w", rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32)),
    const("g1", rng.normal(0, 1, (2, 4, 5, 2)).astype(np.float32)),
    const("g2", rng.normal(0, 1, (2, 4, 5, 2)).astype(np.float32)),
    const("s06", np.float32(0.6)), const("s12", np.float32(1.2)),
]
n = helper.make_node
nodes = [
    n("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
    n("Tanh", ["g1"], ["t1"]), n("Mul", ["t1", "s12"], ["grid1"]),
    n("Tanh", ["g2"], ["t2"]), n("Mul", ["t2", "s06"], ["grid2"]),
    n("GridSample", ["c", "grid1"], ["a"], name="linear", mode="linear",
      padding_mode="border"),
    n("GridSample", ["c", "grid1"], ["b"], name="cubic", mode="cubic",
      padding_mode="reflection", align_corners=1),
    n("GridSample", ["c", "grid2"], ["d"], name="nearest", mode="nearest"),
    n("Sum", ["a", "b", "d"], ["y"]),
]
graph = helper.make_graph(
    nodes, "gridsample",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 4, 5])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
print("wrote", sys.argv[1])
