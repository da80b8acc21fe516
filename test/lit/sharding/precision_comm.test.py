"""Compares the communication of three reports: fp32, bf16 with the
gradients summed in bf16, bf16 with them summed in fp32."""
import re
import sys


def mib(path):
    text = open(path).read()
    m = re.search(r"communication:\s+([0-9.]+) MiB", text)
    if not m:
        sys.exit(f"{path}: no communication line")
    return float(m.group(1))


fp32, low, g32 = (mib(p) for p in sys.argv[1:4])
if fp32 <= 0:
    sys.exit("fp32 moves nothing: the test needs a model that communicates")
print(f"fp32 {fp32} MiB, low {low} MiB, fp32 reduce {g32} MiB")
print("low:", "at most 0.6x" if low <= 0.6 * fp32 else "MORE than 0.6x",
      "of fp32's bytes")
print("fp32 reduce:", "at least 0.9x" if g32 >= 0.9 * fp32 else "LESS than 0.9x",
      "of fp32's bytes")
print("fp32 reduce:", "at least 1.5x" if g32 >= 1.5 * low else "LESS than 1.5x",
      "of low's bytes")
