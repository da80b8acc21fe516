"""A small CNN through three Resize nodes (linear half_pixel by scales,
nearest round_prefer_ceil asymmetric by sizes, cubic align_corners with
exclude_outside), constants as initializers, seeded weights and one batch:
writes OUT/model.onnx, OUT/in/input_0.pb and onnxruntime's outputs in
OUT/ort/.

  resize_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import save_case  # noqa: E402

out = sys.argv[1]
rng = np.random.default_rng(9)
w = numpy_helper.from_array(rng.normal(0, 0.4, (4, 3, 3, 3)).astype(np.float32), "w")
inits = [
    w,
    numpy_helper.from_array(np.array([1, 1, 2.0, 1.5], np.float32), "scales_up"),
    numpy_helper.from_array(np.array([2, 4, 7, 5], np.int64), "sizes_odd"),
    numpy_helper.from_array(np.array([1, 1, 0.6, 0.8], np.float32), "scales_down"),
]
nodes = [
    helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
    helper.make_node("Resize", ["c", "", "scales_up"], ["up"], name="up",
                     mode="linear"),
    helper.make_node("Resize", ["up", "", "", "sizes_odd"], ["odd"], name="odd",
                     mode="nearest", nearest_mode="round_prefer_ceil",
                     coordinate_transformation_mode="asymmetric"),
    helper.make_node("Resize", ["odd", "", "scales_down"], ["y"], name="down",
                     mode="cubic", coordinate_transformation_mode="align_corners",
                     exclude_outside=1, cubic_coeff_a=-0.5),
]
graph = helper.make_graph(
    nodes, "resize",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 4, 4])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
save_case(out, model, {"x": rng.normal(0, 1, (2, 3, 5, 6)).astype(np.float32)})
