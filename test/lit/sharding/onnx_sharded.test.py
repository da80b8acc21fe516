"""Checks an ONNX model paxc annotated (--emit=onnx-sharded) against the
strategy it was annotated with."""
import json
import math
import sys

import onnx

model = onnx.load(sys.argv[1])
strategy = json.load(open(sys.argv[2]))
onnx.checker.check_model(model)
assert model.ir_version == 11, model.ir_version
(config,) = model.configuration
n = config.num_devices
assert n == strategy["gpus"] and len(config.device) == n
outputs = {o for node in model.graph.node for o in node.output}
groups = split = False
annotated = 0
for node in model.graph.node:
    if not node.device_configurations:
        continue
    annotated += 1
    (dc,) = node.device_configurations
    assert dc.configuration_id == config.name
    for spec in dc.sharding_spec:
        assert spec.tensor_name in node.output, (spec.tensor_name, node.output)
        shards = math.prod(s.num_shards for d in spec.sharded_dim
                           for s in d.simple_sharding)
        assert len(spec.device) == shards, (node.name, spec)
        group = {e.key: list(e.value) for e in spec.index_to_device_group_map}
        held = []
        for d in spec.device:
            members = group.get(d, [d])
            assert all(0 <= m < n for m in members), (node.name, spec)
            held += members
            groups |= len(members) > 1
        assert len(held) == len(set(held)), (node.name, spec)
        for d in spec.sharded_dim:
            (s,) = d.simple_sharding
            assert s.dim_value % s.num_shards == 0
            split = True
print(f"IR {model.ir_version}, checker ok, configuration '{config.name}' of "
      f"{n} devices, {annotated} nodes annotated")
print("copies in groups:", "yes" if groups else "no")
print("split outputs:", "yes" if split else "no")
