"""Ifs as exporters write them around shape checks: an If whose condition
compares a dim of x's shape with a constant (known once shapes are), its
then-branch holding a weight of its own, reading x from the outer graph and
holding a nested If on a constant; and an If on a graph input `flag` (the
user binds it). Writes OUT/model.onnx, OUT/in/, OUT/ort/ (flag true), and
OUT/flag.npy.

  if_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import const, save_case  # noqa: E402

out = sys.argv[1]
rng = np.random.default_rng(13)
n, v = helper.make_node, helper.make_tensor_value_info
f32 = TensorProto.FLOAT


def branch(name, nodes, outs, inits=()):
    return helper.make_graph(nodes, name, [], [v(o, f32, None) for o in outs], list(inits))


inner = n("If", ["yes"], ["inner"], name="inner",
          then_branch=branch("inner_then", [n("Tanh", ["h"], ["t"])], ["t"]),
          else_branch=branch("inner_else", [n("Neg", ["h"], ["ng"])], ["ng"]))
then = branch("wide", [n("MatMul", ["x", "w_then"], ["h"]), inner], ["inner"],
              [const("w_then", rng.normal(0, 0.5, (6, 4)).astype(np.float32))])
other = branch("narrow", [n("ReduceSum", ["x", "axis1"], ["s"], keepdims=1),
                          n("Expand", ["s", "shape4"], ["e"])], ["e"])
nodes = [
    n("Shape", ["x"], ["sx"]),
    n("Gather", ["sx", "one"], ["width"]),
    n("Greater", ["width", "five"], ["wide_enough"]),
    n("If", ["wide_enough"], ["a"], name="by_shape", then_branch=then, else_branch=other),
    n("If", ["flag"], ["y"], name="by_flag",
      then_branch=branch("relu", [n("Relu", ["a"], ["r"])], ["r"]),
      else_branch=branch("sigmoid", [n("Sigmoid", ["a"], ["sg"])], ["sg"])),
]
inits = [const("one", np.int64(1)), const("five", np.int64(5)),
         const("yes", np.array(True)), const("axis1", np.array([1], np.int64)),
         const("shape4", np.array([3, 4], np.int64))]
graph = helper.make_graph(nodes, "ifs", [v("x", f32, [3, 6]), v("flag", TensorProto.BOOL, [])],
                          [v("y", f32, [3, 4])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
os.makedirs(out, exist_ok=True)
np.save(os.path.join(out, "flag.npy"), np.array(True))
save_case(out, model, {"x": rng.normal(0, 1, (3, 6)).astype(np.float32),
                       "flag": np.array(True)})
