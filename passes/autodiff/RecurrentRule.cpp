//===- RecurrentRule.cpp - LSTM and GRU backpropagated through time -------===//
#include "passes/autodiff/GradientBuilder.h"

namespace pax {

// lstm and gru: backpropagation through time. One lstm_grad (gru_grad)
// op over the layer's own dims (split like it, by the batch) runs the layer
// again and back and writes each step's gate gradients (x side and h side)
// and the vectors R multiplied; the weights', biases' and input's
// gradients are contractions and sums of those over the steps and the
// batch (partial sums where the batch is split), and dH0, dC0 come out of
// the recurrence.
llvm::Error recurrentRule(GradientBuilder &b, const Op &op,
                          llvm::ArrayRef<Value *> dys) {
  enum { D, S, B, G, H, K };
  bool lstm = op.kind == OpKind::Lstm;
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError("autodiff: op '" + op.name().str() + "' (" +
                                   opKindName(op.kind).str() + "): " + msg);
  };
  const Operand &x = op.operands[0];
  int64_t dirs = op.iters[D].extent, steps = op.iters[S].extent,
          batch = op.iters[B].extent, gates = op.iters[G].extent,
          hs = op.iters[H].extent, in = x.value->type.shape.back();
  DType elem = x.value->type.elem;
  bool batchFirst = op.intAttr("layout", 0) != 0;
  // Where the optional inputs are among the operands (ONNX input i).
  int64_t present = op.intAttr("inputs", 0);
  int where[8] = {0, 1, 2, -1, -1, -1, -1, -1};
  for (int i = 3, next = 3; i < 8; ++i)
    if (present & (int64_t(1) << i))
      where[i] = next++;
  if (where[7] >= 0 && b.needs(unsigned(where[7])))
    return fail("peepholes are not supported in the gradient");

  Op *g = b.newOpLikeForward(lstm ? OpKind::LstmGrad : OpKind::GruGrad,
                             "bptt");
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
  auto dim = AccessExpr::dim;
  TensorType gateType{elem, {steps, dirs, batch, gates, hs}};
  AccessMap gateMap = {dim(S), dim(D), dim(B), dim(G), dim(H)};
  AccessMap state = batchFirst ? AccessMap{dim(B), dim(D), dim(H)}
                               : AccessMap{dim(D), dim(B), dim(H)};
  TensorType stateType{elem, batchFirst ? llvm::SmallVector<int64_t, 4>{batch, dirs, hs}
                                        : llvm::SmallVector<int64_t, 4>{dirs, batch, hs}};
  Value *dxg = g->addResult(gateType, gateMap);
  Value *dhg = g->addResult(gateType, gateMap);
  Value *vec = g->addResult(gateType, gateMap);
  Value *dh0 = g->addResult(stateType, state);
  Value *dc0 = lstm ? g->addResult(stateType, state) : nullptr;

  auto par = [](llvm::StringRef name, int64_t n) {
    return IterDim{name.str(), n, IterKind::Parallel};
  };
  auto red = [](llvm::StringRef name, int64_t n) {
    return IterDim{name.str(), n, IterKind::Reduction};
  };
  auto contraction = [&](llvm::ArrayRef<IterDim> iters, Read a, Read c,
                         const AccessMap &out, const TensorType &type,
                         llvm::StringRef what) {
    Op *m = b.newOp(OpKind::MatMul, iters, what);
    m->operands.push_back({a.value, a.map});
    m->operands.push_back({c.value, c.map});
    return m->addResult(type, out);
  };
  const TensorType &wType = op.operands[1].value->type;
  // dW[d, (g, h), k] = sum over s, b of dXG[s, d, b, g, h] x[s, b, k].
  if (b.needs(1)) {
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
  // dR[d, (g, h), j] = sum over s, b of dHG[s, d, b, g, h] v[s, d, b, g, j].
  if (b.needs(2))
    b.accumulate(op.operands[2].value,
                 contraction({par("d", dirs), par("g", gates), par("h", hs),
                              par("j", hs), red("s", steps), red("b", batch)},
                             {dhg, {dim(4), dim(0), dim(5), dim(1), dim(2)}},
                             {vec, {dim(4), dim(0), dim(5), dim(1), dim(3)}},
                             {dim(0), AccessExpr::group({1, 2}), dim(3)},
                             op.operands[2].value->type, "drecurrence"));
  // dX[s, b, k] = sum over d, g, h of dXG[s, d, b, g, h] W[d, (g, h), k].
  if (b.needs(0)) {
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
  // dB = [sum dXG, sum dHG] over steps and batch.
  if (where[3] >= 0 && b.needs(unsigned(where[3]))) {
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
    Op *cat = b.newOp(OpKind::Concat,
                      {par("d", dirs), par("c", 2 * gates * hs)}, "dbias");
    cat->operands.push_back({wb, {dim(0), dim(1)}});
    cat->operands.push_back(
        {rb, {dim(0), AccessExpr::shifted(1, 1, -gates * hs)}});
    const Value *bias = op.operands[size_t(where[3])].value;
    b.accumulate(bias, cat->addResult(bias->type, {dim(0), dim(1)}));
  }
  if (where[5] >= 0 && b.needs(unsigned(where[5])))
    b.accumulate(op.operands[size_t(where[5])].value, dh0);
  if (lstm && where[6] >= 0 && b.needs(unsigned(where[6])))
    b.accumulate(op.operands[size_t(where[6])].value, dc0);
  return llvm::Error::success();
}

} // namespace pax
