"""What the runtime lit tests that compare paxrun with onnxruntime share:
writing a model with its inputs and onnxruntime's outputs in ONNX's
test-data layout, and the comparison (relative L2 error at most 1e-4)."""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def write(model, feeds, out):
    """Saves model.onnx, in/input_i.pb (feeds in graph-input order) and
    ort/output_i.pb under out."""
    onnx.save(model, f"{out}/model.onnx")
    os.makedirs(f"{out}/in", exist_ok=True)
    os.makedirs(f"{out}/ort", exist_ok=True)
    for i, (name, x) in enumerate(feeds.items()):
        onnx.save_tensor(numpy_helper.from_array(x), f"{out}/in/input_{i}.pb")
    ys = ort.InferenceSession(f"{out}/model.onnx").run(None, feeds)
    for i, y in enumerate(ys):
        onnx.save_tensor(numpy_helper.from_array(y), f"{out}/ort/output_{i}.pb")


def compare(out):
    """Prints the worst relative L2 error of pax/ against ort/ and exits
    non-zero above 1e-4."""
    worst, i = 0.0, 0
    while os.path.exists(f"{out}/ort/output_{i}.pb"):
        want = numpy_helper.to_array(onnx.load_tensor(f"{out}/ort/output_{i}.pb"))
        got = numpy_helper.to_array(onnx.load_tensor(f"{out}/pax/output_{i}.pb"))
        assert got.shape == want.shape, (i, got.shape, want.shape)
        want, got = want.astype(np.float64), got.astype(np.float64)
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        worst = max(worst, err)
        i += 1
    print(f"relative L2 error {worst:.2e} over {i} outputs")
    sys.exit(0 if i and worst <= 1e-4 else 1)


def output_dir():
    """The output folder (argv[1]); with --compare (argv[2]), compares
    paxrun's outputs there with onnxruntime's and exits."""
    out = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "--compare":
        compare(out)
    return out


def i64(name, v):
    """An int64 initializer."""
    return numpy_helper.from_array(np.array(v, np.int64), name)
