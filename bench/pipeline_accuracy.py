#!/usr/bin/env python3
"""How well paxc predicts pipelined training steps, against measured runs.

On this machine's MPI ranks (one device each) with the measured links and
per-block costs (as bench/sim_accuracy.py: `paxrun --measure-links`; the
training step's cost probes at each microbatch count, and with
--pipeline=S at each stage count, merged): a GPT-2 training step compiled
without stages (the searched strategy, with 1 and with M microbatches)
and with pipeline stages (every stage count that divides the ranks,
microbatch counts and schedules); each plan's simulated step (paxc's `ms
simulated`: the simulator's timeline of the plan's step, each device's
ops in the plan's order) against its measured step (`mpirun -np R paxrun
PLAN --random-inputs --repeat=K --time` in rounds over every plan, the
median of the slowest rank's program over the runs after each round's
first). Prints the table, the largest and mean error, and the pairs of
plans whose order the simulator keeps.

  python3 bench/pipeline_accuracy.py [--ranks 2] [--threads 1] [--rounds 3]
                                     [--repeat 4] [--layers 4] [--hidden 128]
                                     [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim_accuracy as sa  # noqa: E402

LOSS = ["--mode=train", "--loss=cross-entropy", "--lr=0.01"]


def gpt2(work, a):
    path = os.path.join(work, "gpt2.onnx")
    subprocess.run([sys.executable, sa.GEN, "gpt2", "--layers",
                    str(a.layers), "--hidden", str(a.hidden), "--heads", "4",
                    "--seq", str(a.seq), "--batch", str(a.batch), "--vocab",
                    "1024", "--weights", "random", "-o", path], check=True,
                   capture_output=True)
    return path


def probes(ranks, counts):
    """(name, flags) of every cost probe the plans need: the step at each
    microbatch count, on every rank and, pipelined, on one stage's ranks
    (a stage's program: its replicas and configurations)."""
    out = []
    for m in counts:
        mb = [f"--microbatches={m}"] if m > 1 else []
        out.append((f"m{m}", mb))
        for s in range(2, ranks + 1):
            if ranks % s == 0 and m > 1:
                out.append((f"s{s}-m{m}", mb + [f"--pipeline={s}"]))
    return out


def profile(machine, path, counts):
    """paxc's options for the model with its blocks measured in every
    probe (a plan in M microbatches runs blocks of 1/M of the batch; a
    pipelined one its stage's), the databases merged."""
    merged, seen = None, set()
    for name, flags in probes(machine.ranks, counts):
        base = machine.profile(f"gpt2-{name}", path, LOSS + flags)
        db = json.load(open(base[-1].split("=", 1)[1]))
        if merged is None:
            merged = dict(db, ops=[])
        for e in db["ops"]:
            if e["key"] not in seen:
                seen.add(e["key"])
                merged["ops"].append(e)
    out = os.path.join(machine.work, "gpt2.merged-costs.json")
    with open(out, "w") as f:
        json.dump(merged, f)
    return [machine.paxc, path, f"--gpus={machine.ranks}",
            f"--cluster={machine.cluster}"] + LOSS + [f"--cost-db={out}"]


def variants(ranks):
    """(label, paxc flags) of every plan measured."""
    out = [("flat", []), ("flat-m4", ["--microbatches=4"])]
    for s in range(2, ranks + 1):
        if ranks % s:
            continue
        for m in (2, 4, 8):
            for k in ("gpipe", "1f1b", "interleaved"):
                out.append((f"pipe{s}-m{m}-{k}",
                            [f"--pipeline={s}", f"--microbatches={m}",
                             f"--schedule={k}"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--bin", default=os.path.join(sa.ROOT, "build", "bin"))
    ap.add_argument("--json", help="write every number here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        machine = sa.Machine(a.bin, a.ranks, a.threads, work)
        path = gpt2(work, a)
        base = profile(machine, path, [1, 2, 4, 8])
        plans = []
        for label, flags in variants(a.ranks):
            plan = os.path.join(work, label + ".paxplan")
            plans.append((label, plan,
                          sa.compile_plan(base + flags + ["-o", plan])))
        rows = sa.distinct_rows(plans)
        machine.measure(rows, a.rounds, a.repeat)
        for row in rows:
            del row["plan"]
        result = sa.report("gpt2 training step", rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
