"""Splits, in a training strategy, each top_k gradient (a scatter_add with
a dim `k`: the k results summed into x's positions) 2 ways over k, so that
the devices add partial sums.

  split_topk_grad.py IN.json OUT.json
"""
import json, sys
d = json.load(open(sys.argv[1]))
n = 0
for op in d["ops"]:
    k = [x for x in op["dims"] if x["name"] == "k" and x["extent"] % 2 == 0]
    if op["kind"] == "scatter_add" and k:
        op["config"] = {"k": 2}
        n += 1
json.dump(d, open(sys.argv[2], "w"))
print(f"split {n} top_k gradients over k")
