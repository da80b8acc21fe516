"""Checks a strategy JSON's simulated_s against its --emit=trace."""
import json
import sys

strategy = json.load(open(sys.argv[1]))
trace = json.load(open(sys.argv[2]))["traceEvents"]
sim = strategy["simulated_s"]
assert sim > 0, sim
assert all(b["simulated_s"] > 0 for b in strategy["baselines"].values()), strategy["baselines"]
print("simulated_s in the strategy and every baseline")
floor = strategy["work_floor_s"]
assert 0 < floor <= min([sim] + [b["simulated_s"] for b in strategy["baselines"].values()]), floor
print("no strategy simulates below the work floor")
end = max(e["ts"] + e["dur"] for e in trace if e["ph"] == "X") * 1e-6
assert abs(end - sim) <= 1e-9 + 1e-6 * sim, (end, sim)
print("the trace ends at simulated_s")
rows = sorted(e["args"]["name"] for e in trace if e["ph"] == "M")
gpus = [r for r in rows if not r.endswith("links")]
links = [r for r in rows if r.endswith("links")]
assert len(gpus) == len(links) == strategy["gpus"], rows
print(f"rows: {len(gpus)} GPUs and their links")
for name, b in [("chosen", strategy)] + sorted(strategy["baselines"].items()):
    assert b["simulated_s"] <= b["cost_s"] * (1 + 1e-12), (name, b)
    if b["simulated_s"] < b["cost_s"] * (1 - 1e-6):
        print(f"{name} simulated shorter than its additive cost")
