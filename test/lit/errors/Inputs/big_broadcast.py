"""x[1] broadcast to [2^17, 2^20] floats (512 GiB) and summed."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

shape = numpy_helper.from_array(np.array([1 << 17, 1 << 20], np.int64), "shape")
graph = helper.make_graph(
    [helper.make_node("Expand", ["x", "shape"], ["e"]),
     helper.make_node("ReduceSum", ["e"], ["y"], keepdims=0)],
    "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [shape])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
