"""A model through the ops written as other ops before import
(frontend/OpRewrites.cpp): OneHot (negative indices, a middle axis), Shrink,
ReduceLogSum, Pad (reflect, edge), Compress, ReverseSequence and BitShift with constant conditions and
lengths, Hardmax, EyeLike and ThresholdedRelu; seeded inputs. Writes
OUT/model.onnx, OUT/in/input_*.pb and onnxruntime's outputs in OUT/ort/.

  small_ops_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import save_case  # noqa: E402

out = sys.argv[1]
rng = np.random.default_rng(6)


def const(name, v):
    return numpy_helper.from_array(np.asarray(v), name)


inits = [
    const("depth", np.int64(5)),
    const("two", np.array([2], np.int64)),
    const("shifts", np.array([0, 3, 31, 12, 1, 7], np.uint32)),
    const("two32", np.array([2], np.uint32)),
    const("pads1", np.array([0, 2, 0, 3], np.int64)),
    const("pads2", np.array([2, -1, 1, 2], np.int64)),
    const("onoff", np.array([-0.5, 2.0], np.float32)),
    const("cond", np.array([1, 0, 1, 1, 0, 1], np.bool_)),
    const("lens", np.array([3, 1, 6, 2], np.int64)),
    const("w", rng.normal(0, 1, (6, 5)).astype(np.float32)),
]
nodes = [
    helper.make_node("OneHot", ["ids", "depth", "onoff"], ["hot"], name="hot", axis=1),
    helper.make_node("Shrink", ["x"], ["sx"], name="shrink", lambd=0.4, bias=0.1),
    helper.make_node("Compress", ["sx", "cond"], ["cx"], name="compress", axis=1),
    helper.make_node("ReverseSequence", ["x", "lens"], ["rx"], name="rev",
                     batch_axis=0, time_axis=1),
    helper.make_node("MatMul", ["rx", "w"], ["m"]),
    helper.make_node("Hardmax", ["m"], ["hm"], name="hm", axis=1),
    helper.make_node("ThresholdedRelu", ["m"], ["tm"], alpha=0.3),
    helper.make_node("Add", ["hm", "tm"], ["s"]),
    helper.make_node("Abs", ["s"], ["a"]),
    helper.make_node("ReduceLogSum", ["a"], ["y1"], name="rls", axes=[1], keepdims=0),
    helper.make_node("ReduceSum", ["hot", "two"], ["h1"], keepdims=0),
    helper.make_node("Transpose", ["h1"], ["ht"]),
    helper.make_node("MatMul", ["ht", "cx"], ["y2"]),
    helper.make_node("Pad", ["x", "pads1"], ["p1"], name="reflect", mode="reflect"),
    helper.make_node("Pad", ["p1", "pads2"], ["y3"], name="edge", mode="edge"),
    helper.make_node("BitShift", ["u", "shifts"], ["ul"], direction="LEFT"),
    helper.make_node("BitShift", ["ul", "two32"], ["y4"], name="right",
                     direction="RIGHT"),
]
graph = helper.make_graph(
    nodes, "small_ops",
    [helper.make_tensor_value_info("ids", TensorProto.INT64, [4, 3]),
     helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
     helper.make_tensor_value_info("u", TensorProto.UINT32, [6])],
    [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [4]),
     helper.make_tensor_value_info("y2", TensorProto.FLOAT, [5, 4]),
     helper.make_tensor_value_info("y3", TensorProto.FLOAT, [7, 12]),
     helper.make_tensor_value_info("y4", TensorProto.UINT32, [6])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
save_case(out, model, {
    "ids": rng.integers(-5, 5, (4, 3)).astype(np.int64),
    "x": rng.normal(0, 1, (4, 6)).astype(np.float32),
    "u": rng.integers(0, 2**32, 6, dtype=np.uint64).astype(np.uint32)})
