"""training_precision.test's checks: `losses FP32 OTHER...` compares each
run's last loss with fp32's (paxrun --train's `step N: loss X` lines);
`scale DIR` prints the loss-scale state of a checkpoint."""
import os
import re
import sys

import onnx
from onnx import numpy_helper


def losses(path):
    text = open(path).read()
    return [float(x) for x in re.findall(r"step \d+: loss ([0-9.eE+-]+)", text)]


def main():
    if sys.argv[1] == "losses":
        want = losses(sys.argv[2])[-1]
        for path in sys.argv[3:]:
            got = losses(path)[-1]
            rel = abs(got - want) / abs(want)
            verdict = "within 1%" if rel <= 0.01 else f"off by {rel:.2%}"
            print(f"{os.path.basename(path)}: the last loss {verdict} of fp32's")
        return
    d = sys.argv[2]
    for index in sorted(f for f in os.listdir(d) if f.endswith(".txt") and f != "checkpoint.txt"):
        for line in open(os.path.join(d, index)):
            fields = line.rstrip("\n").split("\t")
            if fields[-1].startswith("amp/"):
                t = onnx.load_tensor(os.path.join(d, fields[0]))
                print(fields[-1], f"{float(numpy_helper.to_array(t)):.3g}")


if __name__ == "__main__":
    main()
