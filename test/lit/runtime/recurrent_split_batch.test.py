"""A GRU then an LSTM with constant per-row initial states and sequence
lengths, its inputs and onnxruntime's outputs in ONNX's test-data layout;
with --compare, checks paxrun's outputs (relative L2 error at most 1e-4)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_case  # noqa: E402

out = ort_case.output_dir()

rng = np.random.default_rng(11)
S, B, I, H = 5, 8, 6, 4


def const(name, shape, scale=0.5):
    return numpy_helper.from_array(
        (scale * rng.standard_normal(shape)).astype(np.float32), name)


inits = [
    const("gw", (1, 3 * H, I)), const("gr", (1, 3 * H, H)), const("gb", (1, 6 * H)),
    const("gh0", (1, B, H)),
    const("lw", (1, 4 * H, H)), const("lr", (1, 4 * H, H)), const("lb", (1, 8 * H)),
    const("lh0", (1, B, H)), const("lc0", (1, B, H)),
    numpy_helper.from_array(np.array([5, 3, 5, 1, 4, 5, 2, 5], np.int32), "lens"),
]
nodes = [
    helper.make_node("GRU", ["x", "gw", "gr", "gb", "", "gh0"], ["gy", "gyh"],
                     name="gru", hidden_size=H, linear_before_reset=1),
    helper.make_node("Squeeze", ["gy", "axis1"], ["gys"], name="squeeze"),
    helper.make_node("LSTM", ["gys", "lw", "lr", "lb", "lens", "lh0", "lc0"],
                     ["ly", "lyh", "lyc"], name="lstm", hidden_size=H),
]
inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
graph = helper.make_graph(
    nodes, "recurrent",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, B, I])],
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
     for n in ["ly", "lyh", "lyc"]],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
x = rng.standard_normal((S, B, I)).astype(np.float32)
ort_case.write(model, {"x": x}, out)
