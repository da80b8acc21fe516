import sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
B, D, H = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, D])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, H])
inits, nodes, outs = [], [], []
for b in range(4):
    w = numpy_helper.from_array(rng.standard_normal((D, H)).astype(np.float32) * 0.1, f"w{b}")
    inits.append(w)
    nodes.append(helper.make_node("MatMul", ["x", f"w{b}"], [f"m{b}"], name=f"branch{b}/MatMul"))
    nodes.append(helper.make_node("Tanh", [f"m{b}"], [f"t{b}"], name=f"branch{b}/Tanh"))
nodes.append(helper.make_node("Add", ["t0", "t1"], ["s0"], name="join/Add0"))
nodes.append(helper.make_node("Add", ["t2", "t3"], ["s1"], name="join/Add1"))
nodes.append(helper.make_node("Add", ["s0", "s1"], ["y"], name="join/Add"))
g = helper.make_graph(nodes, "branches", [x], [y], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
