#!/usr/bin/env python3
"""No compiled plan holds an op paxrun cannot run.

For every ONNX node test (Debian's libonnx-testdata) and every export of
the PyTorch corpus (test/models/torch), compile a plan with paxc for
several devices, with the op configurations forced to seeded random legal
splits (tools/models/force_strategy.py) so that kernels receive blocks, and
run it with paxrun on the test's inputs. Each model must end one of two
ways:

  bad data the test's stored data does not fit the model (skipped);
  refused  paxc exits with status 1 and an error (an op it does not import,
           or one without a kernel, named with the node; an input the test
           stores with another type); never a crash;
  ran      paxrun runs every op of the plan and the outputs equal the
           test's (node tests: elementwise, |a-b| <= 1e-5 + 1e-3|b|, NaN
           equal to NaN; exports: relative L2 at most 1e-4);
  random   the model draws random numbers (RandomUniform(Like) and the
           like): paxrun runs every op, but paxc's counter-based generator
           draws other numbers than the test's (numpy's), so the outputs
           are not compared.

A plan paxc writes that paxrun cannot run (a missing kernel, a kernel that
refuses the block it is handed) fails the test, as does a wrong output.

  plans_run.py [--node-dir DIR] [--corpus] [--filter SUBSTR] [--gpus 4]
               [--backend cpu|cuda-emulated|cuda] [--precision P]
               [--bin build/bin]
               [--work DIR] [-j N] [-v]

--backend runs the plans on another of paxrun's backends (cuda-emulated:
the CUDA backend's kernels and the plan's generated kernels, on the host).
--precision compiles with paxc --precision (bf16, fp16: mixed precision)
and compares the exports with onnxruntime's fp32 outputs at relative L2
2e-2 (bf16) or 5e-3 (fp16).

Prints the failures (all runs with -v), a count of refusals by reason and
a summary; exits non-zero on any failure. With --bin pointing at a
sanitizer build (build-asan/bin), a sanitizer report is a failure too.
"""
import argparse
import collections
import concurrent.futures
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_matrix  # noqa: E402
import torch_matrix  # noqa: E402

ROOT = run_matrix.ROOT
NODE_DIR = "/usr/share/libonnx-testdata/data/node"
BACKEND = "cpu"  # --backend
PRECISION = "fp32"  # --precision
WORST = {}  # an export's largest relative L2 over its outputs
# The relative L2 an export's outputs may differ from onnxruntime's fp32
# ones by, per --precision (mixed precision rounds every product's
# operands to 8 or 11 significant bits).
EXPORT_TOLERANCE = {"fp32": 1e-4, "tf32": 1e-4, "bf16": 2e-2, "fp16": 5e-3}


def run(cmd, timeout=300):
    try:
        return subprocess.run(cmd, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def sanitizer_report(r):
    """The first line of a sanitizer report in a run's stderr, or None (a
    sanitizer build may exit with status 1, like a refusal)."""
    for line in (r.stderr or "").splitlines() if r is not None else []:
        if "Sanitizer" in line or "runtime error:" in line:
            return line.strip()[:300]
    return None


def compare(expected, out, elementwise, worst=None):
    """None when out/output_i.pb equal expected/output_i.pb, else why not;
    the exports' largest relative L2 appended to \p worst."""
    i = 0
    while os.path.exists(f"{expected}/output_{i}.pb"):
        want = numpy_helper.to_array(
            onnx.load_tensor(f"{expected}/output_{i}.pb"))
        path = f"{out}/output_{i}.pb"
        if not os.path.exists(path):
            return f"no output {i}"
        got = numpy_helper.to_array(onnx.load_tensor(path))
        if got.shape != want.shape:
            return f"output {i} has shape {got.shape}, not {want.shape}"
        if got.dtype != want.dtype:
            return f"output {i} has type {got.dtype}, not {want.dtype}"
        if got.dtype.kind in "OSU" or want.dtype.kind in "OSU":
            if not np.array_equal(got, want):
                return f"output {i} differs"
            i += 1
            continue
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        if elementwise:
            close = same | (np.abs(g - w) <= 1e-5 + 1e-3 * np.abs(w))
            if not close.all():
                k = int(np.argmin(close.reshape(-1)))
                return (f"output {i} element {k}: {g.reshape(-1)[k]} instead "
                        f"of {w.reshape(-1)[k]}")
        else:
            diff = np.where(same, 0.0, g - w)
            err = np.linalg.norm(diff) / max(np.linalg.norm(w), 1e-30)
            if worst is not None:
                worst.append(float(err))
            if not err <= EXPORT_TOLERANCE[PRECISION]:
                return f"output {i}: relative L2 {err:.1e}"
        i += 1
    return None if i else "no expected outputs"


def data_mismatch(model_dir):
    """Why the test data does not fit the model's declared inputs and
    outputs (some node tests store bfloat16 as uint16, or a shape the model
    does not declare), or None."""
    m = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    data = os.path.join(model_dir, "test_data_set_0")
    for what, infos in [("input", [v for v in m.graph.input
                                   if v.name not in inits]),
                        ("output", list(m.graph.output))]:
        for k, vi in enumerate(infos):
            path = f"{data}/{what}_{k}.pb"
            if not os.path.exists(path):
                continue
            t = onnx.load_tensor(path)
            tt = vi.type.tensor_type
            if tt.elem_type and t.data_type != tt.elem_type:
                return (f"{what} {k} is stored as type {t.data_type}, the "
                        f"model declares {tt.elem_type}")
            dims = [d.dim_value if d.HasField("dim_value") else None
                    for d in tt.shape.dim]
            if tt.HasField("shape") and (
                    len(dims) != len(t.dims) or
                    any(d is not None and d != n for d, n in zip(dims, t.dims))):
                return (f"{what} {k} is stored with shape {list(t.dims)}, the "
                        f"model declares {dims}")
    return None


def check(binary, name, model_dir, gpus, work, extra, elementwise):
    """Compiles (forced random splits) and runs one model; returns
    (outcome, reason) with outcome 'ran', 'refused' or 'FAIL'."""
    why = data_mismatch(model_dir)
    if why:
        return "bad data", why
    w = os.path.join(work, name)
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    model = os.path.join(model_dir, "model.onnx")
    data = os.path.join(model_dir, "test_data_set_0")
    base = [f"{binary}/paxc", model, f"--gpus={gpus}", "--quiet",
            f"--precision={PRECISION}"] + extra
    r = run(base + ["--emit=strategy", "-o", f"{w}/s.json"])
    plan_args = []
    if r is not None and r.returncode == 0:
        f = run([sys.executable, f"{ROOT}/tools/models/force_strategy.py",
                 f"{w}/s.json", "random", f"--gpus={gpus}", "--seed", "5",
                 "-o", f"{w}/f.json"])
        if f is None or f.returncode:
            return "FAIL", "force_strategy.py: " + (f.stderr if f else "hung")
        plan_args = [f"--strategy={w}/f.json"]
    if sanitizer_report(r):
        return "FAIL", "paxc: " + sanitizer_report(r)
    r = run(base + plan_args + ["-o", f"{w}/p.paxplan"])
    if r is None:
        return "FAIL", "paxc: no result in 300 s"
    if sanitizer_report(r):
        return "FAIL", "paxc: " + sanitizer_report(r)
    if r.returncode:
        err = r.stderr.strip()
        if r.returncode != 1 or "error:" not in err:
            return "FAIL", f"paxc exit {r.returncode}: {err[-300:]}"
        shutil.rmtree(w, ignore_errors=True)
        lines = err.splitlines()
        return "refused", " ".join(l.strip() for l in lines[:2])[:200]
    r = run([f"{binary}/paxrun", f"{w}/p.paxplan", "--inputs", data,
             "--outputs", f"{w}/out", f"--backend={BACKEND}"])
    if r is None:
        return "FAIL", "paxrun: no result in 300 s"
    if sanitizer_report(r):
        return "FAIL", "paxrun: " + sanitizer_report(r)
    if r.returncode:
        return "FAIL", f"paxrun exit {r.returncode}: {r.stderr.strip()[-300:]}"
    if draws_random(model):
        shutil.rmtree(w, ignore_errors=True)
        return "random", ""
    errors = []
    why = compare(data, f"{w}/out", elementwise, errors)
    if errors:
        WORST[name] = max(errors)
    if why:
        return "FAIL", why
    shutil.rmtree(w, ignore_errors=True)
    return "ran", ""


RANDOM_OPS = {"RandomUniform", "RandomUniformLike", "RandomNormal",
              "RandomNormalLike", "Bernoulli", "Multinomial"}


def draws_random(model):
    """Whether the model has a node that draws random numbers."""
    m = onnx.load(model, load_external_data=False)
    return any(n.op_type in RANDOM_OPS and n.domain in ("", "ai.onnx")
               for n in m.graph.node)


def refusal_kind(reason):
    """A short class of a refusal for the summary."""
    for key, kind in [("have no kernel", "op without a kernel"),
                      ("unsupported", "op not imported"),
                      ("not supported", "op not imported")]:
        if key in reason:
            return kind
    return "other error"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node-dir", default=NODE_DIR)
    ap.add_argument("--no-node", action="store_true",
                    help="skip the ONNX node tests")
    ap.add_argument("--corpus", action="store_true",
                    help="also the PyTorch export corpus")
    ap.add_argument("--filter", default="")
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--precision", default="fp32",
                    choices=sorted(EXPORT_TOLERANCE),
                    help="paxc --precision; the exports' tolerance follows "
                    "it (bf16 2e-2, fp16 5e-3 relative L2; needs --no-node)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "plans-run"))
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    global BACKEND, PRECISION
    BACKEND = args.backend
    PRECISION = args.precision
    if PRECISION != "fp32" and not args.no_node:
        sys.exit("plans_run.py: --precision checks the exports (--corpus "
                 "--no-node); the node tests are exact in fp32")
    jobs = []
    if not args.no_node:
        if not os.path.isdir(args.node_dir):
            sys.exit(f"plans_run.py: no node tests under '{args.node_dir}'")
        for n in sorted(os.listdir(args.node_dir)):
            d = os.path.join(args.node_dir, n)
            if args.filter in n and os.path.exists(f"{d}/model.onnx"):
                jobs.append((n, d, [], True))
    if args.corpus:
        for n in torch_matrix.exports():
            d = os.path.join(torch_matrix.CORPUS, n)
            if args.filter in n:
                jobs.append((n, d, torch_matrix.dim_bindings(d), False))
    if not jobs:
        sys.exit("plans_run.py: no models match")
    counts = collections.Counter()
    refusals = collections.Counter()
    with concurrent.futures.ThreadPoolExecutor(args.j) as ex:
        results = ex.map(lambda j: check(args.bin, j[0], j[1], args.gpus,
                                         args.work, j[2], j[3]), jobs)
        for (name, *_), (outcome, reason) in zip(jobs, results):
            counts[outcome] += 1
            if outcome == "refused":
                refusals[refusal_kind(reason)] += 1
            if outcome == "FAIL" or args.v:
                print(f"{outcome} {name}: {reason}".rstrip(": "), flush=True)
    for kind, n in sorted(refusals.items()):
        print(f"refused ({kind}): {n}")
    if WORST:
        name = max(WORST, key=WORST.get)
        print(f"largest relative L2 of an export ({PRECISION}): "
              f"{WORST[name]:.1e} ({name}); median "
              f"{float(np.median(list(WORST.values()))):.1e}")
    print(f"plans_run.py: {len(jobs)} models on {args.gpus} devices: "
          f"{counts['ran']} ran and equal the expected outputs, "
          f"{counts['random']} ran drawing random numbers, "
          f"{counts['refused']} refused by paxc, {counts['FAIL']} failed, "
          f"{counts['bad data']} with test data that does not fit the model")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
