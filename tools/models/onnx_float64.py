"""Float64 copies of ONNX models, for references free of float32 rounding.

to_float64(model, params_as_inputs) makes every float32 tensor, type, cast
and constant float64; with params_as_inputs, its float initializers become
graph inputs (so a reference can vary them) and are returned by name.
"""
import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def to_float64(model, params_as_inputs=False):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    params = {}
    for t in g.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32:
            params[t.name] = a.astype(np.float64)
    keep = [t for t in g.initializer if t.name not in params]
    del g.initializer[:]
    g.initializer.extend(keep)
    for name, a in params.items():
        if params_as_inputs:
            g.input.append(onnx.helper.make_tensor_value_info(
                name, TensorProto.DOUBLE, a.shape))
        else:
            g.initializer.append(numpy_helper.from_array(a, name))
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
    return m, params
