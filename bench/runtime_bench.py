#!/usr/bin/env python3
"""CPU runtime on one device against onnxruntime: same model, inputs, threads.

For each model, writes the ONNX file with seeded random weights and inputs,
compiles it with `paxc -o model.paxplan`, runs `paxrun --repeat --time` (the
seconds each run spends in compute instructions; loading weights from the
model and allocating buffers are not counted) and onnxruntime's
InferenceSession.run with intra_op_num_threads equal to the threads paxrun
has, checks that every output agrees (relative L2 error at most 1e-4), and
prints the median and best times and the throughput ratio paxrun /
onnxruntime (onnxruntime's median time over paxrun's), measured in this run.
The two alternate for --rounds rounds of --repeat runs each, so that a
passing load on the machine weighs on both; the first run of each round is
a warm-up and is not counted.

  python3 bench/runtime_bench.py [--models resnet50,bert] [--threads N]
      [--repeat N] [--rounds N] [--build DIR] [--work DIR]
      [--paxc-args="--channels-last"]

paxc compiles with --paxc-args, by default --channels-last (the CPU
backend's convolutions run channels-last on oneDNN, each with its batch
norm, relus and residual add; a model without convolutions is unchanged).

Models: resnet50 is the light ResNet50 (test/models/onnx-light) at batch 1;
bert is BERT-base (tools/models/paxmodels.py) at sequence 128, batch 1.
Their ConstantOfShape weights become seeded random initializers, as in
test/models/randomize_weights.py. paxrun runs on the first N CPUs (taskset)
when --threads is below the CPUs this process may use.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "models"))
from randomize_weights import random_weights  # noqa: E402
LIGHT = os.path.join(ROOT, "test", "models", "onnx-light")
GEN = os.path.join(ROOT, "tools", "models", "paxmodels.py")
MODELS = ["resnet50", "bert"]
TOLERANCE = 1e-4


def input_values(model, rng):
    """Seeded inputs: token ids below the vocabulary, an attention mask that
    masks the last eighth, two token types; floats standard normal."""
    vocab = max((t.dims[0] for t in model.graph.initializer
                 if "word_embeddings" in t.name), default=2)
    feeds = []
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            feeds.append(rng.standard_normal(shape).astype(np.float32))
        elif vi.name == "attention_mask":
            mask = np.ones(shape, np.int64)
            mask[..., shape[-1] - shape[-1] // 8:] = 0
            feeds.append(mask)
        elif vi.name == "token_type_ids":
            types = np.zeros(shape, np.int64)
            types[..., shape[-1] // 2:] = 1
            feeds.append(types)
        else:
            feeds.append(rng.integers(0, vocab, shape).astype(np.int64))
    return feeds


def prepare(name, work, seed):
    """Writes work/model.onnx and work/in/input_K.pb; returns the inputs."""
    if name == "resnet50":
        source = os.path.join(LIGHT, "light_resnet50.onnx")
    else:
        source = os.path.join(work, "generated.onnx")
        subprocess.run([sys.executable, GEN, "bert", "--seq", "128", "--batch", "1",
                        "--weights", "constant-of-shape", "-o", source],
                       check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    rng = np.random.default_rng(seed)
    model = onnx.load(source)
    random_weights(model, rng)
    onnx.save(model, os.path.join(work, "model.onnx"))
    os.makedirs(os.path.join(work, "in"), exist_ok=True)
    feeds = input_values(model, rng)
    for i, (vi, value) in enumerate(zip(model.graph.input, feeds)):
        onnx.save_tensor(numpy_helper.from_array(value, vi.name),
                         os.path.join(work, "in", f"input_{i}.pb"))
    return {vi.name: v for vi, v in zip(model.graph.input, feeds)}


def run_paxrun(paxrun, work, repeat, cpus):
    cmd = [paxrun, os.path.join(work, "model.paxplan"), "--inputs",
           os.path.join(work, "in"), "--outputs", os.path.join(work, "pax"),
           f"--repeat={repeat + 1}", "--time"]
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"runtime_bench: {' '.join(cmd)} failed:\n{proc.stderr}")
    times = [float(t) for t in re.findall(r"run \d+: ([0-9.e+-]+) s", proc.stderr)]
    if len(times) != repeat + 1:
        sys.exit("runtime_bench: paxrun printed no times (it needs --repeat and "
                 f"--time):\n{proc.stderr}")
    return times[1:]


def onnxruntime_session(work, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return ort.InferenceSession(os.path.join(work, "model.onnx"), options,
                                providers=["CPUExecutionProvider"])


def run_onnxruntime(sess, feeds, repeat):
    outputs = sess.run(None, feeds)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - start)
    return times, outputs


def worst_error(work, want):
    worst = 0.0
    for i, w in enumerate(want):
        got = numpy_helper.to_array(
            onnx.load_tensor(os.path.join(work, "pax", f"output_{i}.pb")))
        got = got.reshape(w.shape).astype(np.float64)
        w = w.astype(np.float64)
        worst = max(worst, np.linalg.norm(got - w) / max(np.linalg.norm(w), 1e-30))
    return worst


def build(build_dir):
    paxc = os.path.join(build_dir, "bin", "paxc")
    paxrun = os.path.join(build_dir, "bin", "paxrun")
    if not (os.path.exists(paxc) and os.path.exists(paxrun)):
        if not os.path.exists(os.path.join(build_dir, "build.ninja")):
            subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release"], check=True)
        subprocess.run(["ninja", "-C", build_dir, "paxc", "paxrun"], check=True)
    return paxc, paxrun


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", help="keep the models and outputs here")
    ap.add_argument("--paxc-args", default="--channels-last",
                    help="paxc's flags (default: --channels-last)")
    args = ap.parse_args()
    paxc, paxrun = build(args.build)
    allowed = sorted(os.sched_getaffinity(0))
    cpus = None
    if args.threads < len(allowed):
        cpus = ",".join(str(c) for c in allowed[:args.threads])
    root = args.work or tempfile.mkdtemp(prefix="runtime_bench.")
    ok = True
    print(f"{args.threads} threads, {args.rounds} rounds of {args.repeat} runs "
          "each after a warm-up; seconds per inference; paxc "
          f"{args.paxc_args or '(no flags)'}")
    print(f"{'model':10} {'paxrun med':>11} {'best':>8} {'onnxrt med':>11} "
          f"{'best':>8} {'paxrun/onnxrt':>14} {'rel L2':>9}")
    try:
        for name in args.models.split(","):
            work = os.path.join(root, name)
            os.makedirs(work, exist_ok=True)
            feeds = prepare(name, work, args.seed)
            subprocess.run([paxc, os.path.join(work, "model.onnx"), "-o",
                            os.path.join(work, "model.paxplan"), "--quiet"]
                           + args.paxc_args.split(), check=True)
            sess = onnxruntime_session(work, args.threads)
            pax, ref = [], []
            for _ in range(args.rounds):
                pax += run_paxrun(paxrun, work, args.repeat, cpus)
                times, want = run_onnxruntime(sess, feeds, args.repeat)
                ref += times
            err = worst_error(work, want)
            ok &= err <= TOLERANCE
            pm, om = statistics.median(pax), statistics.median(ref)
            print(f"{name:10} {pm:11.4f} {min(pax):8.4f} {om:11.4f} {min(ref):8.4f} "
                  f"{om / pm:13.2f}x {err:9.1e}{'' if err <= TOLERANCE else '  DIFFERS'}",
                  flush=True)
    finally:
        if not args.work:
            shutil.rmtree(root, ignore_errors=True)
    print("outputs agree" if ok else "outputs DIFFER (relative L2 above 1e-4)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
