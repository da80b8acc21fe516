#!/usr/bin/env python3
"""Strategy search: time, memory and quality per model and GPU count.

For every model and device count, runs `paxc MODEL --gpus=N --emit=strategy`
(PaSE's DP with the default configuration space) and reports the search
time, the peak memory of the process, the largest dependent set, the DP
states and those built (repeated layers' equal tables are built once),
whether the strategy is proven optimal (and the gap to the lower
bound when not), and the predicted step time against the data-parallel and
expert baselines searched in the same run (ratios > 1 mean the DP's
strategy is faster). The DP must never be worse than either baseline.

The "hub" models are full-size transformers with weights as graph inputs
and their buffers too (--buffers input: rotary inv_freq, GPT-2's per-layer
causal masks), plus an attention_mask input, so rotary tables and masks are
computed from inputs and read by every layer: Llama-7B, Llama-2-70B,
GPT-2 XL and BERT-large, at the --large counts too.

  python3 bench/search_bench.py [--gpus 4,8,16,32,64] [--large 256,1024]
                                [--mode train|infer] [--models NAME,...]
  python3 bench/search_bench.py --corpus [--gpus 64] [--mode train|infer]

--corpus instead searches every export of the PyTorch corpus
(test/models/torch, symbolic dims bound from its stored inputs) and prints
one line per export and the slowest.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "tools", "models", "paxmodels.py")
LIGHT = os.path.join(ROOT, "test", "models", "onnx-light")
LIGHT_MODELS = ["bvlc_alexnet", "zfnet512", "vgg19", "resnet50", "inception_v1",
                "inception_v2", "densenet121", "squeezenet", "shufflenet"]
GENERATED = ["inception_v3", "gpt2", "bert", "llama", "lstm"]
# name -> generator arguments of the models whose masks and tables are hubs.
HUBS = {
    "llama-7b-hub": ["llama", "--buffers", "input", "--attention-mask"],
    "llama2-70b-hub": ["llama2-70b", "--buffers", "input", "--attention-mask"],
    "gpt2-xl-hub": ["gpt2-xl", "--buffers", "input", "--attention-mask"],
    "bert-large": ["bert-large"],
}
TRANSFORMERS = ["gpt2", "bert", "llama"] + list(HUBS)
# Others at the --gpus counts only: PaSE's Inception-v3 case (batch 128).
EXTRA = {"inception_v3-b128": ["inception_v3", "--batch", "128"]}


def run(paxc, model, gpus, extra, mode):
    with tempfile.TemporaryDirectory() as tmp:
        rss, out = os.path.join(tmp, "rss"), os.path.join(tmp, "strategy.json")
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss, paxc, model,
                               f"--gpus={gpus}", f"--mode={mode}", "--emit=strategy", "--quiet",
                               # The search itself, unconstrained by the device's memory
                               # (a 1 PiB limit): docs/PERFORMANCE.md's "Training steps
                               # that fit" measures the fitting search.
                               "--mem-limit=1048576",
                               # The search's own strategy, whatever simulates
                               # faster: the DP against the baselines by the
                               # cost it minimizes.
                               "--choose=cost", "-o", out]
                              + extra, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - start
        mem = int(open(rss).read().split()[-1]) / 1024
        if proc.returncode:
            lines = [l for l in proc.stderr.strip().splitlines() if "error" in l]
            return None, wall, mem, (lines or ["exit %d" % proc.returncode])[-1]
        return json.load(open(out)), wall, mem, None


def corpus(args):
    """Every export of the corpus at each --gpus count."""
    sys.path.insert(0, os.path.join(ROOT, "test", "models"))
    import torch_matrix  # noqa: E402  (needs onnx, not torch)
    worst, ok = (0.0, ""), True
    print(f"{'export':32} {'gpus':>5} {'total s':>8} {'MiB':>6} {'dep':>4} {'optimum':>12}")
    for name in torch_matrix.exports():
        d = os.path.join(torch_matrix.CORPUS, name)
        for g in [int(x) for x in args.gpus.split(",")]:
            s, wall, mem, err = run(args.paxc, os.path.join(d, "model.onnx"), g,
                                    torch_matrix.dim_bindings(d), args.mode)
            if err:
                print(f"{name:32} {g:5d} FAILED: {err}")
                ok = False
                continue
            worst = max(worst, (wall, f"{name} at {g} GPUs"))
            optimum = "exact" if s["exact"] else f"gap {100 * s['gap']:.2f}%"
            print(f"{name:32} {g:5d} {wall:8.2f} {mem:6.0f} "
                  f"{s['stats']['largest_dependent_set']:4d} {optimum:>12}")
    print(f"slowest: {worst[1]}, {worst[0]:.2f} s")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--paxc", default=os.path.join(ROOT, "build", "bin", "paxc"))
    ap.add_argument("--gpus", default="4,8,16,32,64")
    ap.add_argument("--large", default="256,1024", help="extra counts for transformers")
    ap.add_argument("--batch", type=int, default=32, help="--batch for the CNNs")
    ap.add_argument("--mode", default="train", choices=["train", "infer"])
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--corpus", action="store_true", help="the PyTorch export corpus")
    args = ap.parse_args()
    if args.corpus:
        return corpus(args)
    only = set(args.models.split(",")) if args.models else None
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        models = [(m, os.path.join(LIGHT, f"light_{m}.onnx"), [f"--batch={args.batch}"])
                  for m in LIGHT_MODELS if only is None or m in only]
        for m, gen in ([(m, [m]) for m in GENERATED] + list(EXTRA.items()) +
                       list(HUBS.items())):
            if only is not None and m not in only:
                continue
            path = os.path.join(tmp, m + ".onnx")
            subprocess.run([sys.executable, GEN, *gen, "-o", path], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            models.append((m, path, []))
        print(f"{'model':14} {'gpus':>5} {'total s':>8} {'search s':>9} {'MiB':>7} "
              f"{'dep':>4} {'states':>10} {'built':>9} {'optimum':>12} {'step ms':>9} {'vs data':>8} "
              f"{'vs expert':>9}")
        for name, path, extra in models:
            counts = [int(g) for g in args.gpus.split(",")]
            if name in TRANSFORMERS and args.large:
                counts += [int(g) for g in args.large.split(",")]
            for g in counts:
                s, wall, mem, err = run(args.paxc, path, g, extra, args.mode)
                if err:
                    print(f"{name:14} {g:5d} {wall:8.2f} {'':9} {mem:7.0f}  FAILED: {err}")
                    ok = False
                    continue
                base = s["baselines"]
                # A baseline that fits no strategy within the memory limit
                # (JSON "fits": false) is beaten by any strategy that does.
                def ratio(name):
                    b = base[name]
                    return b["cost_s"] / s["cost_s"] if "cost_s" in b else float("inf")
                vs_dp, vs_ex = ratio("data-parallel"), ratio("expert")
                st = s["stats"]
                optimum = "exact" if s["exact"] else f"gap {100 * s['gap']:.2f}%"
                print(f"{name:14} {g:5d} {wall:8.2f} {s['search_s']:9.3f} {mem:7.0f} "
                      f"{st['largest_dependent_set']:4d} {st['dp_states']:10d} "
                      f"{st['built_dp_states']:9d} {optimum:>12} "
                      f"{s['cost_s'] * 1e3:9.3f} {vs_dp:7.2f}x {vs_ex:8.2f}x")
                if vs_dp < 1 - 1e-9 or vs_ex < 1 - 1e-9:
                    print(f"  WORSE than a baseline: {name} at {g} GPUs")
                    ok = False
    print("all searches finished, never worse than a baseline" if ok else "SOME SEARCHES FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
