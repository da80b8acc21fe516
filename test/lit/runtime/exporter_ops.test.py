"""A model of the ops PyTorch's exporters write around attention, its
inputs and onnxruntime's outputs; with --compare, checks paxrun's."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_case  # noqa: E402

out = ort_case.output_dir()

rng = np.random.default_rng(5)
B, S, D = 4, 6, 8
i64 = ort_case.i64
inits = [
    i64("one_axis", 1), i64("one", 1), i64("three", 3),
    numpy_helper.from_array(np.zeros((), np.float32), "zero"),
    numpy_helper.from_array(rng.standard_normal((B, 5, D)).astype(np.float32), "table"),
    i64("idx", rng.integers(-5, 5, (B, S, 1))),
]
nodes = [
    # Position ids: cumsum(mask, 1) * mask - 1, and the other two variants.
    helper.make_node("CumSum", ["mask", "one_axis"], ["cs"], name="cumsum"),
    helper.make_node("Mul", ["cs", "mask"], ["csm"], name="mul"),
    helper.make_node("Sub", ["csm", "one"], ["pos"], name="sub"),
    helper.make_node("CumSum", ["mask", "one_axis"], ["csx"], name="cumsum_xr",
                     exclusive=1, reverse=1),
    helper.make_node("Mod", ["pos", "three"], ["posmod"], name="mod"),
    # GatherND with a batch dim and one-element index tuples.
    helper.make_node("GatherND", ["table", "idx"], ["g"], name="gathernd",
                     batch_dims=1),
    # Einsum: a batched contraction with a broadcast operand, and a sum.
    helper.make_node("Einsum", ["q", "k"], ["qk"], name="einsum",
                     equation="...qd, ...kd -> ...qk"),
    helper.make_node("Einsum", ["q"], ["qs"], name="einsum_sum",
                     equation="bqd->db"),
    # SDPA's guard against fully masked rows.
    helper.make_node("Softmax", ["scores"], ["sm"], name="softmax", axis=-1),
    helper.make_node("IsNaN", ["sm"], ["nan"], name="isnan"),
    helper.make_node("Where", ["nan", "zero", "sm"], ["att"], name="where"),
]
graph = helper.make_graph(
    nodes, "exporter_ops",
    [helper.make_tensor_value_info("mask", TensorProto.INT64, [B, S]),
     helper.make_tensor_value_info("scores", TensorProto.FLOAT, [B, S, S]),
     helper.make_tensor_value_info("q", TensorProto.FLOAT, [B, S, D]),
     helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, S, D])],
    [helper.make_tensor_value_info(n, t, None) for n, t in
     [("pos", TensorProto.INT64), ("csx", TensorProto.INT64),
      ("posmod", TensorProto.INT64), ("g", TensorProto.FLOAT),
      ("att", TensorProto.FLOAT), ("qk", TensorProto.FLOAT),
      ("qs", TensorProto.FLOAT)]],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
mask = (rng.random((B, S)) > 0.3).astype(np.int64)
scores = rng.standard_normal((B, S, S)).astype(np.float32)
scores[1, 2, :] = -np.inf  # a fully masked row: softmax gives NaN
q = rng.standard_normal((B, S, D)).astype(np.float32)
k = rng.standard_normal((1, S, D)).astype(np.float32)
ort_case.write(model, {"mask": mask, "scores": scores, "q": q, "k": k}, out)
