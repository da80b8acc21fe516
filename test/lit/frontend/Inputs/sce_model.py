"""A two-layer classifier whose graph ends in ONNX's own
SoftmaxCrossEntropyLoss (mean, ignore_index -1), with seeded weights and
one batch of inputs: writes OUT/model.onnx, OUT/in/input_{0,1}.pb (x and
labels, some ignored), OUT/ort/output_0.pb (onnxruntime's loss) and
OUT/data/step_0/ (the same batch, for paxrun --train).

  sce_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(5)
N, D, H, C = 8, 6, 16, 5
w1 = numpy_helper.from_array(rng.normal(0, 0.5, (D, H)).astype(np.float32), "w1")
b1 = numpy_helper.from_array(np.zeros(H, np.float32), "b1")
w2 = numpy_helper.from_array(rng.normal(0, 0.5, (H, C)).astype(np.float32), "w2")
nodes = [
    helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
    helper.make_node("Relu", ["h"], ["r"], name="relu"),
    helper.make_node("MatMul", ["r", "w2"], ["logits"], name="fc2"),
    helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"],
                     name="sce", reduction="mean", ignore_index=-1),
]
graph = helper.make_graph(
    nodes, "sce",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, D]),
     helper.make_tensor_value_info("labels", TensorProto.INT64, [N])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [w1, b1, w2])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
os.makedirs(out, exist_ok=True)
onnx.save(model, os.path.join(out, "model.onnx"))
x = rng.normal(0, 1, (N, D)).astype(np.float32)
labels = rng.integers(0, C, N).astype(np.int64)
labels[[1, 6]] = -1
for d in ("in", os.path.join("data", "step_0")):
    os.makedirs(os.path.join(out, d), exist_ok=True)
    for k, (a, name) in enumerate(((x, "x"), (labels, "labels"))):
        onnx.save_tensor(numpy_helper.from_array(a, name),
                         os.path.join(out, d, f"input_{k}.pb"))
import onnxruntime as ort  # noqa: E402
loss = ort.InferenceSession(model.SerializeToString(),
                            providers=["CPUExecutionProvider"]).run(
    None, {"x": x, "labels": labels})[0]
os.makedirs(os.path.join(out, "ort"), exist_ok=True)
onnx.save_tensor(numpy_helper.from_array(np.asarray(loss), "loss"),
                 os.path.join(out, "ort", "output_0.pb"))
print(f"wrote {out}: onnxruntime's loss {float(loss):.6f}")
