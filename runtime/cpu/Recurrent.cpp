//===- Recurrent.cpp - LSTM and GRU layers --------------------------------===//
#include "runtime/cpu/Recurrent.h"

#include "runtime/cpu/KernelContext.h"

#include "llvm/ADT/StringSwitch.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace pax::runtime::cpu {

std::optional<RecurrentCell> parseRecurrentCell(llvm::StringRef kind) {
  return llvm::StringSwitch<std::optional<RecurrentCell>>(kind)
      .Case("lstm", RecurrentCell::Lstm)
      .Case("gru", RecurrentCell::Gru)
      .Default(std::nullopt);
}

std::optional<RecurrentCell> parseRecurrentGradCell(llvm::StringRef kind) {
  return llvm::StringSwitch<std::optional<RecurrentCell>>(kind)
      .Case("lstm_grad", RecurrentCell::Lstm)
      .Case("gru_grad", RecurrentCell::Gru)
      .Default(std::nullopt);
}

namespace {
/// The iteration dims of a recurrent op, in the importer's order.
enum Dim : unsigned { D, S, B, G, H, K, NumDims };

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// The layer's tensors, checked, with the walkable maps compiled.
struct Layer {
  const Tensor *x, *w, *r;
  const Tensor *bias = nullptr, *lens = nullptr, *h0 = nullptr, *c0 = nullptr,
               *peep = nullptr;
  std::optional<AccessIndexer> xMap, lensMap, h0Map, c0Map;
  llvm::SmallVector<AccessIndexer, 3> outMaps;
  IterationSpace space;
  int64_t dirs = 0, hs = 0, in = 0, gates = 0;
  bool reverse = false, linearBeforeReset = false;
  /// The operands the forward layer's inputs take (X, W, R, then the
  /// optional ones present).
  int consumed = 3;
};
} // namespace

/// Checks \p c against its tensors and compiles the maps the kernel walks.
static llvm::Expected<Layer> prepareLayer(const plan::Compute &c,
                                          RecurrentCell cell,
                                          llvm::ArrayRef<const Tensor *> ins,
                                          llvm::ArrayRef<Tensor *> outs,
                                          bool grad = false) {
  if (findAttr(c, "activations") || findAttr(c, "activation_alpha") ||
      findAttr(c, "activation_beta"))
    return computeError(c, "custom activations are not supported");
  if (attrReal(c, "clip", 0) != 0 || attrInt(c, "input_forget", 0) != 0)
    return computeError(c, "clip and input_forget are not supported");
  size_t maxOuts = grad ? 5 : cell == RecurrentCell::Lstm ? 3 : 2;
  if (ins.size() < 3 || outs.empty() || outs.size() > maxOuts)
    return computeError(c, "needs X, W, R and one to " +
                               llvm::Twine(maxOuts) + " outputs");
  if (c.iters_size() != NumDims)
    return computeError(c, "needs iteration dims [dir, s, b, g, h, k], has " +
                               llvm::Twine(c.iters_size()));
  for (const Tensor *t : ins)
    if (!t || int64_t(t->data.size()) != t->bytes())
      return computeError(c, "an input is missing or has the wrong size");
  for (const Tensor *t : outs)
    if (!t || int64_t(t->data.size()) != t->bytes())
      return computeError(c, "an output is missing or has the wrong size");
  Layer l;
  l.x = ins[0], l.w = ins[1], l.r = ins[2];
  l.space = IterationSpace::of(c);
  l.gates = cell == RecurrentCell::Lstm ? 4 : 3;
  if (l.w->shape.size() != 3 || l.r->shape.size() != 3)
    return computeError(c, "w and r must have rank 3");
  l.dirs = l.w->shape[0], l.hs = l.r->shape[2], l.in = l.w->shape[2];
  if (l.w->shape[1] != l.gates * l.hs || l.r->shape[0] != l.dirs ||
      l.r->shape[1] != l.gates * l.hs ||
      l.space.extents[D] != l.dirs || l.space.extents[G] != l.gates ||
      l.space.extents[H] != l.hs || l.space.extents[K] != l.in + l.hs)
    return computeError(c, "w, r and the iteration dims do not agree");
  const plan::Attr *dir = findAttr(c, "direction");
  l.reverse = dir && dir->has_s() && dir->s() == "reverse";
  l.linearBeforeReset = attrInt(c, "linear_before_reset", 0) != 0;
  // Which optional inputs the operands hold (bit i: ONNX input i).
  int64_t present = attrInt(c, "inputs", 0);
  const Tensor *opt[8] = {};
  int where[8] = {};
  int next = 3;
  int last = cell == RecurrentCell::Lstm ? 7 : 5;
  for (int i = 3; i <= last; ++i)
    if (present & (int64_t(1) << i)) {
      if (next >= int(ins.size()))
        return computeError(c, "the inputs attribute names more operands "
                               "than there are");
      where[i] = next;
      opt[i] = ins[next++];
    }
  l.bias = opt[3], l.lens = opt[4], l.h0 = opt[5];
  if (cell == RecurrentCell::Lstm)
    l.c0 = opt[6], l.peep = opt[7];
  int64_t biasSize = l.dirs * 2 * l.gates * l.hs;
  l.consumed = next;
  if (l.bias && l.bias->numel() != biasSize)
    return computeError(c, "b has the wrong size");
  if (l.peep && l.peep->numel() != l.dirs * 3 * l.hs)
    return computeError(c, "p has the wrong size");
  auto compile = [&](int k, const char *what)
      -> llvm::Expected<std::optional<AccessIndexer>> {
    if (k < 0)
      return std::nullopt;
    auto m = AccessIndexer::compile(c, c.inputs(k), ins[size_t(k)]->shape,
                                    l.space, what);
    if (!m)
      return m.takeError();
    return std::optional<AccessIndexer>(std::move(*m));
  };
  struct Want {
    std::optional<AccessIndexer> *map;
    int operand;
    const char *what;
  } wants[] = {{&l.xMap, 0, "x"},
               {&l.lensMap, l.lens ? where[4] : -1, "sequence_lens"},
               {&l.h0Map, l.h0 ? where[5] : -1, "initial_h"},
               {&l.c0Map, l.c0 ? where[6] : -1, "initial_c"}};
  for (const Want &want : wants) {
    auto m = compile(want.operand, want.what);
    if (!m)
      return m.takeError();
    *want.map = std::move(*m);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    auto m = AccessIndexer::compile(c, c.outputs(int(i)), outs[i]->shape,
                                    l.space, "output " + llvm::Twine(i));
    if (!m)
      return m.takeError();
    l.outMaps.push_back(std::move(*m));
  }
  return l;
}

namespace {
/// One (direction, batch row) of a layer, walked step by step: the state
/// (h, and an LSTM's c) after each step, and what the backward pass reads.
struct Walk {
  const Layer &l;
  bool lstm;
  int64_t d, b, len;
  bool back;
  int64_t hs, in, gh;
  llvm::SmallVector<int64_t, NumDims> point;
  std::vector<double> h, state, xg, hg, xt, rh;

  Walk(const Layer &l, RecurrentCell cell, int64_t d, int64_t b)
      : l(l), lstm(cell == RecurrentCell::Lstm), d(d), b(b),
        back(l.reverse || d == 1), hs(l.hs), in(l.in), gh(l.gates * l.hs),
        point(NumDims, 0), h(size_t(hs), 0.0), state(size_t(hs), 0.0),
        xg(size_t(gh)), hg(size_t(gh)), xt(size_t(in)), rh(size_t(hs)) {
    point[D] = d, point[B] = b;
    int64_t steps = l.space.extents[S];
    len = l.lens ? std::clamp<int64_t>(l.lens->integer(at(*l.lensMap, 0, 0, 0)),
                                       0, steps)
                 : steps;
    for (int64_t j = 0; j < hs; ++j) {
      if (l.h0)
        h[j] = l.h0->real(at(*l.h0Map, 0, 0, j));
      if (l.c0)
        state[j] = l.c0->real(at(*l.c0Map, 0, 0, j));
    }
  }

  /// The index of \p m at time \p s, gate \p g, hidden unit \p j.
  int64_t at(const AccessIndexer &m, int64_t s, int64_t g, int64_t j) {
    point[S] = s, point[G] = g, point[H] = j, point[K] = 0;
    return m.index(point);
  }
  /// The time position of processing step \p step.
  int64_t time(int64_t step) const { return back ? len - 1 - step : step; }
  double bias(int64_t which, int64_t g) const {
    return l.bias ? l.bias->real((d * 2 + which) * gh + g) : 0.0;
  }
  /// Row \p row, column \p k of this direction's R.
  double r(int64_t row, int64_t k) const {
    return l.r->real((d * gh + row) * hs + k);
  }
  /// hg[g] = R v + Rb for gate rows [g0, g1).
  void recur(int64_t g0, int64_t g1, const std::vector<double> &v) {
    for (int64_t g = g0; g < g1; ++g) {
      double acc = 0;
      for (int64_t k = 0; k < hs; ++k)
        acc += r(g, k) * v[k];
      hg[g] = acc + bias(1, g);
    }
  }

  /// Runs processing step \p step, updating h and state. With \p act, also
  /// writes the gates after their activations (gh values; an LSTM's i, o,
  /// f, c; a GRU's z, r, h) and, with \p hn, a GRU's R_h h + Rb_h.
  void step(int64_t step, double *act = nullptr, double *hn = nullptr) {
    int64_t t = time(step);
    for (int64_t k = 0; k < in; ++k) {
      point[S] = t, point[G] = 0, point[H] = 0, point[K] = k;
      xt[k] = l.x->real(l.xMap->index(point));
    }
    for (int64_t g = 0; g < gh; ++g) {
      double acc = 0;
      int64_t row = (d * gh + g) * in;
      for (int64_t k = 0; k < in; ++k)
        acc += l.w->real(row + k) * xt[k];
      xg[g] = acc + bias(0, g);
    }
    if (lstm) {
      // Gates i, o, f, c; peepholes i, o, f.
      recur(0, gh, h);
      for (int64_t j = 0; j < hs; ++j) {
        auto peep = [&](int64_t p) {
          return l.peep ? l.peep->real((d * 3 + p) * hs + j) : 0.0;
        };
        auto gate = [&](int64_t g) { return xg[g * hs + j] + hg[g * hs + j]; };
        double ig = sigmoid(gate(0) + peep(0) * state[j]);
        double fg = sigmoid(gate(2) + peep(2) * state[j]);
        double cg = std::tanh(gate(3));
        state[j] = fg * state[j] + ig * cg;
        double og = sigmoid(gate(1) + peep(1) * state[j]);
        h[j] = og * std::tanh(state[j]);
        if (act)
          act[j] = ig, act[hs + j] = og, act[2 * hs + j] = fg,
          act[3 * hs + j] = cg;
      }
      return;
    }
    // Gates z, r, h. With linear_before_reset the reset gate scales
    // R_h h + Rb_h; without, it scales h before R_h.
    bool lbr = l.linearBeforeReset;
    recur(0, (lbr ? 3 : 2) * hs, h);
    std::vector<double> z(static_cast<size_t>(hs)), rg(static_cast<size_t>(hs));
    for (int64_t j = 0; j < hs; ++j) {
      z[j] = sigmoid(xg[j] + hg[j]);
      rg[j] = sigmoid(xg[hs + j] + hg[hs + j]);
      rh[j] = rg[j] * h[j];
    }
    if (!lbr)
      recur(2 * hs, 3 * hs, rh);
    for (int64_t j = 0; j < hs; ++j) {
      double cand = lbr ? std::tanh(xg[2 * hs + j] + rg[j] * hg[2 * hs + j])
                        : std::tanh(xg[2 * hs + j] + hg[2 * hs + j]);
      if (act)
        act[j] = z[j], act[hs + j] = rg[j], act[2 * hs + j] = cand;
      if (hn)
        hn[j] = hg[2 * hs + j];
      h[j] = (1 - z[j]) * cand + z[j] * h[j];
    }
  }
};
} // namespace

llvm::Error runRecurrent(const plan::Compute &c, RecurrentCell cell,
                         llvm::ArrayRef<const Tensor *> ins,
                         llvm::ArrayRef<Tensor *> outs) {
  auto prepared = prepareLayer(c, cell, ins, outs);
  if (!prepared)
    return prepared.takeError();
  const Layer &l = *prepared;
  int64_t batch = l.space.extents[B], steps = l.space.extents[S];
  tbb::parallel_for(int64_t(0), l.dirs * batch, [&](int64_t db) {
    Walk w(l, cell, db / batch, db % batch);
    for (int64_t step = 0; step < steps; ++step) {
      if (step >= w.len) {
        for (int64_t j = 0; j < l.hs; ++j)
          outs[0]->setReal(w.at(l.outMaps[0], step, 0, j), 0.0);
        continue;
      }
      w.step(step);
      for (int64_t j = 0; j < l.hs; ++j)
        outs[0]->setReal(w.at(l.outMaps[0], w.time(step), 0, j), w.h[j]);
    }
    for (int64_t j = 0; j < l.hs; ++j) {
      if (outs.size() > 1)
        outs[1]->setReal(w.at(l.outMaps[1], 0, 0, j), w.h[j]);
      if (outs.size() > 2)
        outs[2]->setReal(w.at(l.outMaps[2], 0, 0, j), w.state[j]);
    }
  });
  return llvm::Error::success();
}

llvm::Error runRecurrentGrad(const plan::Compute &c, RecurrentCell cell,
                             llvm::ArrayRef<const Tensor *> ins,
                             llvm::ArrayRef<Tensor *> outs) {
  bool lstm = cell == RecurrentCell::Lstm;
  size_t wantOuts = lstm ? 5 : 4;
  if (outs.size() != wantOuts)
    return computeError(c, "has " + llvm::Twine(outs.size()) +
                               " outputs; needs the gate gradients (x side "
                               "and h side), the vectors R multiplied, dH0" +
                               (lstm ? " and dC0" : ""));
  auto prepared = prepareLayer(c, cell, ins, outs, /*grad=*/true);
  if (!prepared)
    return prepared.takeError();
  const Layer &l = *prepared;
  if (l.peep)
    return computeError(c, "peepholes are not supported in the gradient");
  // The result gradients present (bit 0: Y, 1: Y_h, 2: Y_c), after the
  // layer's own operands.
  int64_t grads = attrInt(c, "grads", 0);
  std::optional<AccessIndexer> gradMaps[3];
  const Tensor *gradTensors[3] = {};
  int next = l.consumed;
  for (int i = 0; i < 3; ++i) {
    if (!(grads & (int64_t(1) << i)))
      continue;
    if (next >= int(ins.size()))
      return computeError(c, "the grads attribute names more operands than "
                             "there are");
    auto m = AccessIndexer::compile(c, c.inputs(next),
                                    ins[size_t(next)]->shape, l.space,
                                    "a result's gradient");
    if (!m)
      return m.takeError();
    gradMaps[i] = std::move(*m);
    gradTensors[i] = ins[size_t(next++)];
  }
  int64_t batch = l.space.extents[B], steps = l.space.extents[S];
  int64_t hs = l.hs, gs = l.gates, gh = gs * hs;
  bool lbr = l.linearBeforeReset;
  tbb::parallel_for(int64_t(0), l.dirs * batch, [&](int64_t db) {
    Walk w(l, cell, db / batch, db % batch);
    int64_t len = w.len;
    // Zero where no step runs.
    for (int64_t t = len; t < steps; ++t)
      for (int64_t g = 0; g < gs; ++g)
        for (int64_t j = 0; j < hs; ++j)
          for (size_t o = 0; o < 3; ++o)
            outs[o]->setReal(w.at(l.outMaps[o], t, g, j), 0.0);

    // The forward pass again, keeping per step (in processing order) the
    // previous state, the gates after their activations and, for a GRU,
    // R_h h + Rb_h.
    size_t n = size_t(std::max<int64_t>(len, 1));
    std::vector<double> hPrev(n * hs), cPrev(n * hs), cNow(n * hs),
        act(n * gh), hn(n * hs);
    for (int64_t step = 0; step < len; ++step) {
      std::copy(w.h.begin(), w.h.end(), hPrev.begin() + step * hs);
      std::copy(w.state.begin(), w.state.end(), cPrev.begin() + step * hs);
      w.step(step, &act[size_t(step * gh)], &hn[size_t(step * hs)]);
      std::copy(w.state.begin(), w.state.end(), cNow.begin() + step * hs);
    }

    // Backward through time: dh and dc carry the gradient of the state
    // each step hands to the next.
    std::vector<double> dh(hs, 0.0), dc(hs, 0.0), dx(gh), dhGate(gh),
        dPrev(hs), drh(hs);
    auto addFinal = [&] {
      for (int64_t j = 0; j < hs; ++j) {
        if (gradTensors[1])
          dh[j] += gradTensors[1]->real(w.at(*gradMaps[1], 0, 0, j));
        if (gradTensors[2])
          dc[j] += gradTensors[2]->real(w.at(*gradMaps[2], 0, 0, j));
      }
    };
    if (len == 0)
      addFinal();
    for (int64_t step = len - 1; step >= 0; --step) {
      int64_t t = w.time(step);
      const double *a = &act[size_t(step * gh)];
      const double *hp = &hPrev[size_t(step * hs)];
      if (gradTensors[0])
        for (int64_t j = 0; j < hs; ++j)
          dh[j] += gradTensors[0]->real(w.at(*gradMaps[0], t, 0, j));
      if (step == len - 1)
        addFinal();
      std::fill(dPrev.begin(), dPrev.end(), 0.0);
      if (lstm) {
        for (int64_t j = 0; j < hs; ++j) {
          double ig = a[j], og = a[hs + j], fg = a[2 * hs + j],
                 cg = a[3 * hs + j];
          double tc = std::tanh(cNow[step * hs + j]);
          double dct = dc[j] + dh[j] * og * (1 - tc * tc);
          dx[0 * hs + j] = dct * cg * ig * (1 - ig);
          dx[1 * hs + j] = dh[j] * tc * og * (1 - og);
          dx[2 * hs + j] = dct * cPrev[step * hs + j] * fg * (1 - fg);
          dx[3 * hs + j] = dct * ig * (1 - cg * cg);
          dc[j] = dct * fg;
        }
        dhGate = dx;
        for (int64_t g = 0; g < gh; ++g)
          for (int64_t k = 0; k < hs; ++k)
            dPrev[k] += w.r(g, k) * dhGate[g];
      } else {
        for (int64_t j = 0; j < hs; ++j) {
          double z = a[j], nn = a[2 * hs + j];
          double dn = dh[j] * (1 - z) * (1 - nn * nn);
          dx[j] = dh[j] * (hp[j] - nn) * z * (1 - z);
          dx[2 * hs + j] = dn;
          dhGate[j] = dx[j];
          dhGate[2 * hs + j] = lbr ? dn * a[hs + j] : dn;
          dPrev[j] = dh[j] * z;
        }
        // The reset gate: through r h (or r (R_h h + Rb_h)).
        if (!lbr) {
          std::fill(drh.begin(), drh.end(), 0.0);
          for (int64_t g = 2 * hs; g < 3 * hs; ++g)
            for (int64_t k = 0; k < hs; ++k)
              drh[k] += w.r(g, k) * dhGate[g];
        }
        for (int64_t j = 0; j < hs; ++j) {
          double r = a[hs + j];
          double dr = lbr ? dx[2 * hs + j] * hn[step * hs + j] : drh[j] * hp[j];
          dx[hs + j] = dr * r * (1 - r);
          dhGate[hs + j] = dx[hs + j];
          if (!lbr)
            dPrev[j] += drh[j] * r;
        }
        int64_t rows = lbr ? 3 * hs : 2 * hs;
        for (int64_t g = 0; g < rows; ++g)
          for (int64_t k = 0; k < hs; ++k)
            dPrev[k] += w.r(g, k) * dhGate[g];
      }
      // The step's gate gradients and the vectors R multiplied.
      for (int64_t g = 0; g < gs; ++g)
        for (int64_t j = 0; j < hs; ++j) {
          outs[0]->setReal(w.at(l.outMaps[0], t, g, j), dx[g * hs + j]);
          outs[1]->setReal(w.at(l.outMaps[1], t, g, j), dhGate[g * hs + j]);
          double v = !lstm && !lbr && g == 2 ? a[hs + j] * hp[j] : hp[j];
          outs[2]->setReal(w.at(l.outMaps[2], t, g, j), v);
        }
      dh = dPrev;
    }
    for (int64_t j = 0; j < hs; ++j) {
      outs[3]->setReal(w.at(l.outMaps[3], 0, 0, j), dh[j]);
      if (lstm)
        outs[4]->setReal(w.at(l.outMaps[4], 0, 0, j), dc[j]);
    }
  });
  return llvm::Error::success();
}

} // namespace pax::runtime::cpu
