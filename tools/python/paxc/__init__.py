"""paxc from Python: compile an ONNX model for N devices, run and train it.

    import numpy as np, paxc
    plan = paxc.compile("model.onnx", gpus=4)
    session = paxc.Session(plan)
    outputs = session.run({"input": np.zeros((8, 16), np.float32)})

Every option of the paxc command line is a keyword of compile (paxc --help
lists them; write mem_limit for --mem-limit). Errors raise paxc.Error with
paxc's message.
"""

import json
import numbers
import os
import tempfile

from . import _paxc
from ._paxc import Error

__all__ = ["Error", "Plan", "Session", "compile", "from_torch", "load_plan"]
__version__ = "0.1.0"

def _option_values(name, value):
    """The command line's values of one keyword: --NAME=VALUE each."""
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in _option_values(name, item)]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, os.PathLike):
        return [os.fspath(value)]
    if isinstance(value, (numbers.Number, str)):
        return [str(value)]
    raise TypeError(f"option {name}: {type(value).__name__} is not a value "
                    "the command line takes (str, int, float, bool or a list)")


def _strategy_file(strategy):
    """A strategy dict (Plan.strategy()) as a JSON file; a path as is."""
    if not isinstance(strategy, dict):
        return strategy
    f = tempfile.NamedTemporaryFile("w", suffix=".json", prefix="paxc-strategy-",
                                    delete=False)
    with f:
        json.dump(strategy, f)
    return f.name


def _model_source(model):
    """(path, bytes) of a model given as a path, bytes or an onnx.ModelProto."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), b""
    if isinstance(model, (bytes, bytearray, memoryview)):
        if not len(model):
            raise Error("model: no bytes (an ONNX model's bytes, or a path)")
        return "<model bytes>", bytes(model)
    if hasattr(model, "SerializeToString"):
        return "<onnx.ModelProto>", model.SerializeToString()
    raise TypeError("model: a path, the bytes of an ONNX model or an "
                    f"onnx.ModelProto, not {type(model).__name__}")


class Plan:
    """A compiled plan: what paxrun runs, with its strategy's report."""

    def __init__(self, native):
        self._native = native

    @property
    def devices(self):
        return self._native.devices

    @property
    def inputs(self):
        """(name, element type as numpy names it, shape) of each input the
        plan reads: [("x", "float32", [8, 16])]."""
        return self._native.inputs

    @property
    def outputs(self):
        return self._native.outputs

    @property
    def model_path(self):
        """The model file the plan reads its weights from."""
        return self._native.model_path

    def report(self):
        """The strategy's report (paxc --emit=report --format=json) as a
        dict; None where nothing was searched (one device)."""
        text = self._native.report_json
        return json.loads(text) if text else None

    def report_text(self):
        """The report as paxc --emit=report prints it."""
        return self._native.report_text

    def strategy(self):
        """The chosen strategy (paxc --emit=strategy's model and ops), which
        compile(strategy=...) takes back; None where nothing was searched."""
        r = self.report()
        return None if r is None else {"model": r["model"], "ops": r["ops"]}

    def save(self, path):
        """Writes the plan for paxrun (or load_plan)."""
        self._native.save(os.fspath(path))

    def __repr__(self):
        return f"<paxc.Plan: {self.devices} device(s), inputs {[i[0] for i in self.inputs]}>"


def compile(model, *, gpus=1, cluster=None, mode="infer", loss=None,
            optimizer="sgd", lr=0.01, solver="dp", strategy=None, **options):
    """Compiles an ONNX model (a path, its bytes or an onnx.ModelProto) into
    a Plan for `gpus` devices, as `paxc MODEL --OPTION=VALUE ... -o PLAN`
    would. Any option of paxc --help is a keyword (mem_limit=40 for
    --mem-limit=40; a list repeats a list option such as dim)."""
    path, data = _model_source(model)
    given = {"gpus": gpus, "cluster": cluster, "mode": mode, "loss": loss,
             "optimizer": optimizer, "lr": lr, "solver": solver}
    pairs = []
    for name, value in list(given.items()) + list(options.items()):
        if value is None:
            continue
        flag = name.replace("_", "-")
        pairs += [(flag, v) for v in _option_values(name, value)]
    written = _strategy_file(strategy)
    if written is not None:
        pairs += [("strategy", v) for v in _option_values("strategy", written)]
    try:
        return Plan(_paxc.compile(path, data, pairs))
    finally:
        if isinstance(strategy, dict):
            os.remove(written)


def load_plan(path):
    """A plan file (paxc -o FILE.paxplan, Plan.save) as a Plan."""
    return Plan(_paxc.load_plan(os.fspath(path)))


class Session:
    """A plan's devices in this process (one thread each): run the plan, or
    train it a step at a time with the weights staying on the devices."""

    def __init__(self, plan, backend="cpu", devices="threads"):
        if not isinstance(plan, Plan):
            raise TypeError(f"plan: a paxc.Plan, not {type(plan).__name__}")
        self.plan = plan
        self._native = _paxc.Session(plan._native, backend, devices)

    def run(self, feeds):
        """The plan's outputs by name for `feeds` (each input by name, a
        numpy array of its element type and shape)."""
        return self._native.run(_feeds(feeds))

    def train_step(self, feeds):
        """One training step on `feeds` (data and labels); the loss."""
        return self._native.train_step(_feeds(feeds))

    @property
    def step(self):
        """Training steps taken (from a loaded checkpoint's on)."""
        return self._native.step

    def save_model(self, path):
        """The model with its trained weights (paxrun --save)."""
        self._native.save_model(os.fspath(path))

    def save_checkpoint(self, directory):
        """Weights, optimizer state and step (paxrun --checkpoint)."""
        self._native.save_checkpoint(os.fspath(directory))

    def load_checkpoint(self, directory):
        """Continues from a checkpoint of the same plan (paxrun --resume)."""
        self._native.load_checkpoint(os.fspath(directory))


def _feeds(feeds):
    if not isinstance(feeds, dict):
        raise TypeError(f"feeds: a dict of name to array, not {type(feeds).__name__}")
    return feeds


def from_torch(module, example_inputs, **compile_options):
    """Exports a torch.nn.Module with torch.onnx.export (torch must be
    installed) and compiles it; `example_inputs` a tensor or a tuple."""
    import io
    import torch  # noqa: F401  (only here: paxc itself does not need torch)
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    buffer = io.BytesIO()
    torch.onnx.export(module, example_inputs, buffer)
    return compile(buffer.getvalue(), **compile_options)
