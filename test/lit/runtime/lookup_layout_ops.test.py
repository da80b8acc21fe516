"""A model of the lookups and data movements exporters write, its inputs
and onnxruntime's outputs; with --compare, checks paxrun's."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_case  # noqa: E402

out = ort_case.output_dir()

rng = np.random.default_rng(9)
B, S, D = 4, 6, 8
i64 = ort_case.i64
inits = [
    i64("zero", 0), i64("neg", -1), i64("b", B), i64("one_b", 1),
    i64("repeats", [2, 1, 3]), i64("pads", [0, 1, -1, 0, 2, 0]),
    i64("starts", [-1, 100]), i64("ends", [-(2 ** 63), 0]), i64("axes", [1, 2]),
    i64("steps", [-1, -3]),
    numpy_helper.from_array(np.array(0.5, np.float32), "padval"),
]
nodes = [
    # CLIP's text pooling: hidden[arange(B), ids.argmax(-1)].
    helper.make_node("ArgMax", ["ids"], ["am"], name="argmax", axis=-1,
                     keepdims=0),
    helper.make_node("ArgMin", ["x"], ["amin"], name="argmin", axis=1,
                     select_last_index=1),
    helper.make_node("Range", ["zero", "b", "one_b"], ["rows"], name="range"),
    helper.make_node("Unsqueeze", ["rows", "neg"], ["rows1"], name="unsq_r"),
    helper.make_node("Unsqueeze", ["am", "neg"], ["am1"], name="unsq_a"),
    helper.make_node("Concat", ["rows1", "am1"], ["tuples"], name="concat",
                     axis=-1),
    helper.make_node("GatherND", ["x", "tuples"], ["pooled"], name="gathernd"),
    # Two-element tuples under a batch dim, negative indices included.
    helper.make_node("GatherND", ["y", "t2"], ["gb"], name="gathernd_b",
                     batch_dims=1),
    # RoBERTa-style run-time position lookup along the sequence.
    helper.make_node("GatherElements", ["x", "pos"], ["ge"], name="gather_el",
                     axis=1),
    helper.make_node("Tile", ["x", "repeats"], ["tiled"], name="tile"),
    helper.make_node("Pad", ["x", "pads", "padval"], ["padded"], name="pad"),
    helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"],
                     ["flipped"], name="flip"),
    helper.make_node("Identity", ["am"], ["am_out"], name="am_id"),
]
graph = helper.make_graph(
    nodes, "lookup_layout_ops",
    [helper.make_tensor_value_info("ids", TensorProto.FLOAT, [B, S]),
     helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, D]),
     helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, 5, 3, D]),
     helper.make_tensor_value_info("t2", TensorProto.INT64, [B, 4, 2]),
     helper.make_tensor_value_info("pos", TensorProto.INT64, [B, S, D])],
    [helper.make_tensor_value_info(n, t, None) for n, t in
     [("pooled", TensorProto.FLOAT), ("gb", TensorProto.FLOAT),
      ("ge", TensorProto.FLOAT), ("tiled", TensorProto.FLOAT),
      ("padded", TensorProto.FLOAT), ("flipped", TensorProto.FLOAT),
      ("amin", TensorProto.INT64), ("am_out", TensorProto.INT64),
      ("rows", TensorProto.INT64)]],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
x = rng.standard_normal((B, S, D)).astype(np.float32)
x[:, 2, :] = x[:, 4, :]  # ties: select_last_index matters
t2 = np.stack([rng.integers(-5, 5, (B, 4)), rng.integers(-3, 3, (B, 4))], -1)
ort_case.write(model, {
    "ids": rng.standard_normal((B, S)).astype(np.float32),
    "x": x,
    "y": rng.standard_normal((B, 5, 3, D)).astype(np.float32),
    "t2": t2.astype(np.int64),
    "pos": rng.integers(-S, S, (B, S, D)).astype(np.int64),
}, out)
