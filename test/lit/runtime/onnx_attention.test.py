"""ONNX's Attention (opset 23) in seven forms, with onnxruntime's outputs:
the default scale; a float mask and a given scale; a boolean mask (every
row keeps a key); is_causal; cross-attention with keys shorter than the
queries under is_causal (upper left aligned); grouped-query heads (2 key
and value heads for 4 query heads); and 3-D inputs with the heads packed
in the hidden dim, grouped too. The first also writes present_key and present_value (K and
V, no past). With --compare, checks paxrun's outputs (relative L2 error
at most 1e-4). With --gqa-grad, writes (to argv[1]) a 3-D grouped-query
causal block between trainable projections for a gradient check."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_case  # noqa: E402

if "--gqa-grad" in sys.argv:
    # A 3-D grouped-query causal block between trainable projections, for
    # the gradient check against float64 central differences.
    rng = np.random.default_rng(1)
    B, S, M, H, HK, D = 2, 6, 16, 4, 2, 4

    def weight(n, shape):
        return helper.make_tensor(
            n, TensorProto.FLOAT, shape,
            (0.4 * rng.standard_normal(shape)).astype(np.float32).flatten())

    nodes = [helper.make_node("MatMul", ["x", w], [o])
             for w, o in (("wq", "q"), ("wk", "k"), ("wv", "v"))]
    nodes += [helper.make_node("Attention", ["q", "k", "v"], ["o"],
                               q_num_heads=H, kv_num_heads=HK, is_causal=1),
              helper.make_node("MatMul", ["o", "wo"], ["y"])]
    graph = helper.make_graph(
        nodes, "gqa",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, M])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, S, M])],
        [weight("wq", (M, H * D)), weight("wk", (M, HK * D)),
         weight("wv", (M, HK * D)), weight("wo", (H * D, M))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.save(model, sys.argv[1])
    sys.exit(0)

if "--bad" in sys.argv:
    # One Attention node paxc refuses (argv[3] says why), written to argv[1].
    kind = sys.argv[sys.argv.index("--bad") + 1]
    f = TensorProto.FLOAT
    shapes = {"q": [1, 2, 4, 4], "k": [1, 2, 4, 4], "v": [1, 2, 4, 4],
              "p": [1, 2, 2, 4]}
    ins, attrs, outs = ["q", "k", "v"], {}, ["y"]
    if kind == "past":
        ins += ["", "p", "p"]
    elif kind == "qk":
        outs += ["", "", "qk"]
    elif kind == "heads":
        shapes["q"] = [1, 8, 4]
    elif kind == "mask":
        shapes["m"] = [3, 4]
        ins.append("m")
    node = helper.make_node("Attention", ins, outs, name="bad", **attrs)
    graph = helper.make_graph(
        [node], "bad",
        [helper.make_tensor_value_info(n, f, shapes[n])
         for n in dict.fromkeys(i for i in ins if i)],
        [helper.make_tensor_value_info(o, f, None) for o in outs if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.save(model, sys.argv[1])
    sys.exit(0)

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
    helper.make_node("Attention", ["q", "kg", "vg"], ["y6"], name="grouped",
                     is_causal=1),
    helper.make_node("Attention", ["q3", "k3", "v3"], ["y7"], name="packed",
                     q_num_heads=H, kv_num_heads=H // 2),
]
inits = [helper.make_tensor("fmask", f, fmask.shape, fmask.flatten()),
         helper.make_tensor("bmask", TensorProto.BOOL, bmask.shape,
                            bmask.flatten())]
inputs = {"q": (B, H, S, D), "k": (B, H, S, D), "v": (B, H, S, D),
          "kx": (B, H, L, D), "vx": (B, H, L, D),
          "kg": (B, H // 2, S, D), "vg": (B, H // 2, S, D),
          "q3": (B, S, H * D), "k3": (B, L, H // 2 * D), "v3": (B, L, H // 2 * D)}
outputs = ["y1", "pk", "pv", "y2", "y3", "y4", "y5", "y6", "y7"]
graph = helper.make_graph(
    nodes, "attention",
    [helper.make_tensor_value_info(n, f, s) for n, s in inputs.items()],
    [helper.make_tensor_value_info(n, f, None) for n in outputs], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
model.ir_version = 10
feeds = {n: rng.standard_normal(s).astype(np.float32)
         for n, s in inputs.items()}
ort_case.write(model, feeds, out)
