"""Writes DIR/model/model.onnx whose weight 'w' (4x4 f32) lives in external data.

    external_data.py DIR MODE

MODE picks what is wrong with it:
  missing   the location names a file that does not exist
  dotdot    the location is ../outside.bin (the file exists, outside the folder)
  absolute  the location is the absolute path of a file (inside the folder)
  symlink   the location is a link inside the folder to DIR/outside.bin
  short     the file holds 16 bytes, the tensor needs 64
"""
import os
import sys

from onnx import TensorProto, helper, save_model

out, mode = sys.argv[1], sys.argv[2]
folder = os.path.join(out, "model")
os.makedirs(folder, exist_ok=True)
outside = os.path.join(out, "outside.bin")
with open(outside, "wb") as f:
    f.write(bytes(64))

location = {"missing": "w.bin", "dotdot": "../outside.bin",
            "absolute": os.path.abspath(os.path.join(folder, "w.bin")),
            "symlink": "link.bin", "short": "w.bin"}[mode]
if mode in ("absolute", "short"):
    with open(os.path.join(folder, "w.bin"), "wb") as f:
        f.write(bytes(64 if mode == "absolute" else 16))
if mode == "symlink":
    os.symlink(os.path.abspath(outside), os.path.join(folder, "link.bin"))

w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4],
                data_location=TensorProto.EXTERNAL)
w.external_data.add(key="location", value=location)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
save_model(model, os.path.join(folder, "model.onnx"))
