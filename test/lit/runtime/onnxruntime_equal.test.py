"""Makes a model of ops the generic CPU kernel runs, its inputs, and
onnxruntime's outputs, in ONNX's test-data layout; with --compare, checks
paxrun's outputs against onnxruntime's (relative L2 error at most 1e-4)."""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "--compare":
    worst = 0.0
    for i in range(2):
        want = numpy_helper.to_array(onnx.load_tensor(f"{out}/ort/output_{i}.pb"))
        got = numpy_helper.to_array(onnx.load_tensor(f"{out}/pax/output_{i}.pb"))
        assert got.shape == want.shape, (got.shape, want.shape)
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        worst = max(worst, err)
    print(f"relative L2 error {worst:.2e}")
    sys.exit(0 if worst <= 1e-4 else 1)

rng = np.random.default_rng(7)
table = numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "table")
bias = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "bias")
nodes = [
    helper.make_node("Gather", ["table", "ids"], ["emb"], name="embed"),
    helper.make_node("Add", ["emb", "bias"], ["h0"], name="add"),
    helper.make_node("Erf", ["h0"], ["h1"], name="erf"),
    helper.make_node("Mul", ["h1", "x"], ["h2"], name="mul"),
    helper.make_node("Transpose", ["h2"], ["t"], name="transpose", perm=[0, 2, 1]),
    helper.make_node("ReduceMean", ["t"], ["m"], name="mean", axes=[2], keepdims=1),
    helper.make_node("Sub", ["t", "m"], ["c"], name="center"),
    helper.make_node("Concat", ["c", "t"], ["cat"], name="concat", axis=1),
    helper.make_node("Softplus", ["cat"], ["y"], name="softplus"),
    helper.make_node("ReduceMax", ["y"], ["z"], name="max", axes=[1], keepdims=0),
]
graph = helper.make_graph(
    nodes, "g",
    [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 5]),
     helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 5]),
     helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 5])],
    [table, bias])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
os.makedirs(f"{out}/in", exist_ok=True)
os.makedirs(f"{out}/ort", exist_ok=True)
onnx.save(model, f"{out}/model.onnx")
feeds = {"ids": rng.integers(0, 50, (2, 5)).astype(np.int64),
         "x": rng.standard_normal((2, 5, 8)).astype(np.float32)}
for i, name in enumerate(["ids", "x"]):
    onnx.save_tensor(numpy_helper.from_array(feeds[name], name), f"{out}/in/input_{i}.pb")
results = ort.InferenceSession(f"{out}/model.onnx").run(None, feeds)
for i, r in enumerate(results):
    onnx.save_tensor(numpy_helper.from_array(r), f"{out}/ort/output_{i}.pb")
