#!/usr/bin/env python3
"""A real learning run: a small GPT-style model learns the GPL-3 licence
text (byte tokens), on one simulated device and on four with every op split
at random, with paxc's training plans and paxrun --train.

  python3 tools/models/train_text.py [--steps 200] [--gpus 4] [--float64]
        [--optimizer "--optimizer=adam --lr=0.003"] [--agree 1e-4]
        [--precisions bf16,fp16 [--final 0.02] [--seeds N]]
        [--bin build/bin] [--out docs/training] [--work DIR]

Checks that the loss falls (the last ten steps' mean below 60% of the
first step's) and that the two loss curves agree to --agree (relative,
every step; default 1e-4); writes OUT/loss_curve.png (both curves: one
device dark blue, four devices orange, dotted over it) and OUT/losses.csv
(with --float64, a float64 copy of the model: *_float64.*). With
--precisions, trains in fp32 and in each of those mixed precisions (paxc
--precision) on one and on four devices instead, checks that each final
loss is within --final (2%) of fp32's, and writes
OUT/loss_curve_precision.png (fp32 blue, bf16 green, fp16 red; four
devices dotted) and OUT/losses_precision.csv. With --seeds N (N > 1), the
precisions are compared over N initial weights (paxmodels --seed 0..N-1)
instead: each run's final loss against fp32's with the same weights and
devices, the median of those relative differences within --final; fp32's
own difference between one device and --gpus is printed beside them (how
far rounding alone moves the end of a run). Needs onnx and numpy; the PNG
is written with zlib alone.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pngimage import write_png  # noqa: E402
import onnx
from onnx import numpy_helper as nh

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = "/usr/share/common-licenses/GPL-3"
BATCH, SEQ, STEP_FOLDERS = 8, 32, 50


def prepare(work):
    """Byte tokens of the text; folders step_K with input_ids and the next
    tokens as labels, batches drawn with a fixed seed."""
    data = np.frombuffer(open(TEXT, "rb").read(), dtype=np.uint8).astype(np.int64)
    rng = np.random.default_rng(0)
    for k in range(STEP_FOLDERS):
        starts = rng.integers(0, len(data) - SEQ - 1, size=BATCH)
        x = np.stack([data[s:s + SEQ] for s in starts])
        y = np.stack([data[s + 1:s + SEQ + 1] for s in starts])
        d = os.path.join(work, "data", f"step_{k}")
        os.makedirs(d, exist_ok=True)
        onnx.save_tensor(nh.from_array(x, "input_ids"), os.path.join(d, "input_0.pb"))
        onnx.save_tensor(nh.from_array(y, "labels"), os.path.join(d, "input_1.pb"))
    return len(data)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [float(m.group(1)) for m in re.finditer(r"step \d+: loss ([0-9.eE+-]+)", out)]


def png(path, curves, width=720, height=420):
    """Line plot of \\p curves [(values, rgb, dotted)] on a white canvas with
    axes and a tick per 50 steps and per unit of loss."""
    img = np.full((height, width, 3), 255, dtype=np.uint8)
    left, right, top, bottom = 50, 20, 20, 40
    n = max(len(c[0]) for c in curves)
    hi = np.ceil(max(max(c[0]) for c in curves))
    x = lambda i: left + (width - left - right) * i / max(n - 1, 1)
    y = lambda v: top + (height - top - bottom) * (1 - v / hi)
    img[top:height - bottom + 1, left] = 0
    img[height - bottom, left:width - right] = 0
    for i in range(0, n, 50):
        img[height - bottom:height - bottom + 6, int(x(i))] = 0
    for v in range(0, int(hi) + 1):
        img[int(y(v)), left - 6:left] = 0
        img[int(y(v)), left:width - right:4] = 200
    for values, rgb, dotted in curves:
        for i in range(len(values) - 1):
            x0, y0, x1, y1 = x(i), y(values[i]), x(i + 1), y(values[i + 1])
            steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
            for t in range(steps + 1):
                if dotted and (t // 2) % 2:
                    continue
                px = int(round(x0 + (x1 - x0) * t / steps))
                py = int(round(y0 + (y1 - y0) * t / steps))
                img[max(py - 1, 0):py + 1, max(px - 1, 0):px + 1] = rgb
    write_png(path, img)


def make_model(work, seed=0):
    """The GPT of this run, its weights drawn with \p seed."""
    model = os.path.join(work, f"gpt{seed or ''}.onnx")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models", "paxmodels.py"),
                    "gpt2", "--layers", "2", "--hidden", "64", "--heads", "4",
                    "--ffn", "256", "--vocab", "256", "--positions", "64",
                    "--batch", str(BATCH), "--seq", str(SEQ), "--weights", "random",
                    "--seed", str(seed), "-o", model], check=True, capture_output=True)
    return model


def train_curves(a, model, work, precision="fp32"):
    """The losses of --steps steps on one device and on --gpus with every op
    split at random, in \p precision (paxc --precision)."""
    paxc, paxrun = os.path.join(a.bin, "paxc"), os.path.join(a.bin, "paxrun")
    train = ["--mode=train", "--loss=cross-entropy", *a.optimizer.split(),
             f"--precision={precision}", "--quiet"]
    work = os.path.join(work, os.path.splitext(os.path.basename(model))[0])
    os.makedirs(work, exist_ok=True)
    one = os.path.join(work, f"one_{precision}.paxplan")
    subprocess.run([paxc, model, *train, "-o", one], check=True)
    searched = os.path.join(work, f"searched_{precision}.json")
    subprocess.run([paxc, model, *train, f"--gpus={a.gpus}", "--emit=strategy",
                    "-o", searched], check=True)
    forced = os.path.join(work, f"forced_{precision}.json")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models", "force_strategy.py"),
                    searched, "random", f"--gpus={a.gpus}", "--seed=3", "-o", forced],
                   check=True)
    many = os.path.join(work, f"many_{precision}.paxplan")
    subprocess.run([paxc, model, *train, f"--gpus={a.gpus}", f"--strategy={forced}",
                    "-o", many], check=True)
    data = os.path.join(os.path.dirname(work), "data")
    l1 = run([paxrun, one, "--train", f"--steps={a.steps}", f"--data={data}"])
    ln = run([paxrun, many, "--train", f"--steps={a.steps}", f"--data={data}"])
    return l1, ln


def precision_runs(a, model, work):
    """--precisions: fp32's curves and each low precision's, on one device
    and on --gpus; each final loss (mean of the last ten steps) within
    --final of fp32's one-device one."""
    runs = {"fp32": train_curves(a, model, work)}
    for p in a.precisions.split(","):
        runs[p] = train_curves(a, model, work, p)
    base = float(np.mean(runs["fp32"][0][-10:]))
    ok = True
    with open(os.path.join(a.out, "losses_precision.csv"), "w") as f:
        names = [f"{p}_{d}" for p in runs for d in ("1_device", f"{a.gpus}_devices")]
        f.write("step," + ",".join(names) + "\n")
        for i in range(a.steps):
            f.write(f"{i}," + ",".join(f"{runs[p][k][i]:.6f}" for p in runs
                                      for k in (0, 1)) + "\n")
    colours = {"fp32": (20, 40, 140), "bf16": (30, 150, 60), "fp16": (210, 40, 40)}
    png(os.path.join(a.out, "loss_curve_precision.png"),
        [(runs[p][k], colours.get(p, (120, 120, 120)), k == 1)
         for p in runs for k in (0, 1)])
    for p, (l1, ln) in runs.items():
        for label, losses in ((1, l1), (a.gpus, ln)):
            last = float(np.mean(losses[-10:]))
            rel = (last - base) / base
            good = len(losses) == a.steps and abs(rel) <= a.final
            ok &= good
            print(f"{p} on {label} device(s): loss {losses[0]:.4f} -> {last:.4f} "
                  f"(mean of the last 10), {rel:+.2%} from fp32's"
                  f"{'' if good else ' FAILED'}")
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


def seeded_precision_runs(a, work):
    """--precisions with --seeds: per precision and device count, the
    median over the seeds of each final loss's relative difference from
    fp32's with the same weights and devices, within --final."""
    precisions = ["fp32", *a.precisions.split(",")]
    final = {}  # (precision, seed) -> (one device, --gpus)
    for seed in range(a.seeds):
        model = make_model(work, seed)
        for p in precisions:
            l1, ln = train_curves(a, model, work, p)
            if len(l1) != a.steps or len(ln) != a.steps:
                print(f"{p}, seed {seed}: a run stopped early")
                return 1
            final[p, seed] = (float(np.mean(l1[-10:])), float(np.mean(ln[-10:])))
            print(f"seed {seed} {p}: final loss {final[p, seed][0]:.4f} on one "
                  f"device, {final[p, seed][1]:.4f} on {a.gpus}", flush=True)
    seeds = range(a.seeds)
    split = [final["fp32", s][1] / final["fp32", s][0] - 1 for s in seeds]
    print(f"fp32 on {a.gpus} devices against one: median {np.median(split):+.2%}, "
          f"from {min(split):+.2%} to {max(split):+.2%}")
    ok = True
    for p in precisions[1:]:
        for k, label in ((0, "one device"), (1, f"{a.gpus} devices")):
            rel = [final[p, s][k] / final["fp32", s][k] - 1 for s in seeds]
            good = abs(float(np.median(rel))) <= a.final
            ok &= good
            print(f"{p} on {label}: median {np.median(rel):+.2%} from fp32's "
                  f"(from {min(rel):+.2%} to {max(rel):+.2%}) over {a.seeds} "
                  f"seeds{'' if good else ' FAILED'}")
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "training"))
    ap.add_argument("--work")
    ap.add_argument("--optimizer", default="--optimizer=adam --lr=0.003",
                    help="paxc's optimizer options")
    ap.add_argument("--float64", action="store_true",
                    help="train a float64 copy of the model")
    ap.add_argument("--agree", type=float, default=1e-4,
                    help="the largest relative difference of the two curves")
    ap.add_argument("--precisions",
                    help="also train in these paxc --precision values "
                    "(bf16,fp16) and compare with fp32")
    ap.add_argument("--seeds", type=int, default=1,
                    help="with --precisions: compare over this many initial "
                    "weights (the median of the paired differences)")
    ap.add_argument("--final", type=float, default=0.02,
                    help="with --precisions: the largest relative difference "
                    "of a final loss from fp32's")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="pax-train-")
    os.makedirs(a.out, exist_ok=True)
    size = prepare(work)
    if a.precisions and a.seeds > 1:
        return seeded_precision_runs(a, work)
    model = make_model(work)
    if a.precisions:
        return precision_runs(a, model, work)
    if a.float64:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from onnx_float64 import to_float64
        onnx.save(to_float64(onnx.load(model))[0], model)
    l1, ln = train_curves(a, model, work)
    rel = max(abs(p - q) / abs(p) for p, q in zip(l1, ln))
    first, last = l1[0], float(np.mean(l1[-10:]))
    with open(os.path.join(a.out, f"losses{'_float64' if a.float64 else ''}.csv"),
              "w") as f:
        f.write(f"step,loss_1_device,loss_{a.gpus}_devices\n")
        for i, (p, q) in enumerate(zip(l1, ln)):
            f.write(f"{i},{p:.6f},{q:.6f}\n")
    suffix = "_float64" if a.float64 else ""
    png(os.path.join(a.out, f"loss_curve{suffix}.png"),
        [(l1, (20, 40, 140), False), (ln, (240, 140, 20), True)])
    print(f"{TEXT}: {size} bytes; {a.steps} steps of {BATCH}x{SEQ} tokens; loss "
          f"{first:.4f} -> {last:.4f} (mean of the last 10); 1 and {a.gpus} devices "
          f"agree within {rel:.1e}")
    ok = len(l1) == len(ln) == a.steps and rel <= a.agree and last < 0.6 * first
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
