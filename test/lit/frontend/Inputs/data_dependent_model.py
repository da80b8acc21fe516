"""A model through the ops whose output shape depends on values: x's
elements where a mask is nonzero (NonZero, then GatherND), the distinct
labels (Unique, sorted) gathered from a table, and the boxes
NonMaxSuppression keeps (two classes, an IoU and a score threshold) as
float rows. The mask, labels, boxes and scores are graph inputs a user
binds with --bind; x is fed at run time. Writes OUT/model.onnx,
OUT/bind/NAME.npy, OUT/in/input_0.pb (x) and onnxruntime's outputs in
OUT/ort/.

  data_dependent_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import save_case  # noqa: E402

out = sys.argv[1]
rng = np.random.default_rng(2)
n = helper.make_node
inits = [numpy_helper.from_array(rng.normal(0, 1, (8, 3)).astype(np.float32), "table"),
         numpy_helper.from_array(np.array([2], np.int64), "most"),
         numpy_helper.from_array(np.array([0.4], np.float32), "iou"),
         numpy_helper.from_array(np.array([0.1], np.float32), "floor")]
nodes = [
    n("NonZero", ["mask"], ["nz"], name="nonzero"),
    n("Transpose", ["nz"], ["at"], perm=[1, 0]),
    n("GatherND", ["x", "at"], ["picked"]),
    n("Unique", ["labels"], ["distinct", "first", "inverse", "counts"], name="unique"),
    n("Gather", ["table", "distinct"], ["rows"]),
    n("NonMaxSuppression", ["boxes", "scores", "most", "iou", "floor"], ["kept"],
      name="nms"),
    n("Cast", ["kept"], ["keptf"], to=TensorProto.FLOAT),
]
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
          helper.make_tensor_value_info("mask", TensorProto.BOOL, [3, 4]),
          helper.make_tensor_value_info("labels", TensorProto.INT64, [7]),
          helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 5, 4]),
          helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 2, 5])]
outputs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, None)
           for v in ("picked", "rows", "keptf")]
for o in outputs:
    o.type.tensor_type.ClearField("shape")
model = helper.make_model(helper.make_graph(nodes, "data_dependent", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
corners = rng.uniform(0, 1, (1, 5, 2, 2)).astype(np.float32)
bound = {"mask": rng.uniform(0, 1, (3, 4)) > 0.5,
         "labels": np.array([5, 1, 5, 7, 0, 1, 3], np.int64),
         "boxes": np.concatenate([corners.min(2), corners.max(2) + 0.3], 2).reshape(1, 5, 4),
         "scores": rng.uniform(0, 1, (1, 2, 5)).astype(np.float32)}
os.makedirs(os.path.join(out, "bind"), exist_ok=True)
for k, v in bound.items():
    np.save(os.path.join(out, "bind", k + ".npy"), v)
# The plan takes x alone (the others bound): input_0.pb is x.
ys = save_case(out, model, {"x": rng.normal(0, 1, (3, 4)).astype(np.float32), **bound})
