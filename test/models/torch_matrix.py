#!/usr/bin/env python3
"""The PyTorch export matrix: every export of the corpus (test/models/torch),
compiled for 1, 4 and 8 devices with the dp, data-parallel and expert
solvers on the default cluster and on a slow one (test/models/clusters/
slow.json, 1 GFLOP/s per device, so plans split), and with forced
strategies (tools/models/force_strategy.py: channel, reduce and
batch-channel splits); run by paxrun on threads and, for a subset of the
configurations, on MPI ranks; every output must equal the onnxruntime
output stored with the export (relative L2 at most 1e-4) and every
collective must move the bytes the cost model predicted.

With --corpus=DIR it runs another corpus of the same layout (the model
families of test/models/families: --corpus=test/models/families).

  torch_matrix.py [--corpus DIR] [--models SUBSTR,...] [--gpus 1,4,8]
                  [--cluster default,slow] [--how dp,data-parallel,...]
                  [--transport threads,mpi] [--bin build/bin] [--work DIR]
                  [-j N] [--list]

Symbolic dims of dynamic exports are bound from the stored inputs' shapes.
Prints one line per run and a summary; exits non-zero on any failure.
"""
import argparse
import os
import shutil
import sys

import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_matrix  # noqa: E402

ROOT = run_matrix.ROOT
CORPUS = os.path.join(ROOT, "test", "models", "torch")
CLUSTERS = {"default": "pase",
            "slow": os.path.join(ROOT, "test", "models", "clusters", "slow.json")}
SOLVERS = ["dp", "data-parallel", "expert"]
PATTERNS = ["channel", "reduce", "batch-channel"]


def dim_bindings(model_dir):
    """--dim NAME=VALUE for every symbolic input dim, from the test data."""
    m = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    args, k, bound = [], 0, set()
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        t = onnx.load_tensor(os.path.join(model_dir, "test_data_set_0", f"input_{k}.pb"))
        k += 1
        for d, n in zip(vi.type.tensor_type.shape.dim, t.dims):
            if d.dim_param and d.dim_param not in bound:
                bound.add(d.dim_param)
                args += [f"--dim={d.dim_param}={n}"]
    return args


def exports(corpus=CORPUS):
    return sorted(n for n in os.listdir(corpus)
                  if os.path.exists(os.path.join(corpus, n, "model.onnx")))


def jobs_for(case, gpus_list, clusters, hows, transports):
    """The configurations of one export. One device: dp on the default
    cluster. More: each solver on each cluster, each forced pattern once
    (a forced strategy does not depend on the cluster); MPI ranks run dp on
    the slow cluster and the first forced pattern."""
    jobs = []
    for g in gpus_list:
        if g == 1:
            if "dp" in hows:
                jobs.append((case, 1, "dp", "threads", CLUSTERS[clusters[0]]))
            continue
        for how in hows:
            cs = clusters if not how.startswith("force:") else clusters[-1:]
            for c in cs:
                jobs.append((case, g, how, "threads", CLUSTERS[c]))
        if "mpi" in transports:
            mpi_hows = [h for h in hows if h == "dp"] + \
                [h for h in hows if h.startswith("force:")][:1]
            for how in mpi_hows:
                jobs.append((case, g, how, "mpi", CLUSTERS[clusters[-1]]))
    if "threads" not in transports:
        jobs = [j for j in jobs if j[3] != "threads"]
    return jobs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", default=CORPUS)
    p.add_argument("--models", default="")
    p.add_argument("--gpus", default="1,4,8")
    p.add_argument("--cluster", default="default,slow")
    p.add_argument("--how", default=",".join(SOLVERS + [f"force:{x}" for x in PATTERNS]))
    p.add_argument("--transport", default="threads,mpi")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--work", default=os.path.join(ROOT, "build", "torch-matrix"))
    p.add_argument("-j", type=int, default=2)
    p.add_argument("--list", action="store_true", help="print the jobs, run none")
    a = p.parse_args()
    transports = a.transport.split(",")
    if "mpi" in transports and not shutil.which("mpirun"):
        sys.exit("torch_matrix.py: mpirun not found (use --transport=threads)")
    names = exports(a.corpus)
    if a.models:
        names = [n for n in names if any(s in n for s in a.models.split(","))]
    if not names:
        sys.exit(f"torch_matrix.py: no export matches '{a.models}'")
    jobs = []
    for name in names:
        d = os.path.join(a.corpus, name)
        data = os.path.join(d, "test_data_set_0")
        case = run_matrix.Case(name, os.path.join(d, "model.onnx"), data, data,
                               os.path.join(a.work, name), dim_bindings(d))
        jobs += jobs_for(case, [int(g) for g in a.gpus.split(",")],
                         a.cluster.split(","), a.how.split(","), transports)
    if a.list:
        for case, g, how, t, c in jobs:
            print(case.name, g, how, t, c)
        return 0
    return 1 if run_matrix.run_jobs(a.bin, jobs, a.j, "torch_matrix.py") else 0


if __name__ == "__main__":
    sys.exit(main())
