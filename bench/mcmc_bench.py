#!/usr/bin/env python3
"""FlexFlow's search in paxc: --solver=mcmc end to end, with delta and with
full simulation of every proposal, against FlexFlow's Table 4.

For each model and GPU count, runs `paxc MODEL --gpus=N --solver=mcmc
--emit=strategy` twice in the same run, once as it is (each proposal priced
by delta simulation) and once with --mcmc-full-simulation (each proposal's
whole step simulated again), with the same seed and proposals, and prints
the wall time of each, delta's speedup, the proposals made, and the
simulated step of the answer (both runs must find the same strategy: the
two simulations give the same timelines). The last column is FlexFlow's
search time with delta simulation from its Table 4 (Jia et al., SysML
2019; seconds, on their machine, 10 random starts averaged) where the
paper has the model and count.

  python3 bench/mcmc_bench.py [--gpus 4,8,16,32,64] [--models NAME,...]
                              [--steps N] [--bin DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "tools", "models", "paxmodels.py")
LIGHT = os.path.join(ROOT, "test", "models", "onnx-light")

# FlexFlow, Table 4, delta simulation (seconds).
FLEXFLOW = {
    "alexnet": {4: 0.04, 8: 0.13, 16: 0.48, 32: 1.8, 64: 5.9},
    "resnet50": {4: 0.4, 8: 1.4, 16: 7.3, 32: 33, 64: 158},
    "inception_v3": {4: 4.1, 8: 17, 16: 77, 32: 298, 64: 1278},
    "lstm": {4: 9.2, 8: 31, 16: 121, 32: 342, 64: 969},  # their RNNLM
}


def model_path(name, work):
    if name == "alexnet":
        return os.path.join(LIGHT, "light_bvlc_alexnet.onnx"), ["--batch=64"]
    if name == "resnet50":
        return os.path.join(LIGHT, "light_resnet50.onnx"), ["--batch=64"]
    path = os.path.join(work, name + ".onnx")
    if not os.path.exists(path):
        subprocess.run([sys.executable, GEN, name, "-o", path], check=True,
                       capture_output=True)
    return path, []


def search(binary, path, extra, gpus, steps, full):
    cmd = [os.path.join(binary, "paxc"), path, f"--gpus={gpus}",
           "--solver=mcmc", "--emit=strategy", f"--mcmc-steps={steps}",
           "--mode=train"] + extra
    if full:
        cmd.append("--mcmc-full-simulation")
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return seconds, json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="4,8,16,32,64")
    ap.add_argument("--models", default="alexnet,resnet50,inception_v3,lstm")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="paxc-mcmc-")
    print(f"--solver=mcmc, training, --mcmc-steps={a.steps} per chain, 4 "
          "chains; seconds of the whole paxc process")
    print(f"{'model':14} {'gpus':>4} {'delta s':>9} {'full s':>9} "
          f"{'speedup':>8} {'proposals':>9} {'simulated':>12} "
          f"{'vs DP':>6} {'FlexFlow s':>10}")
    for name in a.models.split(","):
        path, extra = model_path(name, work)
        for g in [int(x) for x in a.gpus.split(",")]:
            td, sd = search(a.bin, path, extra, g, a.steps, False)
            tf, sf = search(a.bin, path, extra, g, a.steps, True)
            if sd["ops"] != sf["ops"] or sd["simulated_s"] != sf["simulated_s"]:
                print(f"{name} at {g}: delta and full simulation disagree",
                      file=sys.stderr)
                return 1
            m = sd["mcmc"]
            ff = FLEXFLOW.get(name, {}).get(g)
            print(f"{name:14} {g:4} {td:9.3f} {tf:9.3f} {tf / td:7.1f}x "
                  f"{m['proposals']:9} {sd['simulated_s'] * 1e3:10.3f}ms "
                  f"{m['dp_simulated_s'] / sd['simulated_s']:5.2f}x "
                  f"{ff if ff is not None else '-':>10}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
