"""A GRU then an LSTM with constant per-row initial states and sequence
lengths, its inputs and onnxruntime's outputs in ONNX's test-data layout;
with --compare, checks paxrun's outputs (relative L2 error at most 1e-4)."""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
OUTPUTS = 3
if len(sys.argv) > 2 and sys.argv[2] == "--compare":
    worst = 0.0
    for i in range(OUTPUTS):
        want = numpy_helper.to_array(onnx.load_tensor(f"{out}/ort/output_{i}.pb"))
        got = numpy_helper.to_array(onnx.load_tensor(f"{out}/pax/output_{i}.pb"))
        assert got.shape == want.shape, (got.shape, want.shape)
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        worst = max(worst, err)
    print(f"relative L2 error {worst:.2e}")
    sys.exit(0 if worst <= 1e-4 else 1)

rng = np.random.default_rng(11)
S, B, I, H = 5, 8, 6, 4


def const(name, shape, scale=0.5):
    return numpy_helper.from_array(
        (scale * rng.standard_normal(shape)).astype(np.float32), name)


inits = [
    const("gw", (1, 3 * H, I)), const("gr", (1, 3 * H, H)), const("gb", (1, 6 * H)),
    const("gh0", (1, B, H)),
    const("lw", (1, 4 * H, H)), const("lr", (1, 4 * H, H)), const("lb", (1, 8 * H)),
    const("lh0", (1, B, H)), const("lc0", (1, B, H)),
    numpy_helper.from_array(np.array([5, 3, 5, 1, 4, 5, 2, 5], np.int32), "lens"),
]
nodes = [
    helper.make_node("GRU", ["x", "gw", "gr", "gb", "", "gh0"], ["gy", "gyh"],
                     name="gru", hidden_size=H, linear_before_reset=1),
    helper.make_node("Squeeze", ["gy", "axis1"], ["gys"], name="squeeze"),
    helper.make_node("LSTM", ["gys", "lw", "lr", "lb", "lens", "lh0", "lc0"],
                     ["ly", "lyh", "lyc"], name="lstm", hidden_size=H),
]
inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
graph = helper.make_graph(
    nodes, "recurrent",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, B, I])],
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
     for n in ["ly", "lyh", "lyc"]],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, f"{out}/model.onnx")
x = rng.standard_normal((S, B, I)).astype(np.float32)
os.makedirs(f"{out}/in", exist_ok=True)
os.makedirs(f"{out}/ort", exist_ok=True)
onnx.save_tensor(numpy_helper.from_array(x), f"{out}/in/input_0.pb")
ys = ort.InferenceSession(f"{out}/model.onnx").run(None, {"x": x})
assert len(ys) == OUTPUTS
for i, y in enumerate(ys):
    onnx.save_tensor(numpy_helper.from_array(y), f"{out}/ort/output_{i}.pb")
