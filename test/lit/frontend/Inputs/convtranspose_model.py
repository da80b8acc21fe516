"""A small generator of ConvTranspose layers (stride 2 with pads and
output_padding, a grouped one with dilation and a bias, a 1x1 one with
output_shape), seeded weights and one batch: writes OUT/model.onnx,
OUT/in/input_0.pb and onnxruntime's output in OUT/ort/; and
OUT/smooth.onnx, the first and last layers with a tanh between them and
no groups (ONNX's reference evaluator, which the gradient check runs,
mis-evaluates grouped ConvTranspose).

  convtranspose_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(13)


def weight(name, shape):
    return numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)


inits = [weight("w1", (6, 4, 4, 4)), weight("w2", (4, 2, 3, 3)),
         weight("b2", (4,)), weight("w3", (4, 3, 1, 1))]
nodes = [
    helper.make_node("ConvTranspose", ["z", "w1"], ["a"], name="up1",
                     strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 0]),
    helper.make_node("Relu", ["a"], ["ar"], name="relu"),
    helper.make_node("ConvTranspose", ["ar", "w2", "b2"], ["b"], name="up2",
                     group=2, dilations=[2, 1], pads=[1, 0, 2, 1]),
    helper.make_node("ConvTranspose", ["b", "w3"], ["y"], name="up3",
                     strides=[2, 2], output_shape=[20, 17]),
]
graph = helper.make_graph(
    nodes, "convtranspose",
    [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 6, 4, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 20, 17])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.shape_inference.infer_shapes(model, strict_mode=True)
for d in ("in", "ort"):
    os.makedirs(os.path.join(out, d), exist_ok=True)
onnx.save(model, os.path.join(out, "model.onnx"))
z = rng.normal(0, 1, (2, 6, 4, 4)).astype(np.float32)
onnx.save_tensor(numpy_helper.from_array(z, "z"), os.path.join(out, "in", "input_0.pb"))
import onnxruntime as ort  # noqa: E402
y = ort.InferenceSession(model.SerializeToString(),
                         providers=["CPUExecutionProvider"]).run(None, {"z": z})[0]
onnx.save_tensor(numpy_helper.from_array(y, "y"), os.path.join(out, "ort", "output_0.pb"))
print(f"wrote {out}: onnxruntime's output {list(y.shape)}")
smooth = helper.make_graph(
    [nodes[0], helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
     helper.make_node("ConvTranspose", ["t", "w3"], ["y"], name="up3",
                      strides=[2, 2], output_shape=[18, 15])],
    "smooth", list(graph.input),
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 18, 15])],
    [inits[0], inits[3]])
smooth_model = helper.make_model(smooth, opset_imports=[helper.make_opsetid("", 13)])
smooth_model.ir_version = 8
onnx.save(smooth_model, os.path.join(out, "smooth.onnx"))
