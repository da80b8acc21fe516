#!/usr/bin/env python3
"""Survey of paxc on the PyTorch export corpus (test/models/torch).

For every export in test/models/torch/manifest.json that succeeded, runs

  build/bin/paxc MODEL --emit=summary --format=json --quiet [--batch=N --dim NAME=VALUE ...]

(symbolic dims are bound to the sizes of the export's test_data_set_0) and
prints one row per model: whether the import succeeded (or the first line of
its error), the ops paxc imported as opaque (``unsupported_ops``), and paxc's
parameter count next to torch's.  Then a histogram of the ONNX op types paxc
failed on across the corpus (from unsupported_ops and from error messages).

Needs only python3 and onnx.  Usage:

  test/models/torch_survey.py [--paxc build/bin/paxc] [--corpus test/models/torch]
                              [--only SUBSTRING] [--json OUT.json]
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def dim_bindings(model_path, data_dir):
    """--dim NAME=VALUE for every symbolic dim of the graph inputs, with the
    value from the first test data set (inputs numbered in graph order)."""
    m = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    inputs = [v for v in m.graph.input if v.name not in inits]
    binds = collections.OrderedDict()
    for i, v in enumerate(inputs):
        dims = v.type.tensor_type.shape.dim
        if not any(d.HasField("dim_param") for d in dims):
            continue
        shape = None
        pb = os.path.join(data_dir, f"input_{i}.pb")
        if os.path.exists(pb):
            t = onnx.TensorProto()
            with open(pb, "rb") as f:
                t.ParseFromString(f.read())
            shape = list(t.dims)
        for ax, d in enumerate(dims):
            if d.HasField("dim_param") and d.dim_param not in binds:
                binds[d.dim_param] = shape[ax] if shape else 2
    return binds


def first_line(s):
    for line in s.splitlines():
        line = line.strip()
        if line:
            return line
    return ""


# Op types named in paxc's error messages, e.g. "unsupported op 'Trilu'",
# "op Trilu (node ...)", "Trilu: ...".
def ops_in_error(msg, known_ops):
    found = set()
    for tok in re.findall(r"[A-Z][A-Za-z0-9]+", msg):
        if tok in known_ops:
            found.add(tok)
    return found


def param_match(pax, e):
    """How paxc's count relates to torch's: '=' equal, '=tied' equal to the
    count with tied weights counted twice, '+bn' / 'tied+bn' the same plus
    the BatchNorm running statistics (which paxc counts as parameters),
    'onnx' equal to the float initializer elements of the file (the exporter
    folded or dropped parameters), else '≠'."""
    bn = e.get("torch_bn_statistics", 0)
    tp = e.get("torch_parameters")
    tied = e.get("torch_parameters_with_tied", tp)
    for label, n in (("=", tp), ("=tied", tied), ("+bn", tp + bn if tp else None),
                     ("tied+bn", tied + bn if tied else None)):
        if n is not None and pax == n:
            return label
    if pax == e.get("initializer_elements"):
        return "onnx"
    return "≠"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--paxc", default=os.path.join(ROOT, "build", "bin", "paxc"))
    ap.add_argument("--corpus", default=os.path.join(HERE, "torch"))
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--json", help="also write the survey as JSON here")
    a = ap.parse_args()

    if not os.path.exists(a.paxc):
        sys.exit(f"{a.paxc} does not exist: build paxc first")
    with open(os.path.join(a.corpus, "manifest.json")) as f:
        manifest = json.load(f)

    rows = []
    fail_ops = collections.Counter()      # op type -> number of models it failed
    fail_models = collections.defaultdict(list)
    for e in manifest["models"]:
        if a.only and a.only not in e["name"]:
            continue
        if "error" in e:
            rows.append(dict(name=e["name"], status="(export failed)", unsupported=[],
                             pax=None, match="", torch=e.get("torch_parameters")))
            continue
        d = os.path.join(a.corpus, e["name"])
        model = os.path.join(d, "model.onnx")
        cmd = [a.paxc, model, "--emit=summary", "--format=json", "--quiet"]
        binds = dim_bindings(model, os.path.join(d, "test_data_set_0"))
        if binds:
            cmd.append(f"--batch={binds.get('batch', 2)}")
            cmd += [f"--dim={k}={v}" for k, v in binds.items()]
        known = set(e.get("op_types", {}))
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = -1, "", f"timeout after {a.timeout}s"
        row = dict(name=e["name"], torch=e.get("torch_parameters"), pax=None, match="",
                   unsupported=[], cmd=" ".join(os.path.relpath(c, ROOT) if c.startswith("/")
                                                 else c for c in cmd))
        failed = set()
        if rc == 0:
            try:
                s = json.loads(out)
                row["status"] = "ok"
                row["unsupported"] = sorted(s.get("unsupported_ops", []))
                row["pax"] = s.get("parameters")
                row["match"] = param_match(row["pax"], e)
                failed |= set(row["unsupported"])
            except json.JSONDecodeError:
                row["status"] = "bad JSON: " + first_line(out)[:100]
        else:
            msg = first_line(err) or first_line(out) or f"exit {rc}"
            msg = msg.replace(os.path.join(d, ""), "").replace(ROOT + "/", "")
            row["status"] = "error: " + msg
            failed |= ops_in_error(msg, known)
            if not failed:
                failed.add("(other: " + re.sub(r"'[^']*'", "'…'", msg.split(": ", 2)[-1])[:60] + ")")
        for op in failed:
            fail_ops[op] += 1
            fail_models[op].append(e["name"])
        rows.append(row)

    def fmt_params(r):
        if r["pax"] is None:
            return f"{'-':>9} {r['torch'] or '-':>9} {'':6}"
        return f"{r['pax']:>9} {r['torch']:>9} {r['match']:6}"

    w = max([len(r["name"]) for r in rows] + [5])
    print(f"{'model':{w}}  {'paxc':>9} {'torch':>9} {'match':6}  status / unsupported ops")
    print("-" * (w + 80))
    for r in rows:
        status = r["status"]
        if r["unsupported"]:
            status += " (unsupported: " + ", ".join(r["unsupported"]) + ")"
        print(f"{r['name']:{w}}  {fmt_params(r)}  {status[:160]}")
    n_ok = sum(1 for r in rows if r["status"] == "ok")
    n_clean = sum(1 for r in rows if r["status"] == "ok" and not r["unsupported"])
    n_exp = sum(1 for r in rows if r["status"] != "(export failed)")
    print()
    print(f"{n_ok}/{n_exp} exports import ({n_clean} with no unsupported op); "
          f"{sum(1 for r in rows if r.get('match') and r['match'] not in ('≠', 'onnx'))} "
          f"with paxc's parameter count equal to torch's (=, =tied, +bn, tied+bn), "
          f"{sum(1 for r in rows if r.get('match') == 'onnx')} to the file's initializers only, "
          f"{sum(1 for r in rows if r.get('match') == '≠')} to neither")
    print()
    print("Op types paxc fails on (number of models; from unsupported_ops and error messages):")
    for op, n in fail_ops.most_common():
        ex = ", ".join(fail_models[op][:3]) + (", ..." if len(fail_models[op]) > 3 else "")
        print(f"  {n:4d}  {op:28s} {ex}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "failing_ops": dict(fail_ops.most_common())}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
