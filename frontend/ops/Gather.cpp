//===- Gather.cpp - Gather, GatherElements, GatherND and the scatters -----===//
#include "frontend/OnnxOps.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace pax {

/// A lookup's iteration space and maps (data, indices, result) and its
/// result's shape. A gather reads data through `data`; a scatter writes
/// into data's shape through it, reading its updates through `result`.
struct LookupSpace {
  llvm::SmallVector<IterDim, 6> iters;
  AccessMap data, indices, result;
  llvm::SmallVector<int64_t, 4> shape;
  unsigned add(std::string name, int64_t extent, IterKind kind) {
    iters.push_back({std::move(name), extent, kind});
    return unsigned(iters.size() - 1);
  }
  /// A parallel dim \p in (data or indices) and the result share.
  unsigned both(AccessMap &in, std::string name, int64_t extent) {
    unsigned d = add(std::move(name), extent, IterKind::Parallel);
    in.push_back(AccessExpr::dim(d));
    result.push_back(AccessExpr::dim(d));
    shape.push_back(extent);
    return d;
  }
};

/// An error unless input 1 holds int32 or int64 indices, each in range for
/// its data dim where they are constant (tuples of \p looked along data
/// dims from \p axis).
static llvm::Error checkIndices(NodeContext &ctx, unsigned axis,
                                unsigned looked) {
  llvm::ArrayRef<int64_t> data = ctx.shape(0);
  DType it = ctx.type(1).elem;
  if (it != DType::I64 && it != DType::I32)
    return ctx.error("indices must be int32 or int64, are " + dtypeName(it));
  if (const ConstTensor *c = ctx.constant(1))
    for (int64_t i = 0; i < c->numel(); ++i) {
      unsigned a = axis + unsigned(i % looked);
      if (c->integer(i) < -data[a] || c->integer(i) >= data[a])
        return ctx.error("index " + llvm::Twine(c->integer(i)) +
                         " is out of range for axis " + llvm::Twine(a) +
                         " of size " + llvm::Twine(data[a]));
    }
  return llvm::Error::success();
}

/// A lookup along data dims [\p axis, \p axis + \p tuple) (one when
/// \p tuple is 0): `gather(v)` reads data at the index the indices hold.
/// Data dims before the axis are shared with the indices' first dims
/// (\p batchDims of them) or the result's own; then the indices' dims (with
/// a \p tuple, the last holds GatherND's index tuples: read at 0 for one
/// element, whole (`*`) for more); then the data dims after the looked-up
/// ones.
static LookupSpace lookupSpace(NodeContext &ctx, unsigned axis,
                               unsigned batchDims, unsigned tuple) {
  llvm::ArrayRef<int64_t> data = ctx.shape(0), idx = ctx.shape(1);
  unsigned looked = std::max(1u, tuple);
  LookupSpace s;
  for (unsigned i = 0; i < axis; ++i) {
    unsigned d = s.both(s.data, (i < batchDims ? "b" : "d") + std::to_string(i),
                        data[i]);
    if (i < batchDims)
      s.indices.push_back(AccessExpr::dim(d));
  }
  for (size_t i = batchDims; i + (tuple ? 1 : 0) < idx.size(); ++i)
    s.both(s.indices, "i" + std::to_string(i), idx[i]);
  if (tuple)
    s.indices.push_back(tuple == 1 ? AccessExpr::broadcast()
                                   : AccessExpr::full());
  for (unsigned t = 0; t < looked; ++t) {
    std::string name = looked == 1 ? "v" : "v" + std::to_string(t);
    s.data.push_back(
        AccessExpr::lookup(s.add(name, data[axis + t], IterKind::Reduction)));
  }
  for (size_t i = axis + looked; i < data.size(); ++i)
    s.both(s.data, "d" + std::to_string(i), data[i]);
  return s;
}

/// A gather of data (input 0) through indices (input 1) over \p s.
static llvm::Error finishGather(NodeContext &ctx, LookupSpace s,
                                unsigned axis) {
  auto op = ctx.newOp(OpKind::Gather);
  op->iters = std::move(s.iters);
  op->operands.push_back({ctx.value(0), std::move(s.data)});
  op->operands.push_back({ctx.value(1), std::move(s.indices)});
  op->addResult(TensorType{ctx.type(0).elem, s.shape}, std::move(s.result));
  op->attrs["axis"] = int64_t(axis);
  return ctx.finish(std::move(op));
}

static llvm::Error buildGather(NodeContext &ctx, unsigned axis,
                               unsigned batchDims, unsigned tuple) {
  if (auto err = checkIndices(ctx, axis, std::max(1u, tuple)))
    return err;
  return finishGather(ctx, lookupSpace(ctx, axis, batchDims, tuple), axis);
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

/// GatherElements' and ScatterElements' `axis`, their indices checked.
static llvm::Expected<unsigned> elementsAxis(NodeContext &ctx) {
  auto axis = ctx.axis(ctx.attrInt("axis", 0), ctx.rank(0));
  if (!axis)
    return axis.takeError();
  if (auto err = checkIndices(ctx, *axis, 1))
    return err;
  return *axis;
}

/// GatherElements' and ScatterElements' space: the indices' grid, then
/// the lookup dim `v` of \p extent; data read at \p dataMap (its axis
/// through `v`), indices and result at the grid.
static LookupSpace elementsSpace(llvm::ArrayRef<int64_t> idx, AccessMap dataMap,
                                 int64_t extent) {
  LookupSpace s;
  s.iters = parallelSpace(idx);
  s.iters.push_back({"v", extent, IterKind::Reduction});
  s.data = std::move(dataMap);
  s.indices = identityMap(idx.size());
  s.result = identityMap(idx.size());
  s.shape.assign(idx.begin(), idx.end());
  return s;
}

/// GatherElements: out[..., i, ...] = data[..., indices[..., i, ...], ...]
/// along `axis`, a lookup over the indices' own grid. Constant indices that
/// are a grid dim plus a constant along the axis (token type ids cut to the
/// sequence) are a slice its maps describe.
llvm::Error importGatherElements(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> data = ctx.shape(0), idx = ctx.shape(1);
  auto axis = elementsAxis(ctx);
  if (!axis)
    return axis.takeError();
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
  // Indices computed at run time: one point per index, the data's axis
  // read through the lookup dim `v` (a reduction: a device holding part of
  // the axis masks the rest, and the partial results sum).
  return finishGather(ctx, elementsSpace(idx, dataMap, data[*axis]), *axis);
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

/// ScatterElements and ScatterND: the updates (input 2) summed into zeros
/// of data's shape through \p s's maps turned around (a scatter_add, split
/// like a gather's gradient), then combined with data (input 0): reduction
/// add adds them; none takes them where an index points (a scatter_add of
/// ones counts the points) and data elsewhere.
static llvm::Error buildScatter(NodeContext &ctx, const LookupSpace &s) {
  std::string reduction = ctx.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return ctx.error("reduction '" + reduction +
                     "' is not supported (none or add)");
  if (ctx.numInputs() < 3 || ctx.shape(2) != llvm::ArrayRef<int64_t>(s.shape))
    return ctx.error("updates must have shape " + shapeStr(s.shape));
  const TensorType &data = ctx.type(0);
  if (ctx.type(2).elem != data.elem)
    return ctx.error("updates and data differ in element type");
  auto scatter = [&](Value *updates) {
    auto op = ctx.newOp(OpKind::ScatterAdd);
    op->iters = s.iters;
    // The points a result element sums: the dims its map does not use
    // (the indices' grid along the looked-up dims).
    for (unsigned d = 0; d < op->iters.size(); ++d)
      if (llvm::none_of(s.data, [&](const AccessExpr &e) { return e.uses(d); }))
        op->iters[d].kind = IterKind::Reduction;
    op->operands.push_back({updates, s.result});
    op->operands.push_back({ctx.value(1), s.indices});
    op->addResult(data, s.data);
    return ctx.emit(std::move(op));
  };
  auto pointwise = [&](OpKind k, llvm::ArrayRef<Value *> in, DType elem) {
    auto op = ctx.newOp(k);
    op->iters = parallelSpace(data.shape);
    for (Value *v : in)
      op->operands.push_back({v, identityMap(data.rank())});
    op->addResult(TensorType{elem, data.shape}, identityMap(data.rank()));
    return op;
  };
  Value *sum = scatter(ctx.value(2));
  if (reduction == "add")
    return ctx.finish(pointwise(OpKind::Add, {ctx.value(0), sum}, data.elem));
  Value *ones = ctx.constantValue(ConstTensor::splat(ctx.type(2), 1), "ones");
  Value *hit = ctx.emit(pointwise(OpKind::Cast, {scatter(ones)}, DType::I1));
  return ctx.finish(
      pointwise(OpKind::Where, {hit, sum, ctx.value(0)}, data.elem));
}

/// ScatterElements (and opset 9's Scatter): updates[..., i, ...] goes to
/// data[..., indices[..., i, ...], ...] along `axis`.
llvm::Error importScatterElements(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> data = ctx.shape(0), idx = ctx.shape(1);
  auto axis = elementsAxis(ctx);
  if (!axis)
    return axis.takeError();
  AccessMap dataMap;
  for (unsigned i = 0; i < data.size(); ++i) {
    if (i != *axis && (idx.size() != data.size() || idx[i] != data[i]))
      return ctx.error("indices " + shapeStr(idx) + " must match data " +
                       shapeStr(data) + " off the axis");
    dataMap.push_back(i == *axis ? AccessExpr::lookup(unsigned(idx.size()))
                                 : AccessExpr::dim(i));
  }
  return buildScatter(ctx, elementsSpace(idx, dataMap, data[*axis]));
}

/// ScatterND: updates[i..., j...] goes to data[indices[i...], j...] (index
/// tuples of k elements, the indices' last dim).
llvm::Error importScatterND(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> data = ctx.shape(0), idx = ctx.shape(1);
  int64_t k = idx.empty() ? 0 : idx.back();
  if (k < 1 || k > int64_t(data.size()))
    return ctx.error("index tuples of " + llvm::Twine(k) +
                     " elements do not fit data " + shapeStr(data));
  if (auto err = checkIndices(ctx, 0, unsigned(k)))
    return err;
  return buildScatter(ctx, lookupSpace(ctx, 0, 0, unsigned(k)));
}

} // namespace pax
