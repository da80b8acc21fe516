#!/usr/bin/env python3
"""Exporter-style ONNX model generators for paxc.

Builds GPT-2, BERT, Llama, an LSTM language model and Inception-v3 with ``onnx.helper``,
laid out the way PyTorch / Hugging Face exports look: node names follow the module
hierarchy ("/transformer/h.0/attn/MatMul", "/Mixed_5b/branch1x1/conv/Conv"), weights are
named after the PyTorch state dict ("transformer.h.0.attn.c_attn.weight"), norms and
activations are decomposed the way the exporter writes them at the model's opset, and
shape / axes / scalar constants are initializers.

Weights can be materialized three ways (``--weights``):

* ``input`` (default): every weight is a graph input with its true shape, so even
  Llama-7B is a small file;
* ``constant-of-shape``: every weight is a ``ConstantOfShape`` node filled with 0.02,
  like ONNX's "light" models;
* ``random``: every weight is an initializer holding seeded random values (normal with
  standard deviation 0.02; norm scales and BatchNorm running variances are 1 plus
  that). Refused above 50M parameters.

Batch and sequence length are fixed in the graph unless ``--dynamic`` is given, in
which case the token inputs get the symbolic dims "batch" and "seq" and every shape
that depends on them is computed in the graph (Shape -> Gather -> Concat / Range);
Inception-v3's image input gets the symbolic dim "batch" (no shape is computed).

The parameter count is the total number of elements of all weight tensors; tied
weights (GPT-2's lm head reuses ``transformer.wte.weight``) count once, and buffers
(causal masks, rotary ``inv_freq``, position ids) and BatchNorm running means and
variances are not parameters (Inception-v3: 23,834,568 parameters, plus 2 x 17,216
BatchNorm statistics in the file).

Usage::

    python3 tools/models/paxmodels.py MODEL -o OUT.onnx [--layers L] [--hidden H]
        [--heads N] [--kv-heads K] [--ffn F] [--vocab V] [--positions P] [--batch B]
        [--seq S] [--dynamic] [--weights input|constant-of-shape|random] [--seed N]
        [--buffers constant|input] [--attention-mask]
        [--print-params]

MODEL is one of gpt2 (GPT-2 small), gpt2-xl, bert (BERT-base with pooler), bert-large,
llama (Llama-7B), llama2-70b (grouped-query attention, 8 kv heads), mixtral
(Mixtral-8x7B: Llama layers whose MLPs are sparse mixtures of 8 experts, top 2,
written as GShard's capacity-based dispatch; --experts sets E), lstm (2-layer LSTM
LM, hidden 2048, vocab 10000) or inception_v3 (torchvision's Inception-v3 without aux
logits, input [B, 3, 299, 299], batch 32 by default; only --batch applies).

``--buffers input`` writes module buffers (Llama's rotary ``inv_freq``, GPT-2's per-layer
causal ``bias``) as graph inputs, as ``torch.onnx.export(export_params=False)`` does, so
the rotary tables and masks are computed from inputs; ``--attention-mask`` (gpt2, llama)
adds an ``attention_mask`` input combined with the causal mask.
"""

import argparse
import math
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WEIGHT_MODES = ("input", "constant-of-shape", "random")
BUFFER_MODES = ("constant", "input")
RANDOM_PARAM_LIMIT = 50_000_000
WEIGHT_FILL = 0.02  # ConstantOfShape fill value and std of random weights.

FLOAT_MIN = float(np.finfo(np.float32).min)  # torch.finfo(torch.float32).min
INT64_MAX = int(np.iinfo(np.int64).max)

GPT2_LN_EPS = 1e-5
BERT_LN_EPS = 1e-12
BERT_MASK_SCALE = -10000.0
LLAMA_RMS_EPS = 1e-6
LLAMA_ROPE_THETA = 10000.0

# A dimension as seen inside the graph: a Python int when static, or the name of a
# 1-D int64 tensor of length 1 when it is computed at run time.
Dim = Union[int, str]

# Default sizes. Keys present here are the size options that apply to the model.
PRESETS: Dict[str, Dict[str, int]] = {
    "gpt2": dict(layers=12, hidden=768, heads=12, ffn=3072, vocab=50257,
                 positions=1024, batch=8, seq=1024),
    "bert": dict(layers=12, hidden=768, heads=12, ffn=3072, vocab=30522,
                 positions=512, batch=1, seq=512),
    "llama": dict(layers=32, hidden=4096, heads=32, ffn=11008, vocab=32000,
                  batch=1, seq=2048, kv_heads=32),
    "llama2-70b": dict(layers=80, hidden=8192, heads=64, ffn=28672, vocab=32000,
                       batch=1, seq=4096, kv_heads=8),
    "gpt2-xl": dict(layers=48, hidden=1600, heads=25, ffn=6400, vocab=50257,
                    positions=1024, batch=8, seq=1024),
    "bert-large": dict(layers=24, hidden=1024, heads=16, ffn=4096, vocab=30522,
                       positions=512, batch=1, seq=512),
    "lstm": dict(layers=2, hidden=2048, vocab=10000, batch=20, seq=35),
    "inception_v3": dict(batch=32),
    "mixtral": dict(layers=32, hidden=4096, heads=32, ffn=14336, vocab=32000,
                    batch=1, seq=4096, kv_heads=8, experts=8),
}


def family(model: str) -> str:
    """The graph a preset is built with: "gpt2-xl" is a gpt2, "llama2-70b" a llama."""
    return {"llama2-70b": "llama", "gpt2-xl": "gpt2", "bert-large": "bert",
            "mixtral": "llama"}.get(model, model)


@dataclass(frozen=True)
class Config:
    """Sizes of one model. Sizes that do not apply to the model are 0."""

    model: str
    batch: int
    layers: int = 0
    hidden: int = 0
    vocab: int = 0
    seq: int = 0
    heads: int = 0
    ffn: int = 0
    positions: int = 0
    kv_heads: int = 0
    experts: int = 0
    dynamic: bool = False
    attention_mask: bool = False

    @property
    def head_dim(self) -> int:
        """Per-head width of a transformer's attention."""
        return self.hidden // self.heads

    def token_dims(self) -> List[Union[int, str]]:
        """Batch and sequence dims of the token inputs, as written in value infos."""
        return ["batch", "seq"] if self.dynamic else [self.batch, self.seq]

    def batch_dim(self) -> Union[int, str]:
        """Batch dim of an image input, as written in value infos."""
        return "batch" if self.dynamic else self.batch


def make_config(model: str, dynamic: bool = False, attention_mask: bool = False,
                **sizes: Optional[int]) -> Config:
    """Return the preset of ``model`` with the given sizes (None = keep preset).

    Raises ValueError for unknown models, sizes that do not apply to the model,
    non-positive sizes and inconsistent combinations.
    """
    if model not in PRESETS:
        raise ValueError(f"unknown model {model!r}; expected one of {sorted(PRESETS)}")
    values = dict(PRESETS[model])
    for key, value in sizes.items():
        if value is None:
            continue
        if key not in values:
            raise ValueError(f"--{key} does not apply to {model}")
        if value <= 0:
            raise ValueError(f"--{key} must be positive, got {value}")
        values[key] = value
    if attention_mask and family(model) not in ("gpt2", "llama"):
        raise ValueError(f"--attention-mask applies to gpt2 and llama models, not {model}")
    preset = PRESETS[model]
    if (preset.get("kv_heads") == preset.get("heads") and sizes.get("heads")
            and not sizes.get("kv_heads")):
        values["kv_heads"] = values["heads"]  # a multi-head preset stays multi-head
    config = Config(model=model, dynamic=dynamic, attention_mask=attention_mask, **values)
    if config.heads and config.hidden % config.heads:
        raise ValueError(f"hidden {config.hidden} is not divisible by heads {config.heads}")
    if config.kv_heads and config.heads % config.kv_heads:
        raise ValueError(f"heads {config.heads} is not divisible by kv heads {config.kv_heads}")
    if family(model) == "llama" and config.head_dim % 2:
        raise ValueError(f"llama head dim {config.head_dim} must be even for rotary embeddings")
    if config.experts and (dynamic or config.experts < 2):
        raise ValueError(f"{model} needs static dims and at least 2 experts")
    if config.positions and config.seq > config.positions:
        raise ValueError(f"seq {config.seq} exceeds the {config.positions} positions of {model}")
    return config


class GraphBuilder:
    """Accumulates nodes, inputs, outputs and initializers of one ONNX graph.

    Node names are "<scope>/<OpType>" with "_1", "_2", ... appended on repeats, and
    node outputs are "<node name>_output_<i>", as the PyTorch exporter writes them.
    """

    def __init__(self, opset: int, weights: str, seed: int, buffers: str = "constant"):
        if buffers not in BUFFER_MODES:
            raise ValueError(f"unknown buffers mode {buffers!r}; expected one of {BUFFER_MODES}")
        if weights not in WEIGHT_MODES:
            raise ValueError(f"unknown weights mode {weights!r}; expected one of {WEIGHT_MODES}")
        self.opset = opset
        self.weights = weights
        self.buffers = buffers
        self.rng = np.random.default_rng(seed)
        self.param_count = 0
        self.nodes: List[onnx.NodeProto] = []
        self.inputs: List[onnx.ValueInfoProto] = []
        self.outputs: List[onnx.ValueInfoProto] = []
        self.initializers: List[onnx.TensorProto] = []
        self._node_counts: Dict[str, int] = {}
        self._tensor_names: set = set()
        self._consts: Dict[tuple, str] = {}
        self._tokens: Optional[str] = None
        self._static_dims: Optional[tuple] = None
        self._token_shape: Optional[str] = None
        self._dynamic_dims: Dict[int, str] = {}

    # -- nodes and constants -------------------------------------------------------

    def op(self, op_type: str, inputs: Sequence[str], scope: str, n_out: int = 1,
           out: Optional[Sequence[str]] = None, **attrs) -> Union[str, List[str]]:
        """Append a node; return its output name (a list when ``n_out`` > 1).

        ``out`` overrides the generated output names.
        """
        base = f"{scope}/{op_type}"
        count = self._node_counts.get(base, 0)
        self._node_counts[base] = count + 1
        name = base if count == 0 else f"{base}_{count}"
        outputs = list(out) if out is not None else [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, value: np.ndarray, name: str) -> str:
        """Return an initializer holding ``value``; identical values share one."""
        key = (value.dtype.str, value.shape, value.tobytes())
        if key not in self._consts:
            unique = name
            suffix = 1
            while unique in self._tensor_names:
                unique = f"{name}_{suffix}"
                suffix += 1
            self._tensor_names.add(unique)
            self.initializers.append(numpy_helper.from_array(value, unique))
            self._consts[key] = unique
        return self._consts[key]

    def buffer(self, value: np.ndarray, name: str) -> str:
        """A module buffer (rotary ``inv_freq``, a causal mask): a constant, or with
        buffers "input" a graph input of its type and shape, as
        ``torch.onnx.export(export_params=False)`` writes it (not a parameter)."""
        if self.buffers != "input":
            return self.const(value, name)
        self._tensor_names.add(name)
        elem = helper.np_dtype_to_tensor_dtype(value.dtype)
        self.inputs.append(helper.make_tensor_value_info(name, elem, list(value.shape)))
        return name

    def ints(self, values: Sequence[int]) -> str:
        """1-D int64 constant (shapes, axes, starts/ends)."""
        return self.const(np.array(values, dtype=np.int64),
                          "ints_" + "_".join(str(v) for v in values))

    def int_scalar(self, value: int) -> str:
        """0-D int64 constant (Gather indices, Range bounds, Trilu k)."""
        return self.const(np.array(value, dtype=np.int64), f"int_{value}")

    def scalar(self, value: float, name: str) -> str:
        """0-D float32 constant."""
        return self.const(np.array(value, dtype=np.float32), name)

    # -- graph inputs, outputs and weights ----------------------------------------

    def token_input(self, name: str, config: Config) -> str:
        """Declare an int64 [batch, seq] graph input."""
        self._tensor_names.add(name)
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.INT64,
                                                         config.token_dims()))
        return name

    def image_input(self, name: str, dims: Sequence[Union[int, str]]) -> str:
        """Declare a float32 graph input (an image batch)."""
        self._tensor_names.add(name)
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims)))
        return name

    def output(self, tensor: str, name: str, dims: Sequence[Union[int, str]]) -> None:
        """Expose float ``tensor`` as graph output ``name`` (renaming it in the graph)."""
        for node in self.nodes:
            for field in (node.input, node.output):
                for i, value in enumerate(field):
                    if value == tensor:
                        field[i] = name
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims)))

    def weight(self, name: str, shape: Sequence[int], scale: bool = False,
               statistic: bool = False) -> str:
        """Declare a float32 weight tensor and count its elements as parameters,
        unless it is a ``statistic`` (a BatchNorm running mean or variance).

        ``scale`` marks norm gains and BatchNorm running variances, which random mode
        centers on 1 instead of 0 (so variances stay positive).
        """
        shape = [int(d) for d in shape]
        if not statistic:
            self.param_count += math.prod(shape)
        self._tensor_names.add(name)
        if self.weights == "input":
            self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        elif self.weights == "constant-of-shape":
            fill = helper.make_tensor("value", TensorProto.FLOAT, [1], [WEIGHT_FILL])
            self.op("ConstantOfShape", [self.ints(shape)], f"/{name}", out=[name], value=fill)
        else:
            data = self.rng.standard_normal(shape, dtype=np.float32) * WEIGHT_FILL
            if scale:
                data += 1.0
            self.initializers.append(numpy_helper.from_array(data, name))
        return name

    # -- batch / sequence dims ----------------------------------------------------

    def bind_tokens(self, tokens: str, config: Config) -> None:
        """Use the [batch, seq] input ``tokens`` as the source of run-time dims."""
        self._tokens = tokens
        self._static_dims = None if config.dynamic else (config.batch, config.seq)

    def _shape_of_tokens(self) -> str:
        if self._token_shape is None:
            self._token_shape = self.op("Shape", [self._tokens], "")
        return self._token_shape

    def _dim(self, axis: int) -> Dim:
        if self._static_dims is not None:
            return self._static_dims[axis]
        if axis not in self._dynamic_dims:
            self._dynamic_dims[axis] = self.op(
                "Gather", [self._shape_of_tokens(), self.ints([axis])], "", axis=0)
        return self._dynamic_dims[axis]

    @property
    def batch(self) -> Dim:
        """Batch size: an int, or a 1-D tensor name when dynamic."""
        return self._dim(0)

    @property
    def seq(self) -> Dim:
        """Sequence length: an int, or a 1-D tensor name when dynamic."""
        return self._dim(1)

    def shape(self, dims: Sequence[Dim], scope: str) -> str:
        """A 1-D int64 shape tensor: an initializer, or a Concat when any dim is dynamic."""
        if all(isinstance(d, int) for d in dims):
            return self.ints(dims)
        parts = [d if isinstance(d, str) else self.ints([d]) for d in dims]
        return self.op("Concat", parts, scope, axis=0)

    def position_ids(self, scope: str) -> str:
        """int64 [1, seq] positions 0..seq-1: an initializer, or Range when dynamic."""
        if self._static_dims is not None:
            seq = self._static_dims[1]
            return self.const(np.arange(seq, dtype=np.int64).reshape(1, seq), "position_ids")
        limit = self.op("Gather", [self._shape_of_tokens(), self.int_scalar(1)], scope, axis=0)
        positions = self.op("Range", [self.int_scalar(0), limit, self.int_scalar(1)], scope)
        return self.unsqueeze(positions, [0], scope)

    # -- ops whose signature changed across opsets --------------------------------

    def unsqueeze(self, x: str, axes: Sequence[int], scope: str) -> str:
        """Unsqueeze with axes as an attribute (opset < 13) or an input."""
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.ints(axes)], scope)
        return self.op("Unsqueeze", [x], scope, axes=list(axes))

    def squeeze(self, x: str, axes: Sequence[int], scope: str) -> str:
        """Squeeze with axes as an attribute (opset < 13) or an input."""
        if self.opset >= 13:
            return self.op("Squeeze", [x, self.ints(axes)], scope)
        return self.op("Squeeze", [x], scope, axes=list(axes))

    def reduce_mean(self, x: str, axes: Sequence[int], scope: str) -> str:
        """ReduceMean keeping dims, axes as an attribute (opset < 18) or an input."""
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.ints(axes)], scope, keepdims=1)
        return self.op("ReduceMean", [x], scope, axes=list(axes), keepdims=1)

    # -- assembly -----------------------------------------------------------------

    def to_model(self, graph_name: str, ir_version: int) -> onnx.ModelProto:
        """Wrap everything into a ModelProto of the given IR version and opset."""
        graph = helper.make_graph(self.nodes, graph_name, self.inputs, self.outputs,
                                  initializer=self.initializers)
        return helper.make_model(graph, ir_version=ir_version, producer_name="paxmodels",
                                 opset_imports=[helper.make_opsetid("", self.opset)])


# --------------------------------------------------------------------------------
# Building blocks shared by the models
# --------------------------------------------------------------------------------

def linear(g: GraphBuilder, x: str, prefix: str, scope: str, n_in: int, n_out: int,
           bias: bool = True) -> str:
    """x @ W (+ b) with W stored [in, out], as the exporter writes nn.Linear/Conv1D."""
    y = g.op("MatMul", [x, g.weight(f"{prefix}.weight", [n_in, n_out])], scope)
    if bias:
        y = g.op("Add", [y, g.weight(f"{prefix}.bias", [n_out])], scope)
    return y


def split_heads(g: GraphBuilder, x: str, config: Config, perm: Sequence[int],
                scope: str, heads: int = 0) -> str:
    """[B, S, heads * head_dim] -> Reshape [B, S, heads, head_dim] -> Transpose(perm);
    ``heads`` defaults to the config's."""
    shape = g.shape([g.batch, g.seq, heads or config.heads, config.head_dim], scope)
    x = g.op("Reshape", [x, shape], scope)
    return g.op("Transpose", [x], scope, perm=list(perm))


def merge_heads(g: GraphBuilder, x: str, config: Config, scope: str) -> str:
    """[B, heads, S, head_dim] -> Transpose -> Reshape [B, S, hidden]."""
    x = g.op("Transpose", [x], scope, perm=[0, 2, 1, 3])
    return g.op("Reshape", [x, g.shape([g.batch, g.seq, config.hidden], scope)], scope)


def attention_core(g: GraphBuilder, q: str, k_t: str, v: str, config: Config, scope: str,
                   mask: Callable[[str], str]) -> str:
    """softmax(mask(q @ k_t / sqrt(head_dim))) @ v, heads merged back to [B, S, hidden]."""
    scores = g.op("MatMul", [q, k_t], scope)
    scale = g.scalar(math.sqrt(config.head_dim), "attn_scale")
    scores = mask(g.op("Div", [scores, scale], scope))
    probs = g.op("Softmax", [scores], scope, axis=-1)
    return merge_heads(g, g.op("MatMul", [probs, v], scope), config, scope)


def layer_norm_decomposed(g: GraphBuilder, x: str, prefix: str, scope: str, width: int,
                          eps: float) -> str:
    """LayerNorm as exported below opset 17: (x - mean) / sqrt(var + eps) * gamma + beta."""
    gamma = g.weight(f"{prefix}.weight", [width], scale=True)
    beta = g.weight(f"{prefix}.bias", [width])
    mean = g.reduce_mean(x, [-1], scope)
    centered = g.op("Sub", [x, mean], scope)
    squared = g.op("Pow", [centered, g.scalar(2.0, "two")], scope)
    var = g.reduce_mean(squared, [-1], scope)
    var = g.op("Add", [var, g.scalar(eps, "ln_eps")], scope)
    normed = g.op("Div", [centered, g.op("Sqrt", [var], scope)], scope)
    return g.op("Add", [g.op("Mul", [normed, gamma], scope), beta], scope)


def layer_norm_op(g: GraphBuilder, x: str, prefix: str, scope: str, width: int,
                  eps: float) -> str:
    """LayerNorm as the single opset-17 LayerNormalization op."""
    gamma = g.weight(f"{prefix}.weight", [width], scale=True)
    beta = g.weight(f"{prefix}.bias", [width])
    return g.op("LayerNormalization", [x, gamma, beta], scope, axis=-1, epsilon=eps)


def rms_norm(g: GraphBuilder, x: str, prefix: str, scope: str, width: int) -> str:
    """Llama RMSNorm: weight * (x * 1 / sqrt(mean(x^2) + eps))."""
    weight = g.weight(f"{prefix}.weight", [width], scale=True)
    squared = g.op("Pow", [x, g.scalar(2.0, "two")], scope)
    var = g.op("Add", [g.reduce_mean(squared, [-1], scope), g.scalar(LLAMA_RMS_EPS, "rms_eps")],
               scope)
    inv_rms = g.op("Reciprocal", [g.op("Sqrt", [var], scope)], scope)
    return g.op("Mul", [weight, g.op("Mul", [x, inv_rms], scope)], scope)


# --------------------------------------------------------------------------------
# GPT-2 (opset 14)
# --------------------------------------------------------------------------------

def gelu_tanh(g: GraphBuilder, x: str, scope: str) -> str:
    """GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    half = g.op("Mul", [x, g.scalar(0.5, "half")], scope)
    cube = g.op("Pow", [x, g.scalar(3.0, "three")], scope)
    inner = g.op("Mul", [cube, g.scalar(0.044715, "gelu_coeff")], scope)
    inner = g.op("Add", [x, inner], scope)
    inner = g.op("Mul", [inner, g.scalar(math.sqrt(2.0 / math.pi), "sqrt_2_over_pi")], scope)
    inner = g.op("Add", [g.op("Tanh", [inner], scope), g.scalar(1.0, "one")], scope)
    return g.op("Mul", [half, inner], scope)


def gpt2_attention(g: GraphBuilder, x: str, c: Config, prefix: str, scope: str,
                   bias: str, padding: Optional[str] = None) -> str:
    """GPT2Attention: fused c_attn, Split, causal Where-mask from the `bias` buffer, c_proj."""
    h = c.hidden
    qkv = linear(g, x, f"{prefix}.c_attn", f"{scope}/c_attn", h, 3 * h)
    q, k, v = g.op("Split", [qkv, g.ints([h, h, h])], scope, n_out=3, axis=2)
    q = split_heads(g, q, c, [0, 2, 1, 3], scope)
    k_t = split_heads(g, k, c, [0, 2, 3, 1], scope)
    v = split_heads(g, v, c, [0, 2, 1, 3], scope)

    def causal(scores: str) -> str:
        seq = g.seq
        ends = g.shape([seq, seq], scope)
        keep = g.op("Slice", [bias, g.ints([0, 0]), ends, g.ints([2, 3])], scope)
        masked = g.op("Where", [keep, scores, g.scalar(FLOAT_MIN, "mask_value")], scope)
        return masked if padding is None else g.op("Add", [masked, padding], scope)

    context = attention_core(g, q, k_t, v, c, scope, causal)
    return linear(g, context, f"{prefix}.c_proj", f"{scope}/c_proj", h, h)


def gpt2_graph(g: GraphBuilder, c: Config) -> None:
    """GPT2LMHeadModel with the lm head tied to wte (MatMul with Transpose(wte))."""
    ids = g.token_input("input_ids", c)
    g.bind_tokens(ids, c)
    wte = g.weight("transformer.wte.weight", [c.vocab, c.hidden])
    wpe = g.weight("transformer.wpe.weight", [c.positions, c.hidden])
    tokens = g.op("Gather", [wte, ids], "/transformer/wte")
    positions = g.op("Gather", [wpe, g.position_ids("/transformer")], "/transformer/wpe")
    h = g.op("Add", [tokens, positions], "/transformer")
    causal = np.tril(np.ones((c.positions, c.positions), dtype=bool))
    causal = causal.reshape(1, 1, c.positions, c.positions)
    padding = None
    if c.attention_mask:
        # (1 - mask[:, None, None, :]) * float32 min, added to the scores.
        am = g.token_input("attention_mask", c)
        m = g.op("Cast", [g.unsqueeze(am, [1, 2], "/transformer")], "/transformer",
                 to=TensorProto.FLOAT)
        m = g.op("Sub", [g.scalar(1.0, "one"), m], "/transformer")
        padding = g.op("Mul", [m, g.scalar(FLOAT_MIN, "mask_value")], "/transformer")
    for i in range(c.layers):
        prefix, scope = f"transformer.h.{i}", f"/transformer/h.{i}"
        # Every layer holds its own `bias` buffer; as constants they are one.
        bias = g.buffer(causal, f"{prefix}.attn.bias" if g.buffers == "input" else "bias")
        a = layer_norm_decomposed(g, h, f"{prefix}.ln_1", f"{scope}/ln_1", c.hidden, GPT2_LN_EPS)
        a = gpt2_attention(g, a, c, f"{prefix}.attn", f"{scope}/attn", bias, padding)
        h = g.op("Add", [h, a], scope)
        m = layer_norm_decomposed(g, h, f"{prefix}.ln_2", f"{scope}/ln_2", c.hidden, GPT2_LN_EPS)
        m = linear(g, m, f"{prefix}.mlp.c_fc", f"{scope}/mlp/c_fc", c.hidden, c.ffn)
        m = gelu_tanh(g, m, f"{scope}/mlp/act")
        m = linear(g, m, f"{prefix}.mlp.c_proj", f"{scope}/mlp/c_proj", c.ffn, c.hidden)
        h = g.op("Add", [h, m], scope)
    h = layer_norm_decomposed(g, h, "transformer.ln_f", "/transformer/ln_f", c.hidden,
                              GPT2_LN_EPS)
    wte_t = g.op("Transpose", [wte], "/lm_head", perm=[1, 0])
    logits = g.op("MatMul", [h, wte_t], "/lm_head")
    g.output(logits, "logits", c.token_dims() + [c.vocab])


# --------------------------------------------------------------------------------
# BERT (opset 17)
# --------------------------------------------------------------------------------

def gelu_erf(g: GraphBuilder, x: str, scope: str) -> str:
    """Exact GELU: x * (1 + erf(x / sqrt(2))) * 0.5."""
    e = g.op("Erf", [g.op("Div", [x, g.scalar(math.sqrt(2.0), "sqrt_2")], scope)], scope)
    e = g.op("Add", [e, g.scalar(1.0, "one")], scope)
    return g.op("Mul", [g.op("Mul", [x, e], scope), g.scalar(0.5, "half")], scope)


def bert_layer(g: GraphBuilder, h: str, c: Config, prefix: str, scope: str,
               mask: str) -> str:
    """One BertLayer: self-attention with additive mask, output LN, GELU FFN, output LN."""
    attn, attn_scope = f"{prefix}.attention", f"{scope}/attention"
    q = linear(g, h, f"{attn}.self.query", f"{attn_scope}/self/query", c.hidden, c.hidden)
    k = linear(g, h, f"{attn}.self.key", f"{attn_scope}/self/key", c.hidden, c.hidden)
    v = linear(g, h, f"{attn}.self.value", f"{attn_scope}/self/value", c.hidden, c.hidden)
    self_scope = f"{attn_scope}/self"
    q = split_heads(g, q, c, [0, 2, 1, 3], self_scope)
    k_t = split_heads(g, k, c, [0, 2, 3, 1], self_scope)
    v = split_heads(g, v, c, [0, 2, 1, 3], self_scope)
    context = attention_core(g, q, k_t, v, c, self_scope,
                             lambda scores: g.op("Add", [scores, mask], self_scope))
    a = linear(g, context, f"{attn}.output.dense", f"{attn_scope}/output/dense",
               c.hidden, c.hidden)
    a = g.op("Add", [a, h], f"{attn_scope}/output")
    a = layer_norm_op(g, a, f"{attn}.output.LayerNorm", f"{attn_scope}/output/LayerNorm",
                      c.hidden, BERT_LN_EPS)
    f = linear(g, a, f"{prefix}.intermediate.dense", f"{scope}/intermediate/dense",
               c.hidden, c.ffn)
    f = gelu_erf(g, f, f"{scope}/intermediate/intermediate_act_fn")
    f = linear(g, f, f"{prefix}.output.dense", f"{scope}/output/dense", c.ffn, c.hidden)
    f = g.op("Add", [f, a], f"{scope}/output")
    return layer_norm_op(g, f, f"{prefix}.output.LayerNorm", f"{scope}/output/LayerNorm",
                         c.hidden, BERT_LN_EPS)


def bert_graph(g: GraphBuilder, c: Config) -> None:
    """BertModel: embeddings, encoder, and pooler (first token -> Gemm -> Tanh)."""
    ids = g.token_input("input_ids", c)
    attention_mask = g.token_input("attention_mask", c)
    token_type_ids = g.token_input("token_type_ids", c)
    g.bind_tokens(ids, c)

    word = g.weight("embeddings.word_embeddings.weight", [c.vocab, c.hidden])
    position = g.weight("embeddings.position_embeddings.weight", [c.positions, c.hidden])
    token_type = g.weight("embeddings.token_type_embeddings.weight", [2, c.hidden])
    e = g.op("Gather", [word, ids], "/embeddings/word_embeddings")
    t = g.op("Gather", [token_type, token_type_ids], "/embeddings/token_type_embeddings")
    e = g.op("Add", [e, t], "/embeddings")
    p = g.op("Gather", [position, g.position_ids("/embeddings")],
             "/embeddings/position_embeddings")
    e = g.op("Add", [e, p], "/embeddings")
    h = layer_norm_op(g, e, "embeddings.LayerNorm", "/embeddings/LayerNorm", c.hidden,
                      BERT_LN_EPS)

    # Extended attention mask: (1 - mask[:, None, None, :]) * -10000.
    m = g.unsqueeze(attention_mask, [1, 2], "")
    m = g.op("Cast", [m], "", to=TensorProto.FLOAT)
    m = g.op("Sub", [g.scalar(1.0, "one"), m], "")
    mask = g.op("Mul", [m, g.scalar(BERT_MASK_SCALE, "mask_scale")], "")

    for i in range(c.layers):
        h = bert_layer(g, h, c, f"encoder.layer.{i}", f"/encoder/layer.{i}", mask)

    first = g.op("Gather", [h, g.int_scalar(0)], "/pooler", axis=1)
    dense_w = g.weight("pooler.dense.weight", [c.hidden, c.hidden])  # [out, in]
    dense_b = g.weight("pooler.dense.bias", [c.hidden])
    pooled = g.op("Gemm", [first, dense_w, dense_b], "/pooler/dense",
                  alpha=1.0, beta=1.0, transB=1)
    pooled = g.op("Tanh", [pooled], "/pooler/activation")
    g.output(h, "last_hidden_state", c.token_dims() + [c.hidden])
    g.output(pooled, "pooler_output", c.token_dims()[:1] + [c.hidden])


# --------------------------------------------------------------------------------
# Llama (opset 18)
# --------------------------------------------------------------------------------

def rotary_cos_sin(g: GraphBuilder, c: Config) -> List[str]:
    """LlamaRotaryEmbedding: cos and sin of shape [1, 1, S, head_dim]."""
    scope = "/model/rotary_emb"
    d = c.head_dim
    inv_freq = 1.0 / LLAMA_ROPE_THETA ** (np.arange(0, d, 2, dtype=np.float32) / d)
    inv = g.buffer(inv_freq.astype(np.float32), "model.rotary_emb.inv_freq")
    inv = g.unsqueeze(inv, [0, 2], scope)  # [1, d/2, 1]
    pos = g.unsqueeze(g.position_ids(scope), [1], scope)  # [1, 1, S]
    pos = g.op("Cast", [pos], scope, to=TensorProto.FLOAT)
    freqs = g.op("Transpose", [g.op("MatMul", [inv, pos], scope)], scope, perm=[0, 2, 1])
    emb = g.op("Concat", [freqs, freqs], scope, axis=-1)  # [1, S, d]
    return [g.unsqueeze(g.op(fn, [emb], scope), [1], scope) for fn in ("Cos", "Sin")]


def causal_mask_additive(g: GraphBuilder, attention_mask: Optional[str] = None) -> str:
    """[1, 1, S, S] float mask: 0 on and below the diagonal, float32 min above it;
    with an ``attention_mask`` input [B, S], [B, 1, S, S] with padded keys at float32
    min too (``Where(mask == 0, min, causal)``)."""
    scope = "/model"
    fill = helper.make_tensor("value", TensorProto.FLOAT, [1], [FLOAT_MIN])
    full = g.op("ConstantOfShape", [g.shape([g.seq, g.seq], scope)], scope, value=fill)
    upper = g.op("Trilu", [full, g.int_scalar(1)], scope, upper=1)
    causal = g.unsqueeze(upper, [0, 1], scope)
    if attention_mask is None:
        return causal
    padded = g.op("Equal", [g.unsqueeze(attention_mask, [1, 2], scope), g.int_scalar(0)],
                  scope)
    return g.op("Where", [padded, g.scalar(FLOAT_MIN, "mask_value"), causal], scope)


def apply_rotary(g: GraphBuilder, x: str, cos: str, sin: str, head_dim: int,
                 scope: str) -> str:
    """x * cos + rotate_half(x) * sin, rotate_half = cat(-x[..., d/2:], x[..., :d/2])."""
    half = head_dim // 2
    x1 = g.op("Slice", [x, g.ints([0]), g.ints([half]), g.ints([-1])], scope)
    x2 = g.op("Slice", [x, g.ints([half]), g.ints([INT64_MAX]), g.ints([-1])], scope)
    rotated = g.op("Concat", [g.op("Neg", [x2], scope), x1], scope, axis=-1)
    return g.op("Add", [g.op("Mul", [x, cos], scope), g.op("Mul", [rotated, sin], scope)],
                scope)


def repeat_kv(g: GraphBuilder, x: str, c: Config, scope: str) -> str:
    """Grouped-query attention's repeat_kv: [B, kv, S, d] -> [B, heads, S, d] by
    Unsqueeze, Expand and Reshape (the identity when every head has its own kv)."""
    if c.kv_heads == c.heads:
        return x
    rep = c.heads // c.kv_heads
    x = g.unsqueeze(x, [2], scope)
    x = g.op("Expand", [x, g.shape([g.batch, c.kv_heads, rep, g.seq, c.head_dim], scope)],
             scope)
    return g.op("Reshape", [x, g.shape([g.batch, c.heads, g.seq, c.head_dim], scope)], scope)


def llama_attention(g: GraphBuilder, x: str, c: Config, prefix: str, scope: str,
                    cos: str, sin: str, mask: str) -> str:
    """LlamaAttention (multi-head, no bias) with rotary q/k and an additive causal mask."""
    h, kv = c.hidden, c.kv_heads * c.head_dim
    q = linear(g, x, f"{prefix}.q_proj", f"{scope}/q_proj", h, h, bias=False)
    k = linear(g, x, f"{prefix}.k_proj", f"{scope}/k_proj", h, kv, bias=False)
    v = linear(g, x, f"{prefix}.v_proj", f"{scope}/v_proj", h, kv, bias=False)
    q = apply_rotary(g, split_heads(g, q, c, [0, 2, 1, 3], scope), cos, sin, c.head_dim, scope)
    k = apply_rotary(g, split_heads(g, k, c, [0, 2, 1, 3], scope, c.kv_heads), cos, sin,
                     c.head_dim, scope)
    k = repeat_kv(g, k, c, scope)
    k_t = g.op("Transpose", [k], scope, perm=[0, 1, 3, 2])
    v = repeat_kv(g, split_heads(g, v, c, [0, 2, 1, 3], scope, c.kv_heads), c, scope)
    context = attention_core(g, q, k_t, v, c, scope,
                             lambda scores: g.op("Add", [scores, mask], scope))
    return linear(g, context, f"{prefix}.o_proj", f"{scope}/o_proj", h, h, bias=False)


def llama_mlp(g: GraphBuilder, x: str, c: Config, prefix: str, scope: str) -> str:
    """LlamaMLP: down_proj(silu(gate_proj(x)) * up_proj(x))."""
    gate = linear(g, x, f"{prefix}.gate_proj", f"{scope}/gate_proj", c.hidden, c.ffn, bias=False)
    act_scope = f"{scope}/act_fn"
    gate = g.op("Mul", [gate, g.op("Sigmoid", [gate], act_scope)], act_scope)
    up = linear(g, x, f"{prefix}.up_proj", f"{scope}/up_proj", c.hidden, c.ffn, bias=False)
    return linear(g, g.op("Mul", [gate, up], scope), f"{prefix}.down_proj",
                  f"{scope}/down_proj", c.ffn, c.hidden, bias=False)


# Mixture of experts: Mixtral's sparse MoE block, top-2 of E experts, written
# as GShard's capacity-based dispatch (dense one-hot dispatch and combine
# tensors, the experts' weights stacked as transformers 5 stores them).
MOE_TOP_K = 2
MOE_CAPACITY_FACTOR = 2.0


def moe_capacity(c: Config) -> int:
    """Tokens each expert takes per sequence (GShard's capacity): later ones drop."""
    return min(c.seq, math.ceil(MOE_CAPACITY_FACTOR * MOE_TOP_K * c.seq / c.experts))


def moe_routes(g: GraphBuilder, x: str, c: Config, prefix: str, scope: str) -> List[str]:
    """The router: dispatch [B, S, E, C] (token s goes to slot c of expert e) and
    combine [B, S, E, C] (the same, weighted by the token's normalized top-2
    probability). Slots are given in order of (token, choice); a token past an
    expert's capacity is dropped there."""
    b, s, e, cap = c.batch, c.seq, c.experts, moe_capacity(c)
    logits = linear(g, x, f"{prefix}.gate", f"{scope}/gate", c.hidden, e, bias=False)
    probs = g.op("Softmax", [logits], scope, axis=-1)
    top, idx = g.op("TopK", [probs, g.ints([MOE_TOP_K])], scope, n_out=2, axis=-1)
    top = g.op("Div", [top, g.op("ReduceSum", [top, g.ints([-1])], scope, keepdims=1)],
               scope)
    onoff = g.const(np.array([0, 1], np.float32), "onehot_values")
    mask = g.op("OneHot", [idx, g.int_scalar(e), onoff], scope, axis=-1)
    mask = g.op("Reshape", [mask, g.ints([b, s * MOE_TOP_K, e])], scope)
    before = g.op("Sub", [g.op("CumSum", [mask, g.int_scalar(1)], scope),
                          g.scalar(1.0, "one")], scope)
    slot = g.op("ReduceSum", [g.op("Mul", [before, mask], scope), g.ints([2])], scope,
                keepdims=0)
    slot = g.op("Cast", [slot], scope, to=TensorProto.INT64)
    slots = g.op("OneHot", [slot, g.int_scalar(cap), onoff], scope, axis=-1)
    routes = g.op("Mul", [g.op("Unsqueeze", [mask, g.ints([3])], scope),
                          g.op("Unsqueeze", [slots, g.ints([2])], scope)], scope)
    weights = g.op("Reshape", [top, g.ints([b, s * MOE_TOP_K, 1, 1])], scope)
    out = []
    for r in (routes, g.op("Mul", [routes, weights], scope)):
        r = g.op("Reshape", [r, g.ints([b, s, MOE_TOP_K, e, cap])], scope)
        out.append(g.op("ReduceSum", [r, g.ints([2])], scope, keepdims=0))
    return out


def mixtral_moe(g: GraphBuilder, x: str, c: Config, prefix: str, scope: str) -> str:
    """MixtralSparseMoeBlock: each token's top-2 experts' SwiGLU MLPs, weighted."""
    dispatch, combine = moe_routes(g, x, c, prefix, scope)
    experts = f"{scope}/experts"
    gate_up = g.weight(f"{prefix}.experts.gate_up_proj", [c.experts, 2 * c.ffn, c.hidden])
    down = g.weight(f"{prefix}.experts.down_proj", [c.experts, c.hidden, c.ffn])
    tokens = g.op("Einsum", [dispatch, x], experts, equation="bsec,bsd->ebcd")
    h = g.op("Einsum", [tokens, gate_up], experts, equation="ebcd,efd->ebcf")
    gate, up = g.op("Split", [h, g.ints([c.ffn, c.ffn])], experts, n_out=2, axis=-1)
    act = g.op("Mul", [gate, g.op("Sigmoid", [gate], experts)], experts)
    h = g.op("Einsum", [g.op("Mul", [act, up], experts), down], experts,
             equation="ebcf,edf->ebcd")
    return g.op("Einsum", [combine, h], scope, equation="bsec,ebcd->bsd")


def llama_graph(g: GraphBuilder, c: Config) -> None:
    """LlamaForCausalLM with an untied lm_head; all projections stored [in, out].
    With experts (Mixtral), each MLP is a sparse MoE block."""
    ids = g.token_input("input_ids", c)
    g.bind_tokens(ids, c)
    embed = g.weight("model.embed_tokens.weight", [c.vocab, c.hidden])
    h = g.op("Gather", [embed, ids], "/model/embed_tokens")
    cos, sin = rotary_cos_sin(g, c)
    mask = causal_mask_additive(
        g, g.token_input("attention_mask", c) if c.attention_mask else None)
    for i in range(c.layers):
        prefix, scope = f"model.layers.{i}", f"/model/layers.{i}"
        a = rms_norm(g, h, f"{prefix}.input_layernorm", f"{scope}/input_layernorm", c.hidden)
        a = llama_attention(g, a, c, f"{prefix}.self_attn", f"{scope}/self_attn", cos, sin, mask)
        h = g.op("Add", [h, a], scope)
        m = rms_norm(g, h, f"{prefix}.post_attention_layernorm",
                     f"{scope}/post_attention_layernorm", c.hidden)
        mlp = mixtral_moe if c.experts else llama_mlp
        m = mlp(g, m, c, f"{prefix}.mlp", f"{scope}/mlp")
        h = g.op("Add", [h, m], scope)
    h = rms_norm(g, h, "model.norm", "/model/norm", c.hidden)
    logits = linear(g, h, "lm_head", "/lm_head", c.hidden, c.vocab, bias=False)
    g.output(logits, "logits", c.token_dims() + [c.vocab])


# --------------------------------------------------------------------------------
# LSTM language model (opset 11)
# --------------------------------------------------------------------------------

def lstm_graph(g: GraphBuilder, c: Config) -> None:
    """Embedding -> one single-layer ONNX LSTM per layer -> vocabulary projection."""
    ids = g.token_input("input_ids", c)
    h = c.hidden
    embed = g.weight("encoder.weight", [c.vocab, h])
    x = g.op("Gather", [embed, ids], "/encoder")
    x = g.op("Transpose", [x], "", perm=[1, 0, 2])  # [S, B, E]
    for i in range(c.layers):
        w = g.weight(f"rnn.l{i}.W", [1, 4 * h, h])  # gates i, o, f, c
        r = g.weight(f"rnn.l{i}.R", [1, 4 * h, h])
        b = g.weight(f"rnn.l{i}.B", [1, 8 * h])  # [Wb, Rb]
        y = g.op("LSTM", [x, w, r, b], "/rnn", hidden_size=h)  # [S, 1, B, H]
        x = g.squeeze(y, [1], "/rnn")
    x = g.op("Transpose", [x], "", perm=[1, 0, 2])  # [B, S, H]
    logits = linear(g, x, "decoder", "/decoder", h, c.vocab)
    g.output(logits, "logits", c.token_dims() + [c.vocab])


# --------------------------------------------------------------------------------
# Inception-v3 (opset 13)
# --------------------------------------------------------------------------------

INCEPTION_BN_EPS = 1e-3  # torchvision's BasicConv2d: BatchNorm2d(eps=0.001)
INCEPTION_BN_MOMENTUM = 0.9  # 1 - PyTorch's momentum 0.1, as the exporter writes it
INCEPTION_IMAGE = 299
INCEPTION_CLASSES = 1000
INCEPTION_DROPOUT = 0.5

Pair = Union[int, Sequence[int]]


def _pair(v: Pair) -> List[int]:
    return [v, v] if isinstance(v, int) else list(v)


class Inception:
    """Writes torchvision's Inception3 into a GraphBuilder.

    Tracks the channel count of every tensor so each BasicConv2d knows its input
    width; ``conv`` is one BasicConv2d (Conv without bias -> BatchNormalization ->
    Relu) named after its module path ("Mixed_5b.branch1x1").
    """

    def __init__(self, g: GraphBuilder):
        self.g = g
        self.channels: Dict[str, int] = {}

    def conv(self, x: str, module: str, out_ch: int, kernel: Pair, stride: Pair = 1,
             padding: Pair = 0) -> str:
        g = self.g
        kh, kw = _pair(kernel)
        ph, pw = _pair(padding)
        in_ch = self.channels[x]
        scope = "/" + module.replace(".", "/")
        w = g.weight(f"{module}.conv.weight", [out_ch, in_ch, kh, kw])
        y = g.op("Conv", [x, w], f"{scope}/conv", dilations=[1, 1], group=1,
                 kernel_shape=[kh, kw], pads=[ph, pw, ph, pw], strides=_pair(stride))
        bn = [g.weight(f"{module}.bn.weight", [out_ch], scale=True),
              g.weight(f"{module}.bn.bias", [out_ch]),
              g.weight(f"{module}.bn.running_mean", [out_ch], statistic=True),
              g.weight(f"{module}.bn.running_var", [out_ch], scale=True, statistic=True)]
        y = g.op("BatchNormalization", [y] + bn, f"{scope}/bn", epsilon=INCEPTION_BN_EPS,
                 momentum=INCEPTION_BN_MOMENTUM)
        y = g.op("Relu", [y], scope)
        self.channels[y] = out_ch
        return y

    def max_pool(self, x: str, scope: str) -> str:
        """max_pool2d(kernel_size=3, stride=2)."""
        y = self.g.op("MaxPool", [x], scope, ceil_mode=0, kernel_shape=[3, 3],
                      pads=[0, 0, 0, 0], strides=[2, 2])
        self.channels[y] = self.channels[x]
        return y

    def avg_pool(self, x: str, scope: str) -> str:
        """avg_pool2d(kernel_size=3, stride=1, padding=1), padding counted."""
        y = self.g.op("AveragePool", [x], scope, ceil_mode=0, count_include_pad=1,
                      kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
        self.channels[y] = self.channels[x]
        return y

    def concat(self, xs: Sequence[str], scope: str) -> str:
        y = self.g.op("Concat", list(xs), scope, axis=1)
        self.channels[y] = sum(self.channels[x] for x in xs)
        return y

    # -- blocks (torchvision.models.inception) ------------------------------------

    def block_a(self, x: str, m: str, pool_features: int) -> str:
        """InceptionA: 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avgpool-1x1."""
        b1 = self.conv(x, f"{m}.branch1x1", 64, 1)
        b5 = self.conv(x, f"{m}.branch5x5_1", 48, 1)
        b5 = self.conv(b5, f"{m}.branch5x5_2", 64, 5, padding=2)
        b3 = self.conv(x, f"{m}.branch3x3dbl_1", 64, 1)
        b3 = self.conv(b3, f"{m}.branch3x3dbl_2", 96, 3, padding=1)
        b3 = self.conv(b3, f"{m}.branch3x3dbl_3", 96, 3, padding=1)
        bp = self.conv(self.avg_pool(x, f"/{m}"), f"{m}.branch_pool", pool_features, 1)
        return self.concat([b1, b5, b3, bp], f"/{m}")

    def block_b(self, x: str, m: str) -> str:
        """InceptionB (grid 35 -> 17): 3x3/2 | 1x1-3x3-3x3/2 | maxpool/2."""
        b3 = self.conv(x, f"{m}.branch3x3", 384, 3, stride=2)
        bd = self.conv(x, f"{m}.branch3x3dbl_1", 64, 1)
        bd = self.conv(bd, f"{m}.branch3x3dbl_2", 96, 3, padding=1)
        bd = self.conv(bd, f"{m}.branch3x3dbl_3", 96, 3, stride=2)
        bp = self.max_pool(x, f"/{m}")
        return self.concat([b3, bd, bp], f"/{m}")

    def block_c(self, x: str, m: str, c7: int) -> str:
        """InceptionC: 1x1 | 1x1-1x7-7x1 | 1x1-7x1-1x7-7x1-1x7 | avgpool-1x1."""
        b1 = self.conv(x, f"{m}.branch1x1", 192, 1)
        b7 = self.conv(x, f"{m}.branch7x7_1", c7, 1)
        b7 = self.conv(b7, f"{m}.branch7x7_2", c7, (1, 7), padding=(0, 3))
        b7 = self.conv(b7, f"{m}.branch7x7_3", 192, (7, 1), padding=(3, 0))
        bd = self.conv(x, f"{m}.branch7x7dbl_1", c7, 1)
        bd = self.conv(bd, f"{m}.branch7x7dbl_2", c7, (7, 1), padding=(3, 0))
        bd = self.conv(bd, f"{m}.branch7x7dbl_3", c7, (1, 7), padding=(0, 3))
        bd = self.conv(bd, f"{m}.branch7x7dbl_4", c7, (7, 1), padding=(3, 0))
        bd = self.conv(bd, f"{m}.branch7x7dbl_5", 192, (1, 7), padding=(0, 3))
        bp = self.conv(self.avg_pool(x, f"/{m}"), f"{m}.branch_pool", 192, 1)
        return self.concat([b1, b7, bd, bp], f"/{m}")

    def block_d(self, x: str, m: str) -> str:
        """InceptionD (grid 17 -> 8): 1x1-3x3/2 | 1x1-1x7-7x1-3x3/2 | maxpool/2."""
        b3 = self.conv(x, f"{m}.branch3x3_1", 192, 1)
        b3 = self.conv(b3, f"{m}.branch3x3_2", 320, 3, stride=2)
        b7 = self.conv(x, f"{m}.branch7x7x3_1", 192, 1)
        b7 = self.conv(b7, f"{m}.branch7x7x3_2", 192, (1, 7), padding=(0, 3))
        b7 = self.conv(b7, f"{m}.branch7x7x3_3", 192, (7, 1), padding=(3, 0))
        b7 = self.conv(b7, f"{m}.branch7x7x3_4", 192, 3, stride=2)
        bp = self.max_pool(x, f"/{m}")
        return self.concat([b3, b7, bp], f"/{m}")

    def block_e(self, x: str, m: str) -> str:
        """InceptionE: 1x1 | 1x1-(1x3, 3x1) | 1x1-3x3-(1x3, 3x1) | avgpool-1x1."""
        b1 = self.conv(x, f"{m}.branch1x1", 320, 1)
        b3 = self.conv(x, f"{m}.branch3x3_1", 384, 1)
        b3 = self.concat([self.conv(b3, f"{m}.branch3x3_2a", 384, (1, 3), padding=(0, 1)),
                          self.conv(b3, f"{m}.branch3x3_2b", 384, (3, 1), padding=(1, 0))],
                         f"/{m}")
        bd = self.conv(x, f"{m}.branch3x3dbl_1", 448, 1)
        bd = self.conv(bd, f"{m}.branch3x3dbl_2", 384, 3, padding=1)
        bd = self.concat([self.conv(bd, f"{m}.branch3x3dbl_3a", 384, (1, 3), padding=(0, 1)),
                          self.conv(bd, f"{m}.branch3x3dbl_3b", 384, (3, 1), padding=(1, 0))],
                         f"/{m}")
        bp = self.conv(self.avg_pool(x, f"/{m}"), f"{m}.branch_pool", 192, 1)
        return self.concat([b1, b3, bd, bp], f"/{m}")


def inception_v3_graph(g: GraphBuilder, c: Config) -> None:
    """torchvision inception_v3(aux_logits=False, transform_input=False), eval mode.

    [B, 3, 299, 299] -> stem (5 convs, 2 max pools) -> Mixed_5b..5d (InceptionA, 35x35)
    -> Mixed_6a (InceptionB) -> Mixed_6b..6e (InceptionC, 17x17) -> Mixed_7a
    (InceptionD) -> Mixed_7b, 7c (InceptionE, 8x8) -> GlobalAveragePool -> Dropout ->
    Flatten -> fc (Gemm, transB=1) -> [B, 1000] logits.
    """
    net = Inception(g)
    x = g.image_input("input", [c.batch_dim(), 3, INCEPTION_IMAGE, INCEPTION_IMAGE])
    net.channels[x] = 3
    x = net.conv(x, "Conv2d_1a_3x3", 32, 3, stride=2)
    x = net.conv(x, "Conv2d_2a_3x3", 32, 3)
    x = net.conv(x, "Conv2d_2b_3x3", 64, 3, padding=1)
    x = net.max_pool(x, "/maxpool1")
    x = net.conv(x, "Conv2d_3b_1x1", 80, 1)
    x = net.conv(x, "Conv2d_4a_3x3", 192, 3)
    x = net.max_pool(x, "/maxpool2")
    for module, pool_features in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        x = net.block_a(x, module, pool_features)
    x = net.block_b(x, "Mixed_6a")
    for module, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160),
                       ("Mixed_6e", 192)):
        x = net.block_c(x, module, c7)
    x = net.block_d(x, "Mixed_7a")
    x = net.block_e(x, "Mixed_7b")
    x = net.block_e(x, "Mixed_7c")
    width = net.channels[x]  # 2048
    x = g.op("GlobalAveragePool", [x], "/avgpool")
    x = g.op("Dropout", [x, g.scalar(INCEPTION_DROPOUT, "dropout_ratio")], "/dropout")
    x = g.op("Flatten", [x], "", axis=1)
    fc_w = g.weight("fc.weight", [INCEPTION_CLASSES, width])  # [out, in]
    fc_b = g.weight("fc.bias", [INCEPTION_CLASSES])
    logits = g.op("Gemm", [x, fc_w, fc_b], "/fc", alpha=1.0, beta=1.0, transB=1)
    g.output(logits, "logits", [c.batch_dim(), INCEPTION_CLASSES])


# --------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSpec:
    """How to build one model family and which opset / IR version it is written at."""

    graph: Callable[[GraphBuilder, Config], None]
    opset: int
    ir_version: int


MODELS: Dict[str, ModelSpec] = {
    "gpt2": ModelSpec(gpt2_graph, opset=14, ir_version=8),
    "bert": ModelSpec(bert_graph, opset=17, ir_version=9),
    "llama": ModelSpec(llama_graph, opset=18, ir_version=10),
    "llama2-70b": ModelSpec(llama_graph, opset=18, ir_version=10),
    "gpt2-xl": ModelSpec(gpt2_graph, opset=14, ir_version=8),
    "bert-large": ModelSpec(bert_graph, opset=17, ir_version=9),
    "lstm": ModelSpec(lstm_graph, opset=11, ir_version=7),
    "inception_v3": ModelSpec(inception_v3_graph, opset=13, ir_version=7),
    "mixtral": ModelSpec(llama_graph, opset=18, ir_version=10),
}


@dataclass(frozen=True)
class BuiltModel:
    """A generated model and its parameter count."""

    model: onnx.ModelProto
    params: int


def _build(config: Config, weights: str, seed: int, buffers: str) -> BuiltModel:
    spec = MODELS[config.model]
    g = GraphBuilder(spec.opset, weights, seed, buffers)
    spec.graph(g, config)
    return BuiltModel(g.to_model(f"paxmodels_{config.model}", spec.ir_version), g.param_count)


def build_model(config: Config, weights: str = "input", seed: int = 0,
                buffers: str = "constant") -> BuiltModel:
    """Build ``config`` with the given weights mode.

    Random weights are refused (ValueError) above RANDOM_PARAM_LIMIT parameters; the
    count is taken from a weights-as-inputs build first, so nothing large is allocated.
    """
    if weights == "random":
        params = _build(config, "input", seed, buffers).params
        if params > RANDOM_PARAM_LIMIT:
            raise ValueError(f"{config.model} has {params:,} parameters; random weights are "
                             f"limited to {RANDOM_PARAM_LIMIT:,} (use --weights input or "
                             f"constant-of-shape, or smaller sizes)")
    return _build(config, weights, seed, buffers)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """Command-line interface; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("-o", "--output", help="path of the .onnx file to write")
    for size in ("layers", "hidden", "heads", "kv-heads", "ffn", "vocab", "positions",
                 "batch", "seq", "experts"):
        parser.add_argument(f"--{size}", type=int, help=f"{size} (default: the model's preset)")
    parser.add_argument("--dynamic", action="store_true",
                        help="symbolic 'batch' and 'seq' input dims instead of fixed ones")
    parser.add_argument("--weights", choices=WEIGHT_MODES, default="input")
    parser.add_argument("--buffers", choices=BUFFER_MODES, default="constant",
                        help="buffers (rotary inv_freq, causal masks) as constants or as "
                             "graph inputs (export_params=False)")
    parser.add_argument("--attention-mask", action="store_true",
                        help="gpt2, llama: an attention_mask input combined with the causal mask")
    parser.add_argument("--seed", type=int, default=0, help="seed of --weights random")
    parser.add_argument("--print-params", action="store_true",
                        help="print the parameter count to stdout")
    args = parser.parse_args(argv)
    if args.output is None and not args.print_params:
        parser.error("-o/--output is required unless --print-params is given")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Build the requested model, write it and/or print its parameter count."""
    args = parse_args(argv)
    try:
        config = make_config(args.model, dynamic=args.dynamic, layers=args.layers,
                             hidden=args.hidden, heads=args.heads, ffn=args.ffn,
                             vocab=args.vocab, positions=args.positions, batch=args.batch,
                             seq=args.seq, kv_heads=args.kv_heads, experts=args.experts,
                             attention_mask=args.attention_mask)
        built = build_model(config, args.weights, args.seed, args.buffers)
    except ValueError as error:
        print(f"paxmodels: error: {error}", file=sys.stderr)
        return 2
    if args.output:
        onnx.save(built.model, args.output)
        print(f"wrote {args.output}: {len(built.model.graph.node)} nodes, "
              f"{built.params:,} parameters", file=sys.stderr)
    if args.print_params:
        print(built.params)
    return 0


if __name__ == "__main__":
    sys.exit(main())
