//===- AttentionRule.cpp - The gradients of one attention op --------------===//
#include "passes/autodiff/GradientBuilder.h"

namespace pax {
namespace {

/// \p map with the queries' and keys' dims (the last two) swapped: how
/// attention_grad_kv, over [batch..., k, q], reads what the forward op
/// reads over [batch..., q, k].
AccessMap swapRows(AccessMap map, unsigned rank) {
  for (AccessExpr &e : map)
    for (unsigned &d : e.dims)
      d = d == rank - 2 ? rank - 1 : d == rank - 1 ? rank - 2 : d;
  return map;
}

/// D = rowsum(dO * O) over the head dim, laid out like the rows'
/// log-sum-exp (both gradient ops read it).
Value *rowDots(GradientBuilder &b, const Op &op, Value *dO) {
  const Result &o = op.results[0], &lse = op.results[1];
  const TensorType &type = o.value->type;
  Value *prod =
      b.elementwise(OpKind::Mul, {dO, o.value.get()}, type, "d_out_times_out");
  llvm::SmallVector<IterDim, 6> iters;
  AccessMap whole;
  for (size_t j = 0; j < o.map.size(); ++j) {
    bool head = o.map[j].kind == AccessExpr::Kind::Full;
    iters.push_back({"d" + std::to_string(j), type.shape[j],
                     head ? IterKind::Reduction : IterKind::Parallel});
    whole.push_back(AccessExpr::dim(unsigned(j)));
  }
  Op *sum = b.newOp(OpKind::ReduceSum, iters, "row_dots");
  sum->operands.push_back({prod, whole});
  // Row dim i of the attention op is O's tensor dim j that O's map writes
  // through dim i.
  AccessMap rows;
  for (const AccessExpr &e : lse.map)
    for (size_t j = 0; j < o.map.size(); ++j)
      if (o.map[j].isPlainDim() && o.map[j].dims == e.dims)
        rows.push_back(AccessExpr::dim(unsigned(j)));
  return sum->addResult(lse.value->type, rows);
}

/// A gradient op's operands (Q, K, V, dO, lse, D, the masks; with
/// \p swap, over [batch..., k, q]) and the forward op's attributes.
void readForward(Op &g, const Op &op, Value *dO, Value *delta, bool swap) {
  unsigned rank = unsigned(op.iters.size());
  auto at = [&](const AccessMap &m) { return swap ? swapRows(m, rank) : m; };
  for (unsigned k = 0; k < 3; ++k)
    g.operands.push_back({op.operands[k].value, at(op.operands[k].map)});
  g.operands.push_back({dO, at(op.results[0].map)});
  g.operands.push_back({op.results[1].value.get(), at(op.results[1].map)});
  g.operands.push_back({delta, at(op.results[1].map)});
  for (size_t k = 3; k < op.operands.size(); ++k)
    g.operands.push_back({op.operands[k].value, at(op.operands[k].map)});
  for (const char *key : {"scale", "masks", "fills", "nan_to_zero", "causal"})
    if (auto it = op.attrs.find(key); it != op.attrs.end())
      g.attrs[key] = it->second;
}

/// attention_grad_kv's dims: the forward op's with the last two swapped,
/// the queries now the reduction; its configuration likewise.
Op *gradKVOp(GradientBuilder &b, const Op &op) {
  llvm::SmallVector<IterDim, 6> iters(op.iters.begin(), op.iters.end());
  size_t rank = iters.size();
  std::swap(iters[rank - 2], iters[rank - 1]);
  iters[rank - 2].kind = IterKind::Parallel;
  iters[rank - 1].kind = IterKind::Reduction;
  Op *g = b.newOp(OpKind::AttentionGradKV, iters, "attention_grad_kv");
  if (auto it = op.attrs.find("config"); it != op.attrs.end()) {
    auto config = std::get<std::vector<int64_t>>(it->second);
    if (config.size() == rank)
      std::swap(config[rank - 2], config[rank - 1]);
    g->attrs["config"] = config;
  }
  return g;
}

} // namespace

// attention: dQ from attention_grad_q over the forward op's dims (split
// like it), dK and dV from attention_grad_kv over the same dims with the
// keys outer; both recompute the probabilities from Q, K, the masks and the
// rows' log-sum-exp, so the scores are stored by neither pass.
llvm::Error attentionRule(GradientBuilder &b, const Op &op,
                          llvm::ArrayRef<Value *> dys) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError("autodiff: op '" + op.name().str() +
                                   "' (attention): " + msg);
  };
  if (dys.size() > 1 && dys[1])
    return fail("the loss depends on the rows' log-sum-exp, which has no "
                "gradient rule");
  for (unsigned k = 3; k < op.operands.size(); ++k)
    if (b.needs(k))
      return fail("mask " + llvm::Twine(k - 3) +
                  " depends on a trainable parameter; its gradient is not "
                  "supported (run paxc with --fuse-attention=false)");
  Value *dO = dys.empty() ? nullptr : dys[0];
  if (!dO || !(b.needs(0) || b.needs(1) || b.needs(2)))
    return llvm::Error::success();
  Value *delta = rowDots(b, op, dO);
  if (b.needs(0)) {
    Op *g = b.newOpLikeForward(OpKind::AttentionGradQ, "attention_grad_q");
    readForward(*g, op, dO, delta, false);
    const Operand &q = op.operands[0];
    b.accumulate(q.value, g->addResult(q.value->type, q.map));
  }
  if (b.needs(1) || b.needs(2)) {
    Op *g = gradKVOp(b, op);
    readForward(*g, op, dO, delta, true);
    unsigned rank = unsigned(op.iters.size());
    const Operand &k = op.operands[1], &v = op.operands[2];
    Value *dk = g->addResult(k.value->type, swapRows(k.map, rank));
    Value *dv = g->addResult(v.value->type, swapRows(v.map, rank));
    if (b.needs(1))
      b.accumulate(k.value, dk);
    if (b.needs(2))
      b.accumulate(v.value, dv);
  }
  return llvm::Error::success();
}

} // namespace pax
