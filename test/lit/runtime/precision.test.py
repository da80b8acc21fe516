"""precision.test's models: a small transformer-style block (linear
layers with biases, a layer norm, GELU via Erf, a softmax over the rows)
exported as `model.half()` writes it (every initializer, input and output
float16) and the same with bfloat16 weights and inputs; in/input_0.pb the
input; ort/output_0.pb onnxruntime's output of the float16 model, and
ref32/output_0.pb its output in float32 on the bfloat16 model's values
(onnxruntime has no bfloat16 kernels for these on the CPU). With
`--compare DIR WANT TOL`, checks DIR/output_0.pb against WANT's within TOL
relative L2."""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def block(elem, weights):
    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((32, 64)) * 0.2
    b1 = rng.standard_normal(64) * 0.1
    w2 = rng.standard_normal((64, 16)) * 0.2
    g = 1 + rng.standard_normal(32) * 0.1
    inits = [numpy_helper.from_array(weights(v), n)
             for n, v in [("w1", w1), ("b1", b1), ("w2", w2), ("g", g),
                          ("beta", np.zeros(32)), ("half", np.array(0.5)),
                          ("one", np.array(1.0)), ("rsqrt2", np.array(0.7071067811865476))]]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g", "beta"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h"]),
        helper.make_node("Mul", ["h", "rsqrt2"], ["hs"]),
        helper.make_node("Erf", ["hs"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["h", "e1"], ["he"]),
        helper.make_node("Mul", ["he", "half"], ["gelu"]),
        helper.make_node("MatMul", ["gelu", "w2"], ["o"]),
        helper.make_node("Softmax", ["o"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", elem, [8, 32])],
        [helper.make_tensor_value_info("y", elem, [8, 32 // 2])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=8)


def bf16(v):
    """float32 values rounded to bfloat16 (nearest even), as float32."""
    b = np.asarray(v, np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def bf16_tensor(v, name):
    t = numpy_helper.from_array(bf16(v), name)
    bits = (np.asarray(bf16(v), np.float32).view(np.uint32) >> 16).astype(np.uint16)
    out = TensorProto(name=name, data_type=TensorProto.BFLOAT16, dims=t.dims)
    out.raw_data = bits.tobytes()
    return out


def write(out):
    x = np.random.default_rng(3).standard_normal((8, 32))
    for d in ("in16", "inbf16", "ort", "ref32"):
        os.makedirs(f"{out}/{d}", exist_ok=True)
    half = block(TensorProto.FLOAT16, lambda v: np.asarray(v, np.float16))
    onnx.save(half, f"{out}/half.onnx")
    x16 = x.astype(np.float16)
    onnx.save_tensor(numpy_helper.from_array(x16), f"{out}/in16/input_0.pb")
    y = ort.InferenceSession(f"{out}/half.onnx").run(None, {"x": x16})[0]
    onnx.save_tensor(numpy_helper.from_array(y), f"{out}/ort/output_0.pb")

    m = block(TensorProto.BFLOAT16, lambda v: np.asarray(v, np.float32))
    for i, t in enumerate(m.graph.initializer):
        m.graph.initializer[i].CopyFrom(bf16_tensor(numpy_helper.to_array(t), t.name))
    onnx.save(m, f"{out}/bf16.onnx")
    onnx.save_tensor(bf16_tensor(x, "x"), f"{out}/inbf16/input_0.pb")
    ref = block(TensorProto.FLOAT, lambda v: bf16(v))
    onnx.save(ref, f"{out}/ref32.onnx")
    y = ort.InferenceSession(f"{out}/ref32.onnx").run(None, {"x": bf16(x)})[0]
    onnx.save_tensor(numpy_helper.from_array(y), f"{out}/ref32/output_0.pb")


def compare(got_dir, want_dir, tol):
    got = numpy_helper.to_array(onnx.load_tensor(f"{got_dir}/output_0.pb"))
    want = numpy_helper.to_array(onnx.load_tensor(f"{want_dir}/output_0.pb"))
    got, want = got.astype(np.float64), want.astype(np.float64)
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    print(f"{os.path.basename(got_dir)}: relative L2 {'within' if err <= tol else 'ABOVE'} {tol:g}")
    return 0 if err <= tol else 1


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    write(sys.argv[1])
