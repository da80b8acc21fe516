#!/usr/bin/env python3
"""Self-check of paxmodels.py.

1. Small configurations of every model (2 layers, hidden 64, vocab 100, seq 16):
   * ``--weights random`` and ``constant-of-shape``: run in onnxruntime with random
     token ids; outputs must be finite and of the declared shape;
   * ``--weights input`` (static and ``--dynamic``): fed with weights chosen here,
     outputs must match an independent numpy float64 reference implementation, and
     masking must behave (causal models ignore future tokens, BERT ignores padded ones).
   Inception-v3 (an image model): a batch-1 ``--weights random`` build and a
   ``constant-of-shape`` build run in onnxruntime (logits [1, 1000], finite), and a
   ``--dynamic`` ``--weights input`` build fed the random build's weights must give
   the same logits, row by row, for a batch of 2.
2. Default sizes: every model is generated through the CLI with ``--weights input``
   into a temporary directory in under 10 s, must pass ``onnx.checker.check_model``
   (with shape inference) and must have exactly the required parameter count, both
   as printed by ``--print-params`` and as summed over its weight inputs. The
   ``constant-of-shape`` builds are checked and counted too, and ``random`` weights
   must be refused at these sizes when above the 50M limit (Inception-v3 is below
   it: its random build must succeed and hold the same count). Inception-v3 must also
   have torchvision's 23,834,568 trainable parameters plus 2 x (BatchNorm channels)
   running statistics, torchvision's op counts, and the expected block output shapes.

Run: python3 tools/models/check_models.py   (exits non-zero on the first failure)
"""

import collections
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
import paxmodels as pm  # noqa: E402  (imported from this directory)

EXPECTED_PARAMS = {
    "gpt2": 124_439_808,
    "bert": 109_482_240,
    "llama": 6_738_415_616,
    "llama2-70b": 68_976_648_192,
    "gpt2-xl": 1_557_611_200,
    "bert-large": 335_141_888,
    "lstm": 108_111_632,  # 10000*2048 + 2*(2*4*2048*2048 + 8*2048) + 2048*10000 + 10000
}


def inception_bn_channels() -> int:
    """Sum of the output channels of torchvision Inception3's BasicConv2d layers
    (aux logits excluded), i.e. the BatchNorm widths."""
    stem = [32, 32, 64, 80, 192]

    def block_a(pool_features):
        return [64, 48, 64, 64, 96, 96, pool_features]

    def block_c(c7):
        return [192, c7, c7, 192, c7, c7, c7, c7, 192, 192]

    block_b = [384, 64, 96, 96]
    block_d = [192, 320, 192, 192, 192, 192]
    block_e = [320, 384, 384, 384, 448, 384, 384, 384, 192]
    widths = (stem + block_a(32) + block_a(64) + block_a(64) + block_b
              + block_c(128) + block_c(160) + block_c(160) + block_c(192)
              + block_d + block_e + block_e)
    assert len(widths) == 94
    return sum(widths)


INCEPTION_TRAINABLE = 23_834_568  # torchvision inception_v3(aux_logits=False)
INCEPTION_BN_CHANNELS = inception_bn_channels()  # 17,216
EXPECTED_PARAMS["inception_v3"] = INCEPTION_TRAINABLE
# Float tensors the file holds besides the parameters: BatchNorm running statistics.
STATISTICS = {"inception_v3": 2 * INCEPTION_BN_CHANNELS}
IMAGE_MODELS = {"inception_v3"}
IMAGE_INPUT = "input"  # the image input of IMAGE_MODELS
EXPECTED_OPS = {
    "inception_v3": {"Conv": 94, "BatchNormalization": 94, "Relu": 94, "Concat": 15,
                     "AveragePool": 9, "MaxPool": 4, "GlobalAveragePool": 1, "Dropout": 1,
                     "Flatten": 1, "Gemm": 1},
}
# Output shapes (without batch) of the inception blocks, from torchvision's comments.
INCEPTION_SHAPES = {
    "/maxpool1/MaxPool": [64, 73, 73], "/maxpool2/MaxPool": [192, 35, 35],
    "/Mixed_5b/Concat": [256, 35, 35], "/Mixed_5c/Concat": [288, 35, 35],
    "/Mixed_5d/Concat": [288, 35, 35], "/Mixed_6a/Concat": [768, 17, 17],
    "/Mixed_6b/Concat": [768, 17, 17], "/Mixed_6e/Concat": [768, 17, 17],
    "/Mixed_7a/Concat": [1280, 8, 8], "/Mixed_7b/Concat": [768, 8, 8],
    "/Mixed_7b/Concat_1": [768, 8, 8], "/Mixed_7b/Concat_2": [2048, 8, 8],
    "/Mixed_7c/Concat_2": [2048, 8, 8],
    "/avgpool/GlobalAveragePool": [2048, 1, 1], "/Flatten": [2048],
}
DEFAULT_BUILD_SECONDS = 10.0

SMALL = {
    "gpt2": dict(layers=2, hidden=64, heads=4, ffn=256, vocab=100, positions=32, batch=2, seq=16),
    "bert": dict(layers=2, hidden=64, heads=4, ffn=256, vocab=100, positions=32, batch=2, seq=16),
    "llama": dict(layers=2, hidden=64, heads=4, ffn=172, vocab=100, batch=2, seq=16),
    "llama2-70b": dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=172, vocab=100,
                       batch=2, seq=16),
    "lstm": dict(layers=2, hidden=64, vocab=100, batch=3, seq=16),
}
SMALL["gpt2-xl"] = SMALL["gpt2"]
SMALL["bert-large"] = SMALL["bert"]
DYNAMIC_RUNS = [(1, 7), (3, 12)]  # (batch, seq) fed to the --dynamic builds
REL_TOLERANCE = 1e-4


# --------------------------------------------------------------------------------
# Running models
# --------------------------------------------------------------------------------

def session(model: onnx.ModelProto) -> ort.InferenceSession:
    """A single-threaded CPU onnxruntime session for ``model``."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def run(model: onnx.ModelProto, feeds: dict) -> dict:
    """Run ``model`` and return its outputs by name."""
    sess = session(model)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def token_feeds(name: str, batch: int, seq: int, vocab: int, rng) -> dict:
    """Random token ids; BERT also gets token types and a mask padding row 0's tail."""
    feeds = {"input_ids": rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)}
    if pm.family(name) == "bert":
        mask = np.ones((batch, seq), dtype=np.int64)
        mask[0, seq // 2:] = 0
        feeds["attention_mask"] = mask
        feeds["token_type_ids"] = rng.integers(0, 2, size=(batch, seq), dtype=np.int64)
    return feeds


def expected_shapes(name: str, config: pm.Config, batch: int, seq: int) -> dict:
    """Output name -> shape for a run with the given batch and seq."""
    if pm.family(name) == "bert":
        return {"last_hidden_state": (batch, seq, config.hidden),
                "pooler_output": (batch, config.hidden)}
    return {"logits": (batch, seq, config.vocab)}


def check_outputs(outputs: dict, shapes: dict, what: str) -> None:
    """Outputs must be exactly the expected ones, with those shapes, all finite."""
    assert set(outputs) == set(shapes), f"{what}: outputs {sorted(outputs)} != {sorted(shapes)}"
    for out, shape in shapes.items():
        assert outputs[out].shape == shape, f"{what}: {out} {outputs[out].shape} != {shape}"
        assert np.isfinite(outputs[out]).all(), f"{what}: {out} has non-finite values"


def weight_feeds(model: onnx.ModelProto, rng) -> dict:
    """Weights for a weights-as-inputs model, scaled so activations stay O(1).

    Matrices get std 1/sqrt(fan_in) (fan_in is dim 0 of [in, out] matrices and the
    last dim of LSTM's [1, 4H, in]); 1-D ``*.weight`` tensors are norm gains around 1;
    other 1-D tensors are biases.
    """
    feeds = {}
    for value in model.graph.input:
        if value.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        noise = rng.standard_normal(shape).astype(np.float32)
        if len(shape) == 1:
            data = 1.0 + 0.1 * noise if value.name.endswith(".weight") else 0.1 * noise
        else:
            data = noise / math.sqrt(shape[-1] if len(shape) == 3 else shape[0])
        feeds[value.name] = data.astype(np.float32)
    return feeds


# --------------------------------------------------------------------------------
# numpy float64 reference implementations (weights by PyTorch state-dict name)
# --------------------------------------------------------------------------------

def layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def to_heads(x, heads):
    b, s, h = x.shape
    return x.reshape(b, s, heads, h // heads).transpose(0, 2, 1, 3)


def attend(q, k, v, mask):
    """Multi-head attention on [B, heads, S, d] tensors; ``mask`` edits the scores."""
    scores = mask(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    out = softmax(scores) @ v
    b, n, s, d = out.shape
    return out.transpose(0, 2, 1, 3).reshape(b, s, n * d)


def causal(scores):
    s = scores.shape[-1]
    return np.where(np.tril(np.ones((s, s), dtype=bool)), scores, -np.inf)


def ref_gpt2(w, feeds, c):
    ids = feeds["input_ids"]
    h = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][np.arange(ids.shape[1])]
    for i in range(c.layers):
        p = f"transformer.h.{i}."
        a = layer_norm(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"], pm.GPT2_LN_EPS)
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (to_heads(t, c.heads) for t in np.split(qkv, 3, axis=-1))
        h = h + attend(q, k, v, causal) @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], pm.GPT2_LN_EPS)
        m = m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        m = 0.5 * m * (1 + np.tanh(math.sqrt(2 / math.pi) * (m + 0.044715 * m ** 3)))
        h = h + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    h = layer_norm(h, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], pm.GPT2_LN_EPS)
    return {"logits": h @ w["transformer.wte.weight"].T}


def ref_bert(w, feeds, c):
    ids = feeds["input_ids"]
    erf = np.vectorize(math.erf)
    e = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.token_type_embeddings.weight"][feeds["token_type_ids"]]
         + w["embeddings.position_embeddings.weight"][np.arange(ids.shape[1])])
    h = layer_norm(e, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                   pm.BERT_LN_EPS)
    additive = (1.0 - feeds["attention_mask"][:, None, None, :]) * pm.BERT_MASK_SCALE
    for i in range(c.layers):
        p = f"encoder.layer.{i}."

        def lin(x, name):
            return x @ w[p + name + ".weight"] + w[p + name + ".bias"]

        q, k, v = (to_heads(lin(h, f"attention.self.{n}"), c.heads)
                   for n in ("query", "key", "value"))
        a = lin(attend(q, k, v, lambda s: s + additive), "attention.output.dense") + h
        a = layer_norm(a, w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"], pm.BERT_LN_EPS)
        f = lin(a, "intermediate.dense")
        f = lin(0.5 * f * (1 + erf(f / math.sqrt(2))), "output.dense") + a
        h = layer_norm(f, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"],
                       pm.BERT_LN_EPS)
    pooled = np.tanh(h[:, 0] @ w["pooler.dense.weight"].T + w["pooler.dense.bias"])
    return {"last_hidden_state": h, "pooler_output": pooled}


def ref_llama(w, feeds, c):
    ids = feeds["input_ids"]
    d = c.head_dim
    inv_freq = 1.0 / pm.LLAMA_ROPE_THETA ** (np.arange(0, d, 2) / d)
    freqs = np.arange(ids.shape[1])[:, None] * inv_freq[None, :]
    cos, sin = np.cos(np.concatenate([freqs, freqs], -1)), np.sin(np.concatenate([freqs, freqs], -1))

    def rope(x):
        rotated = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
        return x * cos + rotated * sin

    def rms(x, name):
        return w[name] * x / np.sqrt((x ** 2).mean(-1, keepdims=True) + pm.LLAMA_RMS_EPS)

    h = w["model.embed_tokens.weight"][ids]
    for i in range(c.layers):
        p = f"model.layers.{i}."
        a = rms(h, p + "input_layernorm.weight")
        q = to_heads(a @ w[p + "self_attn.q_proj.weight"], c.heads)
        k, v = (np.repeat(to_heads(a @ w[p + f"self_attn.{n}_proj.weight"], c.kv_heads),
                          c.heads // c.kv_heads, axis=1) for n in "kv")
        h = h + attend(rope(q), rope(k), v, causal) @ w[p + "self_attn.o_proj.weight"]
        m = rms(h, p + "post_attention_layernorm.weight")
        gate = m @ w[p + "mlp.gate_proj.weight"]
        up = m @ w[p + "mlp.up_proj.weight"]
        h = h + (gate * sigmoid(gate) * up) @ w[p + "mlp.down_proj.weight"]
    return {"logits": rms(h, "model.norm.weight") @ w["lm_head.weight"]}


def ref_lstm(w, feeds, c):
    x = w["encoder.weight"][feeds["input_ids"]]  # [B, S, H]
    batch, seq, _ = x.shape
    for i in range(c.layers):
        wx, r, b = w[f"rnn.l{i}.W"][0], w[f"rnn.l{i}.R"][0], w[f"rnn.l{i}.B"][0]
        bias = b[:4 * c.hidden] + b[4 * c.hidden:]
        h = np.zeros((batch, c.hidden))
        cell = np.zeros((batch, c.hidden))
        ys = []
        for t in range(seq):
            gi, go, gf, gc = np.split(x[:, t] @ wx.T + h @ r.T + bias, 4, axis=-1)  # i, o, f, c
            cell = sigmoid(gf) * cell + sigmoid(gi) * np.tanh(gc)
            h = sigmoid(go) * np.tanh(cell)
            ys.append(h)
        x = np.stack(ys, axis=1)
    return {"logits": x @ w["decoder.weight"] + w["decoder.bias"]}


REFERENCES = {"gpt2": ref_gpt2, "bert": ref_bert, "llama": ref_llama, "lstm": ref_lstm}


# --------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------

def check_against_reference(name, model, config, batch, seq, rng, what):
    """Run a weights-as-inputs model and compare with the numpy reference."""
    weights = weight_feeds(model, rng)
    tokens = token_feeds(name, batch, seq, config.vocab, rng)
    outputs = run(model, {**tokens, **weights})
    check_outputs(outputs, expected_shapes(name, config, batch, seq), what)
    reference = REFERENCES[pm.family(name)]({k: v.astype(np.float64) for k, v in weights.items()},
                                 tokens, config)
    for out, expected in reference.items():
        error = np.abs(outputs[out] - expected).max() / np.abs(expected).max()
        assert error < REL_TOLERANCE, f"{what}: {out} differs from reference (rel {error:.2e})"
    check_masking(name, model, tokens, weights, outputs, config.vocab, what)


def check_masking(name, model, tokens, weights, outputs, vocab, what):
    """Changing a masked-out token must leave every other position's output unchanged."""
    changed = {k: v.copy() for k, v in tokens.items()}
    ids = changed["input_ids"]
    seq = ids.shape[1]
    if pm.family(name) == "bert":  # row 0 is padded from seq // 2 on: change its last token.
        ids[0, -1] = (ids[0, -1] + 1) % vocab
        keep = {"last_hidden_state": (0, slice(0, seq // 2)), "pooler_output": (0,)}
    else:  # causal models: change the last token of every row.
        ids[:, -1] = (ids[:, -1] + 1) % vocab
        keep = {"logits": (slice(None), slice(0, seq - 1))}
    new = run(model, {**changed, **weights})
    for out, index in keep.items():
        assert np.allclose(new[out][index], outputs[out][index], atol=1e-6), \
            f"{what}: {out} depends on a masked token"


def buffer_value(name: str, config: pm.Config) -> np.ndarray:
    """The value of a buffer written as a graph input (--buffers input)."""
    if name.endswith("rotary_emb.inv_freq"):
        d = config.head_dim
        return (1.0 / pm.LLAMA_ROPE_THETA ** (np.arange(0, d, 2, dtype=np.float32) / d)
                ).astype(np.float32)
    if name.endswith("attn.bias"):
        p = config.positions
        return np.tril(np.ones((p, p), dtype=bool)).reshape(1, 1, p, p)
    raise AssertionError(f"unknown buffer {name}")


def check_buffers_and_mask(name, config, model, rng):
    """--buffers input fed the buffers' values, with --attention-mask all ones, equals
    the constant build; a padded key changes nothing where it is masked."""
    masked = pm.make_config(name, attention_mask=True, **SMALL[name])
    variant = pm.build_model(masked, "input", buffers="input").model
    onnx.checker.check_model(variant, full_check=True)
    weights = weight_feeds(model, rng)
    tokens = token_feeds(name, config.batch, config.seq, config.vocab, rng)
    plain = run(model, {**tokens, **weights})
    buffers = {v.name: buffer_value(v.name, config) for v in variant.graph.input
               if v.name not in weights and v.name not in ("input_ids", "attention_mask")}
    assert buffers, f"{name}: --buffers input wrote no buffer input"
    ones = np.ones((config.batch, config.seq), dtype=np.int64)
    same = run(variant, {**tokens, **weights, **buffers, "attention_mask": ones})
    for out, value in plain.items():
        error = np.abs(same[out] - value).max() / np.abs(value).max()
        assert error < REL_TOLERANCE, f"{name} buffers input: {out} differs (rel {error:.2e})"
    # Pad the first key of row 0: the token there no longer matters to later positions.
    pad = ones.copy()
    pad[0, 0] = 0
    before = run(variant, {**tokens, **weights, **buffers, "attention_mask": pad})
    changed = {k: v.copy() for k, v in tokens.items()}
    changed["input_ids"][0, 0] = (changed["input_ids"][0, 0] + 1) % config.vocab
    after = run(variant, {**changed, **weights, **buffers, "attention_mask": pad})
    assert np.allclose(before["logits"][0, 1:], after["logits"][0, 1:], atol=1e-6), \
        f"{name} attention mask: a padded key still matters"
    assert not np.allclose(before["logits"], same["logits"]), \
        f"{name} attention mask: padding changed nothing"


def check_small(name: str) -> None:
    """Small configs: random / constant-of-shape / input (static and dynamic) builds."""
    rng = np.random.default_rng(1234)
    config = pm.make_config(name, **SMALL[name])
    shapes = expected_shapes(name, config, config.batch, config.seq)
    for weights in ("random", "constant-of-shape"):
        built = pm.build_model(config, weights, seed=7)
        onnx.checker.check_model(built.model, full_check=True)
        feeds = token_feeds(name, config.batch, config.seq, config.vocab, rng)
        check_outputs(run(built.model, feeds), shapes, f"{name} small {weights}")

    built = pm.build_model(config, "input")
    onnx.checker.check_model(built.model, full_check=True)
    assert built.params == weight_input_elements(built.model)
    check_against_reference(name, built.model, config, config.batch, config.seq, rng,
                            f"{name} small input")

    if pm.family(name) in ("gpt2", "llama"):
        check_buffers_and_mask(name, config, built.model, rng)

    dynamic = pm.make_config(name, dynamic=True, **SMALL[name])
    model = pm.build_model(dynamic, "input").model
    onnx.checker.check_model(model, full_check=True)
    for batch, seq in DYNAMIC_RUNS:
        check_against_reference(name, model, dynamic, batch, seq, rng,
                                f"{name} small dynamic b{batch} s{seq}")
    print(f"  {name}: small configs ok ({built.params:,} params, {len(built.model.graph.node)} nodes)")


def check_small_image(name: str) -> None:
    """Image models at batch 1 (random, constant-of-shape) and a dynamic batch of 2."""
    rng = np.random.default_rng(1234)
    config = pm.make_config(name, batch=1)
    images = rng.standard_normal((2, 3, pm.INCEPTION_IMAGE, pm.INCEPTION_IMAGE),
                                 dtype=np.float32)
    shape = {"logits": (1, pm.INCEPTION_CLASSES)}
    built = {}
    for weights in ("random", "constant-of-shape"):
        built[weights] = pm.build_model(config, weights, seed=7)
        onnx.checker.check_model(built[weights].model, full_check=True)
        params = built[weights].params
        assert params == EXPECTED_PARAMS[name], f"{name} small {weights}: {params:,}"
        outputs = run(built[weights].model, {"input": images[:1]})
        check_outputs(outputs, shape, f"{name} small {weights}")
        if weights == "random":
            logits = outputs["logits"]
    random_model = built["random"].model
    assert np.ptp(logits) > 0, f"{name} small random: logits are constant"
    # The dynamic weights-as-inputs build must be the same graph: feed it the random
    # build's initializers and a batch of 2 whose first image is the one run above.
    dynamic = pm.build_model(pm.make_config(name, dynamic=True), "input")
    onnx.checker.check_model(dynamic.model, full_check=True)
    assert dynamic.params + STATISTICS[name] == weight_input_elements(dynamic.model)
    feeds = {t.name: numpy_helper.to_array(t) for t in random_model.graph.initializer}
    feeds = {v.name: feeds[v.name] for v in dynamic.model.graph.input if v.name != "input"}
    both = run(dynamic.model, {"input": images, **feeds})
    check_outputs(both, {"logits": (2, pm.INCEPTION_CLASSES)}, f"{name} small dynamic")
    error = np.abs(both["logits"][:1] - logits).max() / np.abs(logits).max()
    assert error < REL_TOLERANCE, f"{name} small dynamic: differs from static (rel {error:.2e})"
    print(f"  {name}: small configs ok (batch 1 and dynamic 2, {dynamic.params:,} params, "
          f"{len(random_model.graph.node)} nodes)")


def weight_input_elements(model: onnx.ModelProto, only=lambda name: True) -> int:
    """Total elements of the float graph inputs (the weights in --weights input), the
    image input of image models excluded; ``only`` filters by weight name."""
    return sum(math.prod(d.dim_value for d in v.type.tensor_type.shape.dim)
               for v in model.graph.input
               if v.type.tensor_type.elem_type == TensorProto.FLOAT and v.name != IMAGE_INPUT
               and only(v.name))


def constant_of_shape_weight_elements(model: onnx.ModelProto) -> int:
    """Total elements of the weight ConstantOfShape nodes ("/<weight>/ConstantOfShape")."""
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return sum(int(np.prod(consts[n.input[0]])) for n in model.graph.node
               if n.op_type == "ConstantOfShape" and n.name == f"/{n.output[0]}/ConstantOfShape")


def check_model_proto(model: onnx.ModelProto) -> None:
    """onnx.checker with shape inference, where the checker knows the IR version."""
    if model.ir_version <= onnx.IR_VERSION:
        onnx.checker.check_model(model, full_check=True)


def check_default(name: str, tmp: str) -> collections.Counter:
    """Default size through the CLI: build time, checker, parameter counts."""
    path = os.path.join(tmp, f"{name}.onnx")
    start = time.monotonic()
    result = subprocess.run([sys.executable, os.path.join(HERE, "paxmodels.py"), name, "-o", path,
                             "--print-params"], capture_output=True, text=True, check=True)
    seconds = time.monotonic() - start
    assert seconds < DEFAULT_BUILD_SECONDS, f"{name}: default build took {seconds:.1f} s"
    printed = int(result.stdout.strip())
    assert printed == EXPECTED_PARAMS[name], f"{name}: printed {printed:,} params"
    model = onnx.load(path)
    check_model_proto(model)
    stats = STATISTICS.get(name, 0)
    counted = weight_input_elements(model)
    assert counted == EXPECTED_PARAMS[name] + stats, \
        f"{name}: weight inputs hold {counted:,} elements"

    light = pm.build_model(pm.make_config(name), "constant-of-shape")
    check_model_proto(light.model)
    counted = constant_of_shape_weight_elements(light.model)
    assert light.params + stats == counted == EXPECTED_PARAMS[name] + stats, \
        f"{name}: constant-of-shape build has {counted:,} weight elements"

    if EXPECTED_PARAMS[name] > pm.RANDOM_PARAM_LIMIT:
        try:
            pm.build_model(pm.make_config(name), "random")
        except ValueError:
            pass
        else:
            raise AssertionError(f"{name}: random weights were not refused at default size")
    else:
        heavy = pm.build_model(pm.make_config(name), "random")
        counted = sum(math.prod(t.dims) for t in heavy.model.graph.initializer
                      if t.data_type == TensorProto.FLOAT and t.dims)
        assert heavy.params + stats == counted == EXPECTED_PARAMS[name] + stats, \
            f"{name}: random build has {counted:,} weight elements"

    ops = collections.Counter(n.op_type for n in model.graph.node)
    if name in EXPECTED_OPS:
        assert ops == EXPECTED_OPS[name], f"{name}: op counts {dict(ops)}"
    if name == "inception_v3":
        check_inception_default(model)

    print(f"  {name}: default ok in {seconds:.2f} s ({printed:,} params, "
          f"{os.path.getsize(path):,} bytes, opset {model.opset_import[0].version}, "
          f"ir {model.ir_version})")
    return ops


def check_inception_default(model: onnx.ModelProto) -> None:
    """Trainable / BatchNorm-statistics split, opset, input and block output shapes."""
    stats = weight_input_elements(model, lambda n: n.endswith((".running_mean", ".running_var")))
    trainable = weight_input_elements(model) - stats
    assert trainable == INCEPTION_TRAINABLE, f"inception_v3: {trainable:,} trainable params"
    assert stats == 2 * INCEPTION_BN_CHANNELS, f"inception_v3: {stats:,} BatchNorm statistics"
    assert (model.opset_import[0].version, model.ir_version) == (13, 7)
    batch = pm.PRESETS["inception_v3"]["batch"]
    image = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert image == [batch, 3, 299, 299], f"inception_v3: input {image}"
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    nodes = {n.name: n for n in model.graph.node}
    for node, shape in INCEPTION_SHAPES.items():
        got = shapes[nodes[node].output[0]]
        assert got == [batch] + shape, f"inception_v3: {node} has shape {got}"
    assert shapes["logits"] == [batch, 1000], f"inception_v3: logits {shapes['logits']}"
    gemm = nodes["/fc/Gemm"]
    assert {a.name: helper.get_attribute_value(a) for a in gemm.attribute}.get("transB") == 1
    for n in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "AveragePool":
            assert attrs["count_include_pad"] == 1 and attrs["pads"] == [1, 1, 1, 1] \
                and attrs["kernel_shape"] == [3, 3] and attrs["strides"] == [1, 1], n.name
        elif n.op_type == "MaxPool":
            assert attrs["kernel_shape"] == [3, 3] and attrs["strides"] == [2, 2], n.name
        elif n.op_type == "Conv":
            assert len(n.input) == 2, f"{n.name} has a bias"


def main() -> int:
    print("small configurations:")
    for name in pm.MODELS:
        if name in IMAGE_MODELS:
            check_small_image(name)
        else:
            check_small(name)
    print("default sizes:")
    with tempfile.TemporaryDirectory() as tmp:
        for name in pm.MODELS:
            ops = check_default(name, tmp)
            print("    " + ", ".join(f"{op} {n}" for op, n in sorted(ops.items())))
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
