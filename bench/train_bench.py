#!/usr/bin/env python3
"""One training step on the CPU, one device, against onnxruntime-training:
same model, same data, same loss, same optimizer, same threads.

  build/ortrain-venv/bin/python bench/train_bench.py [--models gpt2,resnet18]
      [--threads N] [--repeat N] [--rounds N] [--bin DIR] [--work DIR]

Runs under the python of tools/dev/ortrain_env.sh's venv (onnxruntime-
training 1.19.2: it imports onnxruntime.training, without torch, through
test/models/ort_train_reference.py); paxc and paxrun run as subprocesses
from --bin (default build/bin).

Models (cross-entropy over the output's last axis, plain SGD, lr 0.01):
- gpt2: tools/models/paxmodels.py's GPT-2 (tied lm head) with 4 layers,
  hidden 256, 4 heads, vocabulary 8192, sequence 128, batch 4 (9.5 M
  parameters), seeded random weights.
- resnet18: torchvision's ResNet-18 as the TorchScript exporter writes it in
  eval mode (batch norm folded into the convolutions' weights and biases:
  Conv, Relu, Add, MaxPool, GlobalAveragePool, Flatten, Gemm), 1000 classes,
  11.7 M parameters, built here with onnx.helper, at batch --resnet-batch
  (2) of --resnet-size (64) x 64 images, seeded random weights (a small
  input: paxrun's step takes about 6 s there on 2 cores, one at batch 8 of
  112 x 112 images about a minute).
Inputs and labels are test/models/make_test_data.py's (seed 1).

What is timed, per step:
- paxrun: `paxc MODEL --mode=train --loss=cross-entropy --optimizer=sgd
  --lr=0.01` compiles one step's program (forward, backward, SGD update:
  the loss and update/NAME for every parameter); `paxrun PLAN --train
  --steps=N --data=DATA --time` trains N steps (each device keeps the
  weights it updated) and prints two times per step: `compute`, the
  seconds in the step's compute instructions, and `step`, the step's
  whole wall time (buffers allocated and zero-filled, weights and inputs
  fed, the loss and updates assembled). Reading the plan, the model's
  weights and the data once per process is not timed.
- onnxruntime-training: artifacts.generate_artifacts of the model with the
  loss written as plain ONNX (Reshape + SoftmaxCrossEntropyLoss, from
  ort_train_reference.py) and OptimType.SGD; each step is
  `module.lazy_reset_grad(); module(*inputs); optimizer.step()` (api.Module
  train_step and ORT's own SGDOptimizerV2 graph, lr 0.01), wall time, with
  SessionOptions intra_op_num_threads = --threads, inter_op 1, sequential
  (Module and Optimizer share them). Building the artifacts and sessions is
  not timed.
The two alternate for --rounds rounds of --repeat steps each, so that a
passing load on the machine weighs on both; the first step of each round is
a warm-up and is not counted. Both run on the first --threads CPUs this
process may use (taskset for paxrun, sched_setaffinity for this process).
The ratio is onnxruntime's median step over paxrun's (above 1: paxc is
faster), for paxrun's step time and for its compute time.

Checked: the first step's loss (paxrun's output `loss`, onnxruntime's on the
first call) within 1e-4 relative, and the first step's weight changes
(dw, the updated weight minus the initial one; SGD's dw is -lr times the
gradient): for each parameter max |dw_paxrun - dw_ort| over its largest
|dw_ort| (at least a thousandth of the model's largest), the worst within
1e-3.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.path.join(ROOT, "test", "models")
sys.path.insert(0, MODELS_DIR)
import ort_train_reference as ref  # noqa: E402  (takes MODELS_DIR off sys.path)

GEN = os.path.join(ROOT, "tools", "models", "paxmodels.py")
MAKE_DATA = os.path.join(MODELS_DIR, "make_test_data.py")
MODELS = ["gpt2", "resnet18"]
LR = 0.01
LOSS_TOL = 1e-4
UPDATE_TOL = 1e-3


def quiet(cmd):
    """Runs cmd; its output is shown only when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"train_bench: {' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")


def gpt2(path, args):
    quiet([sys.executable, GEN, "gpt2", "--layers", "4", "--hidden", "256",
                    "--heads", "4", "--vocab", "8192", "--positions", "128",
                    "--seq", "128", "--batch", "4", "--weights", "random",
                    "--seed", str(args.seed), "-o", path])


def resnet18(path, args):
    """torchvision's resnet18 in the TorchScript exporter's eval-mode form:
    every BatchNormalization folded into its Conv (weights and a bias).
    Weights normal with std sqrt(2 / fan_in) (the second conv of a block
    and the downsampling 1x1 scaled by 0.5, so that the residual sums stay
    in range), biases 0.01 N."""
    rng = np.random.default_rng(args.seed)
    nodes, inits = [], []

    def param(name, shape, std):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * std).astype(np.float32), name))
        return name

    def conv(x, name, cin, cout, k, stride, gain=1.0):
        w = param(name + ".weight", [cout, cin, k, k], gain * np.sqrt(2.0 / (cin * k * k)))
        b = param(name + ".bias", [cout], 0.01)
        y = f"/{name}/Conv_output_0"
        nodes.append(helper.make_node(
            "Conv", [x, w, b], [y], name=f"/{name}/Conv", dilations=[1, 1], group=1,
            kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride]))
        return y

    def relu(x, name):
        y = f"/{name}/Relu_output_0"
        nodes.append(helper.make_node("Relu", [x], [y], name=f"/{name}/Relu"))
        return y

    n, s = args.resnet_batch, args.resnet_size
    x = relu(conv("pixel_values", "conv1", 3, 64, 7, 2), "relu")
    nodes.append(helper.make_node("MaxPool", [x], ["/maxpool/MaxPool_output_0"],
                                  name="/maxpool/MaxPool", ceil_mode=0, dilations=[1, 1],
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]))
    x, cin = "/maxpool/MaxPool_output_0", 64
    for stage, cout in enumerate([64, 128, 256, 512], start=1):
        for block in range(2):
            p = f"layer{stage}.{block}"
            stride = 2 if stage > 1 and block == 0 else 1
            h = relu(conv(x, p + ".conv1", cin, cout, 3, stride), p + ".relu")
            h = conv(h, p + ".conv2", cout, cout, 3, 1, gain=0.5)
            skip = x
            if stride != 1 or cin != cout:
                skip = conv(x, p + ".downsample.0", cin, cout, 1, stride, gain=0.5)
            nodes.append(helper.make_node("Add", [h, skip], [f"/{p}/Add_output_0"],
                                          name=f"/{p}/Add"))
            x, cin = relu(f"/{p}/Add_output_0", p + ".relu_1"), cout
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["/avgpool/Output"], name="/avgpool"),
        helper.make_node("Flatten", ["/avgpool/Output"], ["/Flatten_output_0"],
                         name="/Flatten", axis=1),
        helper.make_node("Gemm", ["/Flatten_output_0", param("fc.weight", [1000, 512],
                                                             np.sqrt(1.0 / 512)),
                                  param("fc.bias", [1000], 0.01)],
                         ["logits"], name="/fc/Gemm", alpha=1.0, beta=1.0, transB=1),
    ]
    graph = helper.make_graph(
        nodes, "resnet18",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [n, 3, s, s])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [n, 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def prepare(name, work, args):
    """Writes work/model.onnx, work/data/in/input_K.pb (labels last), the
    training plan and paxc's IR (which initializers are parameters)."""
    model = os.path.join(work, "model.onnx")
    {"gpt2": gpt2, "resnet18": resnet18}[name](model, args)
    # -P: test/models/torch would pass for the torch package onnxruntime probes.
    quiet([sys.executable, "-P", MAKE_DATA, model, os.path.join(work, "data"),
           "--seed", str(args.seed), "--loss", "cross-entropy"])
    paxc = os.path.join(args.bin, "paxc")
    quiet([paxc, model, "--mode=train", "--loss=cross-entropy", "--optimizer=sgd",
           f"--lr={LR}", "-o", os.path.join(work, "model.paxplan"), "--quiet"])
    quiet([paxc, model, "--mode=train", "--loss=cross-entropy", "--emit=ir",
           "-o", os.path.join(work, "model.ir")])
    return model


def run_paxrun(args, work, cpus, outputs):
    """paxrun --train --steps=R+1 --time: (compute seconds, step seconds)
    of steps 1..R as paxrun prints them. With outputs, first one run of the
    step's program on the initial weights (--outputs: the loss and every
    update/NAME), not timed."""
    plan, data = os.path.join(work, "model.paxplan"), os.path.join(work, "data", "in")
    prefix = ["taskset", "-c", cpus] if cpus else []
    paxrun = os.path.join(args.bin, "paxrun")
    if outputs:
        quiet(prefix + [paxrun, plan, "--inputs", data, "--outputs",
                        os.path.join(work, "pax")])
    cmd = prefix + [paxrun, plan, "--train", f"--steps={args.repeat + 1}",
                    f"--data={data}", "--time"]
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    compute, steps = [], []
    for m in re.finditer(r"^paxrun: step (\d+): ([0-9.e+-]+) s in compute "
                         r"instructions, ([0-9.e+-]+) s in all$", proc.stderr, re.M):
        if int(m.group(1)) > 0:
            compute.append(float(m.group(2)))
            steps.append(float(m.group(3)))
    if proc.returncode or len(steps) != args.repeat:
        sys.exit(f"train_bench: {' '.join(cmd)} failed:\n{proc.stderr}")
    return compute, steps


class OrtTrainer:
    """onnxruntime-training's Module and SGD Optimizer for the model."""

    def __init__(self, model_path, work, threads):
        artifacts, onnxblock, self.api = ref.import_training()
        import onnxruntime as ort
        model = onnx.load(model_path)
        y = model.graph.output[0].name
        reached = ref.reaching(model, y)
        self.names = [n for n in ref.trained_names(model, None, os.path.join(work, "model.ir"))
                      if n in reached]
        floats = [t.name for t in model.graph.initializer if t.data_type in ref.FLOATS]
        frozen = [n for n in floats if n not in self.names and n in reached]
        self.init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
                     if t.name in self.names}
        initialized = {t.name for t in model.graph.initializer}
        count = len([i for i in model.graph.input if i.name not in initialized]) + 1
        data = os.path.join(work, "data", "in")
        self.feeds = [numpy_helper.to_array(onnx.load_tensor(
            os.path.join(data, f"input_{i}.pb"))) for i in range(count)]
        graph = ref.name_norm_statistics(ref.expand_batch_norms(model))
        out = os.path.join(work, "ort")
        os.makedirs(out, exist_ok=True)
        cwd = os.getcwd()
        os.chdir(out)  # onnxblock writes its temporary files to the cwd
        try:
            with ref.quiet_info_logs():
                artifacts.generate_artifacts(
                    graph, requires_grad=self.names, frozen_params=frozen,
                    loss=ref.loss_block(onnxblock, "cross-entropy", None),
                    optimizer=artifacts.OptimType.SGD, loss_input_names=[y],
                    artifact_directory=out)
        finally:
            os.chdir(cwd)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        self.state = self.api.CheckpointState.load_checkpoint(os.path.join(out, "checkpoint"))
        self.module = self.api.Module(os.path.join(out, "training_model.onnx"), self.state,
                                      os.path.join(out, "eval_model.onnx"), device="cpu",
                                      session_options=options)
        self.optimizer = self.api.Optimizer(os.path.join(out, "optimizer_model.onnx"),
                                            self.module)
        self.optimizer.set_learning_rate(LR)
        self.module.train()

    def step(self):
        self.module.lazy_reset_grad()
        loss = self.module(*self.feeds)
        self.optimizer.step()
        return float(np.asarray(loss))

    def first_step(self):
        """The first step's loss and updated weights."""
        loss = self.step()
        return loss, {n: np.array(self.state.parameters[n].data) for n in self.names}

    def run(self, repeat):
        self.step()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            self.step()
            times.append(time.perf_counter() - start)
        return times


def read_outputs(work):
    got, i = {}, 0
    while os.path.exists(os.path.join(work, "pax", f"output_{i}.pb")):
        t = onnx.load_tensor(os.path.join(work, "pax", f"output_{i}.pb"))
        got[t.name] = numpy_helper.to_array(t)
        i += 1
    return got


def update_error(pax, want, init):
    """The worst parameter's max |dw_paxrun - dw_ort| over its largest
    |dw_ort|, or a thousandth of the model's largest if more (as
    ort_train_reference.py --grads holds gradients)."""
    moves = {}
    for n, w in want.items():
        b = w.astype(np.float64) - init[n]
        a = pax["update/" + n].reshape(w.shape).astype(np.float64) - init[n]
        moves[n] = (np.abs(a - b).max(), np.abs(b).max())
    largest = max(m for _, m in moves.values())
    return max(d / max(m, 1e-3 * largest, 1e-30) for d, m in moves.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--resnet-batch", type=int, default=2)
    ap.add_argument("--resnet-size", type=int, default=64)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                    help="folder holding paxc and paxrun")
    ap.add_argument("--work", help="keep the models, plans and artifacts here")
    args = ap.parse_args()
    for tool in ("paxc", "paxrun"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            sys.exit(f"train_bench: no {tool} in {args.bin} (build it, or give --bin)")
    allowed = sorted(os.sched_getaffinity(0))
    cpus = None
    if args.threads < len(allowed):
        cpus = ",".join(str(c) for c in allowed[:args.threads])
        os.sched_setaffinity(0, allowed[:args.threads])
    root = args.work or tempfile.mkdtemp(prefix="train_bench.")
    ok = True
    print(f"{args.threads} threads, {args.rounds} rounds of {args.repeat} steps each "
          "after a warm-up; seconds per training step (forward, backward, SGD)")
    print(f"{'model':9} {'paxrun step':>11} {'best':>7} {'compute':>8} {'ort step':>9} "
          f"{'best':>7} {'ort/pax step':>13} {'ort/pax compute':>16} {'loss pax':>10} "
          f"{'loss ort':>10} {'dw err':>8}")
    try:
        for name in args.models.split(","):
            work = os.path.join(root, name)
            os.makedirs(work, exist_ok=True)
            model = prepare(name, work, args)
            trainer = OrtTrainer(model, work, args.threads)
            ort_loss, ort_weights = trainer.first_step()
            compute, steps, ort_times = [], [], []
            for r in range(args.rounds):
                c, s = run_paxrun(args, work, cpus, outputs=r == 0)
                compute += c
                steps += s
                ort_times += trainer.run(args.repeat)
            pax = read_outputs(work)
            pax_loss = float(pax["loss"].reshape(-1)[0])
            loss_err = abs(pax_loss - ort_loss) / max(abs(ort_loss), 1e-30)
            dw_err = update_error(pax, ort_weights, trainer.init)
            good = loss_err <= LOSS_TOL and dw_err <= UPDATE_TOL
            ok &= good
            ps, pc, om = (statistics.median(v) for v in (steps, compute, ort_times))
            print(f"{name:9} {ps:11.4f} {min(steps):7.4f} {pc:8.4f} {om:9.4f} "
                  f"{min(ort_times):7.4f} {om / ps:12.2f}x {om / pc:15.2f}x "
                  f"{pax_loss:10.6f} {ort_loss:10.6f} {dw_err:8.1e}"
                  f"{'' if good else '  DIFFERS'}", flush=True)
            del trainer
    finally:
        if not args.work:
            shutil.rmtree(root, ignore_errors=True)
    print("first steps agree (loss within 1e-4, weight changes within 1e-3)" if ok
          else "first steps DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
