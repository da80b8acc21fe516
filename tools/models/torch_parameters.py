#!/usr/bin/env python3
"""Explains paxc's parameter count on the PyTorch export corpus, tensor by
tensor, against the torch model each export was made from.

Rebuilds every architecture of tools/models/export_torch.py exactly as the
exporter did (same seed, same perturbed weights) and matches the tensors
paxc marks as parameters (``param`` globals of ``paxc --emit=ir``, read from
the export's initializers) with torch's parameters by value (the same
values in any order: a transposed or reshaped copy matches). Every
difference between paxc's count and torch's falls in one of these classes:

  folded      a torch parameter the file does not hold: the exporter folded
              it into another tensor (batch norm into the convolution, a
              gathered bias table into the bias it makes)
  computed    a file tensor paxc counts that is no torch parameter: what the
              exporter computed from parameters (a folded convolution
              weight or bias, a gathered relative-position bias)
  twice       a torch parameter the file writes more than once (a tied
              embedding, a shared layer written per use)
  cut         a file tensor that is part of a torch parameter (a position
              table cut to the rows an export uses)
  buffer      a file tensor paxc counts that is a torch buffer, not a
              parameter (BART's all-zero final_logits_bias): the file does
              not say which tensors training updates
  missed      a torch parameter the file holds verbatim that paxc does not
              count: paxc's error, except for one-element parameters, which
              are indistinguishable from the scalar constants exporters
              write (paxc never counts one-element tensors)

Writes test/models/torch/parameters.json (per export: torch's count,
paxc's, and the tensors of each class) and prints one line per export. Runs
in the exporter's virtual environment:

  build/export-venv/bin/python tools/models/torch_parameters.py \\
      [--paxc build/bin/paxc] [--only ARCH,...] [--out FILE]

The file is data for docs/PERFORMANCE.md's parameter table and for
test/models/check_torch_parameters.py (which needs no torch).
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import export_torch  # noqa: E402

CORPUS = os.path.join(ROOT, "test", "models", "torch")


def key(values):
    """The tensor's values, in any order and shape."""
    v = np.sort(np.asarray(values, dtype=np.float32).reshape(-1))
    return hashlib.sha256(v.tobytes()).hexdigest()[:20]


def torch_parameters(arch):
    """(name, float32 array) of the perturbed model's unique parameters, and
    of its float buffers."""
    fn = export_torch.ARCHS[arch][0]
    seed = int(hashlib.sha256(arch.encode()).hexdigest()[:8], 16)
    torch.manual_seed(seed)
    np.random.seed(seed % (2 ** 32))
    spec = fn()
    model = export_torch.perturb(spec["model"], seed)
    out, seen = [], set()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        out.append((name, p.detach().float().numpy().copy()))
    buffers = [(n, b.detach().float().numpy().copy())
               for n, b in model.named_buffers() if b.is_floating_point()]
    return out, buffers


def paxc_parameters(paxc, export_dir, binds):
    """What paxc marks as parameters: the source-model tensor names, each
    once, and (name, elements) of stand-ins, constants a node writes that
    paxc takes for a weight."""
    r = subprocess.run([paxc, os.path.join(export_dir, "model.onnx"),
                        "--emit=ir", "--quiet"] + binds,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip())
    names, stand_ins = [], []
    for line in r.stdout.splitlines():
        m = re.match(r'\s*param @(\S+) : tensor<([0-9x]*)x?[a-z]+[0-9]*> = '
                     r'(?:(?:initializer|input)\("(.*)"\))?', line)
        if not m:
            continue
        if m.group(3) is not None:
            if m.group(3) not in names:
                names.append(m.group(3))
        else:
            dims = [int(d) for d in m.group(2).split("x") if d]
            stand_ins.append((m.group(1).strip('"'), int(np.prod(dims))))
    return names, stand_ins


def is_slice_of(small, big):
    """True when small is a contiguous block of rows of big (any leading
    axis), compared after flattening the trailing dims."""
    while small.ndim > big.ndim and small.shape[0] == 1:
        small = small[0]
    if small.ndim != big.ndim or small.size >= big.size:
        return False
    for axis in range(big.ndim):
        if any(s != b for i, (s, b) in enumerate(zip(small.shape, big.shape))
               if i != axis):
            continue
        n = small.shape[axis]
        for start in range(big.shape[axis] - n + 1):
            if np.array_equal(np.take(big, range(start, start + n), axis=axis), small):
                return True
    return False


def explain(export_dir, params, buffers, counted, stand_ins):
    model = onnx.load(os.path.join(export_dir, "model.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
             if t.data_type == onnx.TensorProto.FLOAT}
    by_key = {}
    for name, v in params:
        by_key.setdefault(key(v), []).append(name)
    file_keys = {}
    for n, v in inits.items():
        file_keys.setdefault(key(v), []).append(n)
    torch_numel = {n: int(v.size) for n, v in params}
    result = {"torch": sum(torch_numel.values()), "folded": [], "computed": [],
              "twice": [], "cut": [], "buffer": [], "missed": []}
    counted_set = set(counted)
    result["paxc"] = sum(int(inits[n].size) for n in counted_set if n in inits)
    result["paxc"] += sum(n for _, n in stand_ins)
    # Constants nodes write that paxc takes for weights: never torch's.
    for name, n in stand_ins:
        result["computed"].append({"file": name, "elements": n,
                                   "stand_in": True})
    # Torch parameters: in the file (counted or not), or folded away.
    for name, v in params:
        copies = file_keys.get(key(v), [])
        if not copies:
            result["folded"].append({"torch": name, "elements": int(v.size)})
            continue
        seen = [c for c in copies if c in counted_set]
        if not seen:
            result["missed"].append({"torch": name, "elements": int(v.size),
                                     "file": copies[0]})
        elif len(seen) > 1:
            result["twice"].append({"torch": name, "elements": int(v.size),
                                    "file": seen})
    # Counted file tensors that are no torch parameter.
    for n in sorted(counted_set):
        v = inits.get(n)
        if v is None or key(v) in by_key:
            continue
        whole = next((pn for pn, pv in params if is_slice_of(v, pv)), None)
        buffer = next((bn for bn, bv in buffers if key(bv) == key(v)), None)
        entry = {"file": n, "elements": int(v.size), "shape": list(v.shape)}
        if buffer:
            entry["torch"] = buffer
            result["buffer"].append(entry)
        elif whole:
            entry["of"] = whole
            result["cut"].append(entry)
        else:
            result["computed"].append(entry)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paxc", default=os.path.join(ROOT, "build", "bin", "paxc"))
    ap.add_argument("--only", help="comma-separated architectures")
    ap.add_argument("--out", default=os.path.join(CORPUS, "parameters.json"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "test", "models"))
    import torch_matrix  # noqa: E402
    global check_torch_parameters
    import check_torch_parameters  # noqa: E402
    exports = torch_matrix.exports()
    manifest = {m["name"]: m for m in
                json.load(open(os.path.join(CORPUS, "manifest.json")))["models"]}
    archs = sorted({manifest[e]["arch"] for e in exports})
    if args.only:
        archs = [a for a in archs if a in args.only.split(",")]
    table = {}
    if os.path.exists(args.out) and args.only:
        table = json.load(open(args.out))
    for arch in archs:
        params, buffers = torch_parameters(arch)
        for e in exports:
            if manifest[e]["arch"] != arch:
                continue
            d = os.path.join(CORPUS, e)
            counted, stand_ins = paxc_parameters(args.paxc, d,
                                                 torch_matrix.dim_bindings(d))
            r = explain(d, params, buffers, counted, stand_ins)
            table[e] = r
            if check_torch_parameters.expected(r) != r["paxc"]:
                print(f"{e}: the differences do not add up to paxc's count "
                      "(a stand-in or a reshaped copy?)", file=sys.stderr)
            parts = [f"{k} {sign}{sum(x['elements'] * (len(x['file']) - 1 if k == 'twice' else 1) for x in r[k])}"
                     for k, sign in (("folded", "-"), ("missed", "-"), ("twice", "+"),
                                     ("computed", "+"), ("cut", "+"),
                                     ("buffer", "+")) if r[k]]
            print(f"{e:34s} torch {r['torch']:7d} paxc {r['paxc']:7d}  "
                  + (", ".join(parts) or "equal"), flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(sorted(table.items())), f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
