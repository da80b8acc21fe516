//===- Attention.cpp - ONNX's Attention as the attention op ---------------===//
#include "frontend/OnnxOps.h"

#include <cmath>
#include <limits>

namespace pax {
namespace {

using Shape4 = llvm::SmallVector<int64_t, 4>;

/// What of ONNX's Attention (opset 23) the attention op does not cover:
/// an error naming it, or success.
llvm::Error unsupportedAttention(NodeContext &ctx) {
  // The ONNX library paxc links may predate Attention (opset 23), so its
  // schema's arity is checked here.
  if (!ctx.hasInput(0) || !ctx.hasInput(1) || !ctx.hasInput(2) ||
      ctx.numOutputs() < 1 || ctx.proto().output(0).empty())
    return ctx.error("needs inputs Q, K and V and output Y");
  for (unsigned i = 0; i < 3; ++i)
    if (ctx.rank(i) != 3 && ctx.rank(i) != 4)
      return ctx.error("Q, K and V must have rank 4 [batch, heads, sequence, "
                       "head size] or 3 [batch, sequence, hidden]");
  if (ctx.hasInput(4) || ctx.hasInput(5))
    return ctx.error("past_key and past_value (a KV cache) are not supported");
  if (ctx.hasInput(6))
    return ctx.error("nonpad_kv_seqlen is not supported");
  if (ctx.attrFloat("softcap", 0) != 0)
    return ctx.error("softcap is not supported");
  if (ctx.numOutputs() > 3 && !ctx.proto().output(3).empty())
    return ctx.error("the qk_matmul_output output is not supported");
  bool present = (ctx.numOutputs() > 1 && !ctx.proto().output(1).empty()) ||
                 (ctx.numOutputs() > 2 && !ctx.proto().output(2).empty());
  if (present && (ctx.rank(1) != 4 || ctx.rank(2) != 4))
    return ctx.error("present_key and present_value of 3-D K and V are not "
                     "supported");
  return llvm::Error::success();
}

/// Input \p i as [batch, heads, sequence, head]: a rank-4 input as it is,
/// a rank-3 [batch, sequence, heads * head] split by a reshape into
/// \p heads (attribute \p attr).
llvm::Expected<std::pair<Value *, Shape4>> asHeads(NodeContext &ctx, unsigned i,
                                                   llvm::StringRef attr) {
  llvm::ArrayRef<int64_t> x = ctx.shape(i);
  if (x.size() == 4)
    return std::pair{ctx.value(i), Shape4(x.begin(), x.end())};
  int64_t heads = ctx.attrInt(attr, 0);
  if (heads <= 0 || x[2] % heads)
    return ctx.error("a 3-D input of shape " + shapeStr(x) + " needs " + attr +
                     " dividing its hidden size");
  Shape4 s = {x[0], heads, x[1], x[2] / heads};
  auto op = ctx.newOp(OpKind::Reshape);
  op->attrs["name"] = (op->name() + "/heads" + llvm::Twine(i)).str();
  op->iters = parallelSpace(s);
  auto dim = AccessExpr::dim;
  op->operands.push_back(
      {ctx.value(i), {dim(0), dim(2), AccessExpr::group({1, 3})}});
  op->addResult(TensorType{ctx.type(i).elem, s}, identityMap(4));
  return std::pair{ctx.emit(std::move(op)), s};
}

/// \p x ([batch, kv heads, sequence, head]) repeated for grouped-query
/// attention: key/value head j serves query heads [j g, (j + 1) g).
Value *repeatHeads(NodeContext &ctx, Value *x, const Shape4 &s, int64_t g,
                   llvm::StringRef what) {
  auto op = ctx.newOp(OpKind::Expand);
  op->attrs["name"] = (op->name() + "/repeat_" + what).str();
  op->iters = {{"b", s[0], IterKind::Parallel},
               {"h", s[1], IterKind::Parallel},
               {"g", g, IterKind::Parallel},
               {"l", s[2], IterKind::Parallel},
               {"d", s[3], IterKind::Parallel}};
  auto dim = AccessExpr::dim;
  op->operands.push_back({x, {dim(0), dim(1), dim(3), dim(4)}});
  op->addResult(TensorType{x->type.elem, {s[0], s[1] * g, s[2], s[3]}},
                {dim(0), AccessExpr::group({1, 2}), dim(3), dim(4)});
  return ctx.emit(std::move(op));
}

/// The mask (input 3) over the scores \p scores: boolean keeps where true,
/// float is added.
llvm::Error readMask(NodeContext &ctx, Op &op, const Shape4 &scores) {
  auto b = broadcastShapes(ctx, ctx.shape(3), scores);
  if (!b)
    return b.takeError();
  if (llvm::ArrayRef<int64_t>(*b) != llvm::ArrayRef<int64_t>(scores))
    return ctx.error("attn_mask of shape " + shapeStr(ctx.shape(3)) +
                     " does not broadcast to the scores " + shapeStr(scores));
  bool keep = ctx.type(3).elem == DType::I1;
  op.operands.push_back({ctx.value(3), broadcastMap(ctx.shape(3), scores)});
  op.attrs["masks"] = std::vector<int64_t>{keep ? 2 : 1};
  if (keep)
    op.attrs["fills"] =
        std::vector<float>{-std::numeric_limits<float>::infinity()};
  return llvm::Error::success();
}

/// The output back to 3-D [batch, sequence, heads * head] (a reshape),
/// bound to the node's output.
llvm::Error finishMerged(NodeContext &ctx, Value *y) {
  const auto &s = y->type.shape;
  auto op = ctx.newOp(OpKind::Reshape);
  op->iters = parallelSpace(s);
  op->operands.push_back({y, identityMap(4)});
  auto dim = AccessExpr::dim;
  op->addResult(TensorType{y->type.elem, {s[0], s[2], s[1] * s[3]}},
                {dim(0), dim(2), AccessExpr::group({1, 3})});
  return ctx.finish(std::move(op));
}

} // namespace

/// ONNX's Attention: the attention op over [b, h, q, k], an optional mask
/// (boolean: keep where true; float: added), is_causal as the op's `causal`
/// (a query sees the keys up to its own index, upper-left aligned). 3-D
/// inputs are split into heads and the output merged back; grouped-query
/// K and V are repeated to the query heads. present_key and present_value,
/// without a past, are K and V.
llvm::Error importAttention(NodeContext &ctx) {
  if (auto err = unsupportedAttention(ctx))
    return err;
  auto q = asHeads(ctx, 0, "q_num_heads");
  auto k = q ? asHeads(ctx, 1, "kv_num_heads") : q.takeError();
  auto v = k ? asHeads(ctx, 2, "kv_num_heads") : k.takeError();
  if (!v)
    return v.takeError();
  const Shape4 &qs = q->second, &ks = k->second, &vs = v->second;
  if (ks[0] != qs[0] || vs[0] != qs[0] || ks[3] != qs[3] || vs[2] != ks[2] ||
      vs[1] != ks[1] || qs[1] % ks[1])
    return ctx.error("Q " + shapeStr(qs) + ", K " + shapeStr(ks) + " and V " +
                     shapeStr(vs) +
                     " (as [batch, heads, sequence, head]) "
                     "do not agree");
  Value *kv[2] = {k->first, v->first};
  if (int64_t g = qs[1] / ks[1]; g > 1) {
    kv[0] = repeatHeads(ctx, kv[0], ks, g, "k");
    kv[1] = repeatHeads(ctx, kv[1], vs, g, "v");
  }
  auto op = ctx.newOp(OpKind::Attention);
  op->iters = {{"b0", qs[0], IterKind::Parallel},
               {"b1", qs[1], IterKind::Parallel},
               {"q", qs[2], IterKind::Parallel},
               {"k", ks[2], IterKind::Reduction}};
  auto dim = AccessExpr::dim;
  AccessMap rows = {dim(0), dim(1), dim(2), AccessExpr::full()};
  AccessMap keys = {dim(0), dim(1), dim(3), AccessExpr::full()};
  op->operands = {{q->first, rows}, {kv[0], keys}, {kv[1], keys}};
  if (ctx.hasInput(3))
    if (auto err = readMask(ctx, *op, {qs[0], qs[1], qs[2], ks[2]}))
      return err;
  op->attrs["scale"] = ctx.attrFloat("scale", 1.0f / std::sqrt(float(qs[3])));
  if (ctx.attrInt("is_causal", 0))
    op->attrs["causal"] = int64_t(1);
  DType elem = ctx.type(0).elem;
  op->addResult(TensorType{elem, {qs[0], qs[1], qs[2], vs[3]}}, rows);
  op->addResult(TensorType{elem, {qs[0], qs[1], qs[2]}},
                {dim(0), dim(1), dim(2)});
  if (ctx.rank(0) == 3)
    return finishMerged(ctx, ctx.emit(std::move(op)));
  if (auto err = ctx.finish(std::move(op), 1))
    return err;
  for (unsigned i = 1; i < 3 && i < ctx.numOutputs(); ++i)
    if (!ctx.proto().output(int(i)).empty())
      ctx.forward(i, i);
  return llvm::Error::success();
}

} // namespace pax
