"""Loops and a Scan as exporters write them: a Loop whose trip count is
x's first dim (known once shapes are) and whose condition the body
computes from the iteration number (it stops after 3 of 4), carrying
h = tanh(h W + x[i]) with h's values as a scan output; a reverse Scan
summing x's rows, its scan output stacked along axis 1; and a Loop whose
trip count is a graph input `steps` (the user binds it) doubling a value.
Writes OUT/model.onnx, OUT/in/, OUT/ort/ (steps = 2) and OUT/steps.npy.

  loop_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import const, save_case  # noqa: E402

out = sys.argv[1]
rng = np.random.default_rng(17)
n, v = helper.make_node, helper.make_tensor_value_info
f32, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL

rnn_body = helper.make_graph(
    [n("Gather", ["x", "i"], ["xi"], axis=0),
     n("MatMul", ["h_in", "w"], ["hw"]),
     n("Add", ["hw", "xi"], ["pre"]),
     n("Tanh", ["pre"], ["h_out"]),
     n("Add", ["i", "one"], ["next"]),
     n("Less", ["next", "three"], ["go_on"]),
     n("Identity", ["h_out"], ["h_scan"])],
    "rnn_body",
    [v("i", i64, []), v("c", b, []), v("h_in", f32, [2, 5])],
    [v("go_on", b, []), v("h_out", f32, [2, 5]), v("h_scan", f32, [2, 5])],
    [const("three", np.int64(3))])
sum_body = helper.make_graph(
    [n("Add", ["acc_in", "row"], ["acc_out"]), n("Mul", ["acc_out", "half"], ["scaled"])],
    "sum_body",
    [v("acc_in", f32, [2, 5]), v("row", f32, [2, 5])],
    [v("acc_out", f32, [2, 5]), v("scaled", f32, [2, 5])],
    [const("half", np.float32(0.5))])
double_body = helper.make_graph(
    [n("Add", ["d_in", "d_in"], ["d_out"]), n("Identity", ["c2"], ["c2_out"])],
    "double_body",
    [v("k", i64, []), v("c2", b, []), v("d_in", f32, [2, 5])],
    [v("c2_out", b, []), v("d_out", f32, [2, 5])])
nodes = [
    n("Shape", ["x"], ["sx"]),
    n("Gather", ["sx", "zero"], ["rows"]),
    n("Loop", ["rows", "yes", "h0"], ["h_last", "hs"], name="rnn", body=rnn_body),
    n("Scan", ["h0", "x"], ["total", "halves"], name="sums", body=sum_body,
      num_scan_inputs=1, scan_input_directions=[1], scan_output_axes=[1]),
    n("Loop", ["steps", "", "total"], ["doubled"], name="by_steps", body=double_body),
]
inits = [const("zero", np.int64(0)), const("one", np.int64(1)), const("yes", np.array(True)),
         const("w", rng.normal(0, 0.5, (5, 5)).astype(np.float32)),
         const("h0", np.zeros((2, 5), np.float32))]
graph = helper.make_graph(
    nodes, "loops", [v("x", f32, [4, 2, 5]), v("steps", i64, [])],
    [v("h_last", f32, [2, 5]), v("hs", f32, [3, 2, 5]), v("halves", f32, [2, 4, 5]),
     v("doubled", f32, [2, 5])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
os.makedirs(out, exist_ok=True)
np.save(os.path.join(out, "steps.npy"), np.array(2, np.int64))
save_case(out, model, {"x": rng.normal(0, 1, (4, 2, 5)).astype(np.float32),
                       "steps": np.array(2, np.int64)})
