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
};
} // namespace

/// Checks \p c against its tensors and compiles the maps the kernel walks.
static llvm::Expected<Layer> prepareLayer(const plan::Compute &c,
                                          RecurrentCell cell,
                                          llvm::ArrayRef<const Tensor *> ins,
                                          llvm::ArrayRef<Tensor *> outs) {
  if (findAttr(c, "activations") || findAttr(c, "activation_alpha") ||
      findAttr(c, "activation_beta"))
    return computeError(c, "custom activations are not supported");
  if (attrReal(c, "clip", 0) != 0 || attrInt(c, "input_forget", 0) != 0)
    return computeError(c, "clip and input_forget are not supported");
  size_t maxOuts = cell == RecurrentCell::Lstm ? 3 : 2;
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

llvm::Error runRecurrent(const plan::Compute &c, RecurrentCell cell,
                         llvm::ArrayRef<const Tensor *> ins,
                         llvm::ArrayRef<Tensor *> outs) {
  auto prepared = prepareLayer(c, cell, ins, outs);
  if (!prepared)
    return prepared.takeError();
  const Layer &l = *prepared;
  int64_t batch = l.space.extents[B], steps = l.space.extents[S];
  int64_t hs = l.hs, in = l.in, gs = l.gates;
  bool lstm = cell == RecurrentCell::Lstm;
  tbb::parallel_for(int64_t(0), l.dirs * batch, [&](int64_t db) {
    int64_t d = db / batch, b = db % batch;
    bool back = l.reverse || d == 1;
    llvm::SmallVector<int64_t, NumDims> point(NumDims, 0);
    point[D] = d, point[B] = b;
    auto at = [&](const AccessIndexer &m, int64_t s, int64_t h, int64_t k) {
      point[S] = s, point[H] = h, point[K] = k;
      return m.index(point);
    };
    std::vector<double> h(static_cast<size_t>(hs), 0.0),
        state(static_cast<size_t>(hs), 0.0),
        xg(static_cast<size_t>(gs * hs)), hg(static_cast<size_t>(gs * hs)),
        xt(static_cast<size_t>(in)),
        rh(static_cast<size_t>(hs));
    for (int64_t j = 0; j < hs; ++j) {
      if (l.h0)
        h[j] = l.h0->real(at(*l.h0Map, 0, j, 0));
      if (l.c0)
        state[j] = l.c0->real(at(*l.c0Map, 0, j, 0));
    }
    int64_t len = l.lens ? std::clamp<int64_t>(
                               l.lens->integer(at(*l.lensMap, 0, 0, 0)), 0,
                               steps)
                         : steps;
    auto bias = [&](int64_t which, int64_t g) {
      return l.bias ? l.bias->real((d * 2 + which) * gs * hs + g) : 0.0;
    };
    // R times v for gate rows [g0, g1).
    auto recur = [&](int64_t g0, int64_t g1, const std::vector<double> &v) {
      for (int64_t g = g0; g < g1; ++g) {
        double acc = 0;
        int64_t row = (d * gs * hs + g) * hs;
        for (int64_t k = 0; k < hs; ++k)
          acc += l.r->real(row + k) * v[k];
        hg[g] = acc + bias(1, g);
      }
    };
    for (int64_t step = 0; step < steps; ++step) {
      int64_t t = back ? len - 1 - step : step;
      if (step >= len) {
        for (int64_t j = 0; j < hs; ++j)
          outs[0]->setReal(at(l.outMaps[0], step, j, 0), 0.0);
        continue;
      }
      for (int64_t k = 0; k < in; ++k)
        xt[k] = l.x->real(at(*l.xMap, t, 0, k));
      for (int64_t g = 0; g < gs * hs; ++g) {
        double acc = 0;
        int64_t row = (d * gs * hs + g) * in;
        for (int64_t k = 0; k < in; ++k)
          acc += l.w->real(row + k) * xt[k];
        xg[g] = acc + bias(0, g);
      }
      if (lstm) {
        // Gates i, o, f, c; peepholes i, o, f.
        recur(0, gs * hs, h);
        for (int64_t j = 0; j < hs; ++j) {
          auto peep = [&](int64_t p) {
            return l.peep ? l.peep->real((d * 3 + p) * hs + j) : 0.0;
          };
          auto gate = [&](int64_t g) { return xg[g * hs + j] + hg[g * hs + j]; };
          double ig = sigmoid(gate(0) + peep(0) * state[j]);
          double fg = sigmoid(gate(2) + peep(2) * state[j]);
          state[j] = fg * state[j] + ig * std::tanh(gate(3));
          double og = sigmoid(gate(1) + peep(1) * state[j]);
          h[j] = og * std::tanh(state[j]);
        }
      } else {
        // Gates z, r, h. With linear_before_reset the reset gate scales
        // R_h h + Rb_h; without, it scales h before R_h.
        recur(0, (l.linearBeforeReset ? 3 : 2) * hs, h);
        std::vector<double> z(static_cast<size_t>(hs)),
            r(static_cast<size_t>(hs));
        for (int64_t j = 0; j < hs; ++j) {
          z[j] = sigmoid(xg[j] + hg[j]);
          r[j] = sigmoid(xg[hs + j] + hg[hs + j]);
          rh[j] = r[j] * h[j];
        }
        if (!l.linearBeforeReset)
          recur(2 * hs, 3 * hs, rh);
        for (int64_t j = 0; j < hs; ++j) {
          double cand =
              l.linearBeforeReset
                  ? std::tanh(xg[2 * hs + j] + r[j] * hg[2 * hs + j])
                  : std::tanh(xg[2 * hs + j] + hg[2 * hs + j]);
          h[j] = (1 - z[j]) * cand + z[j] * h[j];
        }
      }
      for (int64_t j = 0; j < hs; ++j)
        outs[0]->setReal(at(l.outMaps[0], t, j, 0), h[j]);
    }
    for (int64_t j = 0; j < hs; ++j) {
      if (outs.size() > 1)
        outs[1]->setReal(at(l.outMaps[1], 0, j, 0), h[j]);
      if (outs.size() > 2)
        outs[2]->setReal(at(l.outMaps[2], 0, j, 0), state[j]);
    }
  });
  return llvm::Error::success();
}

} // namespace pax::runtime::cpu
