//===- Pooling.cpp - Importers of pooling and LRN -------------------------===//
#include "frontend/OnnxOps.h"

namespace pax {

llvm::Error importPool(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> x = ctx.shape(0);
  if (x.size() < 3)
    return ctx.error("input must have rank 3 or more, has " +
                     llvm::Twine(x.size()));
  if (ctx.numOutputs() > 1 && !ctx.proto().output(1).empty())
    return ctx.error("the Indices output of MaxPool is not supported");
  size_t ns = x.size() - 2;
  std::vector<int64_t> kernel = ctx.attrInts("kernel_shape");
  if (kernel.size() != ns)
    return ctx.error("kernel_shape needs " + llvm::Twine(ns) + " values, has " +
                     llvm::Twine(kernel.size()));
  auto ones = [&](std::vector<int64_t> v) {
    if (v.empty())
      v.assign(ns, 1);
    return v;
  };
  auto strides = ones(ctx.attrInts("strides"));
  auto dil = ones(ctx.attrInts("dilations"));
  if (strides.size() != ns || dil.size() != ns)
    return ctx.error("strides and dilations need " + llvm::Twine(ns) +
                     " values");
  auto dims = windowDims(ctx, x.drop_front(2), kernel, strides, dil,
                         ctx.attrInt("ceil_mode", 0) != 0);
  if (!dims)
    return dims.takeError();

  bool isMax = ctx.opType() == "MaxPool";
  auto op = ctx.newOp(isMax ? OpKind::MaxPool : OpKind::AveragePool);
  op->iters = {{"n", x[0], IterKind::Parallel},
               {"c", x[1], IterKind::Parallel}};
  for (size_t i = 0; i < ns; ++i)
    op->iters.push_back({ns == 2 ? (i ? "ow" : "oh") : "o" + std::to_string(i),
                         (*dims)[i].out, IterKind::Parallel});
  for (size_t i = 0; i < ns; ++i)
    op->iters.push_back({ns == 2 ? (i ? "kw" : "kh") : "k" + std::to_string(i),
                         kernel[i], IterKind::Reduction});
  AccessMap xm = {AccessExpr::dim(0), AccessExpr::dim(1)};
  AccessMap ym = {AccessExpr::dim(0), AccessExpr::dim(1)};
  llvm::SmallVector<int64_t, 4> yshape = {x[0], x[1]};
  for (size_t i = 0; i < ns; ++i) {
    unsigned o = 2 + i, k = 2 + ns + i;
    xm.push_back(
        AccessExpr::window(o, k, strides[i], dil[i], -(*dims)[i].padBegin));
    ym.push_back(AccessExpr::dim(o));
    yshape.push_back((*dims)[i].out);
  }
  op->operands.push_back({ctx.value(0), xm});
  op->addResult(TensorType{ctx.type(0).elem, yshape}, ym);
  if (!isMax)
    op->attrs["count_include_pad"] = ctx.attrInt("count_include_pad", 0);
  // The full window geometry, so a kernel can count padded elements.
  llvm::SmallVector<int64_t, 6> pads;
  for (const WindowDim &d : *dims)
    pads.push_back(d.padBegin);
  for (const WindowDim &d : *dims)
    pads.push_back(d.padEnd);
  op->attrs["pads"] = std::vector<int64_t>(pads.begin(), pads.end());
  return ctx.finish(std::move(op));
}

llvm::Error importGlobalPool(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> x = ctx.shape(0);
  if (x.size() < 3)
    return ctx.error("input must have rank 3 or more, has " +
                     llvm::Twine(x.size()));
  auto op = ctx.newOp(ctx.opType() == "GlobalMaxPool" ? OpKind::MaxPool
                                                      : OpKind::AveragePool);
  op->iters = {{"n", x[0], IterKind::Parallel},
               {"c", x[1], IterKind::Parallel}};
  AccessMap xm = {AccessExpr::dim(0), AccessExpr::dim(1)};
  AccessMap ym = xm;
  llvm::SmallVector<int64_t, 4> yshape = {x[0], x[1]};
  for (size_t i = 2; i < x.size(); ++i) {
    op->iters.push_back(
        {"k" + std::to_string(i - 2), x[i], IterKind::Reduction});
    xm.push_back(AccessExpr::dim(i));
    ym.push_back(AccessExpr::broadcast());
    yshape.push_back(1);
  }
  op->operands.push_back({ctx.value(0), xm});
  op->addResult(TensorType{ctx.type(0).elem, yshape}, ym);
  return ctx.finish(std::move(op));
}

llvm::Error importLrn(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> x = ctx.shape(0);
  if (x.size() < 3)
    return ctx.error("input must have rank 3 or more, has " +
                     llvm::Twine(x.size()));
  int64_t size = ctx.attrInt("size", 0);
  if (size < 1 || size > kMaxExtent)
    return ctx.error("size " + llvm::Twine(size) + " is outside [1, 2^48]");
  auto op = ctx.newOp(OpKind::Lrn);
  op->iters = parallelSpace(x);
  op->iters[0].name = "n";
  op->iters[1].name = "c";
  unsigned j = op->iters.size();
  op->iters.push_back({"j", size, IterKind::Reduction});
  // Channels c - (size-1)/2 ... c + size/2 around each output channel.
  AccessMap xm = identityMap(x.size());
  xm[1] = AccessExpr::window(1, j, 1, 1, -(size - 1) / 2);
  op->operands.push_back({ctx.value(0), xm});
  op->addResult(ctx.type(0), identityMap(x.size()));
  op->attrs["size"] = size;
  op->attrs["alpha"] = ctx.attrFloat("alpha", 1e-4f);
  op->attrs["beta"] = ctx.attrFloat("beta", 0.75f);
  op->attrs["bias"] = ctx.attrFloat("bias", 1.0f);
  return ctx.finish(std::move(op));
}

} // namespace pax
