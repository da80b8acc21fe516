"""Writes model.onnx with every initializer in one external file, data.bin."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32), "w")
shape = numpy_helper.from_array(np.array([2, 2, 32], dtype=np.int64), "shape")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
     helper.make_node("Reshape", ["h", "shape"], ["y"], name="reshape")],
    "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 32])], [w, shape])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.save_model(model, f"{out}/model.onnx", save_as_external_data=True,
                all_tensors_to_one_file=True, location="data.bin", size_threshold=0)
m = onnx.load(f"{out}/model.onnx", load_external_data=False)
assert all(t.data_location == TensorProto.EXTERNAL for t in m.graph.initializer)
