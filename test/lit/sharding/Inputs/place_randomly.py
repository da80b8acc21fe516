"""Gives every op of a strategy JSON a seeded random device offset (a
multiple of its device count that keeps it inside --gpus): a strategy whose
ops run on other devices than the first.

  place_randomly.py STRATEGY.json --gpus=G [--seed=S] -o OUT.json
"""
import argparse
import json
import math
import random

ap = argparse.ArgumentParser()
ap.add_argument("strategy")
ap.add_argument("--gpus", type=int, required=True)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("-o", "--output", required=True)
a = ap.parse_args()
s = json.load(open(a.strategy))
rng = random.Random(a.seed)
placed = 0
for op in s["ops"]:
    k = math.prod(op["config"].values()) if op["config"] else 1
    offset = rng.randrange(0, a.gpus // k) * k
    op.pop("offset", None)
    if offset:
        op["offset"] = offset
        placed += 1
json.dump(s, open(a.output, "w"), indent=1)
print(f"place_randomly.py: {placed} of {len(s['ops'])} ops placed off device 0")
