"""Checks a --plan-stats JSON against the rules the test states."""
import argparse
import json

ap = argparse.ArgumentParser()
ap.add_argument("stats")
ap.add_argument("--devices", type=int, required=True)
ap.add_argument("--peak-tflops", type=float)
ap.add_argument("--memory-gbps", type=float)
ap.add_argument("--no-roofline", action="store_true")
ap.add_argument("--unfused", help="the same plan's stats without fusion: "
                "fewer kernels and less traffic here, the same ops and least")
ap.add_argument("--source-summary", help="paxc --emit=summary --format=json "
                "of the model with every graph-level fusion off: its "
                "compute_ops are each device's ops")
a = ap.parse_args()
devices = json.load(open(a.stats))["devices"]
assert len(devices) == a.devices, devices
for d in devices:
    assert d["traffic_bytes"] >= d["min_traffic_bytes"] > 0, d
    # by_kind splits the compute kernels: their counts and flops sum to the
    # device's, their traffic to at most its (collectives are in its too).
    kinds = d["by_kind"].values()
    assert sum(k["kernels"] for k in kinds) == d["kernels"], d
    assert abs(sum(k["flops"] for k in kinds) - d["flops"]) <= 1e-9 * d["flops"], d
    assert 0 < sum(k["traffic_bytes"] for k in kinds) <= d["traffic_bytes"], d
    assert ("generated" in d["by_kind"]) == (d["fused_kernels"] > 0), d
    if "roofline_s" in d:
        total = sum(k["roofline_s"] for k in kinds)
        assert abs(total - d["roofline_s"]) <= 1e-9 * d["roofline_s"], d
    else:
        assert all("roofline_s" not in k for k in kinds), d
if a.unfused:
    unfused = json.load(open(a.unfused))["devices"]
    for d, u in zip(devices, unfused, strict=True):
        assert u["kernels"] == u["plan_ops"], (d, u)
        assert u["ops"] == d["ops"] and d["plan_ops"] == u["plan_ops"], (d, u)
        assert d["min_traffic_bytes"] == u["min_traffic_bytes"], (d, u)
        assert 0 < d["fused_kernels"] and d["kernels"] < u["kernels"], (d, u)
        assert d["traffic_bytes"] < u["traffic_bytes"], (d, u)
    print(f"{len(devices)} device(s): fewer kernels and less traffic than "
          "unfused, traffic >= the least")
else:
    for d in devices:
        assert d["plan_ops"] > 0 and d["kernels"] == d["plan_ops"], d
        assert d["ops"] >= d["plan_ops"], d
        assert d["fused_kernels"] == 0, d
    print(f"{len(devices)} device(s): kernels = plan ops, traffic >= the "
          "least, fused 0")
if a.source_summary:
    source_ops = json.load(open(a.source_summary))["compute_ops"]
    # The fusions before the plan (attention, GELU, bias, copies) hand each
    # op they remove to one that stays: the ops before fusion are all there.
    assert all(d["ops"] == source_ops for d in devices), (source_ops, devices)
    print(f"ops before fusion: {source_ops} on each device")
if a.no_roofline:
    assert all("roofline_s" not in d for d in devices), devices
    print("no roofline: the cluster has no memory bandwidth")
else:
    peak, bw = a.peak_tflops * 1e12, a.memory_gbps * 1e9
    for d in devices:
        # Each kernel takes the slower of its flops and its bytes: at least
        # all the flops at the peak, at most that plus all the bytes.
        low = d["flops"] / peak
        high = d["flops"] / peak + d["traffic_bytes"] / bw
        assert low * (1 - 1e-9) <= d["roofline_s"] <= high * (1 + 1e-9), d
        assert d["roofline_s"] > 0, d
    print("roofline between the flops at the peak and that plus the traffic "
          "at the memory bandwidth")
