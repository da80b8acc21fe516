//===- Normalization.cpp - Importers of norms, softmax and reductions -----===//
#include "frontend/OnnxOps.h"

#include "llvm/ADT/StringSwitch.h"

namespace pax {

/// Outputs past the first are statistics paxc does not produce.
static llvm::Error onlyFirstOutput(NodeContext &ctx) {
  for (unsigned i = 1; i < ctx.numOutputs(); ++i)
    if (!ctx.proto().output(i).empty())
      return ctx.error("output " + llvm::Twine(i) +
                       " (training statistics) is not supported");
  return llvm::Error::success();
}

llvm::Error importBatchNorm(NodeContext &ctx) {
  if (auto err = onlyFirstOutput(ctx))
    return err;
  llvm::ArrayRef<int64_t> x = ctx.shape(0);
  if (x.size() < 2)
    return ctx.error("input must have rank 2 or more");
  auto op = ctx.newOp(OpKind::BatchNorm);
  op->iters = parallelSpace(x);
  op->operands.push_back({ctx.value(0), identityMap(x.size())});
  for (unsigned i = 1; i < 5; ++i) {
    if (!ctx.hasInput(i))
      return ctx.error("missing input " + llvm::Twine(i));
    if (ctx.shape(i).size() != 1 || ctx.shape(i)[0] != x[1])
      return ctx.error("input " + llvm::Twine(i) + " has shape " +
                       shapeStr(ctx.shape(i)) + ", expected " +
                       llvm::Twine(x[1]) + " (the channels)");
    op->operands.push_back({ctx.value(i), {AccessExpr::dim(1)}});
  }
  op->addResult(ctx.type(0), identityMap(x.size()));
  op->attrs["epsilon"] = ctx.attrFloat("epsilon", 1e-5f);
  return ctx.finish(std::move(op));
}

llvm::Error importInstanceNorm(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> x = ctx.shape(0);
  if (x.size() < 3)
    return ctx.error("input must have rank 3 or more");
  auto op = ctx.newOp(OpKind::InstanceNorm);
  op->iters = parallelSpace(x);
  for (size_t i = 2; i < x.size(); ++i)
    op->iters[i].kind = IterKind::Reduction;
  op->operands.push_back({ctx.value(0), identityMap(x.size())});
  for (unsigned i = 1; i < 3; ++i) {
    if (ctx.shape(i).size() != 1 || ctx.shape(i)[0] != x[1])
      return ctx.error("input " + llvm::Twine(i) + " has shape " +
                       shapeStr(ctx.shape(i)) + ", expected " +
                       llvm::Twine(x[1]));
    op->operands.push_back({ctx.value(i), {AccessExpr::dim(1)}});
  }
  op->addResult(ctx.type(0), identityMap(x.size()));
  op->attrs["epsilon"] = ctx.attrFloat("epsilon", 1e-5f);
  return ctx.finish(std::move(op));
}

/// LayerNormalization and RMSNormalization: dims from `axis` on are
/// normalized (reduction dims that the result keeps).
llvm::Error importLayerNorm(NodeContext &ctx) {
  if (auto err = onlyFirstOutput(ctx))
    return err;
  // RMSNormalization is newer than the ONNX library's schemas, which check
  // the inputs of the other ops before import.
  if (!ctx.hasInput(0))
    return ctx.error("missing input 0 (X)");
  llvm::ArrayRef<int64_t> x = ctx.shape(0);
  auto axis = ctx.axis(ctx.attrInt("axis", -1), x.size());
  if (!axis)
    return axis.takeError();
  bool rms = ctx.opType() == "RMSNormalization";
  auto op = ctx.newOp(rms ? OpKind::RmsNorm : OpKind::LayerNorm);
  op->iters = parallelSpace(x);
  for (size_t i = *axis; i < x.size(); ++i)
    op->iters[i].kind = IterKind::Reduction;
  op->operands.push_back({ctx.value(0), identityMap(x.size())});
  for (unsigned i = 1; i < 3; ++i) {
    if (!ctx.hasInput(i))
      continue;
    auto b = broadcastShapes(ctx, ctx.shape(i), x);
    if (!b)
      return b.takeError();
    if (llvm::ArrayRef<int64_t>(*b) != x)
      return ctx.error("scale/bias of shape " + shapeStr(ctx.shape(i)) +
                       " does not broadcast to " + shapeStr(x));
    op->operands.push_back({ctx.value(i), broadcastMap(ctx.shape(i), x)});
  }
  op->addResult(ctx.type(0), identityMap(x.size()));
  op->attrs["axis"] = int64_t(*axis);
  op->attrs["epsilon"] = ctx.attrFloat("epsilon", 1e-5f);
  return ctx.finish(std::move(op));
}

llvm::Error importSoftmax(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> x = ctx.shape(0);
  bool legacy = ctx.opset() < 13; // axis and everything after it
  auto axis = ctx.axis(ctx.attrInt("axis", legacy ? 1 : -1), x.size());
  if (!axis)
    return axis.takeError();
  auto op = ctx.newOp(ctx.opType() == "Softmax" ? OpKind::Softmax
                                                : OpKind::LogSoftmax);
  op->iters = parallelSpace(x);
  for (size_t i = *axis; i < (legacy ? x.size() : *axis + 1); ++i)
    op->iters[i].kind = IterKind::Reduction;
  op->operands.push_back({ctx.value(0), identityMap(x.size())});
  op->addResult(ctx.type(0), identityMap(x.size()));
  op->attrs["axis"] = int64_t(*axis);
  return ctx.finish(std::move(op));
}

llvm::Error importReduce(NodeContext &ctx) {
  OpKind kind = llvm::StringSwitch<OpKind>(ctx.opType())
                    .Case("ReduceL1", OpKind::ReduceL1)
                    .Case("ReduceL2", OpKind::ReduceL2)
                    .Case("ReduceLogSumExp", OpKind::ReduceLogSumExp)
                    .Case("ReduceMax", OpKind::ReduceMax)
                    .Case("ReduceMean", OpKind::ReduceMean)
                    .Case("ReduceMin", OpKind::ReduceMin)
                    .Case("ReduceProd", OpKind::ReduceProd)
                    .Case("ReduceSum", OpKind::ReduceSum)
                    .Default(OpKind::ReduceSumSquare);
  llvm::ArrayRef<int64_t> x = ctx.shape(0);
  auto axesList = intsFromAttrOrInput(ctx, "axes", 1);
  if (!axesList)
    return axesList.takeError();
  llvm::SmallVector<bool, 6> reduced(x.size(), false);
  for (int64_t a : *axesList) {
    auto ax = ctx.axis(a, x.size(), "reduction axis");
    if (!ax)
      return ax.takeError();
    reduced[*ax] = true;
  }
  if (axesList->empty()) {
    if (ctx.attrInt("noop_with_empty_axes", 0)) {
      ctx.forward(0, 0);
      return llvm::Error::success();
    }
    reduced.assign(x.size(), true);
  }
  bool keep = ctx.attrInt("keepdims", 1) != 0;
  auto op = ctx.newOp(kind);
  op->iters = parallelSpace(x);
  AccessMap out;
  llvm::SmallVector<int64_t, 4> shape;
  for (size_t i = 0; i < x.size(); ++i) {
    if (reduced[i]) {
      op->iters[i].kind = IterKind::Reduction;
      if (keep)
        out.push_back(AccessExpr::broadcast()), shape.push_back(1);
    } else {
      out.push_back(AccessExpr::dim(i));
      shape.push_back(x[i]);
    }
  }
  op->operands.push_back({ctx.value(0), identityMap(x.size())});
  op->addResult(TensorType{ctx.type(0).elem, shape}, out);
  return ctx.finish(std::move(op));
}

/// ArgMax / ArgMin: the position of the extreme along `axis`, as int64. A
/// split of the axis would need the positions of every block's extreme
/// compared, which no collective does: the kind's partials are None.
llvm::Error importArgReduce(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> x = ctx.shape(0);
  if (x.empty())
    return ctx.error("data must have rank 1 or more");
  auto axis = ctx.axis(ctx.attrInt("axis", 0), x.size());
  if (!axis)
    return axis.takeError();
  bool keep = ctx.attrInt("keepdims", 1) != 0;
  auto op = ctx.newOp(ctx.opType() == "ArgMax" ? OpKind::ArgMax
                                               : OpKind::ArgMin);
  op->iters = parallelSpace(x);
  op->iters[*axis].kind = IterKind::Reduction;
  AccessMap out;
  llvm::SmallVector<int64_t, 4> shape;
  for (size_t i = 0; i < x.size(); ++i) {
    if (i != *axis) {
      out.push_back(AccessExpr::dim(unsigned(i)));
      shape.push_back(x[i]);
    } else if (keep) {
      out.push_back(AccessExpr::broadcast());
      shape.push_back(1);
    }
  }
  op->operands.push_back({ctx.value(0), identityMap(x.size())});
  op->addResult(TensorType{DType::I64, shape}, out);
  op->attrs["axis"] = int64_t(*axis);
  op->attrs["select_last_index"] = ctx.attrInt("select_last_index", 0);
  return ctx.finish(std::move(op));
}

} // namespace pax
