"""A KV-cache-like ScatterND (one new row per batch entry written into a
cache at index tuples), a ScatterElements with reduction add and one with
duplicate-free overwrites, between MatMuls with seeded weights; one output,
so it trains with --loss=mse. Writes OUT/model.onnx, OUT/in/input_*.pb and
onnxruntime's output in OUT/ort/.

  scatter_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import save_case  # noqa: E402

out = sys.argv[1]
rng = np.random.default_rng(11)


def const(name, v):
    return numpy_helper.from_array(np.asarray(v), name)


inits = [
    const("w", rng.normal(0, 0.5, (4, 4)).astype(np.float32)),
    const("w2", rng.normal(0, 0.5, (4, 6)).astype(np.float32)),
    const("w3", rng.normal(0, 0.5, (4, 3)).astype(np.float32)),
    const("pos", np.array([[[0, 5]], [[1, 2]]], np.int64)),
    const("idx", np.array([[0, 5, 0], [3, -1, 3]], np.int64)),
    const("perm", np.array([[4, 1, 2], [0, 3, 5]], np.int64)),
    const("one", np.array([1], np.int64)),
]
nodes = [
    helper.make_node("MatMul", ["x", "w"], ["k"]),
    helper.make_node("Unsqueeze", ["k", "one"], ["upd"]),
    helper.make_node("ScatterND", ["cache", "pos", "upd"], ["c2"], name="kv"),
    helper.make_node("ReduceSum", ["c2", "one"], ["c3"], keepdims=0),
    helper.make_node("MatMul", ["x", "w2"], ["h"]),
    helper.make_node("Tanh", ["h"], ["t"]),
    helper.make_node("MatMul", ["x", "w3"], ["u"]),
    helper.make_node("ScatterElements", ["t", "idx", "u"], ["s1"], name="add",
                     axis=1, reduction="add"),
    helper.make_node("Sigmoid", ["u"], ["su"]),
    helper.make_node("ScatterElements", ["s1", "perm", "su"], ["s2"], name="set",
                     axis=1),
    helper.make_node("Concat", ["c3", "s2"], ["y"], axis=1),
]
graph = helper.make_graph(
    nodes, "scatter",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
     helper.make_tensor_value_info("cache", TensorProto.FLOAT, [2, 8, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
model.ir_version = 8
onnx.checker.check_model(model)
save_case(out, model, {"x": rng.normal(0, 1, (2, 4)).astype(np.float32),
                       "cache": rng.normal(0, 1, (2, 8, 4)).astype(np.float32)})
