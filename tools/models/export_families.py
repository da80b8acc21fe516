#!/usr/bin/env python3
"""A second corpus of real PyTorch ONNX exports: the model families built of
the ops the first corpus (export_torch.py) lacks.

  * ``segmentation``: torchvision's LR-ASPP (MobileNetV3) with 3 classes,
    its bilinear upsampling a Resize;
  * ``unet``: a diffusers UNet2DConditionModel (cross-attention down and up
    blocks, a timestep embedding, GroupNorm);
  * ``vae_decoder``: a diffusers AutoencoderKL's decoder (mid-block
    attention, nearest upsampling);
  * ``dcgan``: DCGAN's generator (ConvTranspose2d, BatchNorm, ReLU, Tanh);
  * ``mixtral`` and ``qwen2_moe``: transformers' mixture-of-experts causal
    LMs (a router's TopK, experts chosen per token);
  * ``swin``: transformers' Swin (shifted windows);
  * ``gpt2_decode``: one cached decoding step of GPT-2: the new token and
    the past keys and values in, the logits and the grown cache out.

Every model is tiny, with seeded perturbed weights, exported by both of
PyTorch's exporters (static shapes), and checked against torch as
export_torch.py does (its machinery: same layout, manifest and test data).

  export_families.py [--out test/models/families] [--only ARCH[,ARCH...]]
                     [--exporters ts,dyn] [--list]

Run it in export_torch.sh's virtual environment (torch, torchvision,
transformers and diffusers):

  build/export-venv/bin/python tools/models/export_families.py
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch as et  # noqa: E402

FAMILIES = {}


def family(name, kind):
    def deco(fn):
        FAMILIES[name] = (fn, kind)
        return fn
    return deco


class OutWrap(nn.Module):
    """A module whose output is a dict or a dataclass: its ``key`` entry."""

    def __init__(self, m, key):
        super().__init__()
        self.m, self.key = m, key

    def forward(self, pixel_values):
        out = self.m(pixel_values)
        return out[self.key] if isinstance(out, dict) else getattr(out, self.key)


def static(model, inputs, outputs):
    """A spec with static shapes only (one test data set)."""
    return dict(model=model, inputs=lambda b, s: inputs(b), outputs=list(outputs),
                dims={}, sizes=[(et.BATCH, None)])


@family("segmentation", "cnn")
def build_segmentation():
    from torchvision.models import mobilenet_v3_large
    from torchvision.models.segmentation.lraspp import _lraspp_mobilenetv3
    # torchvision's LR-ASPP over a quarter-width MobileNetV3 (the builder's
    # own backbone, dilated, as lraspp_mobilenet_v3_large makes it).
    backbone = mobilenet_v3_large(weights=None, width_mult=0.25, dilated=True)
    m = _lraspp_mobilenetv3(backbone, 3)
    return static(OutWrap(m, "out"),
                  lambda b: {"pixel_values": et.image(b, 64, 8100 + b)}, ["out"])


class UNetWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, sample, timestep, encoder_hidden_states):
        return self.m(sample, timestep, encoder_hidden_states).sample


@family("unet", "diffusion")
def build_unet():
    from diffusers import UNet2DConditionModel
    m = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=16,
        attention_head_dim=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))

    def inputs(b):
        g = et.gen(8200 + b)
        return {"sample": torch.randn(b, 4, 16, 16, generator=g),
                "timestep": torch.tensor([10.0] * b),
                "encoder_hidden_states": torch.randn(b, 6, 16, generator=g)}
    return static(UNetWrap(m), inputs, ["noise_pred"])


class DecodeWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, latents):
        return self.m.decode(latents).sample


@family("vae_decoder", "diffusion")
def build_vae_decoder():
    from diffusers import AutoencoderKL
    m = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4,
                      block_out_channels=(16, 32), norm_num_groups=8,
                      down_block_types=("DownEncoderBlock2D",) * 2,
                      up_block_types=("UpDecoderBlock2D",) * 2, sample_size=16)
    return static(DecodeWrap(m),
                  lambda b: {"latents": torch.randn(b, 4, 8, 8, generator=et.gen(8300 + b))},
                  ["image"])


class DcganGenerator(nn.Module):
    """DCGAN's generator (Radford et al.), scaled down: z [B, 16, 1, 1] to a
    3 x 16 x 16 image."""

    def __init__(self, z=16, f=16):
        super().__init__()
        self.net = nn.Sequential(
            nn.ConvTranspose2d(z, f * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(f * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(f * 2, f, 4, 2, 1, bias=False), nn.BatchNorm2d(f),
            nn.ReLU(True),
            nn.ConvTranspose2d(f, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.net(z)


@family("dcgan", "gan")
def build_dcgan():
    return static(DcganGenerator(),
                  lambda b: {"z": torch.randn(b, 16, 1, 1, generator=et.gen(8400 + b))},
                  ["image"])


def moe_lm(cls, config):
    """A transformers MoE causal LM whose experts gather each token's
    weights (experts_implementation batched_mm: static shapes, the way it
    exports) and whose attention is eager (grouped-query SDPA does not
    convert)."""
    config.use_cache = False
    m = cls._from_config(config, attn_implementation="eager",
                         experts_implementation="batched_mm")
    spec = et.lm(m, ["logits"], mask=False)
    spec["sizes"] = spec["sizes"][:1]
    return spec


@family("mixtral", "moe")
def build_mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM
    c = MixtralConfig(vocab_size=et.VOCAB, hidden_size=32, intermediate_size=48,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      num_local_experts=4, num_experts_per_tok=2,
                      max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                      pad_token_id=0)
    return moe_lm(MixtralForCausalLM, c)


@family("qwen2_moe", "moe")
def build_qwen2_moe():
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
    c = Qwen2MoeConfig(vocab_size=et.VOCAB, hidden_size=32, intermediate_size=48,
                       moe_intermediate_size=24, shared_expert_intermediate_size=32,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       num_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
                       bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return moe_lm(Qwen2MoeForCausalLM, c)


@family("swin", "vision")
def build_swin():
    # Eager attention: the dynamo exporter's SDPA decomposition views the
    # transposed attention output without a copy, which torch refuses.
    from transformers import SwinConfig, SwinModel
    c = SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[2, 2],
                   num_heads=[2, 4], window_size=4, mlp_ratio=2.0)
    keys = ["last_hidden_state", "pooler_output"]
    m = SwinModel._from_config(c, attn_implementation="eager")
    spec = et.vision(et.PixelWrap(m, keys), 32, keys)
    spec["sizes"] = spec["sizes"][:1]
    return spec


class GptDecodeStep(nn.Module):
    """One step of GPT-2's cached decoding: the new tokens and the past keys
    and values of every layer ([B, heads, past, head_dim]) in, the logits and
    the present (grown) keys and values out."""

    def __init__(self, m, layers):
        super().__init__()
        self.m, self.layers = m, layers

    def forward(self, input_ids, *past):
        from transformers import DynamicCache
        cache = DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.m(input_ids=input_ids, past_key_values=cache, use_cache=True)
        present = []
        for i in range(self.layers):
            layer = out.past_key_values.layers[i]
            present += [layer.keys, layer.values]
        return (out.logits, *present)


@family("gpt2_decode", "decode")
def build_gpt2_decode():
    from transformers import GPT2Config, GPT2LMHeadModel
    layers, heads, width, past = 2, 4, 32, 5
    c = GPT2Config(vocab_size=et.VOCAB, n_positions=64, n_embd=width, n_layer=layers,
                   n_head=heads, bos_token_id=1, eos_token_id=2)
    m = GPT2LMHeadModel._from_config(c)
    m.config.use_cache = True

    def inputs(b):
        g = et.gen(8500 + b)
        d = {"input_ids": torch.randint(3, et.VOCAB, (b, 1), generator=g)}
        for i in range(layers):
            for kv in ("key", "value"):
                d[f"past_{kv}_{i}"] = torch.randn(b, heads, past, width // heads, generator=g)
        return d
    outs = ["logits"] + [f"present_{kv}_{i}" for i in range(layers) for kv in ("key", "value")]
    return static(GptDecodeStep(m, layers), inputs, outs)


def main():
    et.ARCHS.clear()
    et.ARCHS.update(FAMILIES)
    argv = sys.argv[1:]
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        argv += ["--out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                       "..", "test", "models", "families")]
    sys.argv = [sys.argv[0]] + argv + (["--no-dynamic"] if "--no-dynamic" not in argv else [])
    return et.main()


if __name__ == "__main__":
    sys.exit(main())
