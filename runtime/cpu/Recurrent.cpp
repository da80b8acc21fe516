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

using recurrent::Dense;
using recurrent::Layer;
using recurrent::Operand;

/// The optional ONNX inputs a compute holds: input i at opt[i], operand
/// where[i]; next is the first operand after them.
struct OptionalInputs {
  const Tensor *opt[8] = {};
  int where[8] = {};
  int next = 3;
};

/// Rejects the attributes the layer does not support.
llvm::Error checkSupported(const plan::Compute &c) {
  if (findAttr(c, "activations") || findAttr(c, "activation_alpha") ||
      findAttr(c, "activation_beta"))
    return computeError(c, "custom activations are not supported");
  if (attrReal(c, "clip", 0) != 0 || attrInt(c, "input_forget", 0) != 0)
    return computeError(c, "clip and input_forget are not supported");
  return llvm::Error::success();
}

/// Checks the operand and result counts and the iteration dims.
llvm::Error checkCounts(const plan::Compute &c, bool lstm, bool grad,
                        llvm::ArrayRef<const Tensor *> ins,
                        llvm::ArrayRef<Tensor *> outs) {
  using namespace recurrent;
  size_t maxOuts = grad ? (lstm ? 5 : 4) : lstm ? 3 : 2;
  if (grad && outs.size() != maxOuts)
    return computeError(c, "has " + llvm::Twine(outs.size()) +
                               " outputs; needs the gate gradients (x side "
                               "and h side), the vectors R multiplied, dH0" +
                               (lstm ? " and dC0" : ""));
  if (ins.size() < 3 || outs.empty() || outs.size() > maxOuts)
    return computeError(c, "needs X, W, R and one to " + llvm::Twine(maxOuts) +
                               " outputs");
  if (c.iters_size() != NumDims)
    return computeError(c, "needs iteration dims [dir, s, b, g, h, k], has " +
                               llvm::Twine(c.iters_size()));
  return llvm::Error::success();
}

/// Checks that every tensor is present and of its full size.
llvm::Error checkWhole(const plan::Compute &c,
                       llvm::ArrayRef<const Tensor *> ins,
                       llvm::ArrayRef<Tensor *> outs) {
  for (const Tensor *t : ins)
    if (!t || int64_t(t->data.size()) != t->bytes())
      return computeError(c, "an input is missing or has the wrong size");
  for (const Tensor *t : outs)
    if (!t || int64_t(t->data.size()) != t->bytes())
      return computeError(c, "an output is missing or has the wrong size");
  return llvm::Error::success();
}

/// Checks W and R against each other and the iteration dims, and sets the
/// sizes of \p l (its gates already set) from them.
llvm::Error describeSizes(const plan::Compute &c, const IterationSpace &space,
                          const Tensor *w, const Tensor *r, Layer &l) {
  using namespace recurrent;
  if (w->shape.size() != 3 || r->shape.size() != 3)
    return computeError(c, "w and r must have rank 3");
  l.dirs = w->shape[0], l.hs = r->shape[2], l.in = w->shape[2];
  if (w->shape[1] != l.gates * l.hs || r->shape[0] != l.dirs ||
      r->shape[1] != l.gates * l.hs || space.extents[D] != l.dirs ||
      space.extents[G] != l.gates || space.extents[H] != l.hs ||
      space.extents[K] != l.in + l.hs)
    return computeError(c, "w, r and the iteration dims do not agree");
  l.steps = space.extents[S];
  l.batch = space.extents[B];
  return llvm::Error::success();
}

/// Describes \p t (nothing when null) as a tensor read by shape.
Dense dense(const Tensor *t) {
  Dense d;
  if (t) {
    d.data = t->data.data();
    d.type = int32_t(t->dtype);
  }
  return d;
}

/// Finds the optional inputs the operands hold after X, W and R, as the
/// `inputs` attribute names them (bit i: ONNX input i).
llvm::Expected<OptionalInputs>
findOptionalInputs(const plan::Compute &c, bool lstm,
                   llvm::ArrayRef<const Tensor *> ins) {
  // Which optional inputs the operands hold (bit i: ONNX input i).
  int64_t present = attrInt(c, "inputs", 0);
  OptionalInputs o;
  int last = lstm ? 7 : 5;
  for (int i = 3; i <= last; ++i)
    if (present & (int64_t(1) << i)) {
      if (o.next >= int(ins.size()))
        return computeError(c, "the inputs attribute names more operands "
                               "than there are");
      o.where[i] = o.next;
      o.opt[i] = ins[size_t(o.next++)];
    }
  return o;
}

/// Checks the sizes of B and an LSTM's P and sets them in \p l.
llvm::Error describeBiasAndPeepholes(const plan::Compute &c, bool grad,
                                     const OptionalInputs &o, Layer &l) {
  if (o.opt[3] && o.opt[3]->numel() != l.dirs * 2 * l.gates * l.hs)
    return computeError(c, "b has the wrong size");
  if (l.lstm && o.opt[7] && o.opt[7]->numel() != l.dirs * 3 * l.hs)
    return computeError(c, "p has the wrong size");
  if (grad && l.lstm && o.opt[7])
    return computeError(c, "peepholes are not supported in the gradient");
  l.bias = dense(o.opt[3]);
  if (l.lstm)
    l.peep = dense(o.opt[7]);
  return llvm::Error::success();
}

/// Points \p o at operand \p k through its compiled access map; leaves it
/// unused when \p k is negative.
llvm::Error bindOperand(const plan::Compute &c,
                        llvm::ArrayRef<const Tensor *> ins,
                        const IterationSpace &space, Operand &o, int k,
                        const llvm::Twine &what) {
  if (k < 0)
    return llvm::Error::success();
  auto m = AccessIndexer::compile(c, c.inputs(k), ins[size_t(k)]->shape, space,
                                  what);
  if (!m)
    return m.takeError();
  o.data = ins[size_t(k)]->data.data();
  o.type = int32_t(ins[size_t(k)]->dtype);
  o.map = m->flatMap();
  return llvm::Error::success();
}

/// Binds the sequence input and, where present, the sequence lengths and
/// the initial states.
llvm::Error bindInputs(const plan::Compute &c,
                       llvm::ArrayRef<const Tensor *> ins,
                       const IterationSpace &space, const OptionalInputs &o,
                       Layer &l) {
  if (auto err = bindOperand(c, ins, space, l.x, 0, "x"))
    return err;
  if (auto err = bindOperand(c, ins, space, l.lens, o.opt[4] ? o.where[4] : -1,
                             "sequence_lens"))
    return err;
  if (auto err = bindOperand(c, ins, space, l.h0, o.opt[5] ? o.where[5] : -1,
                             "initial_h"))
    return err;
  if (l.lstm)
    if (auto err = bindOperand(c, ins, space, l.c0, o.opt[6] ? o.where[6] : -1,
                               "initial_c"))
      return err;
  return llvm::Error::success();
}

/// Binds the gradient op's result gradients that the `grads` attribute
/// names, from operand \p next on.
llvm::Error bindResultGrads(const plan::Compute &c,
                            llvm::ArrayRef<const Tensor *> ins,
                            const IterationSpace &space, int next, Layer &l) {
  int64_t grads = attrInt(c, "grads", 0);
  for (int i = 0; i < 3; ++i) {
    if (!(grads & (int64_t(1) << i)))
      continue;
    if (next >= int(ins.size()))
      return computeError(c, "the grads attribute names more operands "
                             "than there are");
    if (auto err = bindOperand(c, ins, space, l.grad[i], next++,
                               "a result's gradient"))
      return err;
  }
  return llvm::Error::success();
}

/// Binds the results through their compiled access maps.
llvm::Error bindOutputs(const plan::Compute &c, llvm::ArrayRef<Tensor *> outs,
                        const IterationSpace &space, Layer &l) {
  l.outputs = int32_t(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    auto m = AccessIndexer::compile(c, c.outputs(int(i)), outs[i]->shape, space,
                                    "output " + llvm::Twine(i));
    if (!m)
      return m.takeError();
    l.out[i] = outs[i]->data.data();
    l.outType[i] = int32_t(outs[i]->dtype);
    l.outMap[i] = m->flatMap();
  }
  return llvm::Error::success();
}

} // namespace

/// Checks \p c against its tensors and describes the layer (or, with
/// \p grad, its gradient op) as plain data.
llvm::Expected<recurrent::Layer>
prepareRecurrent(const plan::Compute &c, RecurrentCell cell,
                 llvm::ArrayRef<const Tensor *> ins,
                 llvm::ArrayRef<Tensor *> outs, bool grad) {
  if (auto err = checkSupported(c))
    return err;
  bool lstm = cell == RecurrentCell::Lstm;
  if (auto err = checkCounts(c, lstm, grad, ins, outs))
    return err;
  if (auto err = checkWhole(c, ins, outs))
    return err;
  Layer l;
  l.lstm = lstm;
  IterationSpace space = IterationSpace::of(c);
  l.gates = lstm ? 4 : 3;
  const Tensor *w = ins[1], *r = ins[2];
  if (auto err = describeSizes(c, space, w, r, l))
    return err;
  const plan::Attr *dir = findAttr(c, "direction");
  l.reverse = dir && dir->has_s() && dir->s() == "reverse";
  l.linearBeforeReset = attrInt(c, "linear_before_reset", 0) != 0;
  l.w = dense(w);
  l.r = dense(r);
  auto opt = findOptionalInputs(c, lstm, ins);
  if (!opt)
    return opt.takeError();
  if (auto err = describeBiasAndPeepholes(c, grad, *opt, l))
    return err;
  if (auto err = bindInputs(c, ins, space, *opt, l))
    return err;
  // The gradient op's result gradients (bit 0: Y, 1: Y_h, 2: Y_c), after
  // the layer's own operands.
  if (grad)
    if (auto err = bindResultGrads(c, ins, space, opt->next, l))
      return err;
  if (auto err = bindOutputs(c, outs, space, l))
    return err;
  return l;
}

llvm::Expected<recurrent::Layer>
prepareRecurrent(const plan::Compute &c, llvm::ArrayRef<const Tensor *> ins,
                 llvm::ArrayRef<Tensor *> outs) {
  if (std::optional<RecurrentCell> cell = parseRecurrentCell(c.kind()))
    return prepareRecurrent(c, *cell, ins, outs, false);
  if (std::optional<RecurrentCell> cell = parseRecurrentGradCell(c.kind()))
    return prepareRecurrent(c, *cell, ins, outs, true);
  return computeError(c, "not a recurrent compute");
}

/// Runs \p row on every (direction, batch row) of \p l in parallel, each
/// with \p scratch doubles of its own.
template <typename Row>
static void forEachRow(const recurrent::Layer &l, int64_t scratch, Row row) {
  tbb::parallel_for(int64_t(0), l.dirs * l.batch, [&](int64_t db) {
    std::vector<double> work(size_t(std::max<int64_t>(scratch, 1)));
    row(l, db / l.batch, db % l.batch, work.data());
  });
}

llvm::Error runRecurrent(const plan::Compute &c, RecurrentCell cell,
                         llvm::ArrayRef<const Tensor *> ins,
                         llvm::ArrayRef<Tensor *> outs) {
  auto l = prepareRecurrent(c, cell, ins, outs, false);
  if (!l)
    return l.takeError();
  forEachRow(*l, recurrent::forwardScratch(*l), recurrent::forwardRow);
  return llvm::Error::success();
}

llvm::Error runRecurrentGrad(const plan::Compute &c, RecurrentCell cell,
                             llvm::ArrayRef<const Tensor *> ins,
                             llvm::ArrayRef<Tensor *> outs) {
  auto l = prepareRecurrent(c, cell, ins, outs, true);
  if (!l)
    return l.takeError();
  forEachRow(*l, recurrent::gradScratch(*l), recurrent::gradRow);
  return llvm::Error::success();
}

} // namespace pax::runtime::cpu
