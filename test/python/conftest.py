"""Fixtures of the Python module's tests: a small perceptron as an ONNX
file, its inputs and labels, and where the command-line tools are."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

BATCH, FEATURES, HIDDEN, CLASSES = 8, 16, 32, 10


def perceptron():
    """x[8,16] -> Gemm -> Relu -> MatMul -> Add -> logits[8,10], seeded."""
    rng = np.random.default_rng(7)

    def weight(name, shape, scale=0.3):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [weight("W1", (FEATURES, HIDDEN)), weight("b1", (HIDDEN,), 0.1),
             weight("W2", (HIDDEN, CLASSES)), weight("b2", (CLASSES,), 0.1)]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "W2"], ["m"], name="fc2"),
        helper.make_node("Add", ["m", "b2"], ["logits"], name="bias2"),
    ]
    graph = helper.make_graph(
        nodes, "perceptron",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, FEATURES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, CLASSES])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="session")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "perceptron.onnx"
    onnx.save(perceptron(), str(path))
    return str(path)


@pytest.fixture(scope="session")
def batch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    labels = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    return x, labels


@pytest.fixture(scope="session")
def bin_dir():
    """The built paxc and paxrun (PAX_BIN, set by ctest)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("PAX_BIN", os.path.join(here, "..", "..", "build", "bin"))


@pytest.fixture(scope="session")
def src_dir():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("PAX_SRC", os.path.join(here, "..", ".."))


sys.dont_write_bytecode = True


@pytest.fixture(scope="session")
def fed_weight_path(tmp_path_factory):
    """The perceptron with W2 a graph input (no initializer): a weight the
    caller feeds by name."""
    model = perceptron()
    w2 = next(t for t in model.graph.initializer if t.name == "W2")
    model.graph.initializer.remove(w2)
    model.graph.input.append(
        helper.make_tensor_value_info("W2", TensorProto.FLOAT, [HIDDEN, CLASSES]))
    path = tmp_path_factory.mktemp("fed") / "fed_weight.onnx"
    onnx.save(model, str(path))
    return str(path)
