#!/usr/bin/env python3
"""Writes a forced strategy for paxc --strategy=FILE.

Reads a strategy JSON (paxc MODEL --gpus=G --emit=strategy), whose ops list
every iteration dim with its extent, kind and whether a plan can split it,
and replaces each op's configuration by a pattern:

  channel   split the second parallel dim (output channels, features)
  spatial   split the third parallel dim (rows of an image, sequence)
  reduce    split a reduction dim (partial sums reduced by all_reduce)
  batch-channel  the first parallel dim by 2 and the second by G/2
  random    a seeded random legal configuration per op (several dims)

Factors are the largest divisor of the extent that keeps the op within G
devices. Ops without such a dim keep no split.

  force_strategy.py STRATEGY.json PATTERN --gpus=G [--seed=S] -o OUT.json
"""
import argparse
import json
import random
import sys


def divisor(extent, limit):
    """The largest divisor of extent in [2, limit], or 1."""
    for f in range(min(extent, limit), 1, -1):
        if extent % f == 0:
            return f
    return 1


def runnable(dims):
    return [d for d in dims if d["splittable"] == "yes"]


def force(op, pattern, gpus, rng):
    dims = op["dims"]
    par = [d for d in runnable(dims) if d["kind"] == "par"]
    red = [d for d in runnable(dims) if d["kind"] == "red"]
    allpar = [d for d in dims if d["kind"] == "par"]
    config = {}

    def split(d, limit):
        f = divisor(d["extent"], limit)
        if f > 1:
            config[d["name"]] = f
        return f

    if pattern == "channel":
        cands = [d for d in par if allpar.index(d) == 1] or par[1:2]
        for d in cands[:1]:
            split(d, gpus)
    elif pattern == "spatial":
        cands = [d for d in par if allpar.index(d) >= 2]
        for d in cands[:1]:
            split(d, gpus)
    elif pattern == "reduce":
        for d in red[:1]:
            split(d, gpus)
    elif pattern == "batch-channel":
        used = 1
        if par and allpar.index(par[0]) == 0:
            used = split(par[0], 2)
        rest = [d for d in par if allpar.index(d) == 1]
        for d in rest[:1]:
            split(d, gpus // used)
    elif pattern == "random":
        cands = runnable(dims)
        rng.shuffle(cands)
        left = gpus
        for d in cands[: rng.randint(0, 3)]:
            divs = [f for f in range(2, min(d["extent"], left) + 1)
                    if d["extent"] % f == 0 and left % f == 0]
            if divs:
                f = rng.choice(divs)
                config[d["name"]] = f
                left //= f
    else:
        sys.exit(f"force_strategy.py: unknown pattern '{pattern}'")
    return config


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("strategy")
    ap.add_argument("pattern")
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    with open(a.strategy) as f:
        s = json.load(f)
    rng = random.Random(a.seed)
    splits = 0
    for op in s["ops"]:
        op["config"] = force(op, a.pattern, a.gpus, rng)
        splits += bool(op["config"])
    with open(a.output, "w") as f:
        json.dump(s, f, indent=1)
    print(f"force_strategy.py: {a.pattern}: {splits} of {len(s['ops'])} ops "
          "split")


if __name__ == "__main__":
    main()
