#!/usr/bin/env python3
"""Inference on one GPU: paxrun --backend=cuda against PyTorch eager, same
model, same inputs, same GPU, same run.

  python3 bench/cuda_bench.py [--models resnet50,bert,gpt2] [--repeat N]
      [--tf32] [--precision fp32|bf16|fp16] [--bin DIR] [--work DIR]
      [--json FILE]

Runs on a GPU machine with PyTorch, torchvision and transformers (the
machine's python3); paxc and paxrun from --bin (a build, or the bundle of
tools/dev/gpu_bundle.sh with its env.sh sourced). Each model is built in
PyTorch with seeded random weights, exported to ONNX (opset 17,
TorchScript exporter), compiled by paxc for one device and run by paxrun
on the same inputs:

- resnet50: torchvision's ResNet-50, batch 32 of 224 x 224 images.
- bert: transformers' BERT-base (12 layers, hidden 768), batch 8 of 128
  tokens.
- gpt2: transformers' GPT-2 small (12 layers, hidden 768, vocabulary
  50257), batch 8 of 1024 tokens, logits only.

Timed: PyTorch eager `model(*inputs)` under torch.inference_mode, after
warm-up, each run ended by torch.cuda.synchronize(); paxrun's `--repeat=N
--time` runs (the first a warm-up), each `W s in all`: the run's wall
time, the device synchronized at its end. Reported per model: the median
seconds of each, the throughput ratio paxc / PyTorch (target 0.8x, goal
1.0x), the largest difference of the outputs (paxrun --outputs against
PyTorch's), and device memory: PyTorch's peak allocation against the
plan's arena. TF32 is off on both sides unless --tf32 (paxrun
--allow-tf32, torch.backends.*.allow_tf32). --precision=bf16|fp16 compiles
with paxc --precision and runs PyTorch under torch.autocast("cuda") in the
same precision.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np


def build(name):
    import torch

    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision

        model = torchvision.models.resnet50(weights=None)
        inputs = (torch.randn(32, 3, 224, 224),)
        names = ["images"]
    elif name == "bert":
        from transformers import BertConfig, BertModel

        model = BertModel(BertConfig())
        ids = torch.randint(0, 30522, (8, 128))
        inputs = (ids, torch.ones_like(ids))
        names = ["input_ids", "attention_mask"]
    elif name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(use_cache=False)
        model = GPT2LMHeadModel(config)
        inputs = (torch.randint(0, config.vocab_size, (8, 1024)),)
        names = ["input_ids"]
    else:
        raise SystemExit(f"cuda_bench: no model '{name}'")
    return model.eval(), inputs, names


class First(object):
    """The model's first output as one tensor (transformers return dicts)."""

    def __init__(self, model):
        self.model = model

    def __call__(self, *args):
        out = self.model(*args)
        if isinstance(out, (tuple, list)):
            return out[0]
        if hasattr(out, "logits"):
            return out.logits
        if hasattr(out, "last_hidden_state"):
            return out.last_hidden_state
        return out


def export(model, inputs, names, path):
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args):
            return First(self.m)(*args)

    try:
        torch.onnx.export(Wrap(model).eval(), inputs, path, input_names=names,
                          output_names=["output"], opset_version=17,
                          dynamo=False)
    except Exception as error:  # exporters differ between PyTorch versions
        print(f"cuda_bench: TorchScript export failed ({error}); using the "
              "dynamo exporter", flush=True)
        torch.onnx.export(Wrap(model).eval(), inputs, path, input_names=names,
                          output_names=["output"], dynamo=True,
                          external_data=False)


def write_inputs(inputs, folder):
    import onnx
    from onnx import numpy_helper

    os.makedirs(folder, exist_ok=True)
    for i, t in enumerate(inputs):
        onnx.save_tensor(numpy_helper.from_array(t.numpy()),
                         os.path.join(folder, f"input_{i}.pb"))


def torch_times(model, inputs, repeat, tf32, precision="fp32"):
    import contextlib

    import torch

    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    model = model.cuda()
    args = [t.cuda() for t in inputs]
    call = First(model)
    times = []
    torch.cuda.reset_peak_memory_stats()
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    autocast = (torch.autocast("cuda", dtype=low) if low
                else contextlib.nullcontext())
    with torch.inference_mode(), autocast:
        for _ in range(3):
            out = call(*args)
        torch.cuda.synchronize()
        for _ in range(repeat):
            start = time.perf_counter()
            out = call(*args)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated()
    result = out.float().cpu().numpy()
    model.cpu()
    torch.cuda.empty_cache()
    return times, peak, result


def paxrun_profile(binary, plan, inputs, tf32, path):
    """One profiled run (--profile=kernel) written to PATH."""
    cmd = [os.path.join(binary, "paxrun"), plan, "--inputs", inputs,
           "--backend=cuda", "--repeat=2", "--profile=kernel"]
    if tf32:
        cmd.append("--allow-tf32")
    done = subprocess.run(cmd, capture_output=True, text=True)
    with open(path, "w") as f:
        f.write(done.stdout + done.stderr)


def paxrun_times(binary, plan, inputs, outputs, repeat, tf32):
    cmd = [os.path.join(binary, "paxrun"), plan, "--inputs", inputs,
           "--outputs", outputs, "--backend=cuda", f"--repeat={repeat + 1}",
           "--time"]
    if tf32:
        cmd.append("--allow-tf32")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n"
                         f"{done.stderr[-3000:]}")
    walls = [float(m.group(1)) for m in re.finditer(
        r"paxrun: run \d+: (?:[0-9.]+ s in compute instructions, )?"
        r"([0-9.]+) s in all", done.stderr)]
    arena = re.search(r"in an arena of ([0-9.]+) MiB", done.stdout)
    return walls[1:], float(arena.group(1)) if arena else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,bert,gpt2")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--tf32", action="store_true")
    parser.add_argument("--precision", default="fp32",
                        choices=["fp32", "bf16", "fp16"],
                        help="paxc --precision; PyTorch under "
                        "torch.autocast in the same low precision")
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--bin", default=os.path.join(here, "..", "build",
                                                      "bin"))
    parser.add_argument("--work", default="/tmp/paxc-cuda-bench")
    parser.add_argument("--json")
    parser.add_argument("--ort", action="store_true",
                        help="also run the exported model in onnxruntime "
                        "(CPU) and report paxrun's and PyTorch's outputs "
                        "against it")
    parser.add_argument("--unfused", action="store_true",
                        help="also time each model's plan compiled with "
                        "paxc --fuse-kernels=false (every op its own "
                        "kernel) and report fused / unfused")
    parser.add_argument("--profile", metavar="DIR",
                        help="also write each model's per-kernel profile "
                        "(paxrun --profile=kernel) to DIR/NAME.profile")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    rows = []
    failed = 0
    for name in args.models.split(","):
        try:
            row = bench_model(name, args)
        except BaseException as error:  # one model's failure ends only it
            if isinstance(error, KeyboardInterrupt):
                raise
            print(f"{name}: FAILED: {error}", flush=True)
            rows.append({"model": name, "tf32": args.tf32,
                         "precision": args.precision,
                         "error": str(error)[-2000:]})
            failed = 1
            continue
        rows.append(row)
        print(f"{name}: paxrun {row['paxrun_s'] * 1e3:.2f} ms, PyTorch "
              f"{row['torch_s'] * 1e3:.2f} ms: {row['ratio']:.2f}x; outputs "
              f"within {row['max_rel_diff']:.1e} of PyTorch's (relative to "
              f"the largest); memory: arena {row['paxrun_arena_mib']:.0f} "
              f"MiB, PyTorch peak {row['torch_peak_mib']:.0f} MiB",
              flush=True)
        if "paxrun_unfused_s" in row:
            print(f"{name}: unfused plan {row['paxrun_unfused_s'] * 1e3:.2f} "
                  f"ms: fused kernels "
                  f"{row['paxrun_unfused_s'] / row['paxrun_s']:.2f}x faster",
                  flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=2)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return failed


def time_unfused(name, onnx_path, data, args):
    """The plan without fused, generated kernels: its median time (and
    profile), or why it could not run."""
    plan = os.path.join(args.work, f"{name}.unfused.paxplan")
    try:
        done = subprocess.run([os.path.join(args.bin, "paxc"), onnx_path,
                               "--gpus=1", "-o", plan, "--quiet",
                               "--fuse-kernels=false"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"paxc failed:\n{done.stderr[-3000:]}")
        times, _ = paxrun_times(args.bin, plan, data,
                                os.path.join(args.work, f"{name}-out-unfused"),
                                args.repeat, args.tf32)
        if args.profile:
            paxrun_profile(args.bin, plan, data, args.tf32,
                           os.path.join(args.profile,
                                        f"{name}.unfused.profile"))
    except Exception as error:  # the fused numbers stand without it
        print(f"{name}: unfused plan: FAILED: {error}", flush=True)
        return {"unfused_error": str(error)[-2000:]}
    print(f"{name}: unfused plan {statistics.median(times) * 1e3:.2f} ms",
          flush=True)
    return {"paxrun_unfused_s": statistics.median(times)}


def bench_model(name, args):
    import onnx
    from onnx import numpy_helper

    model, inputs, names = build(name)
    onnx_path = os.path.join(args.work, f"{name}.onnx")
    export(model, inputs, names, onnx_path)
    data = os.path.join(args.work, f"{name}-in")
    out_dir = os.path.join(args.work, f"{name}-out")
    write_inputs(inputs, data)
    # PyTorch and the unfused plan first, each printed as it is measured,
    # so that their numbers stand when the fused plan fails.
    eager, peak, want = torch_times(model, inputs, args.repeat, args.tf32,
                                    args.precision)
    print(f"{name}: PyTorch {statistics.median(eager) * 1e3:.2f} ms",
          flush=True)
    unfused = time_unfused(name, onnx_path, data, args) if args.unfused else {}
    plan = os.path.join(args.work, f"{name}.paxplan")
    done = subprocess.run([os.path.join(args.bin, "paxc"), onnx_path,
                           "--gpus=1", "-o", plan, "--quiet",
                           f"--precision={args.precision}"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"paxc failed:\n{done.stderr[-3000:]}")
    pax, arena = paxrun_times(args.bin, plan, data, out_dir, args.repeat,
                              args.tf32)
    if args.profile:
        paxrun_profile(args.bin, plan, data, args.tf32,
                       os.path.join(args.profile, f"{name}.profile"))
    got = numpy_helper.to_array(
        onnx.load_tensor(os.path.join(out_dir, "output_0.pb")))

    def rel(a, b):
        """Largest difference of a and b, relative to b's largest value."""
        diff = float(np.max(np.abs(a.astype(np.float64) - b)))
        return diff / (float(np.max(np.abs(b))) or 1.0)

    extra = {}
    if args.ort:
        import onnxruntime as ort

        session = ort.InferenceSession(onnx_path,
                                       providers=["CPUExecutionProvider"])
        feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(),
                                                   inputs)}
        reference = session.run(None, feeds)[0].astype(np.float64)
        extra = {"paxrun_vs_ort": rel(got, reference),
                 "torch_vs_ort": rel(want, reference)}
        print(f"{name}: against onnxruntime: paxrun "
              f"{extra['paxrun_vs_ort']:.1e}, PyTorch "
              f"{extra['torch_vs_ort']:.1e}", flush=True)
    return extra | unfused | {
        "model": name,
        "tf32": args.tf32,
        "paxrun_s": statistics.median(pax),
        "torch_s": statistics.median(eager),
        "ratio": statistics.median(eager) / statistics.median(pax),
        "max_rel_diff": rel(got, want),
        "torch_peak_mib": peak / 2**20,
        "paxrun_arena_mib": arena,
    }


if __name__ == "__main__":
    sys.exit(main())
