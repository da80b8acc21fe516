"""Forces GShard's expert parallelism on a strategy of a Mixtral model
(tools/models/paxmodels.py mixtral): the dispatch and combine einsums split
over the batch (tokens stay where they are), the experts' MLPs (their
einsums and the pointwise ops between them) over the expert dim, so that
tokens go to their experts and back by all-to-all.

  gshard_strategy.py IN.json GPUS OUT.json
"""
import json
import sys

d = json.load(open(sys.argv[1]))
gpus = int(sys.argv[2])
for op in d["ops"]:
    name = op["name"]
    if name.endswith("/experts/Einsum") or name.endswith("/mlp/Einsum"):
        op["config"] = {"b": gpus}
    elif "/mlp/experts/" in name:
        op["config"] = {op["dims"][0]["name"]: gpus}
json.dump(d, open(sys.argv[3], "w"))
