"""A small quantized CNN as onnxruntime's quantization tools write them:
QuantizeLinear, a QLinearConv with per-channel int8 weights and an int32
bias, DequantizeLinear, then DynamicQuantizeLinear feeding a MatMulInteger
(per-column weight zero points) and a QLinearMatMul; seeded weights and one
batch. Writes OUT/model.onnx, OUT/in/input_0.pb and onnxruntime's outputs
in OUT/ort/.

  quantized_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import save_case  # noqa: E402

out = sys.argv[1]
rng = np.random.default_rng(4)


def const(name, v):
    return numpy_helper.from_array(np.asarray(v), name)


inits = [
    const("xs", np.float32(0.03)), const("xz", np.uint8(128)),
    const("w", rng.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8)),
    const("ws", rng.uniform(0.002, 0.004, 4).astype(np.float32)),
    const("wz", np.zeros(4, np.int8)),
    const("cs", np.float32(0.05)), const("cz", np.uint8(100)),
    const("bias", rng.integers(-2000, 2000, 4).astype(np.int32)),
    const("shape", np.array([2, 64], np.int64)),
    const("m", rng.integers(-120, 120, (64, 5)).astype(np.int8)),
    const("mz", rng.integers(-3, 3, 5).astype(np.int8)),
    const("ms", np.float32(0.01)),
    const("q", rng.integers(0, 255, (5, 3)).astype(np.uint8)),
    const("qs", np.float32(0.02)), const("qz", np.uint8(120)),
    const("ys", np.float32(0.4)), const("yz", np.uint8(90)),
]
nodes = [
    helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="quant"),
    helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "cs", "cz", "bias"],
                     ["cq"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["c"], name="dequant"),
    helper.make_node("Relu", ["c"], ["r"]),
    helper.make_node("Reshape", ["r", "shape"], ["flat"]),
    helper.make_node("DynamicQuantizeLinear", ["flat"], ["fq", "fs", "fz"], name="dyn"),
    helper.make_node("MatMulInteger", ["fq", "m", "fz", "mz"], ["acc"], name="mmi"),
    helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
    helper.make_node("Mul", ["fs", "ms"], ["scale"]),
    helper.make_node("Mul", ["accf", "scale"], ["h"]),
    helper.make_node("QuantizeLinear", ["h", "qs", "qz"], ["hq"], name="quant2"),
    helper.make_node("QLinearMatMul", ["hq", "qs", "qz", "q", "qs", "qz", "ys", "yz"],
                     ["yq"], name="qmm"),
    helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"], name="out"),
]
graph = helper.make_graph(
    nodes, "quantized",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
save_case(out, model, {"x": rng.normal(0, 1, (2, 3, 8, 8)).astype(np.float32)})
