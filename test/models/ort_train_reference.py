#!/usr/bin/env python3
"""An independent reference for paxc's training steps: onnxruntime-training
computes the gradients, numpy applies the updates, and the trained weights
are compared with those `paxrun --train --save` wrote.

  ort_train_reference.py MODEL DATA_DIR TRAINED --steps N
        --loss cross-entropy|mse|output [--loss-output NAME] [--ignore-index N]
        [--optimizer sgd|adam|adamw] [--lr ..] [--momentum ..] [--nesterov]
        [--weight-decay ..] [--beta1 ..] [--beta2 ..] [--adam-eps ..]
        [--clip-norm ..] [--freeze REGEX] [--params-from IR] [--log PAXRUN_LOG]
        [--grads DIR [--grad-tol T]] [--noise-floor F] [--tol T] [--verbose]

MODEL is the model as exported (no loss), DATA_DIR holds input_0.pb ...
input_K.pb (the graph inputs in order, then the labels: make_test_data.py
--loss writes them), TRAINED is what `paxrun PLAN --train --steps=N
--data=DATA_DIR --save=TRAINED` wrote for a plan compiled with `paxc MODEL
--mode=train --loss=...` and the same optimizer options (the names and
defaults are paxc's). Runs in the venv of tools/dev/ortrain_env.sh
(onnxruntime-training 1.19.2, onnx 1.17, numpy 1.26).

What is onnxruntime's and what is ours:
- onnxruntime-training's: the loss graph's gradients. The loss is written
  here as plain ONNX appended with onnxblock, independently of paxc's own
  loss nodes: cross-entropy is the output Reshaped to (-1, classes) and
  SoftmaxCrossEntropyLoss (reduction mean, ignore_index with
  --ignore-index); mse is ReduceMean((y - labels)^2) over all elements;
  output sums the model's one-element output. artifacts.generate_artifacts
  builds the training graph (ORT's graph optimizations, its gradient
  builder, its gradient rules) and api.Module.train_step runs it on the CPU
  in float32; each step reads every parameter's gradient from the
  CheckpointState (the graph's own gradient accumulation buffers, reset
  lazily every step).
- ours: the updates, in float64 numpy with the formulas of
  test/models/reference_optimizers.py (torch's SGD, momentum, Nesterov,
  weight decay, Adam, AdamW, clipping by the global norm), which also serve
  the hand-derived perceptron reference (mlp_reference.py); the updated
  weights are written back to the CheckpointState in float32 before the
  next step. onnxruntime's own optimizer graphs (onnxblock.optim: plain
  SGD and AdamW) are not used: they have no momentum, Nesterov, nor Adam's
  weight decay added to the gradient.
- which tensors are trained: by default the float initializers of more than
  one element, less BatchNormalization's running statistics (enough for
  grad_models.py's perceptron and CNN); with --params-from IR exactly those
  that `paxc MODEL --emit=ir` (the file IR) declares `param`, as paxc keeps
  other constants an exporter stored as initializers (scalars, masks,
  rotary frequencies) out of training: which tensors are weights is paxc's
  definition, their values are not. Either way less those --freeze
  matches and those the loss's output is not computed from (BERT's pooler
  under a loss on its hidden states: neither trains them). Every other
  initializer must be unchanged in TRAINED.
- the model is rewritten for onnxruntime in two places that keep its
  values: BatchNormalization (inference form) becomes its formula, since
  onnxruntime's training graph would normalize with the batch's
  statistics; LayerNormalization's optional Mean and InvStdDev outputs are
  named, which onnxruntime's gradient rule reads.

Compared per trained tensor: relative error max|a - b| / max|b|, a paxrun's
weights and b the reference's; --verbose prints each one, and how far the
weights moved (the update's own relative error, max|a - b| / max|b - w0|,
which sees gradient errors that the weight's error divides by the weight).
With --noise-floor F, the elements whose gradient falls below F times the
model's largest at some step are left out and counted: Adam divides by
sqrt(v), so a gradient that is rounding noise (an attention key bias's true
gradient is zero) moves its weight by about lr in a direction rounding
chose, in paxc as in onnxruntime. With --grads, the first step's gradients
are compared too (paxc --gradients): max|a - b| over the tensor's largest,
or a thousandth of the model's largest gradient if more, within --grad-tol
(default 1e-4). With --log, paxrun's printed losses ('step K: loss X') must
equal onnxruntime's within the same tolerance (plus the printed digits'
5e-7). Exits 1 when anything exceeds its tolerance (--tol, default 1e-5),
printing a MISMATCH line for each.
"""
import argparse
import contextlib
import importlib
import importlib.util
import os
import re
import sys
import tempfile
import types

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from reference_optimizers import Optimizer  # noqa: E402

# This folder holds the PyTorch corpus, torch/: on sys.path it would pass for
# the torch package, which onnxruntime probes for.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != HERE]


def import_training():
    """onnxruntime.training's api and onnxblock without torch:
    onnxruntime/training/__init__.py imports its ORTModule optimizers, which
    import torch (onnxruntime issue 22070), though neither the on-device
    training API nor onnxblock needs it. The package is registered empty and
    its submodules loaded from its folder."""
    spec = importlib.util.find_spec("onnxruntime")
    if "onnxruntime.training" not in sys.modules:
        pkg = types.ModuleType("onnxruntime.training")
        pkg.__path__ = [os.path.join(spec.submodule_search_locations[0], "training")]
        sys.modules["onnxruntime.training"] = pkg
    importlib.import_module("onnxruntime").set_default_logger_severity(3)
    artifacts = importlib.import_module("onnxruntime.training.artifacts")
    onnxblock = importlib.import_module("onnxruntime.training.onnxblock")
    api = importlib.import_module("onnxruntime.training.api")
    return artifacts, onnxblock, api


FLOATS = (TensorProto.FLOAT, TensorProto.DOUBLE)


def trained_names(model, freeze, params_from):
    floats = [t.name for t in model.graph.initializer if t.data_type in FLOATS]
    if params_from:
        text = open(params_from).read()
        declared = set(re.findall(r'param @\S+ : \S+ = initializer\("([^"]+)"\)', text))
        names = [n for n in floats if n in declared]
    else:
        stats = {n.input[i] for n in model.graph.node
                 if n.op_type == "BatchNormalization" for i in (3, 4) if i < len(n.input)}
        sizes = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer}
        names = [n for n in floats if n not in stats and sizes[n] > 1]
    if freeze:
        names = [n for n in names if not re.search(freeze, n)]
    return names


def reaching(model, output):
    """The names whose values the output is computed from."""
    producer = {o: n for n in model.graph.node for o in n.output}
    seen, todo = set(), [output]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in producer:
            todo.extend(i for i in producer[v].input if i)
    return seen


def name_norm_statistics(model):
    """LayerNormalization's optional outputs, Mean and InvStdDev, named:
    onnxruntime's gradient rule for the op reads them."""
    for i, n in enumerate(model.graph.node):
        if n.op_type == "LayerNormalization":
            while len(n.output) < 3:
                n.output.append(f"ortref_ln{i}_stat{len(n.output)}")
    return model


def expand_batch_norms(model):
    """Every BatchNormalization in inference form (its running statistics)
    as its formula, (x - mean) * (scale / sqrt(var + epsilon)) + bias, over
    the channel axis 1: onnxruntime's training graph replaces the op by
    BatchNormInternal, which normalizes with the batch's statistics (torch's
    train mode), while an inference export, and paxc, use the running ones."""
    if not any(n.op_type == "BatchNormalization" for n in model.graph.node):
        return model
    inferred = onnx.shape_inference.infer_shapes(model)
    ranks = {v.name: len(v.type.tensor_type.shape.dim)
             for v in list(inferred.graph.value_info) + list(inferred.graph.input)
             if v.type.tensor_type.HasField("shape")}
    elem = {t.name: t.data_type for t in model.graph.initializer}
    nodes = []
    for n in model.graph.node:
        if n.op_type != "BatchNormalization":
            nodes.append(n)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if attrs.get("training_mode", 0) or len(n.output) > 1:
            raise SystemExit(f"error: {n.name}: BatchNormalization in training mode")
        x, scale, bias, mean, var = n.input
        if x not in ranks:
            raise SystemExit(f"error: {n.name}: the rank of its input '{x}' is unknown")
        rank = ranks[x]
        p = f"ortref_bn{len(nodes)}_"
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem.get(scale, TensorProto.FLOAT))
        model.graph.initializer.extend([
            numpy_helper.from_array(np.array([-1] + [1] * (rank - 2), np.int64), p + "shape"),
            numpy_helper.from_array(np.array(attrs.get("epsilon", 1e-5), dtype), p + "eps")])
        mk = helper.make_node
        nodes += [
            mk("Add", [var, p + "eps"], [p + "ve"], name=p + "ve"),
            mk("Sqrt", [p + "ve"], [p + "std"], name=p + "std"),
            mk("Div", [scale, p + "std"], [p + "k"], name=p + "k"),
            mk("Reshape", [p + "k", p + "shape"], [p + "kc"], name=p + "kc"),
            mk("Reshape", [mean, p + "shape"], [p + "mc"], name=p + "mc"),
            mk("Reshape", [bias, p + "shape"], [p + "bc"], name=p + "bc"),
            mk("Sub", [x, p + "mc"], [p + "xm"], name=p + "xm"),
            mk("Mul", [p + "xm", p + "kc"], [p + "xk"], name=p + "xk"),
            mk("Add", [p + "xk", p + "bc"], [n.output[0]], name=p + "y"),
        ]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def loss_block(onnxblock, kind, ignore_index):
    """The loss as plain ONNX on top of the model's output."""

    class Loss(onnxblock.Block):
        def build(self, y):
            g = self.base.graph
            out = next(o for o in g.output if o.name == y)
            shape = [d.dim_value if d.HasField("dim_value") else d.dim_param
                     for d in out.type.tensor_type.shape.dim]
            elem = out.type.tensor_type.elem_type
            if kind == "output":
                g.node.append(helper.make_node("ReduceSum", [y], ["ortref_loss"],
                                               keepdims=0, name="ortref_loss"))
                return "ortref_loss"
            if kind == "mse":
                g.input.append(helper.make_tensor_value_info("labels", elem, shape))
                g.node.extend([
                    helper.make_node("Sub", [y, "labels"], ["ortref_diff"], name="ortref_diff"),
                    helper.make_node("Mul", ["ortref_diff", "ortref_diff"], ["ortref_sq"],
                                     name="ortref_sq"),
                    helper.make_node("ReduceMean", ["ortref_sq"], ["ortref_loss"], keepdims=0,
                                     name="ortref_loss"),
                ])
                return "ortref_loss"
            classes = shape[-1]
            if not isinstance(classes, int) or classes <= 0:
                raise SystemExit(f"error: output '{y}' has no static class dim: {shape}")
            g.input.append(helper.make_tensor_value_info("labels", TensorProto.INT64, shape[:-1]))
            g.initializer.extend([
                numpy_helper.from_array(np.array([-1, classes], np.int64), "ortref_rows"),
                numpy_helper.from_array(np.array([-1], np.int64), "ortref_flat")])
            attrs = {"reduction": "mean"}
            if ignore_index is not None:
                attrs["ignore_index"] = ignore_index
            g.node.extend([
                helper.make_node("Reshape", [y, "ortref_rows"], ["ortref_logits"],
                                 name="ortref_logits"),
                helper.make_node("Reshape", ["labels", "ortref_flat"], ["ortref_labels"],
                                 name="ortref_labels"),
                helper.make_node("SoftmaxCrossEntropyLoss", ["ortref_logits", "ortref_labels"],
                                 ["ortref_loss", "ortref_log_prob"], name="ortref_loss",
                                 **attrs),
            ])
            return "ortref_loss"

    return Loss()


@contextlib.contextmanager
def quiet_info_logs():
    """onnxruntime's training graph transformers log every pass at level info
    to stderr, whatever the logger's severity: stderr is kept aside while the
    artifacts are built and written back less those lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            for line in f.read().decode(errors="replace").splitlines(True):
                if "[I:onnxruntime" not in line:
                    sys.stderr.write(line)


def read_losses(path):
    losses = {}
    for line in open(path):
        m = re.match(r"step (\d+): loss (\S+)", line.strip())
        if m:
            losses[int(m.group(1))] = float(m.group(2))
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("trained")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--loss", required=True, choices=["cross-entropy", "mse", "output"])
    ap.add_argument("--loss-output")
    ap.add_argument("--ignore-index", type=int)
    Optimizer.add_arguments(ap)
    ap.add_argument("--freeze", help="parameters whose name this matches are not trained")
    ap.add_argument("--params-from", metavar="IR",
                    help="train the initializers that `paxc MODEL --emit=ir` declares param")
    ap.add_argument("--log", help="paxrun's output: its losses must equal onnxruntime's")
    ap.add_argument("--noise-floor", type=float, default=0.0, metavar="F",
                    help="leave out the elements whose gradient falls below F times the "
                         "model's largest at some step (where Adam's update follows "
                         "rounding noise)")
    ap.add_argument("--grads", metavar="DIR",
                    help="also compare the first step's gradients with paxrun's outputs "
                         "grad/NAME in DIR (a plan compiled with paxc --gradients), "
                         "relative to the tensor's largest gradient, at least a "
                         "thousandth of the model's largest")
    ap.add_argument("--grad-tol", type=float, default=1e-4)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--verbose", "-v", action="store_true")
    a = ap.parse_args()

    artifacts, onnxblock, api = import_training()
    model = onnx.load(a.model)
    y = a.loss_output or model.graph.output[0].name
    if y not in [o.name for o in model.graph.output]:
        raise SystemExit(f"error: the model has no output '{y}'")
    declared = trained_names(model, a.freeze, a.params_from)
    reached = reaching(model, y)
    names = [n for n in declared if n in reached]
    if not names:
        raise SystemExit("error: no parameter to train")
    floats = [t.name for t in model.graph.initializer if t.data_type in FLOATS]
    frozen = [n for n in floats if n not in names and n in reached]
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    initialized = set(init)
    inputs = [i.name for i in model.graph.input if i.name not in initialized]
    count = len(inputs) + (a.loss != "output")
    feeds = [numpy_helper.to_array(onnx.load_tensor(os.path.join(a.data, f"input_{i}.pb")))
             for i in range(count)]

    graph = name_norm_statistics(expand_batch_norms(onnx.load(a.model)))
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="ortref") as tmp:
        os.chdir(tmp)  # onnxblock writes its temporary files to the cwd
        try:
            with quiet_info_logs():
                artifacts.generate_artifacts(
                    graph, requires_grad=names, frozen_params=frozen,
                    loss=loss_block(onnxblock, a.loss, a.ignore_index),
                    loss_input_names=[y], artifact_directory=tmp)
                state = api.CheckpointState.load_checkpoint(os.path.join(tmp, "checkpoint"))
                module = api.Module(os.path.join(tmp, "training_model.onnx"), state,
                                    os.path.join(tmp, "eval_model.onnx"), device="cpu")
        finally:
            os.chdir(cwd)
        module.train()
        opt = Optimizer.from_args(a)
        w = {n: init[n].astype(np.float64) for n in names}
        losses = []
        gmax = {n: np.zeros(init[n].shape) for n in names}
        gmin = {n: np.full(init[n].shape, np.inf) for n in names}
        first = None
        for _ in range(a.steps):
            module.lazy_reset_grad()
            loss = module(*feeds)
            losses.append(float(np.asarray(loss)))
            g = {n: state.parameters[n].grad.astype(np.float64) for n in names}
            first = first or g
            for n in names:
                gmax[n] = np.maximum(gmax[n], np.abs(g[n]))
                gmin[n] = np.minimum(gmin[n], np.abs(g[n]))
            w = opt.step(w, g)
            for n in names:
                state.parameters[n] = w[n].astype(init[n].dtype)

    got = {t.name: numpy_helper.to_array(t) for t in onnx.load(a.trained).graph.initializer}
    floor = a.noise_floor * max(m.max() for m in gmax.values())
    failed, noisy = [], 0
    worst, worst_name, worst_move = 0.0, None, 0.0
    for n in names:
        if n not in got:
            failed.append(f"{n}: missing from {a.trained}")
            continue
        b = w[n].astype(np.float64)
        if got[n].shape != b.shape:
            failed.append(f"{n}: shape {list(got[n].shape)}, expected {list(b.shape)}")
            continue
        keep = gmin[n] >= floor
        noisy += int(keep.size - keep.sum())
        delta = np.abs(got[n].astype(np.float64) - b)[keep]
        diff = delta.max() if delta.size else 0.0
        err = diff / max(np.abs(b).max(), 1e-30)
        moved = np.abs(b - init[n])[keep].max() if delta.size else 0.0
        move_err = diff / moved if moved > 0 else (0.0 if diff == 0 else np.inf)
        worst_move = max(worst_move, move_err)
        if a.verbose:
            left = f", {keep.size - keep.sum()} left out" if not keep.all() else ""
            at = ""
            if diff > 0:
                i = np.unravel_index(np.argmax(np.where(keep, np.abs(got[n] - b), -1)), b.shape)
                at = (f"; worst at {list(map(int, i))}: {float(got[n][i]):.8g} against "
                      f"{b[i]:.8g}, gradient {gmin[n][i]:.1e} to {gmax[n][i]:.1e}")
            print(f"  {n} {list(init[n].shape)}: {err:.1e} (update {move_err:.1e}{left}){at}")
        if err > worst or worst_name is None:
            worst, worst_name = err, n
        if err > a.tol:
            failed.append(f"{n}: relative error {err:.2e}")
    for n in init:
        if n not in names and n in got and not np.array_equal(got[n], init[n]):
            failed.append(f"{n}: not trained by the reference, changed in {a.trained}")
    print(f"{len(names)} tensors after {a.steps} steps ({opt.describe()}), within "
          f"{worst:.1e} of onnxruntime-training (worst {worst_name}; updates within "
          f"{worst_move:.1e}); {len(init) - len(names)} initializers kept, "
          f"{len(declared) - len(names)} parameters unused by the loss")
    if a.noise_floor:
        print(f"{noisy} elements left out: their gradients fell below "
              f"{a.noise_floor:g} of the largest ({floor:.1e})")
    if a.grads:
        pax = {}
        for f in sorted(os.listdir(a.grads)):
            if f.startswith("output_") and f.endswith(".pb"):
                t = onnx.load_tensor(os.path.join(a.grads, f))
                pax[t.name] = numpy_helper.to_array(t).astype(np.float64)
        gworst, gname = 0.0, None
        largest = max(np.abs(v).max() for v in first.values())
        for n in names:
            if "grad/" + n not in pax:
                failed.append(f"grad/{n}: missing from {a.grads}")
                continue
            b, d = first[n], pax["grad/" + n].reshape(first[n].shape)
            err = np.abs(d - b).max() / max(np.abs(b).max(), 1e-3 * largest, 1e-30)
            if a.verbose:
                print(f"  grad/{n}: {err:.1e}")
            if err >= gworst:
                gworst, gname = err, n
            if err > a.grad_tol:
                failed.append(f"grad/{n}: relative error {err:.2e}")
        print(f"{len(names)} gradients of the first step within {gworst:.1e} of "
              f"onnxruntime-training (worst {gname})")
    if a.log:
        pax = read_losses(a.log)
        lerr = 0.0
        for k, v in enumerate(losses):
            if k not in pax:
                failed.append(f"step {k}: no loss in {a.log}")
                continue
            lerr = max(lerr, abs(pax[k] - v))
            if abs(pax[k] - v) > 5e-7 + a.tol * abs(v):
                failed.append(f"step {k}: loss {pax[k]} against {v:.7f}")
        print(f"losses {' '.join(f'{v:.6f}' for v in losses)}: paxrun's printed "
              f"losses within {lerr:.1e}")
    for f in failed:
        print("MISMATCH " + f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
