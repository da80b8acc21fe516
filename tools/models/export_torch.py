#!/usr/bin/env python3
"""A corpus of real PyTorch ONNX exports for paxc's tests.

Builds small (tiny-config) versions of common architectures with torch,
torchvision and transformers (every transformers model from a Config object,
nothing downloaded), perturbs their weights with a seeded generator, exports
each with both of PyTorch's ONNX exporters:

  * ``ts``:  ``torch.onnx.export(..., dynamo=False, opset_version=17)``
             (the TorchScript exporter)
  * ``dyn``: ``torch.onnx.export(..., dynamo=True, optimize=True)``
             (the torch.export-based exporter at its default opset)

once with static shapes and once with a symbolic batch dim (``_dynamic``;
language models also get a symbolic sequence dim), and writes

  OUT/<arch>_<ts|dyn>[_dynamic]/model.onnx
  OUT/<arch>_<ts|dyn>[_dynamic]/test_data_set_0/input_N.pb, output_N.pb
  OUT/<arch>_<ts|dyn>_dynamic/test_data_set_1/...   (other batch / seq sizes)
  OUT/manifest.json

Inputs are numbered in graph-input order; outputs are onnxruntime's
(CPUExecutionProvider, one thread) and are checked against torch's outputs
(rtol 1e-3).  An export that fails or mismatches is recorded in the manifest
with its error and its directory is not written.

The run is reproducible: rerunning gives byte-identical files.  Per-node
metadata (stack traces, module paths) and doc strings that the exporters write
are removed.

Usage:
  export_torch.py [--out test/models/torch] [--only ARCH[,ARCH...]] [--list]
                  [--exporters ts,dyn] [--no-dynamic]
"""

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import traceback
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper
from torch import nn

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
ort.set_default_logger_severity(3)

RTOL = 1e-3
BATCH = 2
SEQ = 8
# The second test data set of a dynamic export uses other sizes.
BATCH2 = 3
SEQ2 = 6
VOCAB = 100


# --------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------

def perturb(model, seed):
    """Overwrite every parameter and the BatchNorm statistics with seeded
    random values of a sensible scale (normal, std 1/sqrt(fan_in) for
    matrices and kernels; 1 + 0.1 N for 1-D weights (norm scales); 0.1 N for
    biases and other vectors; running_var uniform in [0.5, 1.5])."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        seen = set()
        embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        for name, p in model.named_parameters(remove_duplicate=True):
            if id(p) in seen:
                continue
            seen.add(id(p))
            fan_in = p.numel() // max(1, p.shape[0]) if p.dim() >= 1 else 1
            leaf = name.rsplit(".", 1)[-1]
            if p.dim() >= 2 and fan_in > 1:
                if id(p) in embeddings:
                    std = 0.5  # embedding tables: rows are hidden vectors
                else:
                    std = 1.0 / math.sqrt(fan_in)
                v = torch.randn(p.shape, generator=g) * std
            elif leaf == "weight" or "scale" in leaf or "gamma" in leaf:
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
            else:
                v = 0.1 * torch.randn(p.shape, generator=g)
            p.copy_(v.to(p.dtype))
        for name, b in model.named_buffers():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "running_mean":
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
            elif leaf == "running_var":
                b.copy_(0.5 + torch.rand(b.shape, generator=g))
    model.eval()
    return model


def param_counts(model):
    uniq = sum(p.numel() for p in model.parameters())
    total = sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))
    return uniq, total


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------

def gen(seed):
    return torch.Generator().manual_seed(seed)


def ids(batch, seq, seed, vocab=VOCAB):
    # Avoid the special token ids 0..3 (pad/bos/eos/unk in most configs).
    return torch.randint(4, vocab, (batch, seq), generator=gen(seed))


def padding_mask(batch, seq):
    """Right padding: every row but the first ends with zeros."""
    m = torch.ones(batch, seq, dtype=torch.int64)
    for b in range(1, batch):
        m[b, seq - 1 - (b % max(1, seq - 2)):] = 0
    return m


def image(batch, size, seed, ch=3):
    return torch.randn(batch, ch, size, size, generator=gen(seed))


# --------------------------------------------------------------------------
# Wrappers: forward with explicit argument names, tuple-of-tensors outputs
# --------------------------------------------------------------------------

def _first(out, keys):
    if isinstance(out, torch.Tensor):
        return (out,)
    if isinstance(out, (tuple, list)):
        return tuple(out[: len(keys)])
    return tuple(getattr(out, k) for k in keys)


class IdsWrap(nn.Module):
    def __init__(self, m, keys, **kw):
        super().__init__()
        self.m, self.keys, self.kw = m, keys, kw

    def forward(self, input_ids):
        return _first(self.m(input_ids=input_ids, **self.kw), self.keys)


class IdsMaskWrap(nn.Module):
    def __init__(self, m, keys, **kw):
        super().__init__()
        self.m, self.keys, self.kw = m, keys, kw

    def forward(self, input_ids, attention_mask):
        return _first(self.m(input_ids=input_ids, attention_mask=attention_mask, **self.kw),
                      self.keys)


class Seq2SeqWrap(nn.Module):
    def __init__(self, m, keys, **kw):
        super().__init__()
        self.m, self.keys, self.kw = m, keys, kw

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        return _first(self.m(input_ids=input_ids, attention_mask=attention_mask,
                             decoder_input_ids=decoder_input_ids, **self.kw), self.keys)


class PixelWrap(nn.Module):
    def __init__(self, m, keys, **kw):
        super().__init__()
        self.m, self.keys, self.kw = m, keys, kw

    def forward(self, pixel_values):
        return _first(self.m(pixel_values=pixel_values, **self.kw), self.keys)


class WhisperWrap(nn.Module):
    def __init__(self, m, keys, **kw):
        super().__init__()
        self.m, self.keys, self.kw = m, keys, kw

    def forward(self, input_features, decoder_input_ids):
        return _first(self.m(input_features=input_features,
                             decoder_input_ids=decoder_input_ids, **self.kw), self.keys)


class AudioWrap(nn.Module):
    def __init__(self, m, keys, **kw):
        super().__init__()
        self.m, self.keys, self.kw = m, keys, kw

    def forward(self, input_values):
        return _first(self.m(input_values=input_values, **self.kw), self.keys)


class ClipWrap(nn.Module):
    def __init__(self, m, keys, **kw):
        super().__init__()
        self.m, self.keys, self.kw = m, keys, kw

    def forward(self, input_ids, pixel_values, attention_mask):
        return _first(self.m(input_ids=input_ids, pixel_values=pixel_values,
                             attention_mask=attention_mask, **self.kw), self.keys)


# --------------------------------------------------------------------------
# Architectures.  Each builder returns a dict:
#   model:   the nn.Module (eval, perturbed)
#   inputs:  fn(batch, seq) -> OrderedDict name -> tensor
#   outputs: output names
#   dims:    {input name: {axis: symbolic name}} for the dynamic export
#   sizes:   [(batch, seq) of test set 0, (batch, seq) of test set 1]
#   counted: the module whose parameters are counted (default: model)
# --------------------------------------------------------------------------

ARCHS = {}


def arch(name, kind):
    def deco(fn):
        ARCHS[name] = (fn, kind)
        return fn
    return deco


def vision(model, size, outputs=("logits",)):
    return dict(model=model,
                inputs=lambda b, s: {"pixel_values": image(b, size, 1000 + b)},
                outputs=list(outputs), dims={"pixel_values": {0: "batch"}},
                sizes=[(BATCH, None), (BATCH2, None)])


class Net(nn.Module):
    """Plain torch module wrapper with a pixel_values input."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, pixel_values):
        return self.m(pixel_values)


# ---- CNNs (torchvision) ---------------------------------------------------

@arch("resnet", "cnn")
def build_resnet():
    from torchvision.models.resnet import BasicBlock, ResNet

    class SmallResNet(ResNet):
        """torchvision's ResNet (BasicBlock, [1,1,1,1]) at widths 8-64."""

        def __init__(self, widths=(8, 16, 32, 64), num_classes=10):
            nn.Module.__init__(self)
            self._norm_layer = nn.BatchNorm2d
            self.inplanes, self.dilation, self.groups, self.base_width = widths[0], 1, 1, 64
            self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(widths[0])
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._make_layer(BasicBlock, widths[0], 1)
            self.layer2 = self._make_layer(BasicBlock, widths[1], 1, stride=2)
            self.layer3 = self._make_layer(BasicBlock, widths[2], 1, stride=2)
            self.layer4 = self._make_layer(BasicBlock, widths[3], 1, stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(widths[3], num_classes)

    return vision(Net(SmallResNet()), 64)


@arch("mobilenet_v2", "cnn")
def build_mobilenet_v2():
    from torchvision.models import MobileNetV2
    from torchvision.ops.misc import Conv2dNormActivation
    setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2], [6, 64, 1, 2],
               [6, 96, 1, 1], [6, 160, 1, 2], [6, 320, 1, 1]]
    m = MobileNetV2(num_classes=10, width_mult=0.35, inverted_residual_setting=setting)
    # The 1280-channel head is fixed in torchvision; shrink it to 128.
    last_in = m.features[-1][0].in_channels
    m.features[-1] = Conv2dNormActivation(last_in, 128, kernel_size=1,
                                          norm_layer=nn.BatchNorm2d, activation_layer=nn.ReLU6)
    m.classifier[1] = nn.Linear(128, 10)
    return vision(Net(m), 32)


@arch("mobilenet_v3", "cnn")
def build_mobilenet_v3():
    from torchvision.models.mobilenetv3 import MobileNetV3, _mobilenet_v3_conf
    setting, last = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25)
    return vision(Net(MobileNetV3(setting, last, num_classes=10)), 64)


@arch("efficientnet", "cnn")
def build_efficientnet():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.2, depth_mult=0.34)
    return vision(Net(EfficientNet(setting, dropout=0.2, num_classes=10, last_channel=last)), 32)


@arch("convnext", "cnn")
def build_convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    setting = [CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1), CNBlockConfig(64, None, 1)]
    return vision(Net(ConvNeXt(setting, num_classes=10)), 32)


@arch("regnet", "cnn")
def build_regnet():
    from torchvision.models.regnet import BlockParams, RegNet
    params = BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0,
                                          group_width=8, se_ratio=0.25)
    return vision(Net(RegNet(params, num_classes=10, stem_width=8)), 32)


@arch("densenet", "cnn")
def build_densenet():
    from torchvision.models import DenseNet
    return vision(Net(DenseNet(growth_rate=8, block_config=(2, 2, 2), num_init_features=16,
                               bn_size=2, num_classes=10)), 32)


@arch("inception_v3", "cnn")
def build_inception_v3():
    from torchvision.models.inception import BasicConv2d, Inception3

    def conv_block(in_channels, out_channels, **kw):
        # Every channel count of Inception-v3 is a multiple of 16: divide them
        # all by 16 (the concatenations stay consistent).
        return BasicConv2d(in_channels if in_channels == 3 else in_channels // 16,
                           out_channels // 16, **kw)

    from torchvision.models import inception as inc
    blocks = [conv_block] + [
        (lambda cls: (lambda *a, **kw: cls(*a, conv_block=conv_block, **kw)))(c)
        for c in (inc.InceptionA, inc.InceptionB, inc.InceptionC, inc.InceptionD,
                  inc.InceptionE, inc.InceptionAux)]
    m = Inception3(num_classes=10, aux_logits=False, transform_input=False,
                   inception_blocks=blocks, init_weights=False)
    m.fc = nn.Linear(2048 // 16, 10)
    return vision(Net(m), 80)


# ---- Vision transformers (transformers) -------------------------------------

@arch("vit", "vit")
def build_vit():
    from transformers import ViTConfig, ViTModel
    c = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, image_size=32, patch_size=8)
    return vision(PixelWrap(ViTModel(c), ["last_hidden_state", "pooler_output"]), 32,
                  ["last_hidden_state", "pooler_output"])


@arch("deit", "vit")
def build_deit():
    from transformers import DeiTConfig, DeiTModel
    c = DeiTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=64, image_size=32, patch_size=8)
    return vision(PixelWrap(DeiTModel(c), ["last_hidden_state", "pooler_output"]), 32,
                  ["last_hidden_state", "pooler_output"])


@arch("swin", "vit")
def build_swin():
    from transformers import SwinConfig, SwinModel
    c = SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[2, 2],
                   num_heads=[2, 4], window_size=4, mlp_ratio=2.0)
    return vision(PixelWrap(SwinModel(c), ["last_hidden_state", "pooler_output"]), 32,
                  ["last_hidden_state", "pooler_output"])


# ---- Language models (transformers) -----------------------------------------

def lm(model, keys, mask=True, seq=SEQ, seq2=SEQ2, vocab=VOCAB):
    wrap = IdsMaskWrap(model, keys) if mask else IdsWrap(model, keys)

    def inputs(b, s):
        d = {"input_ids": ids(b, s, 2000 + 10 * b + s, vocab)}
        if mask:
            d["attention_mask"] = padding_mask(b, s)
        return d

    dims = {"input_ids": {0: "batch", 1: "seq"}}
    if mask:
        dims["attention_mask"] = {0: "batch", 1: "seq"}
    return dict(model=wrap, inputs=inputs, outputs=list(keys), dims=dims,
                sizes=[(BATCH, seq), (BATCH2, seq2)])


def hf(cls, config, attn=None):
    kw = {} if attn is None else {"attn_implementation": attn}
    if hasattr(config, "use_cache"):
        config.use_cache = False
    return cls._from_config(config, **kw)


def bert_config(**kw):
    from transformers import BertConfig
    return BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64,
                      max_position_embeddings=64, **kw)


ENC_KEYS = ["last_hidden_state", "pooler_output"]


@arch("bert_sdpa", "lm")
def build_bert_sdpa():
    from transformers import BertModel
    return lm(hf(BertModel, bert_config(), "sdpa"), ENC_KEYS)


@arch("bert_eager", "lm")
def build_bert_eager():
    from transformers import BertModel
    return lm(hf(BertModel, bert_config(), "eager"), ENC_KEYS)


@arch("bert_nomask", "lm")
def build_bert_nomask():
    from transformers import BertModel
    return lm(hf(BertModel, bert_config(), "sdpa"), ENC_KEYS, mask=False)


@arch("roberta", "lm")
def build_roberta():
    from transformers import RobertaConfig, RobertaModel
    c = RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64,
                      max_position_embeddings=66, pad_token_id=1)
    return lm(hf(RobertaModel, c), ENC_KEYS)


@arch("distilbert", "lm")
def build_distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    c = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                         max_position_embeddings=64)
    return lm(hf(DistilBertModel, c), ["last_hidden_state"])


@arch("albert", "lm")
def build_albert():
    from transformers import AlbertConfig, AlbertModel
    c = AlbertConfig(vocab_size=VOCAB, embedding_size=16, hidden_size=32,
                     num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=64)
    return lm(hf(AlbertModel, c), ENC_KEYS)


def gpt2_config():
    from transformers import GPT2Config
    return GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                      bos_token_id=1, eos_token_id=2)


@arch("gpt2_sdpa", "lm")
def build_gpt2_sdpa():
    from transformers import GPT2LMHeadModel
    return lm(hf(GPT2LMHeadModel, gpt2_config(), "sdpa"), ["logits"])


@arch("gpt2_eager", "lm")
def build_gpt2_eager():
    from transformers import GPT2LMHeadModel
    return lm(hf(GPT2LMHeadModel, gpt2_config(), "eager"), ["logits"])


@arch("gpt2_nomask", "lm")
def build_gpt2_nomask():
    from transformers import GPT2LMHeadModel
    return lm(hf(GPT2LMHeadModel, gpt2_config(), "sdpa"), ["logits"], mask=False)


@arch("gpt_neox", "lm")
def build_gpt_neox():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    c = GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, rotary_pct=0.5,
                      max_position_embeddings=64, bos_token_id=1, eos_token_id=2)
    return lm(hf(GPTNeoXForCausalLM, c), ["logits"])


def llama_config():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                       pad_token_id=0)


@arch("llama_sdpa", "lm")
def build_llama_sdpa():
    from transformers import LlamaForCausalLM
    return lm(hf(LlamaForCausalLM, llama_config(), "sdpa"), ["logits"])


@arch("llama_eager", "lm")
def build_llama_eager():
    from transformers import LlamaForCausalLM
    return lm(hf(LlamaForCausalLM, llama_config(), "eager"), ["logits"])


@arch("llama_nomask", "lm")
def build_llama_nomask():
    from transformers import LlamaForCausalLM
    return lm(hf(LlamaForCausalLM, llama_config(), "sdpa"), ["logits"], mask=False)


@arch("mistral", "lm")
def build_mistral():
    from transformers import MistralConfig, MistralForCausalLM
    c = MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=64, sliding_window=4, bos_token_id=1,
                      eos_token_id=2, pad_token_id=0)
    return lm(hf(MistralForCausalLM, c), ["logits"])


@arch("qwen2", "lm")
def build_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    c = Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    max_position_embeddings=64, tie_word_embeddings=True,
                    bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return lm(hf(Qwen2ForCausalLM, c), ["logits"])


@arch("phi", "lm")
def build_phi():
    from transformers import PhiConfig, PhiForCausalLM
    c = PhiConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=4, partial_rotary_factor=0.5,
                  max_position_embeddings=64, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return lm(hf(PhiForCausalLM, c), ["logits"])


@arch("gemma", "lm")
def build_gemma():
    from transformers import GemmaConfig, GemmaForCausalLM
    c = GemmaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                    head_dim=8, max_position_embeddings=64, bos_token_id=1,
                    eos_token_id=2, pad_token_id=0)
    return lm(hf(GemmaForCausalLM, c), ["logits"])


# ---- Encoder-decoders -------------------------------------------------------

def seq2seq(model, keys, vocab=VOCAB, dec_len=5, dec_len2=4):
    def inputs(b, s):
        return {"input_ids": ids(b, s, 3000 + 10 * b + s, vocab),
                "attention_mask": padding_mask(b, s),
                "decoder_input_ids": ids(b, dec_len if s == SEQ else dec_len2,
                                         3500 + 10 * b + s, vocab)}
    return dict(model=Seq2SeqWrap(model, keys), inputs=inputs, outputs=list(keys),
                dims={"input_ids": {0: "batch", 1: "seq"},
                      "attention_mask": {0: "batch", 1: "seq"},
                      "decoder_input_ids": {0: "batch", 1: "dec_seq"}},
                sizes=[(BATCH, SEQ), (BATCH2, SEQ2)])


@arch("t5", "seq2seq")
def build_t5():
    from transformers import T5Config, T5ForConditionalGeneration
    c = T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                 num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
                 relative_attention_max_distance=16, decoder_start_token_id=0,
                 pad_token_id=0, eos_token_id=1)
    return seq2seq(hf(T5ForConditionalGeneration, c), ["logits"])


@arch("bart", "seq2seq")
def build_bart():
    from transformers import BartConfig, BartForConditionalGeneration
    c = BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                   encoder_attention_heads=4, decoder_attention_heads=4,
                   encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                   pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    return seq2seq(hf(BartForConditionalGeneration, c), ["logits"])


# ---- Audio ------------------------------------------------------------------

@arch("whisper", "audio")
def build_whisper():
    from transformers import WhisperConfig, WhisperModel
    c = WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=2,
                      decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                      encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
                      max_target_positions=32, pad_token_id=0, bos_token_id=1,
                      eos_token_id=2, decoder_start_token_id=1)

    def inputs(b, s):
        # Whisper requires exactly 2 * max_source_positions mel frames.
        return {"input_features": torch.randn(b, 16, 32, generator=gen(4000 + b)),
                "decoder_input_ids": ids(b, 5, 4500 + b)}
    return dict(model=WhisperWrap(hf(WhisperModel, c), ["last_hidden_state"]),
                inputs=inputs, outputs=["last_hidden_state"],
                dims={"input_features": {0: "batch"}, "decoder_input_ids": {0: "batch"}},
                sizes=[(BATCH, None), (BATCH2, None)])


@arch("wav2vec2", "audio")
def build_wav2vec2():
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    c = Wav2Vec2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=64,
                       conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                       num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                       feat_extract_norm="group", do_stable_layer_norm=False,
                       mask_time_prob=0.0)

    def inputs(b, s):
        return {"input_values": torch.randn(b, s, generator=gen(5000 + b + s))}
    return dict(model=AudioWrap(hf(Wav2Vec2Model, c), ["last_hidden_state"]),
                inputs=inputs, outputs=["last_hidden_state"],
                dims={"input_values": {0: "batch", 1: "samples"}},
                sizes=[(BATCH, 400), (BATCH2, 320)])


# ---- Multimodal -------------------------------------------------------------

@arch("clip", "multimodal")
def build_clip():
    from transformers import CLIPConfig, CLIPModel
    c = CLIPConfig(
        text_config=dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4,
                         max_position_embeddings=16, projection_dim=16,
                         pad_token_id=1, bos_token_id=0, eos_token_id=2),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, image_size=32, patch_size=8,
                           projection_dim=16),
        projection_dim=16)
    keys = ["logits_per_image", "text_embeds", "image_embeds"]

    def inputs(b, s):
        t = ids(b, s, 6000 + b + s)
        t[:, -1] = 2  # eos, pooled
        return {"input_ids": t, "pixel_values": image(b, 32, 6500 + b),
                "attention_mask": torch.ones(b, s, dtype=torch.int64)}
    return dict(model=ClipWrap(hf(CLIPModel, c), keys), inputs=inputs, outputs=keys,
                dims={"input_ids": {0: "batch", 1: "seq"}, "pixel_values": {0: "batch"},
                      "attention_mask": {0: "batch", 1: "seq"}},
                sizes=[(BATCH, SEQ), (BATCH2, SEQ2)])


# ---- Plain torch sequence models ----------------------------------------------

class RnnLM(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = cell(32, 64, num_layers=2, batch_first=True)
        self.head = nn.Linear(64, VOCAB)

    def forward(self, input_ids):
        h, _ = self.rnn(self.embed(input_ids))
        return self.head(h)


@arch("lstm_lm", "rnn")
def build_lstm():
    return lm(RnnLM(nn.LSTM), ["logits"], mask=False)


@arch("gru_lm", "rnn")
def build_gru():
    return lm(RnnLM(nn.GRU), ["logits"], mask=False)


class TEnc(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, src):
        return self.enc(src)


class TDec(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.dec = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(32))

    def forward(self, tgt, memory):
        s = tgt.shape[1]
        causal = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        return self.dec(tgt, memory, tgt_mask=causal, tgt_is_causal=True)


@arch("transformer_encoder", "torch")
def build_tenc():
    return dict(model=TEnc(),
                inputs=lambda b, s: {"src": torch.randn(b, s, 32, generator=gen(7000 + b + s))},
                outputs=["output"], dims={"src": {0: "batch", 1: "seq"}},
                sizes=[(BATCH, SEQ), (BATCH2, SEQ2)])


@arch("transformer_decoder", "torch")
def build_tdec():
    return dict(model=TDec(),
                inputs=lambda b, s: {"tgt": torch.randn(b, s, 32, generator=gen(7500 + b + s)),
                                     "memory": torch.randn(b, 10, 32, generator=gen(7700 + b))},
                outputs=["output"],
                dims={"tgt": {0: "batch", 1: "seq"}, "memory": {0: "batch", 1: "mem_seq"}},
                sizes=[(BATCH, SEQ), (BATCH2, SEQ2)])


# --------------------------------------------------------------------------
# Export, normalization, checking
# --------------------------------------------------------------------------

def flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    r = []
    for o in out:
        r.extend(flat(o))
    return r


def normalize(model):
    """Drop what varies between runs or machines: per-node metadata (stack
    traces, module paths), doc strings."""
    def graph(g):
        g.doc_string = ""
        del g.metadata_props[:]
        for n in g.node:
            n.doc_string = ""
            del n.metadata_props[:]
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)
                for sg in a.graphs:
                    graph(sg)
        for coll in (g.input, g.output, g.value_info):
            for v in coll:
                v.doc_string = ""
                del v.metadata_props[:]
        for t in g.initializer:
            t.doc_string = ""
            del t.metadata_props[:]
    graph(model.graph)
    for f in model.functions:
        f.doc_string = ""
        for n in f.node:
            n.doc_string = ""
            del n.metadata_props[:]
    model.doc_string = ""
    del model.metadata_props[:]
    return model


@contextlib.contextmanager
def no_packed_sequences(active):
    """Without an attention_mask, transformers' mask builder looks for packed
    sequences in position_ids (torch.diff + cumsum), which the TorchScript
    exporter cannot export (aten::diff).  For the TorchScript exports only,
    make it report "no packed sequences", its answer for our inputs."""
    import transformers.masking_utils as mu
    saved = mu.find_packed_sequence_indices
    if active:
        mu.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        mu.find_packed_sequence_indices = saved


def export(spec, exporter, dynamic, path):
    model = spec["model"]
    b, s = spec["sizes"][0]
    inputs = spec["inputs"](b, s)
    names = list(inputs)
    args = tuple(inputs[n] for n in names)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf), \
            no_packed_sequences(exporter == "ts"):
        if exporter == "ts":
            kw = {}
            if dynamic:
                kw["dynamic_axes"] = {n: dict(spec["dims"][n]) for n in names}
            torch.onnx.export(model, args, path, dynamo=False, opset_version=17,
                              input_names=names, output_names=spec["outputs"],
                              do_constant_folding=True, **kw)
        else:
            kw = {}
            if dynamic:
                dims = {}
                shapes = []
                for n in names:
                    d = {}
                    for ax, dn in spec["dims"][n].items():
                        if dn not in dims:
                            dims[dn] = torch.export.Dim(dn, min=1, max=1024)
                        d[ax] = dims[dn]
                    shapes.append(d)
                kw["dynamic_shapes"] = tuple(shapes)
            prog = torch.onnx.export(model, args, dynamo=True, external_data=False,
                                     optimize=True, input_names=names,
                                     output_names=spec["outputs"], **kw)
            prog.save(path, external_data=False)
    m = onnx.load(path)
    if dynamic:
        for v in m.graph.input:
            for ax, dn in spec["dims"].get(v.name, {}).items():
                d = v.type.tensor_type.shape.dim[ax]
                if not d.HasField("dim_param"):
                    raise RuntimeError(f"the exporter made dim {ax} ({dn}) of input "
                                       f"{v.name!r} static ({d.dim_value})")
    normalize(m)
    onnx.save(m, path, save_as_external_data=False)
    return m


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def compare(ref, got):
    """Largest error relative to the tensor's scale; raises on mismatch."""
    if len(ref) != len(got):
        raise RuntimeError(f"mismatch: torch has {len(ref)} outputs, onnxruntime {len(got)}")
    worst = 0.0
    for i, (r, g) in enumerate(zip(ref, got)):
        r = r.detach().numpy()
        if r.shape != g.shape:
            raise RuntimeError(f"mismatch: output {i} shape {list(g.shape)}, torch {list(r.shape)}")
        if np.isnan(r).any() or np.isnan(g).any():
            if not np.array_equal(np.isnan(r), np.isnan(g)):
                raise RuntimeError(f"mismatch: output {i} NaNs differ")
        scale = float(np.nanmax(np.abs(r))) if r.size else 0.0
        atol = 1e-5 * max(1.0, scale)
        err = np.abs(r.astype(np.float64) - g.astype(np.float64))
        tol = atol + RTOL * np.abs(r.astype(np.float64))
        if not np.all((err <= tol) | np.isnan(err)):
            raise RuntimeError(
                f"mismatch: output {i} max abs diff {float(np.nanmax(err)):.3g} "
                f"(max |torch| {scale:.3g})")
        worst = max(worst, float(np.nanmax(err)) / max(scale, 1e-30) if r.size else 0.0)
    return worst


DTYPES = {v: k for k, v in onnx.TensorProto.DataType.items()}


def value_desc(v):
    t = v.type.tensor_type
    shape = []
    for d in t.shape.dim:
        shape.append(d.dim_param if d.HasField("dim_param") else
                     (d.dim_value if d.HasField("dim_value") else "?"))
    return {"name": v.name, "dtype": DTYPES.get(t.elem_type, str(t.elem_type)).lower(),
            "shape": shape}


def clean_error(e):
    # The exporters wrap the real error; report the innermost cause.
    inner = e
    while inner.__cause__ is not None and inner.__cause__ is not inner:
        inner = inner.__cause__
    msg = f"{type(e).__name__}: {e}" if inner is e else \
        f"{type(e).__name__} <- {type(inner).__name__}: {inner}"
    msg = re.sub(r"\x1b\[[0-9;]*m", "", msg)
    lines = [l.strip() for l in msg.splitlines() if l.strip()]
    msg = " | ".join(lines[:3])
    msg = re.sub(r"0x[0-9a-fA-F]+", "0x?", msg)
    msg = re.sub(r"/tmp/[^\s'\"]*", "<tmp>", msg)
    msg = re.sub(re.escape(os.getcwd()), "<cwd>", msg)
    return msg[:400]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def run_one(arch_name, exporter, dynamic, out_dir, log):
    name = f"{arch_name}_{exporter}" + ("_dynamic" if dynamic else "")
    entry = {"name": name, "arch": arch_name, "kind": ARCHS[arch_name][1],
             "exporter": "torchscript" if exporter == "ts" else "dynamo",
             "dynamic": dynamic}
    fn = ARCHS[arch_name][0]
    seed = int(hashlib.sha256(arch_name.encode()).hexdigest()[:8], 16)
    target = os.path.join(out_dir, name)
    if os.path.exists(target):
        shutil.rmtree(target)
    try:
        torch.manual_seed(seed)
        np.random.seed(seed % (2 ** 32))
        spec = fn()
        model = perturb(spec["model"], seed)
        uniq, total = param_counts(model)
        entry["torch_parameters"] = uniq
        if total != uniq:
            entry["torch_parameters_with_tied"] = total
        bn = sum(b.numel() for n, b in model.named_buffers()
                 if n.rsplit(".", 1)[-1] in ("running_mean", "running_var"))
        if bn:
            entry["torch_bn_statistics"] = bn
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            m = export(spec, exporter, dynamic, path)
            entry["opset"] = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
            entry["ir_version"] = m.ir_version
            inits = {t.name for t in m.graph.initializer}
            graph_inputs = [v for v in m.graph.input if v.name not in inits]
            entry["inputs"] = [value_desc(v) for v in graph_inputs]
            entry["outputs"] = [value_desc(v) for v in m.graph.output]
            ops = {}
            for n in m.graph.node:
                key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
                ops[key] = ops.get(key, 0) + 1
            entry["op_types"] = dict(sorted(ops.items()))
            entry["initializer_elements"] = sum(
                int(np.prod(t.dims)) for t in m.graph.initializer
                if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                                   onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE))
            sets = spec["sizes"][: 2 if dynamic else 1]
            data = []
            worst = 0.0
            for k, (b, s) in enumerate(sets):
                inputs = spec["inputs"](b, s)
                with torch.no_grad():
                    ref = flat(model(*[inputs[n] for n in inputs]))
                feeds = {}
                for v in graph_inputs:
                    if v.name not in inputs:
                        raise RuntimeError(f"graph input {v.name!r} is not a model input")
                    feeds[v.name] = inputs[v.name].numpy()
                got = ort_run(path, feeds)
                worst = max(worst, compare(ref, got))
                data.append((feeds, got))
            entry["max_rel_error"] = float(f"{worst:.3g}")
            os.makedirs(target)
            shutil.copyfile(path, os.path.join(target, "model.onnx"))
            entry["test_data_sets"] = []
            for k, (feeds, got) in enumerate(data):
                d = os.path.join(target, f"test_data_set_{k}")
                os.makedirs(d)
                for i, v in enumerate(graph_inputs):
                    onnx.save_tensor(numpy_helper.from_array(feeds[v.name], v.name),
                                     os.path.join(d, f"input_{i}.pb"))
                for i, (v, arr) in enumerate(zip(m.graph.output, got)):
                    onnx.save_tensor(numpy_helper.from_array(arr, v.name),
                                     os.path.join(d, f"output_{i}.pb"))
                entry["test_data_sets"].append({
                    "inputs": [list(feeds[v.name].shape) for v in graph_inputs],
                    "outputs": [list(a.shape) for a in got]})
            mp = os.path.join(target, "model.onnx")
            entry["size_bytes"] = os.path.getsize(mp)
            entry["sha256"] = sha256(mp)
        log(f"ok     {name}: {entry['size_bytes']} bytes, {uniq} params, "
            f"rel err {entry['max_rel_error']}")
    except Exception as e:  # noqa: BLE001 - recorded in the manifest
        if os.path.exists(target):
            shutil.rmtree(target)
        entry["error"] = clean_error(e)
        log(f"FAILED {name}: {entry['error']}")
        if os.environ.get("PAX_EXPORT_TRACEBACK"):
            traceback.print_exc()
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "models", "torch"))
    ap.add_argument("--only", help="comma-separated architectures")
    ap.add_argument("--exporters", default="ts,dyn")
    ap.add_argument("--no-dynamic", action="store_true")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for k, (_, kind) in ARCHS.items():
            print(f"{k:24s} {kind}")
        return 0
    out = os.path.normpath(a.out)
    os.makedirs(out, exist_ok=True)
    archs = list(ARCHS) if not a.only else a.only.split(",")
    for x in archs:
        if x not in ARCHS:
            sys.exit(f"unknown architecture {x!r}; see --list")
    manifest_path = os.path.join(out, "manifest.json")
    entries = {}
    if a.only and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            entries = {e["name"]: e for e in json.load(f)["models"]}
    elif not a.only:
        # A full run starts from an empty corpus.
        for d in os.listdir(out):
            p = os.path.join(out, d)
            if os.path.isdir(p) and os.path.exists(os.path.join(p, "model.onnx")):
                shutil.rmtree(p)
    log = lambda s: print(s, flush=True)  # noqa: E731
    for x in archs:
        for ex in a.exporters.split(","):
            for dyn in ([False] if a.no_dynamic else [False, True]):
                e = run_one(x, ex, dyn, out, log)
                entries[e["name"]] = e
    models = [entries[k] for k in sorted(entries)]
    ok = [e for e in models if "error" not in e]
    manifest = {
        "generator": "tools/models/export_torch.py",
        "versions": {"torch": torch.__version__.split("+")[0],
                     "transformers": __import__("transformers").__version__,
                     "torchvision": __import__("torchvision").__version__,
                     "onnxscript": __import__("onnxscript").__version__,
                     "onnx": onnx.__version__, "onnxruntime": ort.__version__},
        "count": len(models), "ok": len(ok),
        "total_bytes": sum(e["size_bytes"] for e in ok),
        "models": models,
    }
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    log(f"{len(ok)}/{len(models)} exports ok, {manifest['total_bytes']} bytes of models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
