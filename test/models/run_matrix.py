#!/usr/bin/env python3
"""The equality matrix: every model, compiled for 1, 2, 4 and 8 devices with
the dp, data-parallel and expert solvers and with forced strategies
(tools/models/force_strategy.py: channel, spatial, reduce and random
splits), run by paxrun on threads and on MPI ranks, must equal
onnxruntime (relative L2 error at most 1e-4), and every collective must
move the bytes the cost model predicted (paxrun --comm-stats).

  run_matrix.py [--models a,b] [--gpus 1,2,4,8] [--transport threads,mpi]
                [--work DIR] [--bin build/bin] [-j N] [--paxc-args=ARGS]

Models: the light ResNet50, Inception v1, VGG19, DenseNet121, SqueezeNet,
ShuffleNet and AlexNet with seeded random weights, and small GPT-2, BERT,
Llama and LSTM models (tools/models/paxmodels.py, random weights).
Prints one line per run and a summary; exits non-zero on any failure.
"""
import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIGHT = ["resnet50", "inception_v1", "vgg19", "densenet121", "squeezenet",
         "shufflenet", "bvlc_alexnet"]
SMALL = {
    "gpt2": "--layers 2 --hidden 64 --heads 4 --ffn 256 --vocab 96 --positions 32 --batch 2 --seq 16",
    "bert": "--layers 2 --hidden 64 --heads 4 --ffn 256 --vocab 96 --positions 32 --batch 2 --seq 16",
    "llama": "--layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 96 --batch 2 --seq 16",
    "lstm": "--layers 2 --hidden 64 --vocab 96 --batch 4 --seq 8",
}
SOLVERS = ["dp", "data-parallel", "expert"]
PATTERNS = ["channel", "spatial", "reduce", "random"]


def run(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True,
                          text=True, **kw)


def prepare(name, work):
    """model.onnx, in/input_i.pb and ort/output_i.pb for one model."""
    d = os.path.join(work, name)
    if os.path.exists(os.path.join(d, "ort", "output_0.pb")):
        return d
    os.makedirs(d, exist_ok=True)
    if name in LIGHT:
        r = run([sys.executable, f"{ROOT}/test/models/randomize_weights.py",
                 f"{ROOT}/test/models/onnx-light/light_{name}.onnx", d,
                 "--seed", "7"])
        if r.returncode:
            sys.exit(f"run_matrix.py: preparing {name}: {r.stderr}")
        return d
    model = os.path.join(d, "model.onnx")
    r = run(f"{sys.executable} {ROOT}/tools/models/paxmodels.py {name} "
            f"{SMALL[name]} --weights random --seed 3 -o {model}")
    if r.returncode:
        sys.exit(f"run_matrix.py: generating {name}: {r.stderr}")
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(11)
    feeds = {}
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    os.makedirs(os.path.join(d, "ort"), exist_ok=True)
    for i, inp in enumerate(sess.get_inputs()):
        if "int" in inp.type:
            if "mask" in inp.name:
                v = np.ones(inp.shape, dtype=np.int64)
            elif "type" in inp.name:
                v = np.zeros(inp.shape, dtype=np.int64)
            else:
                v = rng.integers(0, 96, size=inp.shape, dtype=np.int64)
        else:
            v = rng.uniform(-1, 1, size=inp.shape).astype(np.float32)
        feeds[inp.name] = v
        onnx.save_tensor(numpy_helper.from_array(v, inp.name),
                         os.path.join(d, "in", f"input_{i}.pb"))
    for i, out in enumerate(sess.run(None, feeds)):
        onnx.save_tensor(numpy_helper.from_array(out),
                         os.path.join(d, "ort", f"output_{i}.pb"))
    return d


def rel_l2(expected, out):
    """The worst relative L2 error of out/output_i.pb against expected/."""
    worst = 0.0
    i = 0
    while os.path.exists(f"{expected}/output_{i}.pb"):
        want = numpy_helper.to_array(onnx.load_tensor(f"{expected}/output_{i}.pb"))
        if not os.path.exists(f"{out}/output_{i}.pb"):
            return float("inf")
        got = numpy_helper.to_array(onnx.load_tensor(f"{out}/output_{i}.pb"))
        if got.shape != want.shape:
            return float("inf")
        got = got.astype(np.float64)
        want = want.astype(np.float64)
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        worst = max(worst, err)
        i += 1
    return worst if i else float("inf")


class Case:
    """One model of a matrix: its file, inputs, expected outputs (each a
    folder of input_i.pb / output_i.pb) and extra paxc arguments."""

    def __init__(self, name, model, inputs, expected, work, extra=()):
        self.name, self.model, self.inputs = name, model, inputs
        self.expected, self.work, self.extra = expected, work, list(extra)


def one(binary, case, gpus, how, transport, cluster="dgx1-p100"):
    """Compiles and runs one configuration; returns (ok, line). how: a
    solver name, or force:PATTERN for a forced strategy."""
    tag = f"{case.name} gpus={gpus} {how} {transport}"
    if cluster != "dgx1-p100":
        tag += f" cluster={os.path.basename(cluster).replace('.json', '')}"
    safe = tag.replace(" ", "_").replace("=", "").replace(":", "-")
    work = os.path.join(case.work, "runs", safe)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    paxc, paxrun = f"{binary}/paxc", f"{binary}/paxrun"
    plan = f"{work}/p.paxplan"
    base = [paxc, case.model, f"--gpus={gpus}", f"--cluster={cluster}",
            "--quiet"] + case.extra
    if how.startswith("force:"):
        pattern = how.split(":")[1]
        r = run(base + ["--mode=infer", "--emit=strategy", "-o", f"{work}/s.json"])
        if r.returncode == 0:
            r = run([sys.executable, f"{ROOT}/tools/models/force_strategy.py",
                     f"{work}/s.json", pattern, f"--gpus={gpus}", "--seed",
                     str(gpus), "-o", f"{work}/f.json"])
        if r.returncode == 0:
            r = run(base + [f"--strategy={work}/f.json", "-o", plan])
    else:
        r = run(base + [f"--solver={how}", "-o", plan])
    if r.returncode:
        return False, f"FAIL {tag}: paxc: {r.stderr.strip()[-300:]}"
    cmd = [paxrun, plan, "--inputs", case.inputs, "--outputs", f"{work}/out",
           "--comm-stats"]
    if transport == "mpi":
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
               str(gpus)] + cmd
    try:
        r = run(cmd, timeout=600)
    except subprocess.TimeoutExpired:
        return False, f"FAIL {tag}: paxrun: no result in 600 s"
    if r.returncode:
        bad = [l for l in r.stdout.splitlines() if "MISMATCH" in l]
        return False, (f"FAIL {tag}: paxrun: "
                       f"{(bad[0] if bad else r.stderr.strip())[-300:]}")
    err = rel_l2(case.expected, f"{work}/out")
    total = [l for l in r.stdout.splitlines() if l.startswith("comm: total")]
    comm = total[0].split(",")[0].replace("comm: total ", "") if total else ""
    ok = err <= 1e-4
    shutil.rmtree(work, ignore_errors=True)
    return ok, f"{'ok  ' if ok else 'FAIL'} {tag}: rel L2 {err:.1e}, comm {comm}"


def run_jobs(binary, jobs, parallel, what):
    """Runs (case, gpus, how, transport, cluster) jobs on \p parallel
    threads, printing one line each; returns the number that failed."""
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(parallel) as ex:
        for ok, line in ex.map(lambda j: one(binary, *j), jobs):
            print(line, flush=True)
            failed += not ok
    print(f"{what}: {len(jobs) - failed} of {len(jobs)} runs equal "
          "onnxruntime with the predicted communication")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(LIGHT + list(SMALL)))
    ap.add_argument("--gpus", default="1,2,4,8")
    ap.add_argument("--transport", default="threads,mpi")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "matrix"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("-j", type=int, default=1)
    ap.add_argument("--paxc-args", default="",
                    help="more paxc arguments for every run, e.g. "
                         "--paxc-args=--channels-last")
    args = ap.parse_args()
    transports = args.transport.split(",")
    if "mpi" in transports and not shutil.which("mpirun"):
        sys.exit("run_matrix.py: mpirun not found (--transport=threads)")
    jobs = []
    for name in args.models.split(","):
        d = prepare(name, args.work)
        case = Case(name, f"{d}/model.onnx", f"{d}/in", f"{d}/ort", d,
                    args.paxc_args.split())
        for gpus in [int(g) for g in args.gpus.split(",")]:
            hows = ["dp"] if gpus == 1 else SOLVERS + [f"force:{p}" for p in PATTERNS]
            for how in hows:
                for t in transports:
                    jobs.append((case, gpus, how, t))
    return 1 if run_jobs(args.bin, jobs, args.j, "run_matrix.py") else 0


if __name__ == "__main__":
    sys.exit(main())
