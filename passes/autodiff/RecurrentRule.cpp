//===- RecurrentRule.cpp - LSTM and GRU backpropagated through time -------===//
#include "passes/autodiff/GradientBuilder.h"

namespace pax {

namespace {

/// A parallel iteration dim.
IterDim par(llvm::StringRef name, int64_t n) {
  return IterDim{name.str(), n, IterKind::Parallel};
}

/// A reduction iteration dim.
IterDim red(llvm::StringRef name, int64_t n) {
  return IterDim{name.str(), n, IterKind::Reduction};
}

/// The backward of one lstm or gru op: the forward op's extents, where its
/// optional inputs are, and the results of its lstm_grad (gru_grad) op.
struct Bptt {
  // The forward op's iteration dims.
  enum { D, S, B, G, H, K };

  GradientBuilder &b;
  const Op &op;
  bool lstm;
  const Operand &x;
  int64_t dirs, steps, batch, gates, hs, in;
  DType elem;
  bool batchFirst;
  // Where the optional inputs are among the operands (ONNX input i).
  int where[8] = {0, 1, 2, -1, -1, -1, -1, -1};
  Value *dxg = nullptr, *dhg = nullptr, *vec = nullptr;
  Value *dh0 = nullptr, *dc0 = nullptr;

  Bptt(GradientBuilder &b, const Op &op);

  llvm::Error fail(const llvm::Twine &msg) const;
  bool needsInput(int i) const;
  void buildGradOp(llvm::ArrayRef<Value *> dys);
  void addGradResults(Op &g);
  Value *contraction(llvm::ArrayRef<IterDim> iters, Read a, Read c,
                     const AccessMap &out, const TensorType &type,
                     llvm::StringRef what);
  void weightGrad();
  void recurrenceGrad();
  void inputGrad();
  void biasGrad();
};

/// Reads the forward op's extents and finds its optional inputs.
Bptt::Bptt(GradientBuilder &b, const Op &op)
    : b(b), op(op), lstm(op.kind == OpKind::Lstm), x(op.operands[0]),
      dirs(op.iters[D].extent), steps(op.iters[S].extent),
      batch(op.iters[B].extent), gates(op.iters[G].extent),
      hs(op.iters[H].extent), in(x.value->type.shape.back()),
      elem(x.value->type.elem), batchFirst(op.intAttr("layout", 0) != 0) {
  int64_t present = op.intAttr("inputs", 0);
  for (int i = 3, next = 3; i < 8; ++i)
    if (present & (int64_t(1) << i))
      where[i] = next++;
}

/// An error that names the forward op.
llvm::Error Bptt::fail(const llvm::Twine &msg) const {
  return llvm::createStringError("autodiff: op '" + op.name().str() + "' (" +
                                 opKindName(op.kind).str() + "): " + msg);
}

/// Whether ONNX input \p i is present and needs a gradient.
bool Bptt::needsInput(int i) const {
  return where[i] >= 0 && b.needs(unsigned(where[i]));
}

/// Builds the lstm_grad (gru_grad) op over the forward op's dims: it reads
/// the forward op's operands and the results' gradients it is given.
void Bptt::buildGradOp(llvm::ArrayRef<Value *> dys) {
  Op *g = b.newOpLikeForward(lstm ? OpKind::LstmGrad : OpKind::GruGrad, "bptt");
  for (const auto &[key, value] : op.attrs)
    if (key != "name" && key != "config")
      g->attrs[key] = value;
  for (const Operand &o : op.operands)
    g->operands.push_back(o);
  int64_t grads = 0;
  for (size_t r = 0; r < dys.size() && r < 3; ++r)
    if (dys[r]) {
      grads |= int64_t(1) << r;
      g->operands.push_back({dys[r], op.results[r].map});
    }
  g->attrs["grads"] = grads;
  addGradResults(*g);
}

/// Gives \p g its results: each step's gate gradients (x side and h side),
/// the vectors R multiplied, dH0 and (for lstm) dC0.
void Bptt::addGradResults(Op &g) {
  auto dim = AccessExpr::dim;
  TensorType gateType{elem, {steps, dirs, batch, gates, hs}};
  AccessMap gateMap = {dim(S), dim(D), dim(B), dim(G), dim(H)};
  AccessMap state = batchFirst ? AccessMap{dim(B), dim(D), dim(H)}
                               : AccessMap{dim(D), dim(B), dim(H)};
  TensorType stateType{
      elem, batchFirst ? llvm::SmallVector<int64_t, 4>{batch, dirs, hs}
                       : llvm::SmallVector<int64_t, 4>{dirs, batch, hs}};
  dxg = g.addResult(gateType, gateMap);
  dhg = g.addResult(gateType, gateMap);
  vec = g.addResult(gateType, gateMap);
  dh0 = g.addResult(stateType, state);
  dc0 = lstm ? g.addResult(stateType, state) : nullptr;
}

/// A matmul over \p iters of \p a and \p c, writing \p type through \p out.
Value *Bptt::contraction(llvm::ArrayRef<IterDim> iters, Read a, Read c,
                         const AccessMap &out, const TensorType &type,
                         llvm::StringRef what) {
  Op *m = b.newOp(OpKind::MatMul, iters, what);
  m->operands.push_back({a.value, a.map});
  m->operands.push_back({c.value, c.map});
  return m->addResult(type, out);
}

/// Adds the input weights' gradient.
void Bptt::weightGrad() {
  auto dim = AccessExpr::dim;
  const TensorType &wType = op.operands[1].value->type;
  // dW[d, (g, h), k] = sum over s, b of dXG[s, d, b, g, h] x[s, b, k].
  // dims: 0 d, 1 g, 2 h, 3 k, 4 s, 5 b
  AccessMap xm = batchFirst ? AccessMap{dim(5), dim(4), dim(3)}
                            : AccessMap{dim(4), dim(5), dim(3)};
  b.accumulate(op.operands[1].value,
               contraction({par("d", dirs), par("g", gates), par("h", hs),
                            par("k", in), red("s", steps), red("b", batch)},
                           {dxg, {dim(4), dim(0), dim(5), dim(1), dim(2)}},
                           {x.value, xm},
                           {dim(0), AccessExpr::group({1, 2}), dim(3)}, wType,
                           "dweight"));
}

/// Adds the recurrence weights' gradient.
void Bptt::recurrenceGrad() {
  auto dim = AccessExpr::dim;
  // dR[d, (g, h), j] = sum over s, b of dHG[s, d, b, g, h] v[s, d, b, g, j].
  b.accumulate(op.operands[2].value,
               contraction({par("d", dirs), par("g", gates), par("h", hs),
                            par("j", hs), red("s", steps), red("b", batch)},
                           {dhg, {dim(4), dim(0), dim(5), dim(1), dim(2)}},
                           {vec, {dim(4), dim(0), dim(5), dim(1), dim(3)}},
                           {dim(0), AccessExpr::group({1, 2}), dim(3)},
                           op.operands[2].value->type, "drecurrence"));
}

/// Adds the input's gradient.
void Bptt::inputGrad() {
  auto dim = AccessExpr::dim;
  // dX[s, b, k] = sum over d, g, h of dXG[s, d, b, g, h] W[d, (g, h), k].
  // dims: 0 s, 1 b, 2 k, 3 d, 4 g, 5 h
  AccessMap out = batchFirst ? AccessMap{dim(1), dim(0), dim(2)}
                             : AccessMap{dim(0), dim(1), dim(2)};
  b.accumulate(x.value,
               contraction({par("s", steps), par("b", batch), par("k", in),
                            red("d", dirs), red("g", gates), red("h", hs)},
                           {dxg, {dim(0), dim(3), dim(1), dim(4), dim(5)}},
                           {op.operands[1].value,
                            {dim(3), AccessExpr::group({4, 5}), dim(2)}},
                           out, x.value->type, "dx"));
}

/// Adds the biases' gradient.
void Bptt::biasGrad() {
  auto dim = AccessExpr::dim;
  // dB = [sum dXG, sum dHG] over steps and batch.
  TensorType half{elem, {dirs, gates * hs}};
  auto sum = [&](Value *v, llvm::StringRef what) {
    Op *m = b.newOp(OpKind::ReduceSum,
                    {par("d", dirs), par("g", gates), par("h", hs),
                     red("s", steps), red("b", batch)},
                    what);
    m->operands.push_back({v, {dim(3), dim(0), dim(4), dim(1), dim(2)}});
    return m->addResult(half, {dim(0), AccessExpr::group({1, 2})});
  };
  Value *wb = sum(dxg, "dbias_w"), *rb = sum(dhg, "dbias_r");
  Op *cat = b.newOp(OpKind::Concat, {par("d", dirs), par("c", 2 * gates * hs)},
                    "dbias");
  cat->operands.push_back({wb, {dim(0), dim(1)}});
  cat->operands.push_back(
      {rb, {dim(0), AccessExpr::shifted(1, 1, -gates * hs)}});
  const Value *bias = op.operands[size_t(where[3])].value;
  b.accumulate(bias, cat->addResult(bias->type, {dim(0), dim(1)}));
}

} // namespace

// lstm and gru: backpropagation through time. One lstm_grad (gru_grad)
// op over the layer's own dims (split like it, by the batch) runs the layer
// again and back and writes each step's gate gradients (x side and h side)
// and the vectors R multiplied; the weights', biases' and input's
// gradients are contractions and sums of those over the steps and the
// batch (partial sums where the batch is split), and dH0, dC0 come out of
// the recurrence.
llvm::Error recurrentRule(GradientBuilder &b, const Op &op,
                          llvm::ArrayRef<Value *> dys) {
  Bptt r(b, op);
  if (r.needsInput(7))
    return r.fail("peepholes are not supported in the gradient");
  r.buildGradOp(dys);
  if (b.needs(1))
    r.weightGrad();
  if (b.needs(2))
    r.recurrenceGrad();
  if (b.needs(0))
    r.inputGrad();
  if (r.needsInput(3))
    r.biasGrad();
  if (r.needsInput(5))
    b.accumulate(op.operands[size_t(r.where[5])].value, r.dh0);
  if (r.lstm && r.needsInput(6))
    b.accumulate(op.operands[size_t(r.where[6])].value, r.dc0);
  return llvm::Error::success();
}

} // namespace pax
