#!/usr/bin/env python3
"""Does MCMC's simulated gain over the DP hold in measured runs?

On this machine measured for paxc (bench/sim_accuracy.py's link and cost
probes), for each model: the DP's plan and MCMC's plan (`--solver=mcmc`,
which may also place ops on other devices than the first), each's simulated
step, and each's measured step on R MPI ranks (rounds over both plans, the
median of the slowest rank's program). Prints the simulated gain
(DP / MCMC) next to the measured gain.

  python3 bench/mcmc_measured.py [--ranks 2] [--threads 1] [--rounds 5]
                                 [--repeat 4]
                                 [--models dual-encoder,inception,lstm]
                                 [--mcmc-steps N] [--json FILE]
"""
import argparse
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_accuracy import GEN, ROOT, Machine, compile_plan, run  # noqa: E402


def dual_encoder(path, seq=32, width=512, vocab=4096):
    """Two LSTM encoders of one sequence (batch 1) whose last states are
    added and projected to the vocabulary: branches no split can share out
    (a recurrence is only ever split along its batch), which placement runs
    at once."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)

    def weight(name, *shape):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * 0.05).astype(np.float32), name)

    inits, nodes = [], []
    for e in range(2):
        inits += [weight(f"W{e}", 1, 4 * width, width),
                  weight(f"R{e}", 1, 4 * width, width),
                  weight(f"B{e}", 1, 8 * width)]
        nodes.append(helper.make_node(
            "LSTM", ["x", f"W{e}", f"R{e}", f"B{e}"], ["", f"h{e}"],
            hidden_size=width, name=f"encoder{e}/LSTM"))
    inits.append(weight("P", width, vocab))
    nodes += [helper.make_node("Add", ["h0", "h1"], ["h"], name="join/Add"),
              helper.make_node("MatMul", ["h", "P"], ["logits"],
                               name="head/MatMul")]
    graph = helper.make_graph(
        nodes, "dual_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       [seq, 1, width])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       [1, 1, vocab])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def model(name, work):
    """(path, paxc flags) of a model MCMC can improve on a few devices:
    batch 1, where splitting the batch is no option."""
    path = os.path.join(work, name + ".onnx")
    if name == "dual-encoder":
        dual_encoder(path)
        return path, []
    if name == "inception":
        args = ["inception_v3", "--batch", "1"]
    elif name == "lstm":
        args = ["lstm", "--layers", "2", "--hidden", "512", "--seq", "32",
                "--batch", "1", "--vocab", "4096"]
    else:
        sys.exit(f"mcmc_measured.py: unknown model '{name}'")
    run([sys.executable, GEN] + args + ["-o", path])
    return path, []


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--models", default="dual-encoder,inception,lstm")
    ap.add_argument("--mcmc-steps", type=int, default=0)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--json", help="write every number here")
    a = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as work:
        machine = Machine(a.bin, a.ranks, a.threads, work)
        for name in a.models.split(","):
            path, flags = model(name, work)
            base = machine.profile(name, path, flags)
            rows = []
            for solver in ["dp", "mcmc"]:
                plan = os.path.join(work, f"{name}.{solver}.paxplan")
                extra = [f"--solver={solver}"]
                if solver == "mcmc" and a.mcmc_steps:
                    extra.append(f"--mcmc-steps={a.mcmc_steps}")
                sim = compile_plan(base + extra + ["-o", plan])
                err = run(base + extra + ["-o", plan]).stderr
                m = re.search(r"(\d+) op\(s\) placed off device 0", err)
                placed = int(m.group(1)) if m else 0
                rows.append({"solver": solver, "plan": plan,
                             "simulated_s": sim, "placed_ops": placed})
            machine.measure(rows, a.rounds, a.repeat)
            dp, mc = rows
            sim_gain = dp["simulated_s"] / mc["simulated_s"]
            meas_gain = dp["measured_s"] / mc["measured_s"]
            print(f"\n{name} on {a.ranks} ranks:")
            for r in rows:
                print(f"  {r['solver']:<5} simulated {r['simulated_s'] * 1e3:9.3f}"
                      f" ms  measured {r['measured_s'] * 1e3:9.3f} ms  "
                      f"({r['placed_ops']} ops placed off device 0)")
            print(f"  MCMC over the DP: simulated {sim_gain:.3f}x, measured "
                  f"{meas_gain:.3f}x")
            for r in rows:
                del r["plan"]
            results[name] = {"rows": rows, "simulated_gain": sim_gain,
                             "measured_gain": meas_gain}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
