"""The passes each device of a pipelined plan runs, in its program's order.

Reads a plan's text (paxc --emit=plan-text) and prints, per device, its
passes in the order their first computes run: F<k> for microbatch k's
forward, B<k> for its backward (a recomputed forward op counts as
backward), "S:F<k>" on a device that runs several stages (interleaved
chunks). Computes without a microbatch (a gradient's sum, an update) and
those every device computes (from constants) are left out.

    pipeline_passes.py PLAN.txt
    pipeline_passes.py PLAN.txt --recomputed

With --recomputed: each device's count of recomputed computes, and whether
the first device recomputes more than the last.
"""
import re
import sys


def programs(text):
    """Yields each device program's computes as dicts of their attrs."""
    text = text.split("\nreference {")[0]
    for block in text.split("\nprograms {")[1:]:
        device = int(re.search(r"^  device: (\d+)", block, re.M).group(1)) \
            if re.search(r"^  device: (\d+)", block, re.M) else 0
        computes = []
        for c in block.split("\n    compute {")[1:]:
            attrs = dict(re.findall(
                r'attrs \{\n\s+name: "([a-z_]+)"\n(?:\s+i: (-?\d+)\n)?', c))
            computes.append(attrs)
        yield device, computes


def passes(computes):
    ops = [a for a in computes if "microbatch" in a and "everywhere" not in a]
    # A device running several stages (interleaved chunks) names them.
    several = len({a.get("stage") for a in ops}) > 1
    out = []
    for a in ops:
        k = int(a["microbatch"] or 0)
        forward = "forward" in a and "recomputed" not in a
        p = ("F" if forward else "B") + str(k)
        if several:
            p = str(int(a.get("stage") or 0)) + ":" + p
        if p not in out:
            out.append(p)
    return out


def recomputed(text):
    counts = {}
    for device, computes in programs(text):
        counts[device] = sum("recomputed" in a for a in computes)
        print("device %d: %d recomputed" % (device, counts[device]))
    first, last = min(counts), max(counts)
    if counts[first] > counts[last]:
        print("device %d recomputes more than device %d" % (first, last))


def main():
    text = open(sys.argv[1]).read()
    if "--recomputed" in sys.argv[2:]:
        return recomputed(text)
    for device, computes in programs(text):
        print("device %d: %s" % (device, " ".join(passes(computes))))


if __name__ == "__main__":
    main()
