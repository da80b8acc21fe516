//===- Gather.cpp - Gather, GatherElements, GatherND and the scatters -----===//
#include "frontend/OnnxOps.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace pax {

/// A lookup along data dims [\p axis, \p axis + \p tuple) (one when
/// \p tuple is 0): `gather(v)` reads data at the index the indices hold.
/// Data dims before the axis are shared with the indices' first dims
/// (\p batchDims of them) or the result's own; then the indices' dims (with
/// a \p tuple, the last holds GatherND's index tuples: read at 0 for one
/// element, whole (`*`) for more); then the data dims after the looked-up
/// ones.
static llvm::Error buildGather(NodeContext &ctx, unsigned axis,
                               unsigned batchDims, unsigned tuple) {
  llvm::ArrayRef<int64_t> data = ctx.shape(0), idx = ctx.shape(1);
  DType it = ctx.type(1).elem;
  if (it != DType::I64 && it != DType::I32)
    return ctx.error("indices must be int32 or int64, are " + dtypeName(it));
  unsigned looked = std::max(1u, tuple);
  if (const ConstTensor *c = ctx.constant(1))
    for (int64_t i = 0; i < c->numel(); ++i) {
      unsigned a = axis + unsigned(i % looked);
      if (c->integer(i) < -data[a] || c->integer(i) >= data[a])
        return ctx.error("index " + llvm::Twine(c->integer(i)) +
                         " is out of range for axis " + llvm::Twine(a) +
                         " of size " + llvm::Twine(data[a]));
    }
  auto op = ctx.newOp(OpKind::Gather);
  AccessMap dataMap, idxMap, outMap;
  llvm::SmallVector<int64_t, 4> shape;
  auto add = [&](std::string name, int64_t extent, IterKind kind) {
    op->iters.push_back({std::move(name), extent, kind});
    return unsigned(op->iters.size() - 1);
  };
  auto both = [&](AccessMap &in, std::string name, int64_t extent) {
    unsigned d = add(std::move(name), extent, IterKind::Parallel);
    in.push_back(AccessExpr::dim(d));
    outMap.push_back(AccessExpr::dim(d));
    shape.push_back(extent);
    return d;
  };
  for (unsigned i = 0; i < axis; ++i) {
    unsigned d =
        both(dataMap, (i < batchDims ? "b" : "d") + std::to_string(i), data[i]);
    if (i < batchDims)
      idxMap.push_back(AccessExpr::dim(d));
  }
  for (size_t i = batchDims; i + (tuple ? 1 : 0) < idx.size(); ++i)
    both(idxMap, "i" + std::to_string(i), idx[i]);
  if (tuple)
    idxMap.push_back(tuple == 1 ? AccessExpr::broadcast() : AccessExpr::full());
  for (unsigned t = 0; t < looked; ++t) {
    std::string name = looked == 1 ? "v" : "v" + std::to_string(t);
    dataMap.push_back(
        AccessExpr::lookup(add(name, data[axis + t], IterKind::Reduction)));
  }
  for (size_t i = axis + looked; i < data.size(); ++i)
    both(dataMap, "d" + std::to_string(i), data[i]);
  op->operands.push_back({ctx.value(0), dataMap});
  op->operands.push_back({ctx.value(1), idxMap});
  op->addResult(TensorType{ctx.type(0).elem, shape}, outMap);
  op->attrs["axis"] = int64_t(axis);
  return ctx.finish(std::move(op));
}

llvm::Error importGather(NodeContext &ctx) {
  if (ctx.shape(0).empty())
    return ctx.error("data must have rank 1 or more");
  auto axis = ctx.axis(ctx.attrInt("axis", 0), ctx.rank(0));
  if (!axis)
    return axis.takeError();
  return buildGather(ctx, *axis, 0, /*tuple=*/0);
}

/// When the constant \p idx (an index grid over \p grid, \p count values
/// per point at \p pos) reads data dim of extent \p extent exactly at one
/// grid dim plus a constant, for every point: that dim and the constant.
/// A gather through such indices is a data movement its maps describe.
static std::optional<std::pair<unsigned, int64_t>>
affineIndex(const ConstTensor &idx, llvm::ArrayRef<int64_t> grid, int64_t count,
            int64_t pos, int64_t extent) {
  std::optional<std::pair<unsigned, int64_t>> found;
  for (unsigned j = 0; j < grid.size() && !found; ++j) {
    if (grid[j] == 1 && extent != 1)
      continue; // a size-1 dim matches any constant; try the others first
    std::optional<int64_t> c;
    bool ok = true;
    llvm::SmallVector<int64_t, 6> point(grid.size(), 0);
    for (int64_t flat = 0, n = idx.numel() / count; flat < n && ok; ++flat) {
      int64_t rest = flat;
      for (size_t k = grid.size(); k-- > 0;)
        point[k] = rest % grid[k], rest /= grid[k];
      int64_t v = idx.integer(flat * count + pos);
      v = v < 0 ? v + extent : v;
      if (!c)
        c = v - point[j];
      ok = v >= 0 && v < extent && v - point[j] == *c;
    }
    if (ok && c && *c >= 0 && *c + grid[j] <= extent)
      found = std::make_pair(j, *c);
  }
  return found;
}

/// A gather through constant indices that are one grid dim plus a constant
/// in every data dim they index: a `slice` whose maps read data at
/// \p dataMap; the result is indexed by the grid dims then \p trailing.
static llvm::Error importAffineGather(NodeContext &ctx,
                                      llvm::ArrayRef<int64_t> grid,
                                      AccessMap dataMap,
                                      llvm::ArrayRef<int64_t> trailing) {
  auto op = ctx.newOp(OpKind::Slice);
  llvm::SmallVector<int64_t, 4> shape(grid.begin(), grid.end());
  op->iters = parallelSpace(grid);
  AccessMap outMap = identityMap(grid.size());
  for (int64_t e : trailing) {
    unsigned d = op->iters.size();
    op->iters.push_back({"d" + std::to_string(d), e, IterKind::Parallel});
    dataMap.push_back(AccessExpr::dim(d));
    outMap.push_back(AccessExpr::dim(d));
    shape.push_back(e);
  }
  op->operands.push_back({ctx.value(0), dataMap});
  op->addResult(TensorType{ctx.type(0).elem, shape}, outMap);
  op->attrs["onnx_op"] = ctx.opType().str();
  return ctx.finish(std::move(op));
}

/// GatherElements: out[..., i, ...] = data[..., indices[..., i, ...], ...]
/// along `axis`, a lookup over the indices' own grid. Constant indices that
/// are a grid dim plus a constant along the axis (token type ids cut to the
/// sequence) are a slice its maps describe.
llvm::Error importGatherElements(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> data = ctx.shape(0), idx = ctx.shape(1);
  auto axis = ctx.axis(ctx.attrInt("axis", 0), data.size());
  if (!axis)
    return axis.takeError();
  DType it = ctx.type(1).elem;
  if (it != DType::I64 && it != DType::I32)
    return ctx.error("indices must be int32 or int64, are " + dtypeName(it));
  if (idx.size() != data.size())
    return ctx.error("indices " + shapeStr(idx) + " and data " +
                     shapeStr(data) + " differ in rank");
  const ConstTensor *c = ctx.constant(1);
  std::optional<std::pair<unsigned, int64_t>> at;
  if (c)
    at = affineIndex(*c, idx, 1, 0, data[*axis]);
  AccessMap dataMap;
  for (unsigned i = 0; i < data.size(); ++i) {
    if (i == *axis) {
      dataMap.push_back(at ? AccessExpr::shifted(at->first, 1, at->second)
                           : AccessExpr::lookup(unsigned(idx.size())));
      continue;
    }
    if (data[i] != idx[i] && data[i] != 1)
      return ctx.error("indices " + shapeStr(idx) + " do not fit data " +
                       shapeStr(data) + " off the axis");
    dataMap.push_back(data[i] == 1 && idx[i] != 1 ? AccessExpr::broadcast()
                                                  : AccessExpr::dim(i));
  }
  if (at)
    return importAffineGather(ctx, idx, dataMap, {});
  if (c)
    for (int64_t i = 0; i < c->numel(); ++i)
      if (c->integer(i) < -data[*axis] || c->integer(i) >= data[*axis])
        return ctx.error("index " + llvm::Twine(c->integer(i)) +
                         " is out of range for axis " + llvm::Twine(*axis) +
                         " of size " + llvm::Twine(data[*axis]));
  // Indices computed at run time: one point per index, the data's axis
  // read through the lookup dim `v` (a reduction: a device holding part of
  // the axis masks the rest, and the partial results sum).
  auto op = ctx.newOp(OpKind::Gather);
  op->iters = parallelSpace(idx);
  op->iters.push_back({"v", data[*axis], IterKind::Reduction});
  op->operands.push_back({ctx.value(0), dataMap});
  op->operands.push_back({ctx.value(1), identityMap(idx.size())});
  op->addResult(TensorType{ctx.type(0).elem, {idx.begin(), idx.end()}},
                identityMap(idx.size()));
  op->attrs["axis"] = int64_t(*axis);
  return ctx.finish(std::move(op));
}

/// GatherND: a gather along data dims [batch_dims, batch_dims + k) for
/// index tuples of k elements (the indices' last dim), with the batch dims
/// shared by data and indices. Constant tuples whose elements are an index
/// dim plus a constant (a mask broadcast by index grids) are a slice its
/// maps describe (importAffineGather).
llvm::Error importGatherND(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> data = ctx.shape(0), idx = ctx.shape(1);
  int64_t b = ctx.attrInt("batch_dims", 0);
  DType it = ctx.type(1).elem;
  if (it != DType::I64 && it != DType::I32)
    return ctx.error("indices must be int32 or int64, are " + dtypeName(it));
  if (idx.empty() || b < 0 || b >= int64_t(idx.size()) ||
      b >= int64_t(data.size()))
    return ctx.error("batch_dims " + llvm::Twine(b) + " does not fit data " +
                     shapeStr(data) + " and indices " + shapeStr(idx));
  for (int64_t i = 0; i < b; ++i)
    if (data[i] != idx[i])
      return ctx.error("batch dim " + llvm::Twine(i) + " of data " +
                       shapeStr(data) + " and indices " + shapeStr(idx) +
                       " differ");
  int64_t k = idx.back();
  if (k < 1 || b + k > int64_t(data.size()))
    return ctx.error("index tuples of " + llvm::Twine(k) +
                     " elements do not fit data " + shapeStr(data));
  if (k > 1) {
    // Tuples of constants, each element a grid dim plus a constant (a mask
    // broadcast by index grids): a slice over the index grid.
    const ConstTensor *c = ctx.constant(1);
    llvm::ArrayRef<int64_t> grid = idx.drop_back();
    AccessMap dataMap;
    for (int64_t i = 0; i < b; ++i)
      dataMap.push_back(AccessExpr::dim(unsigned(i)));
    for (int64_t t = 0; t < k && c; ++t) {
      auto at = affineIndex(*c, grid, k, t, data[b + t]);
      if (!at)
        c = nullptr;
      else
        dataMap.push_back(AccessExpr::shifted(at->first, 1, at->second));
    }
    if (c)
      return importAffineGather(ctx, grid, dataMap, data.drop_front(b + k));
  }
  return buildGather(ctx, unsigned(b), unsigned(b), unsigned(k));
}

} // namespace pax
