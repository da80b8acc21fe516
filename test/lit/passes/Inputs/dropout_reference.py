#!/usr/bin/env python3
"""Checks a run of grad_models.py's dropout model against its definition.

  dropout_reference.py MODEL INPUT_DIR PAX_DIR

PAX_DIR holds paxrun's outputs (logits, then the mask). The mask must drop
a fraction of the elements near the ratio (0.3: within 0.05 over 512), and
the logits must equal numpy's perceptron with that mask, the kept elements
scaled by 1 / (1 - ratio), within 1e-5 of the largest logit.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper as nh


def main():
    model, inputs, pax = sys.argv[1:4]
    w = {t.name: nh.to_array(t) for t in onnx.load(model).graph.initializer}
    x = nh.to_array(onnx.load_tensor(f"{inputs}/input_0.pb")).astype(np.float64)
    logits = nh.to_array(onnx.load_tensor(f"{pax}/output_0.pb"))
    mask = nh.to_array(onnx.load_tensor(f"{pax}/output_1.pb"))
    assert mask.dtype == bool, mask.dtype
    ratio = float(w["ratio"])
    dropped = 1 - mask.mean()
    assert abs(dropped - ratio) < 0.05, f"dropped {dropped:.3f}, ratio {ratio}"
    r = np.maximum(x @ w["W1"] + w["b1"], 0)
    want = (r * mask / (1 - ratio)) @ w["W2"] + w["b2"]
    err = np.abs(logits - want).max() / np.abs(want).max()
    assert err < 1e-5, f"logits differ by {err:.2e}"
    print(f"dropout: {dropped:.3f} of {mask.size} dropped, logits within {err:.1e}")


if __name__ == "__main__":
    main()
