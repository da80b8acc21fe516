#!/usr/bin/env python3
"""Checks paxc's parameter count on every PyTorch export against torch's.

test/models/torch/parameters.json (written by
tools/models/torch_parameters.py, which rebuilds the torch models) holds,
per export, torch's parameter count and the tensors by which the file
differs from torch's parameters: folded into other tensors, written twice,
computed by the exporter, cut to the rows used, buffers the file holds like
weights, or missed by paxc. This
check needs no torch. For every export it asserts

  * paxc --emit=summary counts torch's parameters, minus the folded and
    missed ones, plus the extra copies, the computed tensors, the cuts and
    the buffers
    (so every difference from torch's count is one of those tensors);
  * paxc misses no parameter of two or more elements (one-element
    parameters look like the scalar constants exporters write);

and prints one line per export and a summary; exits non-zero on any
failure.

  check_torch_parameters.py [--paxc build/bin/paxc] [--only SUBSTR]
                            [--markdown FILE]

--markdown writes the table of docs/TORCH_PARAMETERS.md: one row per export
with torch's count, paxc's, and every tensor that makes the difference.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_matrix  # noqa: E402

CORPUS = torch_matrix.CORPUS


def total(entries, twice=False):
    return sum(e["elements"] * (len(e["file"]) - 1 if twice else 1)
               for e in entries)


def expected(r):
    """torch's count adjusted by the listed differences."""
    return (r["torch"] - total(r["folded"]) - total(r["missed"]) +
            total(r["twice"], twice=True) + total(r["computed"]) +
            total(r["cut"]) + total(r.get("buffer", [])))


KINDS = [("folded", "folded", -1), ("missed", "missed", -1),
         ("twice", "written twice", +1), ("computed", "computed", +1),
         ("cut", "cut", +1), ("buffer", "buffer", +1)]


def short(name):
    """A torch parameter name without the wrapper's prefix."""
    return name[2:] if name.startswith("m.") else name


def differences(r):
    """The markdown cell listing what makes paxc's count differ from
    torch's: per kind, the signed element total and the tensors."""
    parts = []
    for key, label, sign in KINDS:
        entries = r.get(key, [])
        if not entries:
            continue
        n = total(entries, twice=key == "twice") * sign
        names = []
        for e in entries:
            if key == "cut":
                names.append(f"{short(e['of'])} to {e['shape']}")
            elif key == "computed":
                names.append(f"`{e['file']}` {e['elements']}")
            else:
                names.append(short(e["torch"]))
        shown = ", ".join(names[:3])
        if len(names) > 3:
            shown += f" and {len(names) - 3} more"
        parts.append(f"{label} {n:+d} ({len(entries)}: {shown})")
    return "; ".join(parts) if parts else "equal"


def write_markdown(path, rows):
    with open(path, "w") as f:
        f.write("| export | torch | paxc | differences (elements; tensors) |\n"
                "|---|---|---|---|\n")
        for name, r, got in rows:
            f.write(f"| {name} | {r['torch']} | {got} | {differences(r)} |\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paxc", default=os.path.join(torch_matrix.ROOT, "build",
                                                   "bin", "paxc"))
    ap.add_argument("--only", default="")
    ap.add_argument("--markdown", help="write the per-export table here")
    args = ap.parse_args()
    table = json.load(open(os.path.join(CORPUS, "parameters.json")))
    failed = equal = 0
    rows = []
    names = [e for e in torch_matrix.exports() if args.only in e]
    for name in names:
        if name not in table:
            print(f"FAIL {name}: not in parameters.json "
                  "(rerun tools/models/torch_parameters.py)")
            failed += 1
            continue
        r = table[name]
        d = os.path.join(CORPUS, name)
        p = subprocess.run([args.paxc, os.path.join(d, "model.onnx"),
                            "--emit=summary", "--format=json", "--quiet"] +
                           torch_matrix.dim_bindings(d),
                           capture_output=True, text=True)
        if p.returncode:
            print(f"FAIL {name}: paxc: {p.stderr.strip()}")
            failed += 1
            continue
        got = json.loads(p.stdout)["parameters"]
        want = expected(r)
        big_missed = [m["torch"] for m in r["missed"] if m["elements"] > 1]
        why = []
        if got != want:
            why.append(f"paxc counts {got}, torch's {r['torch']} with the "
                       f"listed differences makes {want}")
        if big_missed:
            why.append("paxc misses " + ", ".join(big_missed))
        if why:
            print(f"FAIL {name}: " + "; ".join(why))
            failed += 1
            continue
        equal += got == r["torch"]
        rows.append((name, r, got))
        print(f"ok   {name}: {got} (torch {r['torch']})")
    print(f"check_torch_parameters.py: {len(names) - failed} of {len(names)} "
          f"exports explained ({equal} equal to torch's count), "
          f"{failed} failed")
    if args.markdown:
        write_markdown(args.markdown, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
