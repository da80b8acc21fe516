"""ONNX's Attention (opset 23) in five forms, with onnxruntime's outputs:
the default scale; a float mask and a given scale; a boolean mask (a fully
masked row left out: onnxruntime and paxc disagree on it); is_causal; and
cross-attention with keys shorter than the queries under is_causal (upper
left aligned). The first also writes present_key and present_value (K and
V, no past). With --compare, checks paxrun's outputs (relative L2 error
at most 1e-4)."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_case  # noqa: E402

out = ort_case.output_dir()
rng = np.random.default_rng(3)
B, H, S, L, D = 2, 4, 8, 6, 4

f = TensorProto.FLOAT
fmask = rng.standard_normal((B, 1, S, S)).astype(np.float32)
bmask = rng.random((1, H, S, S)) < 0.7
bmask[..., 0] = True  # every row keeps a key
nodes = [
    helper.make_node("Attention", ["q", "k", "v"], ["y1", "pk", "pv"],
                     name="plain"),
    helper.make_node("Attention", ["q", "k", "v", "fmask"], ["y2"],
                     name="float_mask", scale=0.3),
    helper.make_node("Attention", ["q", "k", "v", "bmask"], ["y3"],
                     name="bool_mask"),
    helper.make_node("Attention", ["q", "k", "v"], ["y4"], name="causal",
                     is_causal=1),
    helper.make_node("Attention", ["q", "kx", "vx"], ["y5"], name="cross",
                     is_causal=1),
]
inits = [helper.make_tensor("fmask", f, fmask.shape, fmask.flatten()),
         helper.make_tensor("bmask", TensorProto.BOOL, bmask.shape,
                            bmask.flatten())]
inputs = {"q": (B, H, S, D), "k": (B, H, S, D), "v": (B, H, S, D),
          "kx": (B, H, L, D), "vx": (B, H, L, D)}
outputs = ["y1", "pk", "pv", "y2", "y3", "y4", "y5"]
graph = helper.make_graph(
    nodes, "attention",
    [helper.make_tensor_value_info(n, f, s) for n, s in inputs.items()],
    [helper.make_tensor_value_info(n, f, None) for n in outputs], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
model.ir_version = 10
feeds = {n: rng.standard_normal(s).astype(np.float32)
         for n, s in inputs.items()}
ort_case.write(model, feeds, out)
