//===- Layout.cpp - Importers of data-movement ONNX ops -------------------===//
//
// Reshape, Transpose, Concat, Split, Slice and Expand are pure data movement:
// the access maps alone say which element goes where.
//
//===----------------------------------------------------------------------===//
#include "frontend/OnnxOps.h"

#include <numeric>

namespace pax {

/// The finest dims that both \p a and \p b are row-major groups of, or empty
/// when there is none ([6, 4] and [4, 6] share no refinement).
static llvm::SmallVector<int64_t, 4>
commonRefinement(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  // Suffix products of both sides, merged: a refinement exists when they form
  // a divisibility chain.
  std::vector<int64_t> cuts;
  for (auto side : {a, b}) {
    int64_t p = 1;
    for (int i = int(side.size()) - 1; i >= 0; --i)
      cuts.push_back(p), p *= side[i];
    cuts.push_back(p);
  }
  std::sort(cuts.begin(), cuts.end(), std::greater<>());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  llvm::SmallVector<int64_t, 4> fine;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    if (cuts[i] % cuts[i + 1])
      return {};
    fine.push_back(cuts[i] / cuts[i + 1]);
  }
  return fine;
}

/// Maps each dim of \p side onto consecutive dims of \p fine starting at
/// iteration dim \p base.
static void mapOnto(llvm::ArrayRef<int64_t> side, llvm::ArrayRef<int64_t> fine,
                    unsigned base, llvm::SmallVectorImpl<AccessExpr> &out) {
  size_t f = 0;
  for (int64_t d : side) {
    llvm::SmallVector<unsigned, 3> dims;
    int64_t p = 1;
    while (p < d)
      p *= fine[f], dims.push_back(base + unsigned(f++));
    out.push_back(dims.size() == 1 ? AccessExpr::dim(dims[0])
                                   : AccessExpr::group(dims));
  }
}

/// The reshape of \p x (of shape \p in) to \p outShape: size-1 dims read or
/// write index 0; the rest is cut into groups of equal element count, each
/// with its own iteration dims, the common refinement of both sides' dims.
/// Null where a group has no common refinement ([2, 3, 4] to [4, 2, 3]:
/// no index of one side is an affine or group map of the other's); the
/// input dims of each such group are then added to \p unrefined.
static std::unique_ptr<Op>
buildReshape(NodeContext &ctx, Value *x, llvm::ArrayRef<int64_t> in,
             llvm::ArrayRef<int64_t> outShape,
             llvm::SmallVectorImpl<llvm::SmallVector<unsigned, 4>> *unrefined =
                 nullptr) {
  auto op = ctx.newOp(OpKind::Reshape);
  AccessMap inMap(in.size()), outMap(outShape.size());
  llvm::SmallVector<unsigned, 4> ia, ib;
  for (unsigned i = 0; i < in.size(); ++i)
    if (in[i] == 1)
      inMap[i] = AccessExpr::broadcast();
    else
      ia.push_back(i);
  for (unsigned i = 0; i < outShape.size(); ++i)
    if (outShape[i] == 1)
      outMap[i] = AccessExpr::broadcast();
    else
      ib.push_back(i);
  size_t i = 0, j = 0;
  while (i < ia.size() && j < ib.size()) {
    llvm::SmallVector<int64_t, 4> ga = {in[ia[i]]}, gb = {outShape[ib[j]]};
    llvm::SmallVector<unsigned, 4> ka = {ia[i++]}, kb = {ib[j++]};
    int64_t pa = ga[0], pb = gb[0];
    while (pa != pb) {
      if (pa < pb && i < ia.size())
        ga.push_back(in[ia[i]]), ka.push_back(ia[i++]), pa *= ga.back();
      else if (pb < pa && j < ib.size())
        gb.push_back(outShape[ib[j]]), kb.push_back(ib[j++]), pb *= gb.back();
      else
        return nullptr; // checkSameCount was not called: counts differ
    }
    auto fine = commonRefinement(ga, gb);
    if (fine.empty()) {
      if (unrefined)
        unrefined->push_back(ka);
      continue;
    }
    unsigned base = op->iters.size();
    for (int64_t d : fine)
      op->iters.push_back({"", d, IterKind::Parallel});
    llvm::SmallVector<AccessExpr, 4> ea, eb;
    mapOnto(ga, fine, base, ea);
    mapOnto(gb, fine, base, eb);
    for (size_t k = 0; k < ka.size(); ++k)
      inMap[ka[k]] = ea[k];
    for (size_t k = 0; k < kb.size(); ++k)
      outMap[kb[k]] = eb[k];
  }
  if (unrefined && !unrefined->empty())
    return nullptr;
  for (size_t k = 0; k < op->iters.size(); ++k)
    op->iters[k].name = "d" + std::to_string(k);
  op->operands.push_back({x, inMap});
  op->addResult(TensorType{x->type.elem, {outShape.begin(), outShape.end()}},
                outMap);
  return op;
}

llvm::Error finishReshape(NodeContext &ctx, llvm::ArrayRef<int64_t> outShape) {
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  // Groups are cut by element counts, which a 0 dim makes meaningless.
  if (llvm::is_contained(in, 0) || llvm::is_contained(outShape, 0))
    return ctx.error("cannot reshape " + shapeStr(in) + " to " +
                     shapeStr(outShape) + ": empty tensors are not supported");
  llvm::SmallVector<llvm::SmallVector<unsigned, 4>, 2> unrefined;
  if (auto op = buildReshape(ctx, ctx.value(0), in, outShape, &unrefined))
    return ctx.finish(std::move(op));
  if (unrefined.empty())
    return ctx.error("internal: reshape groups do not close");
  // Groups whose dims' boundaries do not line up: through a shape with
  // each such group's input dims merged into one, so that both steps
  // refine (the other dims map through).
  llvm::SmallVector<int64_t, 6> mid(in.begin(), in.end());
  llvm::SmallVector<bool, 6> merged(in.size(), false);
  for (const auto &group : unrefined)
    for (size_t k = 1; k < group.size(); ++k) {
      mid[group[0]] *= in[group[k]];
      merged[group[k]] = true;
    }
  llvm::SmallVector<int64_t, 6> midShape;
  for (size_t k = 0; k < mid.size(); ++k)
    if (!merged[k])
      midShape.push_back(mid[k]);
  auto first = buildReshape(ctx, ctx.value(0), in, midShape);
  auto op =
      first ? buildReshape(ctx, ctx.emit(std::move(first)), midShape, outShape)
            : nullptr;
  if (!op)
    return ctx.error("internal: reshape groups do not close");
  return ctx.finish(std::move(op));
}

static llvm::Error checkSameCount(NodeContext &ctx, llvm::ArrayRef<int64_t> in,
                                  llvm::ArrayRef<int64_t> out) {
  int64_t a = 1, b = 1;
  bool overflow = false;
  for (int64_t d : in)
    overflow |= __builtin_mul_overflow(a, d, &a);
  for (int64_t d : out)
    overflow |= __builtin_mul_overflow(b, d, &b);
  if (overflow)
    return ctx.error("cannot reshape " + shapeStr(in) + " to " + shapeStr(out) +
                     ": more than 2^63 elements");
  if (a != b)
    return ctx.error("cannot reshape " + shapeStr(in) + " (" + llvm::Twine(a) +
                     " elements) to " + shapeStr(out) + " (" + llvm::Twine(b) +
                     " elements)");
  return llvm::Error::success();
}

llvm::Error importReshape(NodeContext &ctx) {
  auto shapeC = ctx.requireConstant(1, "the target shape");
  if (!shapeC)
    return shapeC.takeError();
  std::vector<int64_t> spec = (*shapeC)->toInts();
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  // A batch baked into the target shape follows --batch when the input
  // carries the new batch: [1, 9216] becomes [8, 9216].
  if (auto rb = ctx.rebatch(); rb && !spec.empty() && !in.empty() &&
                               spec[0] == rb->first && in[0] == rb->second)
    spec[0] = rb->second;
  bool allowZero = ctx.attrInt("allowzero", 0) != 0;
  llvm::SmallVector<int64_t, 4> out;
  int inferred = -1;
  int64_t known = 1, total = ctx.type(0).numel();
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return ctx.error("shape entry " + llvm::Twine(i) +
                         " is 0 (copy) but the input has rank " +
                         llvm::Twine(in.size()));
      d = in[i];
    } else if (d == -1) {
      if (inferred >= 0)
        return ctx.error("the target shape has more than one -1");
      inferred = int(i);
      out.push_back(1);
      continue;
    } else if (d < 0) {
      return ctx.error("the target shape has a negative dim " + llvm::Twine(d));
    } else if (d > kMaxExtent) {
      return ctx.error("the target shape has a dim of " + llvm::Twine(d) +
                       ", larger than 2^48");
    }
    out.push_back(d);
    if (__builtin_mul_overflow(known, d, &known))
      return ctx.error("the target shape " + shapeStr(spec) +
                       " has more than 2^63 elements");
  }
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return ctx.error("cannot reshape " + shapeStr(in) + " (" +
                       llvm::Twine(total) + " elements) to a shape with " +
                       llvm::Twine(known) + " elements per -1 slot");
    out[inferred] = total / known;
  }
  if (auto err = checkSameCount(ctx, in, out))
    return err;
  return finishReshape(ctx, out);
}

llvm::Error importFlatten(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  int64_t a = ctx.attrInt("axis", 1);
  if (a < -int64_t(in.size()) || a > int64_t(in.size()))
    return ctx.error("axis " + llvm::Twine(a) + " is out of range for rank " +
                     llvm::Twine(in.size()));
  size_t axis = a < 0 ? a + in.size() : a;
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < in.size(); ++i)
    (i < axis ? outer : inner) *= in[i];
  int64_t out[] = {outer, inner};
  return finishReshape(ctx, out);
}

llvm::Error importSqueeze(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  auto axes = intsFromAttrOrInput(ctx, "axes", 1);
  if (!axes)
    return axes.takeError();
  llvm::SmallVector<bool, 6> drop(in.size(), false);
  for (int64_t a : *axes) {
    auto ax = ctx.axis(a, in.size());
    if (!ax)
      return ax.takeError();
    if (in[*ax] != 1)
      return ctx.error("cannot squeeze dim " + llvm::Twine(*ax) + " of size " +
                       llvm::Twine(in[*ax]));
    drop[*ax] = true;
  }
  llvm::SmallVector<int64_t, 4> out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!(axes->empty() ? in[i] == 1 : drop[i]))
      out.push_back(in[i]);
  return finishReshape(ctx, out);
}

llvm::Error importUnsqueeze(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  auto axes = intsFromAttrOrInput(ctx, "axes", 1);
  if (!axes)
    return axes.takeError();
  size_t rank = in.size() + axes->size();
  llvm::SmallVector<bool, 6> added(rank, false);
  for (int64_t a : *axes) {
    auto ax = ctx.axis(a, rank);
    if (!ax)
      return ax.takeError();
    if (added[*ax])
      return ctx.error("axis " + llvm::Twine(a) + " is given twice");
    added[*ax] = true;
  }
  llvm::SmallVector<int64_t, 4> out;
  size_t k = 0;
  for (size_t i = 0; i < rank; ++i)
    out.push_back(added[i] ? 1 : in[k++]);
  return finishReshape(ctx, out);
}

llvm::Error importTranspose(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  std::vector<int64_t> perm = ctx.attrInts("perm");
  if (perm.empty())
    for (size_t i = 0; i < in.size(); ++i)
      perm.push_back(int64_t(in.size() - 1 - i));
  std::vector<int64_t> sorted(perm);
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(in.size());
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota) {
    std::string p;
    for (int64_t v : perm)
      p += (p.empty() ? "" : ", ") + std::to_string(v);
    return ctx.error("perm [" + p + "] is not a permutation of 0.." +
                     llvm::Twine(int64_t(in.size()) - 1));
  }
  auto op = ctx.newOp(OpKind::Transpose);
  op->iters = parallelSpace(in);
  op->operands.push_back({ctx.value(0), identityMap(in.size())});
  AccessMap out;
  llvm::SmallVector<int64_t, 4> shape;
  for (int64_t p : perm)
    out.push_back(AccessExpr::dim(unsigned(p))), shape.push_back(in[p]);
  op->addResult(TensorType{ctx.type(0).elem, shape}, out);
  op->attrs["perm"] = perm;
  return ctx.finish(std::move(op));
}

llvm::Error importConcat(NodeContext &ctx) {
  if (!ctx.hasInput(0))
    return ctx.error("needs at least one input");
  llvm::ArrayRef<int64_t> first = ctx.shape(0);
  auto axis = ctx.axis(ctx.attrInt("axis", 0), first.size());
  if (!axis)
    return axis.takeError();
  llvm::SmallVector<int64_t, 4> shape(first);
  shape[*axis] = 0;
  for (unsigned i = 0; i < ctx.numInputs(); ++i) {
    llvm::ArrayRef<int64_t> s = ctx.shape(i);
    bool ok = s.size() == first.size() && ctx.type(i).elem == ctx.type(0).elem;
    for (size_t d = 0; ok && d < s.size(); ++d)
      ok = d == *axis || s[d] == first[d];
    if (!ok)
      return ctx.error("input " + llvm::Twine(i) + " has type " +
                       ctx.type(i).str() + ", which does not match input 0 (" +
                       ctx.type(0).str() + ") outside axis " +
                       llvm::Twine(*axis));
    shape[*axis] += s[*axis];
    if (shape[*axis] > kMaxExtent)
      return ctx.error("the result's axis " + llvm::Twine(*axis) +
                       " would have more than 2^48 elements");
  }
  auto op = ctx.newOp(OpKind::Concat);
  op->iters = parallelSpace(shape);
  int64_t offset = 0;
  for (unsigned i = 0; i < ctx.numInputs(); ++i) {
    int64_t len = ctx.shape(i)[*axis];
    if (len == 0)
      continue;
    AccessMap m = identityMap(shape.size());
    m[*axis] = AccessExpr::shifted(*axis, 1, -offset);
    op->operands.push_back({ctx.value(i), m});
    offset += len;
  }
  op->addResult(TensorType{ctx.type(0).elem, shape}, identityMap(shape.size()));
  op->attrs["axis"] = int64_t(*axis);
  return ctx.finish(std::move(op));
}

llvm::Error importSplit(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  auto axis = ctx.axis(ctx.attrInt("axis", 0), in.size());
  if (!axis)
    return axis.takeError();
  auto sizes = intsFromAttrOrInput(ctx, "split", 1);
  if (!sizes)
    return sizes.takeError();
  int64_t n = ctx.numOutputs(), dim = in[*axis];
  if (n < 1)
    return ctx.error("has no outputs");
  if (sizes->empty()) {
    int64_t parts = ctx.attrInt("num_outputs", n);
    if (parts != n)
      return ctx.error("num_outputs is " + llvm::Twine(parts) +
                       " but the node has " + llvm::Twine(n) + " outputs");
    // Equal chunks, the last one smaller when the dim does not divide.
    int64_t chunk = (dim + parts - 1) / parts;
    if ((parts - 1) * chunk >= dim)
      return ctx.error("cannot split axis " + llvm::Twine(*axis) + " of size " +
                       llvm::Twine(dim) + " into " + llvm::Twine(parts) +
                       " parts");
    for (int64_t k = 0; k < parts; ++k)
      sizes->push_back(std::min(chunk, dim - k * chunk));
  }
  if (int64_t(sizes->size()) != n)
    return ctx.error("split has " + llvm::Twine(sizes->size()) + " sizes for " +
                     llvm::Twine(n) + " outputs");
  int64_t sum = 0;
  for (int64_t s : *sizes) {
    if (s <= 0 || s > dim)
      return ctx.error("split size " + llvm::Twine(s) + " is outside [1, " +
                       llvm::Twine(dim) + "] (the size of axis " +
                       llvm::Twine(*axis) + ")");
    sum += s;
  }
  if (sum != dim)
    return ctx.error("split sizes add up to " + llvm::Twine(sum) +
                     " but axis " + llvm::Twine(*axis) + " has " +
                     llvm::Twine(dim));
  auto op = ctx.newOp(OpKind::Split);
  op->iters = parallelSpace(in);
  op->operands.push_back({ctx.value(0), identityMap(in.size())});
  int64_t offset = 0;
  for (int64_t s : *sizes) {
    AccessMap m = identityMap(in.size());
    m[*axis] = AccessExpr::shifted(*axis, 1, -offset);
    llvm::SmallVector<int64_t, 4> shape(in);
    shape[*axis] = s;
    op->addResult(TensorType{ctx.type(0).elem, shape}, m);
    offset += s;
  }
  op->attrs["axis"] = int64_t(*axis);
  return ctx.finish(std::move(op));
}

namespace {

/// The starts, ends, axes and steps of a Slice node, one of each per
/// sliced axis.
struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;
};

/// The first index and the length of the slice of one dim.
struct AxisSlice {
  int64_t begin, len;
};

} // namespace

/// Reads the starts, ends, axes and steps of a Slice node (attributes
/// before opset 10, inputs since), axes and steps defaulting to every axis
/// and 1; an error when their lengths differ.
static llvm::Expected<SliceArgs> readSliceArgs(NodeContext &ctx) {
  bool legacy = ctx.opset() < 10;
  auto get = [&](llvm::StringRef attr, unsigned input) {
    if (legacy)
      return llvm::Expected<std::vector<int64_t>>(ctx.attrInts(attr));
    return ctx.hasInput(input)
               ? intsFromAttrOrInput(ctx, attr, input)
               : llvm::Expected<std::vector<int64_t>>(std::vector<int64_t>());
  };
  auto starts = get("starts", 1), ends = get("ends", 2), axes = get("axes", 3),
       steps = get("steps", 4);
  for (auto *e : {&starts, &ends, &axes, &steps})
    if (!*e)
      return e->takeError();
  if (starts->size() != ends->size())
    return ctx.error("starts and ends have different lengths");
  if (axes->empty())
    for (size_t i = 0; i < starts->size(); ++i)
      axes->push_back(int64_t(i));
  if (steps->empty())
    steps->assign(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size())
    return ctx.error("starts, ends, axes and steps have different lengths");
  return SliceArgs{std::move(*starts), std::move(*ends), std::move(*axes),
                   std::move(*steps)};
}

/// The slice from \p start to \p end by \p step of a dim of size \p dim.
static AxisSlice clampSlice(int64_t dim, int64_t start, int64_t end,
                            int64_t step) {
  // Indices count from the end when negative and clamp to the dim:
  // [0, dim] for a positive step, [-1, dim - 1] walking backwards.
  int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? dim : dim - 1;
  auto clampIdx = [&](int64_t v) {
    if (v < 0)
      v += dim;
    return std::clamp<int64_t>(v, lo, hi);
  };
  int64_t b = clampIdx(start), e = clampIdx(end);
  int64_t len = step > 0 ? (e > b ? (e - b - 1) / step + 1 : 0)
                         : (b > e ? (b - e - 1) / -step + 1 : 0);
  return {b, len};
}

/// Sets the length of each sliced axis in \p shape and its start and step
/// in \p m; an error on a bad axis, a step of 0, an empty slice of a
/// tensor that is not a constant or an axis sliced twice.
static llvm::Error sliceAxes(NodeContext &ctx, llvm::ArrayRef<int64_t> in,
                             const SliceArgs &args,
                             llvm::SmallVectorImpl<int64_t> &shape,
                             AccessMap &m) {
  llvm::SmallVector<bool, 6> sliced(in.size(), false);
  for (size_t i = 0; i < args.axes.size(); ++i) {
    auto ax = ctx.axis(args.axes[i], in.size());
    if (!ax)
      return ax.takeError();
    int64_t dim = in[*ax], step = args.steps[i];
    if (step == 0)
      return ctx.error("step 0 of axis " + llvm::Twine(*ax) + " is invalid");
    AxisSlice s = clampSlice(dim, args.starts[i], args.ends[i], step);
    if (s.len == 0 && !ctx.constant(0))
      return ctx.error("the slice of axis " + llvm::Twine(*ax) +
                       " is empty; empty tensors are not supported");
    if (s.len == 1)
      step = 1; // one element: the step does not matter
    if (sliced[*ax])
      return ctx.error("axis " + llvm::Twine(*ax) + " is sliced twice");
    sliced[*ax] = true;
    shape[*ax] = s.len;
    m[*ax] = AccessExpr::shifted(*ax, step, s.begin);
  }
  return llvm::Error::success();
}

llvm::Error importSlice(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  auto args = readSliceArgs(ctx);
  if (!args)
    return args.takeError();
  auto op = ctx.newOp(OpKind::Slice);
  llvm::SmallVector<int64_t, 4> shape(in);
  AccessMap m = identityMap(in.size());
  if (llvm::Error err = sliceAxes(ctx, in, *args, shape, m))
    return err;
  // An empty slice of a constant (the tail of a shape, as exporters
  // write `x.shape[k:]`) is an empty constant.
  if (llvm::is_contained(shape, 0)) {
    ctx.setConstant(0, ConstTensor::zeros(TensorType{ctx.type(0).elem, shape}));
    return llvm::Error::success();
  }
  op->iters = parallelSpace(shape);
  op->operands.push_back({ctx.value(0), m});
  op->addResult(TensorType{ctx.type(0).elem, shape}, identityMap(shape.size()));
  return ctx.finish(std::move(op));
}

llvm::Error importExpand(NodeContext &ctx) {
  auto shapeC = ctx.requireConstant(1, "the target shape");
  if (!shapeC)
    return shapeC.takeError();
  std::vector<int64_t> target = (*shapeC)->toInts();
  for (int64_t d : target)
    if (d < 0 || d > kMaxExtent)
      return ctx.error("the target shape has a dim of " + llvm::Twine(d) +
                       ", outside [0, 2^48]");
  auto shape = broadcastShapes(ctx, ctx.shape(0), target);
  if (!shape)
    return shape.takeError();
  auto op = ctx.newOp(OpKind::Expand);
  op->iters = parallelSpace(*shape);
  op->operands.push_back({ctx.value(0), broadcastMap(ctx.shape(0), *shape)});
  op->addResult(TensorType{ctx.type(0).elem, {shape->begin(), shape->end()}},
                identityMap(shape->size()));
  return ctx.finish(std::move(op));
}

/// Tile: each axis repeated r times is a group (r, d) of the result, read
/// from the input at d.
llvm::Error importTile(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  auto repC = ctx.requireConstant(1, "repeats");
  if (!repC)
    return repC.takeError();
  std::vector<int64_t> repeats = (*repC)->toInts();
  if (repeats.size() != in.size())
    return ctx.error("repeats has " + llvm::Twine(repeats.size()) +
                     " values for an input of rank " + llvm::Twine(in.size()));
  auto op = ctx.newOp(OpKind::Tile);
  AccessMap inMap, outMap;
  llvm::SmallVector<int64_t, 4> shape;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t r = repeats[i];
    if (r < 1 || r > kMaxExtent / std::max<int64_t>(in[i], 1))
      return ctx.error("repeats " + llvm::Twine(r) + " of axis " +
                       llvm::Twine(i) + " is not supported (1 to 2^48 / dim)");
    unsigned rep = unsigned(op->iters.size());
    if (r > 1)
      op->iters.push_back({"r" + std::to_string(i), r, IterKind::Parallel});
    unsigned d = unsigned(op->iters.size());
    op->iters.push_back({"d" + std::to_string(i), in[i], IterKind::Parallel});
    inMap.push_back(AccessExpr::dim(d));
    outMap.push_back(r > 1 ? AccessExpr::group({rep, d}) : AccessExpr::dim(d));
    shape.push_back(r * in[i]);
  }
  op->operands.push_back({ctx.value(0), inMap});
  op->addResult(TensorType{ctx.type(0).elem, shape}, outMap);
  return ctx.finish(std::move(op));
}

/// The value a Pad node fills with: the value attribute before opset 11,
/// else input 2 when given (one value), else 0.
static llvm::Expected<double> padValue(NodeContext &ctx, bool legacy) {
  double value = legacy ? ctx.attrFloat("value", 0) : 0;
  if (!legacy && ctx.hasInput(2)) {
    auto v = ctx.requireConstant(2, "constant_value");
    if (!v)
      return v.takeError();
    if ((*v)->numel() != 1)
      return ctx.error("constant_value must hold one value");
    value = (*v)->real(0);
  }
  return value;
}

/// The axes a Pad node pads: input 3 when given (opset 11 on), else every
/// axis of the input's \p rank.
static llvm::Expected<std::vector<int64_t>> padAxes(NodeContext &ctx,
                                                    bool legacy, size_t rank) {
  std::vector<int64_t> axes;
  if (!legacy && ctx.hasInput(3)) {
    auto a = intsFromAttrOrInput(ctx, "axes", 3);
    if (!a)
      return a.takeError();
    axes = *a;
  } else {
    for (size_t i = 0; i < rank; ++i)
      axes.push_back(int64_t(i));
  }
  return axes;
}

/// Sets the pad before each of \p axes in \p before and its padded size in
/// \p shape, from \p pads (the begin pads, then the end pads); an error on
/// a bad axis, a pad beyond any dim or a size outside [1, 2^48].
static llvm::Error applyPads(NodeContext &ctx, llvm::ArrayRef<int64_t> in,
                             llvm::ArrayRef<int64_t> axes,
                             llvm::ArrayRef<int64_t> pads,
                             llvm::SmallVectorImpl<int64_t> &before,
                             llvm::SmallVectorImpl<int64_t> &shape) {
  for (size_t i = 0; i < axes.size(); ++i) {
    auto ax = ctx.axis(axes[i], in.size());
    if (!ax)
      return ax.takeError();
    int64_t lo = pads[i], hi = pads[i + axes.size()];
    // Pads past any extent are refused before they are added up.
    for (int64_t p : {lo, hi})
      if (p < -kMaxExtent || p > kMaxExtent)
        return ctx.error("pad " + llvm::Twine(p) + " on axis " +
                         llvm::Twine(*ax) + " is beyond any dim (2^48)");
    before[*ax] = lo;
    shape[*ax] = in[*ax] + lo + hi;
    if (shape[*ax] < 1 || shape[*ax] > kMaxExtent)
      return ctx.error("pads " + llvm::Twine(lo) + " and " + llvm::Twine(hi) +
                       " leave axis " + llvm::Twine(*ax) + " of size " +
                       llvm::Twine(in[*ax]) + " with " +
                       llvm::Twine(shape[*ax]) + " elements");
  }
  return llvm::Error::success();
}

/// Pad in `constant` mode: the result reads the input shifted by the pads
/// before each axis (a negative pad crops), and holds the value elsewhere.
llvm::Error importPad(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.shape(0);
  std::string mode = ctx.attrString("mode", "constant");
  if (mode != "constant")
    return ctx.error("mode '" + mode +
                     "' is not supported (constant, edge, reflect or wrap)");
  bool legacy = ctx.opset() < 11;
  auto pads = legacy
                  ? llvm::Expected<std::vector<int64_t>>(ctx.attrInts("pads"))
                  : intsFromAttrOrInput(ctx, "pads", 1);
  if (!pads)
    return pads.takeError();
  auto value = padValue(ctx, legacy);
  if (!value)
    return value.takeError();
  auto axes = padAxes(ctx, legacy, in.size());
  if (!axes)
    return axes.takeError();
  if (pads->size() != 2 * axes->size())
    return ctx.error("pads has " + llvm::Twine(pads->size()) + " values for " +
                     llvm::Twine(axes->size()) + " axes");
  llvm::SmallVector<int64_t, 4> before(in.size(), 0), shape(in);
  if (llvm::Error err = applyPads(ctx, in, *axes, *pads, before, shape))
    return err;
  auto op = ctx.newOp(OpKind::Pad);
  op->iters = parallelSpace(shape);
  AccessMap m;
  for (size_t i = 0; i < in.size(); ++i)
    m.push_back(AccessExpr::shifted(unsigned(i), 1, -before[i]));
  op->operands.push_back({ctx.value(0), m});
  op->addResult(TensorType{ctx.type(0).elem, shape}, identityMap(shape.size()));
  op->attrs["value"] = float(*value);
  return ctx.finish(std::move(op));
}

} // namespace pax
