#!/usr/bin/env python3
"""Small models for the gradient tests, with seeded weights.

  grad_models.py mlp|embed|zoo|cnn|cnn_bn|dropout|sparse|dense|strided|acts|pools|lstm|lstm_bi|gru|gru_lbr|lrn|more|prod OUT.onnx

mlp: Gemm, Relu, MatMul and a broadcast Add (a two-layer perceptron).
embed: an embedding lookup (Gather of a 32-row table), a mean over the
sequence, Tanh and a Gemm head.
zoo: every op kind with a gradient rule at least once: Gemm with alpha,
beta and a transposed weight, Tanh, Sigmoid, Mul, Div, Exp, Log, Sqrt, Sub,
Neg, Reshape, Transpose, ReduceSum, ReduceMean, Softmax, LogSoftmax, a
weight read by two ops, and a broadcast bias.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def weight(rng, name, shape, scale=0.3):
    return nh.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def mlp(rng):
    inits = [weight(rng, "W1", (8, 16)), weight(rng, "b1", (16,), 0.1),
             weight(rng, "W2", (16, 5)), weight(rng, "b2", (5,), 0.1)]
    nodes = [
        h.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="fc1"),
        h.make_node("Relu", ["h"], ["r"], name="relu"),
        h.make_node("MatMul", ["r", "W2"], ["m"], name="fc2"),
        h.make_node("Add", ["m", "b2"], ["logits"], name="bias2"),
    ]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [4, 8])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [4, 5])]


def dropout(rng):
    """mlp with training-mode Dropout (ratio 0.3) after the Relu, a batch
    of 32, and the dropout mask as a second output."""
    nodes, inits, inputs, outputs = mlp(rng)
    inits += [nh.from_array(np.array(0.3, np.float32), "ratio"),
              nh.from_array(np.array(True), "training")]
    nodes.insert(2, h.make_node("Dropout", ["r", "ratio", "training"],
                                ["rd", "mask"], name="drop"))
    nodes[3].input[0] = "rd"
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [32, 8])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [32, 5]),
         h.make_tensor_value_info("mask", T.BOOL, [32, 16])]


def embed(rng):
    # 32 rows: make_test_data.py draws token ids below 32.
    inits = [weight(rng, "E", (32, 6), 0.5), weight(rng, "W", (5, 6)),
             weight(rng, "b", (5,), 0.1)]
    nodes = [
        h.make_node("Gather", ["E", "ids"], ["e"], name="embedding"),
        h.make_node("ReduceMean", ["e"], ["m"], name="pool", axes=[1],
                    keepdims=0),
        h.make_node("Tanh", ["m"], ["t"], name="tanh"),
        h.make_node("Gemm", ["t", "W", "b"], ["logits"], name="head",
                    transB=1),
    ]
    return nodes, inits, [h.make_tensor_value_info("ids", T.INT64, [4, 3])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [4, 5])]


def sparse(rng):
    """embed with a 20000 x 64 table and a batch of 16 x 8 tokens: a step
    touches at most 128 of its rows (a sparse gradient)."""
    inits = [weight(rng, "E", (20000, 64), 0.5), weight(rng, "W", (5, 64)),
             weight(rng, "b", (5,), 0.1)]
    nodes, _, _, _ = embed(rng)
    return nodes, inits, [h.make_tensor_value_info("ids", T.INT64, [16, 8])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [16, 5])]


def dense(rng):
    """embed with a 1024 x 128 table and a batch of 64 x 64 tokens: more
    (index, row) pairs than the table has rows (a dense gradient)."""
    inits = [weight(rng, "E", (1024, 128), 0.5), weight(rng, "W", (5, 128)),
             weight(rng, "b", (5,), 0.1)]
    nodes, _, _, _ = embed(rng)
    return nodes, inits, [h.make_tensor_value_info("ids", T.INT64, [64, 64])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [64, 5])]


def strided(rng):
    """A 1x1 convolution, then a stride-2 one whose windows never read the
    last row and column of its input (ResNet's downsampling): the first
    one's input gradient is zero there."""
    inits = [weight(rng, "W0", (4, 2, 1, 1)), weight(rng, "W", (4, 4, 1, 1)),
             weight(rng, "F", (16, 5))]
    nodes = [h.make_node("Conv", ["x", "W0"], ["a"], name="a"),
             h.make_node("Relu", ["a"], ["r"], name="relu"),
             h.make_node("Conv", ["r", "W"], ["c"], name="c", strides=[2, 2]),
             h.make_node("Flatten", ["c"], ["f"], name="flatten"),
             h.make_node("MatMul", ["f", "F"], ["logits"], name="head")]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [4, 2, 4, 4])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [4, 5])]


def acts(rng):
    """Gelu (exact and tanh), Clip, LeakyRelu, HardSigmoid, HardSwish, a
    constant Pad and a strided Slice between Gemms (opset 20)."""
    inits = [weight(rng, "W1", (6, 8)), weight(rng, "W2", (8, 8)),
             weight(rng, "W3", (8, 8)), weight(rng, "W4", (6, 5)),
             nh.from_array(np.array(-0.4, np.float32), "lo"),
             nh.from_array(np.array(0.5, np.float32), "hi"),
             nh.from_array(np.array([0, 1, 0, 3], np.int64), "pads"),
             nh.from_array(np.array([1], np.int64), "starts"),
             nh.from_array(np.array([12], np.int64), "ends"),
             nh.from_array(np.array([1], np.int64), "axes"),
             nh.from_array(np.array([2], np.int64), "steps")]
    nodes = [
        h.make_node("Gemm", ["x", "W1"], ["g1"], name="fc1"),
        h.make_node("Gelu", ["g1"], ["a1"], name="gelu"),
        h.make_node("Gemm", ["a1", "W2"], ["g2"], name="fc2"),
        h.make_node("Gelu", ["g2"], ["a2"], name="gelu_tanh", approximate="tanh"),
        h.make_node("Clip", ["a2", "lo", "hi"], ["a3"], name="clip"),
        h.make_node("Gemm", ["a3", "W3"], ["g3"], name="fc3"),
        h.make_node("LeakyRelu", ["g3"], ["a4"], name="leaky", alpha=0.2),
        h.make_node("HardSigmoid", ["a4"], ["a5"], name="hsig", alpha=0.3),
        h.make_node("Mul", ["a4", "a5"], ["a6"], name="gate"),
        h.make_node("HardSwish", ["a6"], ["a7"], name="hswish"),
        h.make_node("Add", ["a7", "g3"], ["a8"], name="skip"),
        h.make_node("Pad", ["a8", "pads"], ["p"], name="pad"),
        h.make_node("Slice", ["p", "starts", "ends", "axes", "steps"], ["q"],
                    name="strided_slice"),
        h.make_node("MatMul", ["q", "W4"], ["logits"], name="head"),
    ]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [4, 6])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [4, 5])]


def pools(rng):
    """An instance normalization, then padded average pools: counting only
    the input's points (the default), then the padded ones
    (count_include_pad, padding at the end only)."""
    inits = [weight(rng, "C", (4, 3, 3, 3)), weight(rng, "F", (36, 5)),
             weight(rng, "s", (4,), 0.5), weight(rng, "t", (4,), 0.2)]
    nodes = [
        h.make_node("Conv", ["x", "C"], ["c0"], name="conv", pads=[1, 1, 1, 1]),
        h.make_node("InstanceNormalization", ["c0", "s", "t"], ["c"], name="inorm"),
        h.make_node("AveragePool", ["c"], ["p1"], name="pool1", kernel_shape=[3, 3],
                    strides=[2, 2], pads=[1, 1, 1, 1]),
        h.make_node("AveragePool", ["p1"], ["p2"], name="pool2", kernel_shape=[2, 2],
                    pads=[0, 0, 1, 1], count_include_pad=1),
        h.make_node("Flatten", ["p2"], ["f"], name="flatten"),
        h.make_node("MatMul", ["f", "F"], ["logits"], name="head"),
    ]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 6, 6])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [2, 5])]


def rnn(rng, kind, **attrs):
    """x [5, 3, 4] (sequence, batch, features) through one ONNX LSTM or GRU
    layer with biases and initial states, both outputs used; a MatMul head
    on Y (its direction axis squeezed) plus Y_h's sum."""
    gates = 4 if kind == "LSTM" else 3
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    hs = 6
    inits = [weight(rng, "W", (dirs, gates * hs, 4), 0.4),
             weight(rng, "R", (dirs, gates * hs, hs), 0.4),
             weight(rng, "B", (dirs, 2 * gates * hs), 0.2),
             weight(rng, "h0", (dirs, 3, hs), 0.5),
             weight(rng, "F", (dirs * hs, 5), 0.5),
             nh.from_array(np.array([5, 3, dirs * hs], np.int64), "yshape")]
    ins = ["x", "W", "R", "B", "", "h0"]
    if kind == "LSTM":
        inits.append(weight(rng, "c0", (dirs, 3, hs), 0.5))
        ins.append("c0")
    nodes = [h.make_node(kind, ins, ["y", "yh"], name="rnn", hidden_size=hs,
                         **attrs),
             h.make_node("Transpose", ["y"], ["yt"], name="to_sbdh",
                         perm=[0, 2, 1, 3]),
             h.make_node("Reshape", ["yt", "yshape"], ["yr"], name="flat"),
             h.make_node("MatMul", ["yr", "F"], ["z"], name="head"),
             h.make_node("ReduceSum", ["yh"], ["hsum"], name="hsum", keepdims=0),
             h.make_node("Add", ["z", "hsum"], ["logits"], name="plus_h")]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [5, 3, 4])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [5, 3, 5])]


def lrn(rng):
    """A convolution, then a local response normalization across 3 channels
    with a large alpha (the cross-channel term of its gradient matters)."""
    inits = [weight(rng, "W", (3, 2, 3, 3))]
    nodes = [h.make_node("Conv", ["x", "W"], ["c"], name="conv1"),
             h.make_node("LRN", ["c"], ["y"], name="lrn1", size=3, alpha=0.8,
                         beta=0.75, bias=1.0)]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 5, 5])], \
        [h.make_tensor_value_info("y", T.FLOAT, [1, 3, 3, 3])]


def more(rng):
    """Abs, Softplus, Elu, Max, Min, CumSum, ReduceMax, Floor (opset 13)."""
    inits = [weight(rng, "W1", (4, 6), 0.6), weight(rng, "W2", (6, 5)),
             nh.from_array(np.array(1, np.int64), "axis")]
    nodes = [h.make_node("MatMul", ["x", "W1"], ["a"], name="mm1"),
             h.make_node("Abs", ["a"], ["b1"], name="abs"),
             h.make_node("Softplus", ["a"], ["b2"], name="softplus"),
             h.make_node("Elu", ["a"], ["b3"], name="elu", alpha=0.7),
             h.make_node("Max", ["b1", "b3"], ["m1"], name="max"),
             h.make_node("Min", ["b2", "b3"], ["m2"], name="min"),
             h.make_node("Add", ["m1", "m2"], ["s"], name="sum"),
             h.make_node("CumSum", ["s", "axis"], ["c"], name="running"),
             h.make_node("ReduceMax", ["c"], ["rm"], name="rmax", axes=[1],
                         keepdims=1),
             h.make_node("Sub", ["c", "rm"], ["d"], name="centered"),
             h.make_node("Floor", ["a"], ["f"], name="floor"),
             h.make_node("Add", ["d", "f"], ["e"], name="plus_floor"),
             h.make_node("MatMul", ["e", "W2"], ["logits"], name="mm2")]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [3, 4])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [3, 5])]


def acts2(rng):
    """Selu, Celu, Softsign, Mish, PRelu with a trained per-column slope,
    Mean, Sum, Tile (opset 18)."""
    inits = [weight(rng, "W1", (4, 6), 0.8), weight(rng, "W2", (6, 5)),
             nh.from_array(np.array([0.2, -0.1, 0.3, 0.05, 0.25, 0.15], np.float32), "slope"),
             nh.from_array(np.array([2, 1], np.int64), "reps")]
    nodes = [h.make_node("MatMul", ["x", "W1"], ["a"], name="mm1"),
             h.make_node("Selu", ["a"], ["b1"], name="selu"),
             h.make_node("Celu", ["a"], ["b2"], name="celu", alpha=0.8),
             h.make_node("Softsign", ["a"], ["b3"], name="softsign"),
             h.make_node("Mish", ["a"], ["b4"], name="mish"),
             h.make_node("PRelu", ["a", "slope"], ["b5"], name="prelu"),
             h.make_node("Mean", ["b4", "b5"], ["m"], name="mean"),
             h.make_node("Sum", ["b1", "b2", "b3", "m"], ["s"], name="sum"),
             h.make_node("Tile", ["s", "reps"], ["t"], name="tile"),
             h.make_node("MatMul", ["t", "W2"], ["logits"], name="mm2")]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [3, 4])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [6, 5])]


def prod(rng):
    """A product over a row (no gradient rule yet)."""
    inits = [weight(rng, "W", (4, 3))]
    nodes = [h.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
             h.make_node("ReduceProd", ["m"], ["y"], name="product", axes=[1])]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [2, 4])], \
        [h.make_tensor_value_info("y", T.FLOAT, [2, 1])]


def cnn(rng):
    """Padded and strided convolutions with a bias, max pooling, batch norm
    with running statistics, a global average pool and a Gemm head."""
    inits = [weight(rng, "C1", (4, 2, 3, 3)), weight(rng, "c1", (4,), 0.1),
             weight(rng, "C2", (4, 4, 3, 3)), weight(rng, "gamma", (4,), 0.2),
             weight(rng, "beta", (4,), 0.1),
             nh.from_array(np.zeros(4, np.float32), "mean"),
             nh.from_array(np.ones(4, np.float32), "var"),
             weight(rng, "F", (4, 5)), weight(rng, "f", (5,), 0.1)]
    nodes = [
        h.make_node("Conv", ["x", "C1", "c1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["a"], ["r"], name="relu1"),
        h.make_node("MaxPool", ["r"], ["p"], name="pool1", kernel_shape=[2, 2],
                    strides=[2, 2]),
        h.make_node("Conv", ["p", "C2"], ["b"], name="conv2", pads=[1, 1, 1, 1],
                    strides=[2, 2]),
        h.make_node("BatchNormalization", ["b", "gamma", "beta", "mean", "var"],
                    ["bn"], name="bn"),
        h.make_node("Relu", ["bn"], ["r2"], name="relu2"),
        h.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        h.make_node("Flatten", ["g"], ["fl"], name="flatten"),
        h.make_node("Gemm", ["fl", "F", "f"], ["logits"], name="fc"),
    ]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [2, 2, 8, 8])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [2, 5])]


def cnn_bn(rng):
    """cnn with its batch norm in training mode (batch statistics, opset
    15) and a batch of 4."""
    nodes, inits, inputs, outputs = cnn(rng)
    bn = next(n for n in nodes if n.op_type == "BatchNormalization")
    bn.attribute.append(h.make_attribute("training_mode", 1))
    bn.attribute.append(h.make_attribute("momentum", 0.8))
    bn.output.extend(["bn_running_mean", "bn_running_var"])
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [4, 2, 8, 8])], \
        [h.make_tensor_value_info("logits", T.FLOAT, [4, 5])]


def zoo(rng):
    inits = [weight(rng, "W1", (5, 6)), weight(rng, "c1", (5,), 0.1),
             weight(rng, "W2", (5, 5)), weight(rng, "k", (5,), 0.5),
             weight(rng, "W3", (2, 3)), weight(rng, "b3", (1, 3), 0.1),
             nh.from_array(np.array(1.0, dtype=np.float32), "one"),
             nh.from_array(np.array([2, 10], dtype=np.int64), "shape"),
             nh.from_array(np.array([1], dtype=np.int64), "axis1")]
    nodes = [
        h.make_node("Gemm", ["x", "W1", "c1"], ["g"], name="gemm", transB=1,
                    alpha=0.5, beta=2.0),
        h.make_node("Tanh", ["g"], ["t"], name="tanh"),
        h.make_node("MatMul", ["t", "W2"], ["tw"], name="mm"),
        h.make_node("Sigmoid", ["tw"], ["s"], name="sigmoid"),
        h.make_node("Mul", ["t", "s"], ["u"], name="gate"),
        h.make_node("Mul", ["u", "k"], ["uk"], name="scale"),
        h.make_node("Exp", ["uk"], ["e"], name="exp"),
        h.make_node("Add", ["e", "one"], ["e1"], name="plus_one"),
        h.make_node("Log", ["e1"], ["sp"], name="softplus"),
        h.make_node("Mul", ["u", "u"], ["u2"], name="square"),
        h.make_node("Add", ["u2", "one"], ["u21"], name="plus_one_b"),
        h.make_node("Sqrt", ["u21"], ["q"], name="sqrt"),
        h.make_node("Div", ["sp", "q"], ["v"], name="div"),
        h.make_node("Sub", ["v", "u"], ["w"], name="sub"),
        h.make_node("Neg", ["w"], ["nw"], name="neg"),
        h.make_node("Reshape", ["nw", "shape"], ["r"], name="reshape"),
        h.make_node("Transpose", ["r"], ["tr"], name="transpose"),
        h.make_node("MatMul", ["tr", "W3"], ["z"], name="mm3"),
        h.make_node("Add", ["z", "b3"], ["zb"], name="bias3"),
        h.make_node("Softmax", ["zb"], ["sm"], name="softmax", axis=-1),
        h.make_node("LogSoftmax", ["zb"], ["ls"], name="log_softmax", axis=0),
        h.make_node("Add", ["sm", "ls"], ["a"], name="mix"),
        h.make_node("ReduceSum", ["a", "axis1"], ["rs"], name="row_sum",
                    keepdims=1),
        h.make_node("ReduceMean", ["a"], ["rm"], name="col_mean", axes=[0],
                    keepdims=1),
        h.make_node("Add", ["rs", "rm"], ["y0"], name="outer"),
        h.make_node("MatMul", ["tr", "W3"], ["z2"], name="mm3_again"),
        h.make_node("Mul", ["y0", "z2"], ["y"], name="out"),
    ]
    return nodes, inits, [h.make_tensor_value_info("x", T.FLOAT, [4, 6])], \
        [h.make_tensor_value_info("y", T.FLOAT, [10, 3])]


def main():
    name, out = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(7)
    models = {
        "mlp": mlp, "zoo": zoo, "embed": embed, "cnn": cnn, "cnn_bn": cnn_bn,
        "dropout": dropout, "sparse": sparse, "dense": dense,
        "strided": strided, "acts": acts, "pools": pools, "lrn": lrn,
        "more": more, "acts2": acts2, "prod": prod,
        "lstm": lambda r: rnn(r, "LSTM"),
        "lstm_bi": lambda r: rnn(r, "LSTM", direction="bidirectional"),
        "gru": lambda r: rnn(r, "GRU"),
        "gru_lbr": lambda r: rnn(r, "GRU", linear_before_reset=1,
                                 direction="reverse"),
    }
    nodes, inits, inputs, outputs = models[name](rng)
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    # Opset 13: softmaxes over one axis; ReduceSum's axes an input. 15 for
    # BatchNormalization's training_mode.
    opset = {"cnn_bn": 15, "acts": 20, "acts2": 18}.get(name, 13)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
