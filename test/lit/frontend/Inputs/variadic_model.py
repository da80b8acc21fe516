"""Sum, Mean and Max of 11 inputs (some broadcast): more operands than the
CUDA backend's generic kernel takes (8). Writes OUT/model.onnx, OUT/in/
and onnxruntime's outputs in OUT/ort/.

  variadic_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import save_case  # noqa: E402

rng = np.random.default_rng(0)
names = [f"x{i}" for i in range(11)]
shapes = [[3, 4] if i % 3 else [4] for i in range(11)]
nodes = [helper.make_node(op, names, [out], name=out)
         for op, out in (("Sum", "s"), ("Mean", "m"), ("Max", "mx"))]
graph = helper.make_graph(
    nodes, "variadic",
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)],
    [helper.make_tensor_value_info(o, TensorProto.FLOAT, [3, 4]) for o in ("s", "m", "mx")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
save_case(sys.argv[1], model,
          {n: rng.normal(0, 1, s).astype(np.float32) for n, s in zip(names, shapes)})
