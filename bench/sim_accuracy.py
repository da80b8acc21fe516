#!/usr/bin/env python3
"""How well paxc's simulator predicts measured runs (FlexFlow's claim: within
30%, and the order of strategies kept).

On this machine, for a CNN, a transformer and the LSTM language model:
  1. profile: `paxc MODEL --gpus=R --emit=cost-probe` and `mpirun -np R
     paxrun PROBE --write-cost-db` (every rank times the blocks at once,
     with the threads each rank will have, as they will compute);
  2. links: `mpirun -np R paxrun --measure-links` (latency, bandwidth, the
     rate partial sums are added at, one device's matrix-product rate);
  3. strategies: the DP's, data-parallel, expert and MCMC searches with the
     cost database, and forced ones (channel, reduce, spatial, random
     seeds), each distinct plan once;
  4. each plan's simulated step (paxc) against its measured step: `mpirun
     -np R paxrun PLAN --repeat=K --time` in rounds over every strategy (the
     machine's drifts reach all alike), the median over every round's runs
     but its first of the slowest rank's program.
Prints a table per model: simulated, measured, error, and the pairs of
strategies whose order the simulator keeps (pairs measured within the
noise, 3%, count as kept either way). --json writes every number.

  python3 bench/sim_accuracy.py [--ranks 2] [--threads 1] [--repeat 4]
                                [--rounds 3]
                                [--models cnn,transformer,lstm] [--bin DIR]
                                [--json FILE] [--traces DIR]
"""
import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "tools", "models", "paxmodels.py")
FORCE = os.path.join(ROOT, "tools", "models", "force_strategy.py")
LIGHT = os.path.join(ROOT, "test", "models", "onnx-light")
NOISE = 0.03


def model(name, work):
    """(path, paxc flags) of a benchmark model."""
    if name == "cnn":
        return os.path.join(LIGHT, "light_resnet50.onnx"), ["--batch=8"]
    path = os.path.join(work, name + ".onnx")
    if name == "transformer":
        args = ["gpt2", "--layers", "2", "--hidden", "256", "--heads", "4",
                "--seq", "64", "--batch", "8", "--vocab", "4096"]
    elif name == "lstm":
        args = ["lstm", "--layers", "2", "--hidden", "512", "--seq", "32",
                "--batch", "16", "--vocab", "4096"]
    else:
        sys.exit(f"sim_accuracy.py: unknown model '{name}'")
    subprocess.run([sys.executable, GEN] + args + ["-o", path], check=True,
                   capture_output=True)
    return path, []


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    return p


def mpirun(ranks):
    exe = "mpirun"
    version = subprocess.run([exe, "--version"], capture_output=True,
                             text=True).stdout
    flags = ["--allow-run-as-root", "--oversubscribe"] \
        if "Open MPI" in version or "OpenRTE" in version else []
    return [exe] + flags + ["-np", str(ranks)]


class Machine:
    """This machine measured for paxc: the link probe's cluster, and per
    model the cost probe's database."""

    def __init__(self, binary, ranks, threads, work):
        self.paxc = os.path.join(binary, "paxc")
        self.paxrun = os.path.join(binary, "paxrun")
        self.mpi = mpirun(ranks)
        self.ranks = ranks
        self.threads = f"--threads={threads}"
        self.work = work
        self.cluster = os.path.join(work, "cluster.json")
        out = run(self.mpi + [self.paxrun, f"--measure-links={self.cluster}",
                              self.threads])
        print(out.stderr.strip())

    def profile(self, name, path, flags):
        """paxc's options for the model with its measured costs."""
        probe = os.path.join(self.work, name + ".probe.paxplan")
        db = os.path.join(self.work, name + ".costs.json")
        run([self.paxc, path, f"--gpus={self.ranks}", "--emit=cost-probe",
             "-o", probe] + flags)
        # Every rank times the probe at once, as they will compute.
        print(run(self.mpi + [self.paxrun, probe, f"--write-cost-db={db}",
                              self.threads, "--repeat=5"]).stderr.strip())
        return [self.paxc, path, f"--gpus={self.ranks}",
                f"--cluster={self.cluster}"] + flags + [f"--cost-db={db}"]

    def measure(self, rows, rounds, repeat):
        """Each row's plan run on the ranks in rounds over every row (the
        machine's drifts reach them all alike; each round's first run warms
        up): measured_s, the median of the slowest rank's program."""
        for row in rows:
            row["runs_s"] = []
        for _ in range(rounds):
            for row in rows:
                out = run(self.mpi + [self.paxrun, row["plan"],
                                      "--random-inputs", self.threads,
                                      f"--repeat={repeat}", "--time"])
                times = [float(m) for m in re.findall(
                    r"([0-9.]+) s the slowest rank's program", out.stderr)]
                row["runs_s"] += times[1:] or times
        for row in rows:
            row["measured_s"] = statistics.median(row["runs_s"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads per rank (and for the profile)")
    ap.add_argument("--repeat", type=int, default=4,
                    help="runs of a plan per round (the first warms up)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds over every strategy")
    ap.add_argument("--models", default="cnn,transformer,lstm")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--traces", help="write each model's DP plan's simulated "
                    "and measured traces here")
    a = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as work:
        machine = Machine(a.bin, a.ranks, a.threads, work)
        paxrun, mpi = machine.paxrun, machine.mpi
        for name in a.models.split(","):
            path, flags = model(name, work)
            base = machine.profile(name, path, flags)
            plans = []  # (label, plan path, simulated seconds)
            for solver in ["dp", "data-parallel", "expert", "mcmc"]:
                plan = os.path.join(work, f"{name}.{solver}.paxplan")
                sim = compile_plan(base + [f"--solver={solver}", "-o", plan])
                plans.append((solver, plan, sim))
            searched = os.path.join(work, name + ".strategy.json")
            run(base + ["--emit=strategy", "-o", searched])
            for pattern, seed in [("channel", 1), ("reduce", 1),
                                  ("spatial", 1), ("batch-channel", 1),
                                  ("random", 1), ("random", 2),
                                  ("random", 3)]:
                label = pattern + (f"-{seed}" if pattern == "random" else "")
                forced = os.path.join(work, f"{name}.{label}.json")
                plan = os.path.join(work, f"{name}.{label}.paxplan")
                run([sys.executable, FORCE, searched, pattern,
                     f"--gpus={a.ranks}", f"--seed={seed}", "-o", forced])
                try:
                    sim = compile_plan(base + [f"--strategy={forced}", "-o",
                                               plan])
                except RuntimeError:
                    continue  # not a plan this model can run
                plans.append((label, plan, sim))
            rows = distinct_rows(plans)
            machine.measure(rows, a.rounds, a.repeat)
            for row in rows:
                del row["plan"]
            if a.traces:
                traces(a, mpi, name, base, paxrun, work)
            results[name] = report(name, rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


def distinct_rows(plans):
    """A row per distinct plan of \p plans ((label, plan path, simulated
    seconds)); a plan equal to an earlier one adds its label there."""
    rows, seen = [], {}
    for label, plan, sim in plans:
        digest = hashlib.sha256(open(plan, "rb").read()).hexdigest()
        if digest in seen:
            seen[digest]["also"].append(label)
            continue
        row = {"strategy": label, "also": [], "simulated_s": sim,
               "plan": plan, "runs_s": []}
        seen[digest] = row
        rows.append(row)
    return rows


def compile_plan(cmd):
    """Runs paxc writing a plan; its simulated step, seconds."""
    err = run(cmd).stderr
    m = re.search(r"([0-9.]+) ms simulated", err)
    if not m:
        raise RuntimeError("paxc did not say the simulated step:\n" + err)
    return float(m.group(1)) * 1e-3


def traces(a, mpi, name, base, paxrun, work):
    """The DP plan's simulated step and its measured run on the ranks, as
    Chrome/Perfetto traces (tools/models/render_trace.py draws them)."""
    os.makedirs(a.traces, exist_ok=True)
    sim = os.path.join(a.traces, f"{name}_simulated.json")
    run(base + ["--emit=trace", "-o", sim])
    plan = os.path.join(work, f"{name}.dp.paxplan")
    meas = os.path.join(a.traces, f"{name}_measured.json")
    run(mpi + [paxrun, plan, "--random-inputs", f"--threads={a.threads}",
               "--repeat=3", f"--trace={meas}"])


def report(name, rows):
    print(f"\n{name}: {len(rows)} distinct strategies on the measured "
          "cluster")
    print(f"  {'strategy':<28} {'simulated ms':>13} {'measured ms':>12} "
          f"{'error':>7}")
    errors = []
    for r in rows:
        err = (r["simulated_s"] - r["measured_s"]) / r["measured_s"]
        errors.append(abs(err))
        label = "=".join([r["strategy"]] + r["also"])
        print(f"  {label:<28} {r['simulated_s'] * 1e3:13.3f} "
              f"{r['measured_s'] * 1e3:12.3f} {100 * err:+6.1f}%")
    kept = total = 0
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            mi, mj = rows[i]["measured_s"], rows[j]["measured_s"]
            si, sj = rows[i]["simulated_s"], rows[j]["simulated_s"]
            total += 1
            tie = abs(mi - mj) <= NOISE * max(mi, mj)
            kept += tie or (mi < mj) == (si < sj)
    print(f"  largest error {100 * max(errors):.1f}%, mean "
          f"{100 * statistics.mean(errors):.1f}%; order kept for {kept} of "
          f"{total} pairs (pairs measured within {100 * NOISE:.0f}% count "
          "as kept)")
    return {"rows": rows, "max_error": max(errors),
            "mean_error": statistics.mean(errors), "pairs_kept": kept,
            "pairs": total}


if __name__ == "__main__":
    main()
