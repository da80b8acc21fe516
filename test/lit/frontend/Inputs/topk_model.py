"""A mixture-of-experts router as Hugging Face models write it: a linear
layer's logits, TopK (k=2) of them, a softmax over the two, a one-hot
dispatch combined into dense per-expert gates, an expert projection and a
residual; and a smallest-3 TopK along the tokens. Seeded weights, one
output, so it trains with --loss=mse. Writes OUT/model.onnx, OUT/in/ and
onnxruntime's output in OUT/ort/.

  topk_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import save_case  # noqa: E402

out = sys.argv[1]
rng = np.random.default_rng(12)


def const(name, v):
    return numpy_helper.from_array(np.asarray(v), name)


inits = [
    const("wr", rng.normal(0, 1, (8, 5)).astype(np.float32)),
    const("we", rng.normal(0, 0.5, (5, 8)).astype(np.float32)),
    const("k2", np.array([2], np.int64)),
    const("k3", np.array([3], np.int64)),
    const("depth", np.int64(5)),
    const("onoff", np.array([0, 1], np.float32)),
    const("last", np.array([-1], np.int64)),
    const("one", np.array([1], np.int64)),
]
nodes = [
    helper.make_node("MatMul", ["x", "wr"], ["logits"]),
    helper.make_node("TopK", ["logits", "k2"], ["v", "i"], name="router"),
    helper.make_node("Softmax", ["v"], ["p"], axis=-1),
    helper.make_node("OneHot", ["i", "depth", "onoff"], ["mask"], axis=-1),
    helper.make_node("Unsqueeze", ["p", "last"], ["p3"]),
    helper.make_node("Mul", ["mask", "p3"], ["weighted"]),
    helper.make_node("ReduceSum", ["weighted", "one"], ["gates"], keepdims=0),
    helper.make_node("MatMul", ["gates", "we"], ["moe"]),
    helper.make_node("TopK", ["logits", "k3"], ["low", "lowi"], name="lowest",
                     axis=0, largest=0),
    helper.make_node("ReduceMean", ["low"], ["lowm"], axes=[0], keepdims=0),
    helper.make_node("MatMul", ["lowm", "we"], ["bias"]),
    helper.make_node("Add", ["moe", "bias"], ["h"]),
    helper.make_node("Add", ["h", "x"], ["y"]),
]
graph = helper.make_graph(
    nodes, "topk",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 8])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
save_case(out, model, {"x": rng.normal(0, 1, (6, 8)).astype(np.float32)})
