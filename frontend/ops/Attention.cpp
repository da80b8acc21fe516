//===- Attention.cpp - ONNX's Attention as the attention op ---------------===//
#include "frontend/OnnxOps.h"

#include <cmath>
#include <limits>

namespace pax {

/// What of ONNX's Attention (opset 23) the attention op does not cover:
/// an error naming it, or success.
static llvm::Error unsupportedAttention(NodeContext &ctx) {
  if (ctx.rank(0) != 4 || ctx.rank(1) != 4 || ctx.rank(2) != 4)
    return ctx.error("Q, K and V must have rank 4 [batch, heads, sequence, "
                     "head size] (3-D inputs with the heads packed in the "
                     "hidden dim are not supported)");
  if (ctx.hasInput(4) || ctx.hasInput(5))
    return ctx.error("past_key and past_value (a KV cache) are not supported");
  if (ctx.hasInput(6))
    return ctx.error("nonpad_kv_seqlen is not supported");
  if (ctx.attrFloat("softcap", 0) != 0)
    return ctx.error("softcap is not supported");
  if (ctx.numOutputs() > 3 && !ctx.proto().output(3).empty())
    return ctx.error("the qk_matmul_output output is not supported");
  llvm::ArrayRef<int64_t> q = ctx.shape(0), k = ctx.shape(1), v = ctx.shape(2);
  if (k[1] != q[1] || v[1] != q[1])
    return ctx.error("grouped-query attention (" + llvm::Twine(q[1]) +
                     " query heads, " + llvm::Twine(k[1]) +
                     " key/value heads) is not supported");
  if (k[0] != q[0] || v[0] != q[0] || k[3] != q[3] || v[2] != k[2])
    return ctx.error("Q " + shapeStr(q) + ", K " + shapeStr(k) + " and V " +
                     shapeStr(v) + " do not agree");
  return llvm::Error::success();
}

/// ONNX's Attention: the attention op over [b, h, q, k], an optional mask
/// (boolean: keep where true; float: added), is_causal as the op's `causal`
/// (a query sees the keys up to its own index, upper-left aligned).
/// present_key and present_value, without a past, are K and V.
llvm::Error importAttention(NodeContext &ctx) {
  if (auto err = unsupportedAttention(ctx))
    return err;
  llvm::ArrayRef<int64_t> q = ctx.shape(0), k = ctx.shape(1), v = ctx.shape(2);
  auto op = ctx.newOp(OpKind::Attention);
  op->iters = {{"b0", q[0], IterKind::Parallel},
               {"b1", q[1], IterKind::Parallel},
               {"q", q[2], IterKind::Parallel},
               {"k", k[2], IterKind::Reduction}};
  auto dim = AccessExpr::dim;
  op->operands.push_back(
      {ctx.value(0), {dim(0), dim(1), dim(2), AccessExpr::full()}});
  op->operands.push_back(
      {ctx.value(1), {dim(0), dim(1), dim(3), AccessExpr::full()}});
  op->operands.push_back(
      {ctx.value(2), {dim(0), dim(1), dim(3), AccessExpr::full()}});
  if (ctx.hasInput(3)) {
    llvm::SmallVector<int64_t, 4> scores = {q[0], q[1], q[2], k[2]};
    auto b = broadcastShapes(ctx, ctx.shape(3), scores);
    if (!b)
      return b.takeError();
    if (llvm::ArrayRef<int64_t>(*b) != llvm::ArrayRef<int64_t>(scores))
      return ctx.error("attn_mask of shape " + shapeStr(ctx.shape(3)) +
                       " does not broadcast to the scores " + shapeStr(scores));
    bool keep = ctx.type(3).elem == DType::I1;
    op->operands.push_back({ctx.value(3), broadcastMap(ctx.shape(3), scores)});
    op->attrs["masks"] = std::vector<int64_t>{keep ? 2 : 1};
    if (keep)
      op->attrs["fills"] =
          std::vector<float>{-std::numeric_limits<float>::infinity()};
  }
  float scale = ctx.attrFloat("scale", 1.0f / std::sqrt(float(q[3])));
  op->attrs["scale"] = scale;
  if (ctx.attrInt("is_causal", 0))
    op->attrs["causal"] = int64_t(1);
  DType elem = ctx.type(0).elem;
  op->addResult(TensorType{elem, {q[0], q[1], q[2], v[3]}},
                {dim(0), dim(1), dim(2), AccessExpr::full()});
  op->addResult(TensorType{elem, {q[0], q[1], q[2]}}, {dim(0), dim(1), dim(2)});
  if (auto err = ctx.finish(std::move(op), 1))
    return err;
  for (unsigned i = 1; i < 3 && i < ctx.numOutputs(); ++i)
    if (!ctx.proto().output(int(i)).empty())
      ctx.forward(i, i);
  return llvm::Error::success();
}

} // namespace pax
