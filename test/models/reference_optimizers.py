"""The parameter updates of `paxc --mode=train`, in numpy: torch's formulas
(torch.optim.SGD with dampening 0, Adam with bias correction, AdamW with
decoupled weight decay) and clipping by the norm of all the gradients
together (torch.nn.utils.clip_grad_norm_). Written independently of paxc;
the numpy references of the training tests share them:
test/lit/passes/Inputs/mlp_reference.py (a perceptron's backward pass by
hand) and test/models/ort_train_reference.py (onnxruntime-training's
gradients).

    opt = Optimizer("adam", lr=0.01)
    for step in ...:
        weights = opt.step(weights, gradients)   # dicts name -> array

The arithmetic is in the arrays' own type: pass float64 arrays for a
float64 reference.
"""
import numpy as np


def global_norm(grads):
    """The L2 norm of all the gradients together."""
    return np.sqrt(sum((np.asarray(v) ** 2).sum() for v in grads.values()))


def clipped(grads, clip_norm):
    """Every gradient scaled by min(1, clip_norm / (norm + 1e-6)), the norm
    over all of them (torch's clip_grad_norm_)."""
    coef = min(clip_norm / (global_norm(grads) + 1e-6), 1.0)
    return {k: v * coef for k, v in grads.items()}


class Optimizer:
    """One optimizer's state across steps; step() takes the weights and
    their gradients (dicts of the same names) and returns the new weights."""

    def __init__(self, kind="sgd", lr=0.01, momentum=0.0, nesterov=False,
                 weight_decay=0.0, beta1=0.9, beta2=0.999, eps=1e-8,
                 clip_norm=0.0):
        if kind not in ("sgd", "adam", "adamw"):
            raise ValueError(f"optimizer {kind!r}: expected sgd, adam or adamw")
        self.kind, self.lr, self.momentum = kind, lr, momentum
        self.nesterov, self.weight_decay = nesterov, weight_decay
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.clip_norm = clip_norm
        self.state = {}
        self.t = 0

    @staticmethod
    def add_arguments(ap):
        """paxc's optimizer options, with paxc's names and defaults."""
        ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adam", "adamw"])
        ap.add_argument("--lr", type=float, default=0.01)
        ap.add_argument("--momentum", type=float, default=0.0)
        ap.add_argument("--nesterov", action="store_true")
        ap.add_argument("--weight-decay", type=float, default=0.0)
        ap.add_argument("--beta1", type=float, default=0.9)
        ap.add_argument("--beta2", type=float, default=0.999)
        ap.add_argument("--adam-eps", type=float, default=1e-8)
        ap.add_argument("--clip-norm", type=float, default=0.0)

    @classmethod
    def from_args(cls, a):
        return cls(a.optimizer, a.lr, a.momentum, a.nesterov, a.weight_decay,
                   a.beta1, a.beta2, a.adam_eps, a.clip_norm)

    def describe(self):
        if self.kind == "sgd":
            s = f"sgd lr {self.lr:g}"
            if self.momentum:
                s += f" momentum {self.momentum:g}" + (" nesterov" if self.nesterov else "")
        else:
            s = f"{self.kind} lr {self.lr:g} betas {self.beta1:g} {self.beta2:g} eps {self.eps:g}"
        if self.weight_decay:
            s += f" weight decay {self.weight_decay:g}"
        if self.clip_norm:
            s += f" clip norm {self.clip_norm:g}"
        return s

    def step(self, w, g, clip=True):
        """The weights after one step: w and g map names to arrays; the
        gradients are clipped first when clip_norm is set and clip is true
        (pass clip=False for gradients already clipped)."""
        self.t += 1
        t = self.t
        if self.clip_norm > 0 and clip:
            g = clipped(g, self.clip_norm)
        out = dict(w)
        for k, d in g.items():
            if self.kind == "sgd":
                if self.weight_decay:
                    d = d + self.weight_decay * w[k]
                if self.momentum:
                    buf = self.momentum * self.state.get(k, 0) + d
                    self.state[k] = buf
                    d = d + self.momentum * buf if self.nesterov else buf
                out[k] = w[k] - self.lr * d
                continue
            wk = w[k]
            if self.kind == "adam" and self.weight_decay:
                d = d + self.weight_decay * wk
            if self.kind == "adamw" and self.weight_decay:
                wk = wk * (1 - self.lr * self.weight_decay)
            b1, b2 = self.beta1, self.beta2
            m = b1 * self.state.get(("m", k), 0) + (1 - b1) * d
            v = b2 * self.state.get(("v", k), 0) + (1 - b2) * d * d
            self.state[("m", k)], self.state[("v", k)] = m, v
            denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + self.eps
            out[k] = wk - self.lr / (1 - b1 ** t) * m / denom
        return out
