#!/usr/bin/env python3
"""A GPT-style decoding step over a static key/value cache, and
onnxruntime running its decoding loop.

The step takes the new token [B, 1], its position [1] and per layer the
cache of keys and values [B, H, T, D] (T positions, those after the
position unused); it writes the new key and value at the position
(ScatterElements along the cache's positions), attends over the positions
up to it, and returns the logits [B, 1, V], the greedy next token [B, 1],
the next position and the updated caches, all of the inputs' shapes, so
that a loop feeds them back:

  paxrun step.paxplan --inputs OUT/in --decode-steps=N \\
      --feedback 'next_token=input_ids,next_position=position,present_*=past_*'

Writes OUT/model.onnx (seeded random weights), OUT/in/input_*.pb (the first
tokens, position 0, zero caches) and prints onnxruntime's loop: each step's
next tokens, and with --time the steps per second of onnxruntime's loop
(one thread, the caches fed back through numpy as users write it).

  decode_model.py OUT [--steps N] [--layers L] [--width W] [--heads H]
                  [--cache T] [--vocab V] [--batch B] [--time]
"""
import argparse
import os
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(a, rng):
    B, T, H, W, V, L = a.batch, a.cache, a.heads, a.width, a.vocab, a.layers
    D = W // H
    n, inits, nodes = helper.make_node, [], []

    def const(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v), name))
        return name

    def weight(name, shape, scale=0.2):
        return const(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def op(kind, ins, out, **attrs):
        nodes.append(n(kind, ins, [out], name=out, **attrs))
        return out

    wte = weight("wte", (V, W), 1.0)
    const("iota", np.arange(T, dtype=np.int64))
    const("heads_shape", np.array([B, 1, H, D], np.int64))
    const("width_shape", np.array([B, 1, W], np.int64))
    const("index_shape", np.array([B, H, 1, D], np.int64))
    const("scale", np.float32(1 / np.sqrt(D)))
    const("neg", np.float32(-1e9))
    const("one", np.array([1], np.int64))
    const("pos4", np.array([1, 1, 1, 1], np.int64))
    x = op("Add", [op("Gather", [wte, "input_ids"], "tok"),
                   op("Gather", [weight("wpe", (T, W)), "position"], "pos")], "x0")
    valid = op("LessOrEqual", ["iota", "position"], "valid")
    at = op("Expand", [op("Reshape", ["position", "pos4"], "pos_r"), "index_shape"], "at")
    outputs = []
    for i in range(L):
        p = f"l{i}_"
        h = op("LayerNormalization", [x, const(p + "g", np.ones(W, np.float32)),
                                      const(p + "b", np.zeros(W, np.float32))], p + "ln1")
        heads = {}
        for kv in ("q", "k", "v"):
            y = op("MatMul", [h, weight(p + "w" + kv, (W, W))], p + kv)
            y = op("Reshape", [y, "heads_shape"], p + kv + "_r")
            heads[kv] = op("Transpose", [y], p + kv + "_t", perm=[0, 2, 1, 3])
        ck = op("ScatterElements", [f"past_key_{i}", at, heads["k"]], f"present_key_{i}", axis=2)
        cv = op("ScatterElements", [f"past_value_{i}", at, heads["v"]], f"present_value_{i}",
                axis=2)
        outputs += [ck, cv]
        s = op("MatMul", [heads["q"], op("Transpose", [ck], p + "kt", perm=[0, 1, 3, 2])],
               p + "scores")
        s = op("Where", [valid, op("Mul", [s, "scale"], p + "scaled"), "neg"], p + "masked")
        c = op("MatMul", [op("Softmax", [s], p + "probs", axis=-1), cv], p + "ctx")
        c = op("Reshape", [op("Transpose", [c], p + "ctx_t", perm=[0, 2, 1, 3]), "width_shape"],
               p + "ctx_r")
        x = op("Add", [x, op("MatMul", [c, weight(p + "wo", (W, W))], p + "attn")], p + "x1")
        m = op("LayerNormalization", [x, const(p + "g2", np.ones(W, np.float32)),
                                      const(p + "b2", np.zeros(W, np.float32))], p + "ln2")
        m = op("Relu", [op("MatMul", [m, weight(p + "w1", (W, 4 * W))], p + "fc")], p + "act")
        x = op("Add", [x, op("MatMul", [m, weight(p + "w2", (4 * W, W))], p + "mlp")], p + "x2")
    logits = op("MatMul", [x, op("Transpose", [wte], "wte_t", perm=[1, 0])], "logits")
    op("ArgMax", [logits], "next_token", axis=-1, keepdims=0)
    op("Add", ["position", "one"], "next_position")
    cache = [B, H, T, D]
    ins = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [B, 1]),
           helper.make_tensor_value_info("position", TensorProto.INT64, [1])]
    for i in range(L):
        for kv in ("key", "value"):
            ins.append(helper.make_tensor_value_info(f"past_{kv}_{i}", TensorProto.FLOAT, cache))
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, 1, V]),
            helper.make_tensor_value_info("next_token", TensorProto.INT64, [B, 1]),
            helper.make_tensor_value_info("next_position", TensorProto.INT64, [1])]
    outs += [helper.make_tensor_value_info(o, TensorProto.FLOAT, cache) for o in outputs]
    g = helper.make_graph(nodes, "decode_step", ins, outs, inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--cache", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--time", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(5)
    model = build(a, rng)
    os.makedirs(os.path.join(a.out, "in"), exist_ok=True)
    onnx.save(model, os.path.join(a.out, "model.onnx"))
    D = a.width // a.heads
    feeds = {"input_ids": rng.integers(0, a.vocab, (a.batch, 1)).astype(np.int64),
             "position": np.array([0], np.int64)}
    for i in range(a.layers):
        for kv in ("key", "value"):
            feeds[f"past_{kv}_{i}"] = np.zeros((a.batch, a.heads, a.cache, D), np.float32)
    for k, (name, v) in enumerate(feeds.items()):
        onnx.save_tensor(numpy_helper.from_array(v, name),
                         os.path.join(a.out, "in", f"input_{k}.pb"))
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    start = time.perf_counter()
    for step in range(a.steps):
        out = dict(zip(names, sess.run(None, feeds)))
        if not a.time:
            print(f"step {step}: next_token = " +
                  " ".join(str(int(t)) for t in out["next_token"].ravel()))
        feeds["input_ids"] = out["next_token"]
        feeds["position"] = out["next_position"]
        for k in list(feeds):
            if k.startswith("past_"):
                feeds[k] = out["present_" + k[len("past_"):]]
    if a.time:
        s = time.perf_counter() - start
        print(f"onnxruntime: decoded {a.steps} steps in {s:.3f} s ({a.steps / s:.1f} steps/s)")


if __name__ == "__main__":
    main()
