#!/usr/bin/env python3
"""ONNX's node tests on onnxruntime's CPU provider, side by side with paxc.

Runs every node test (Debian libonnx-testdata, as paxc-conformance does) on
onnxruntime's CPU execution provider, feeding test_data_set_0 and comparing
each output as paxc-conformance compares (elementwise, absolute 1e-5 plus
relative 1e-3, NaN equal to NaN, the element type and size exact). A test
onnxruntime cannot load or run counts as refused.

  test/models/ort_node_tests.py [--node-dir DIR] [--write FILE]
        [--paxc-log LOG] [--need 0.95]

--write FILE: the names of the tests onnxruntime passes, one per line (the
list test/lit/conformance keeps, test/models/ort_node_passed.txt).
--paxc-log LOG: `paxc-conformance -v` output (or the --write list instead
of running onnxruntime with --ort-list FILE): prints how many of
onnxruntime's passes paxc passes, which it fails and, by op, which it
skips; exits 1 when paxc fails one, or passes fewer than --need of them.
"""
import argparse
import collections
import os
import re
import sys

import numpy as np

NODE_DIR = "/usr/share/libonnx-testdata/data/node"


def load_tensor(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def same(got, want):
    """paxc-conformance's comparison."""
    if got.dtype != want.dtype or got.size != want.size:
        return False
    if want.dtype.kind in "biu" or want.dtype == np.bool_:
        return np.array_equal(got.reshape(-1), want.reshape(-1))
    if want.dtype.kind not in "fc":
        return np.array_equal(got.reshape(-1), want.reshape(-1))
    a = got.reshape(-1).astype(np.float64)
    b = want.reshape(-1).astype(np.float64)
    nan = np.isnan(a) & np.isnan(b)
    close = (a == b) | (np.abs(a - b) <= 1e-5 + 1e-3 * np.abs(b))
    return bool(np.all(nan | close))


def run_ort(test_dir):
    """'pass', 'fail' or 'refused: why' for one node test on onnxruntime."""
    import onnx
    import onnxruntime as ort
    data = os.path.join(test_dir, "test_data_set_0")
    try:
        model = onnx.load(os.path.join(test_dir, "model.onnx"))
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        inits = {i.name for i in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in inits]
        feeds = {n: load_tensor(os.path.join(data, f"input_{k}.pb"))
                 for k, n in enumerate(names)}
        outs = sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001 - any refusal is a refusal
        return "refused: " + str(e).splitlines()[0][:120]
    for k, got in enumerate(outs):
        path = os.path.join(data, f"output_{k}.pb")
        if not os.path.exists(path):
            return "refused: no stored output"
        try:
            want = load_tensor(path)
        except Exception as e:  # noqa: BLE001
            return "refused: " + str(e).splitlines()[0][:120]
        if not isinstance(got, np.ndarray) or not same(np.asarray(got), want):
            return "fail"
    return "pass"


def paxc_outcomes(log):
    """Test name -> 'PASS', 'FAIL' or 'SKIP reason' from paxc-conformance -v."""
    out = {}
    for line in open(log):
        m = re.match(r"(PASS|FAIL|SKIP) (\S+?)(?::\s*(.*))?$", line.rstrip())
        if m:
            out[m.group(2)] = m.group(1) + (" " + m.group(3) if m.group(3) else "")
    return out


def compare(ort_passed, paxc, need):
    both = [t for t in ort_passed if paxc.get(t, "").startswith("PASS")]
    failed = [t for t in ort_passed if paxc.get(t, "").startswith("FAIL")]
    skipped = collections.Counter()
    for t in ort_passed:
        o = paxc.get(t, "SKIP not run")
        if o.startswith("SKIP"):
            op = re.sub(r"^test_", "", t).split("_")[0]
            skipped[op] += 1
    share = len(both) / max(len(ort_passed), 1)
    print(f"onnxruntime passes {len(ort_passed)}; paxc passes {len(both)} of them "
          f"({share:.1%}), fails {len(failed)}, skips {len(ort_passed) - len(both) - len(failed)}")
    for t in failed:
        print(f"  paxc FAILS {t}: {paxc[t]}")
    if skipped:
        print("  skipped by paxc, by op (first word of the test name): " +
              ", ".join(f"{op} {n}" for op, n in skipped.most_common()))
    return 0 if not failed and share >= need else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node-dir", default=NODE_DIR)
    ap.add_argument("--write")
    ap.add_argument("--ort-list", help="onnxruntime's passes, from --write")
    ap.add_argument("--paxc-log")
    ap.add_argument("--need", type=float, default=0.95)
    a = ap.parse_args()
    if a.ort_list:
        passed = [l.strip() for l in open(a.ort_list) if l.strip()]
    else:
        tests = sorted(d for d in os.listdir(a.node_dir)
                       if os.path.isdir(os.path.join(a.node_dir, d)))
        counts = collections.Counter()
        passed = []
        for t in tests:
            r = run_ort(os.path.join(a.node_dir, t))
            counts[r.split(":")[0]] += 1
            if r == "pass":
                passed.append(t)
        print(f"onnxruntime: {counts['pass']} passed, {counts['fail']} failed, "
              f"{counts['refused']} refused, of {len(tests)}")
        if a.write:
            with open(a.write, "w") as f:
                f.write("".join(t + "\n" for t in passed))
    if a.paxc_log:
        return compare(passed, paxc_outcomes(a.paxc_log), a.need)
    return 0


if __name__ == "__main__":
    sys.exit(main())
