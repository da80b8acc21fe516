# %% [markdown]
# # paxc from Python
#
# A notebook-style walk through the Python module: build a small model,
# compile it for 4 devices, look at the strategy paxc chose, run it against
# onnxruntime, then compile a training step and train it.
#
# Run it as a script (`PYTHONPATH=build/python python3 docs/python_example.py`)
# or cell by cell in a notebook. The test suite runs it.

# %%
import os
import tempfile

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import paxc

work = tempfile.mkdtemp(prefix="paxc-example-")

# %% [markdown]
# ## A model
# A two-layer perceptron, as any exporter would write it.

# %%
rng = np.random.default_rng(0)
weights = {
    "W1": rng.standard_normal((64, 128)).astype(np.float32) * 0.1,
    "b1": np.zeros(128, np.float32),
    "W2": rng.standard_normal((128, 10)).astype(np.float32) * 0.1,
}
graph = helper.make_graph(
    [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="fc1"),
     helper.make_node("Relu", ["h"], ["r"], name="relu"),
     helper.make_node("MatMul", ["r", "W2"], ["logits"], name="fc2")],
    "mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [32, 10])],
    [numpy_helper.from_array(w, name) for name, w in weights.items()])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8  # paxc reads IR versions 3 to 11
model_path = os.path.join(work, "mlp.onnx")
onnx.save(model, model_path)

# %% [markdown]
# ## Compile for 4 devices
# Every option of `paxc --help` is a keyword; the plan carries the report of
# the search that chose it.

# %%
plan = paxc.compile(model_path, gpus=4, cluster="dgx-h100")
report = plan.report()
print(f"{plan.devices} devices; step {report['simulated_s'] * 1e6:.3g} us "
      f"simulated, {report['memory_bytes'] / 2**20:.2f} MiB per device")
for op in plan.strategy()["ops"]:
    print(f"  {op['name']:6} config {op['config']}")

# %% [markdown]
# ## Run it, and check it against onnxruntime

# %%
session = paxc.Session(plan)
x = rng.standard_normal((32, 64)).astype(np.float32)
logits = session.run({"x": x})["logits"]
reference = onnxruntime.InferenceSession(
    model_path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
error = np.abs(logits - reference).max()
print(f"largest difference from onnxruntime: {error:.2e}")
assert error < 1e-4

# %% [markdown]
# ## Train
# A training step: the loss appended, the backward pass and Adam's updates
# built in, split over the same 4 devices. Each `train_step` returns the
# loss; the weights stay on the devices between steps.

# %%
train_plan = paxc.compile(model_path, gpus=4, mode="train", loss="cross-entropy",
                          optimizer="adam", lr=0.01)
trainer = paxc.Session(train_plan)
labels = rng.integers(0, 10, 32).astype(np.int64)
losses = [trainer.train_step({"x": x, "labels": labels}) for _ in range(5)]
print("losses:", " ".join(f"{loss:.4f}" for loss in losses))
assert losses[-1] < losses[0]

# %%
trainer.save_model(os.path.join(work, "trained.onnx"))
trainer.save_checkpoint(os.path.join(work, "checkpoint"))
print("trained model and checkpoint in", work)
