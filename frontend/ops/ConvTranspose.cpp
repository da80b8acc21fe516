//===- ConvTranspose.cpp - The importer of ConvTranspose ------------------===//
//
// ConvTranspose is the gradient of a convolution with respect to its
// input: each input position, times the weights over the input channels,
// is spread over the output window it maps to,
//
//   y[n, co, s*i + d*k - pad] += sum_ci x[n, ci, i] w[ci, co, k],
//
// which imports as the two ops autodiff writes for that gradient: a
// contraction over the input channels at every (input position, kernel
// point), and a scatter_add of those values through the window into the
// output (positions in the padding dropped, output_padding rows left
// zero). Both split, differentiate and run like any other op.
//
//===----------------------------------------------------------------------===//
#include "frontend/OnnxOps.h"

namespace pax {
namespace {

/// The sizes of a ConvTranspose's spatial dims.
struct TransposedDim {
  int64_t in = 0, kernel = 0, stride = 1, dilation = 1, out = 0, padBegin = 0;
};

std::vector<int64_t> orOnes(std::vector<int64_t> v, size_t n) {
  if (v.empty())
    v.assign(n, 1);
  return v;
}

/// Each spatial dim's output extent and begin padding from pads, auto_pad,
/// output_padding and output_shape (ONNX's rules).
llvm::Expected<llvm::SmallVector<TransposedDim, 3>>
transposedDims(NodeContext &ctx, llvm::ArrayRef<int64_t> in,
               llvm::ArrayRef<int64_t> kernel) {
  size_t n = in.size();
  auto strides = orOnes(ctx.attrInts("strides"), n);
  auto dil = orOnes(ctx.attrInts("dilations"), n);
  std::vector<int64_t> pads = ctx.attrInts("pads"),
                       outPad = ctx.attrInts("output_padding"),
                       outShape = ctx.attrInts("output_shape");
  pads.resize(2 * n, 0);
  outPad.resize(n, 0);
  if (strides.size() != n || dil.size() != n)
    return ctx.error("strides and dilations need " + llvm::Twine(n) +
                     " values");
  if (!outShape.empty() && outShape.size() != n)
    outShape.erase(outShape.begin(), outShape.end() - ptrdiff_t(n));
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  llvm::SmallVector<TransposedDim, 3> dims(n);
  for (size_t i = 0; i < n; ++i) {
    TransposedDim &d = dims[i];
    d = {in[i], kernel[i], strides[i], dil[i], 0, pads[i]};
    if (d.stride < 1 || d.dilation < 1 || d.kernel < 1 || outPad[i] < 0)
      return ctx.error("strides, dilations and kernel sizes must be "
                       "positive, output_padding not negative");
    int64_t full =
        d.stride * (d.in - 1) + outPad[i] + (d.kernel - 1) * d.dilation + 1;
    bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
    if (!outShape.empty() || same) {
      d.out = outShape.empty() ? d.in * d.stride : outShape[i];
      // total / 2 rounded down, as ONNX's reference divides (an output
      // larger than the full one pads negatively).
      int64_t total = full - d.out,
              half = total >= 0 ? total / 2 : -((1 - total) / 2);
      d.padBegin = autoPad == "SAME_UPPER" ? half : total - half;
    } else if (autoPad == "VALID") {
      d.padBegin = 0, d.out = full;
    } else if (autoPad == "NOTSET") {
      d.out = full - pads[i] - pads[i + n];
    } else {
      return ctx.error("unknown auto_pad '" + autoPad + "'");
    }
    if (d.out < 1 || d.out > kMaxExtent)
      return ctx.error("output dim " + llvm::Twine(i + 2) + " would have " +
                       llvm::Twine(d.out) + " positions");
  }
  return dims;
}

/// The contraction and scatter's iteration dims: n, (g), co, the input
/// positions, the kernel points (all parallel), then ci (summed).
struct Space {
  llvm::SmallVector<IterDim, 6> iters;
  unsigned n = 0, co = 0, ci = 0;
  int g = -1;
  llvm::SmallVector<unsigned, 3> at, k;
  AccessExpr channel(unsigned d) const {
    return g >= 0 ? AccessExpr::group({unsigned(g), d}) : AccessExpr::dim(d);
  }
};

Space spaceOf(int64_t batch, int64_t group, int64_t cg, int64_t mg,
              llvm::ArrayRef<TransposedDim> dims) {
  Space s;
  auto add = [&](std::string name, int64_t extent, IterKind kind) {
    s.iters.push_back({std::move(name), extent, kind});
    return unsigned(s.iters.size() - 1);
  };
  s.n = add("n", batch, IterKind::Parallel);
  if (group > 1)
    s.g = int(add("g", group, IterKind::Parallel));
  s.co = add("co", mg, IterKind::Parallel);
  for (size_t i = 0; i < dims.size(); ++i)
    s.at.push_back(
        add("i" + std::to_string(i), dims[i].in, IterKind::Parallel));
  for (size_t i = 0; i < dims.size(); ++i)
    s.k.push_back(
        add("k" + std::to_string(i), dims[i].kernel, IterKind::Parallel));
  s.ci = add("ci", cg, IterKind::Reduction);
  return s;
}

/// The per-point values: t[n, (g), co, i, k] = sum_ci x[n, ci, i] w[ci,
/// co, k], laid out as the space's parallel dims (the group apart).
Value *windowValues(NodeContext &ctx, const Space &s) {
  auto op = ctx.newOp(OpKind::MatMul);
  op->iters = s.iters;
  AccessMap xm = {AccessExpr::dim(s.n), s.channel(s.ci)},
            wm = {s.channel(s.ci), AccessExpr::dim(s.co)};
  for (unsigned d : s.at)
    xm.push_back(AccessExpr::dim(d));
  for (unsigned d : s.k)
    wm.push_back(AccessExpr::dim(d));
  TensorType t{ctx.type(0).elem, {}};
  for (unsigned d = 0; d < s.ci; ++d)
    t.shape.push_back(s.iters[d].extent);
  op->operands.push_back({ctx.value(0), xm});
  op->operands.push_back({ctx.value(1), wm});
  op->addResult(t, identityMap(s.ci));
  return ctx.emit(std::move(op));
}

} // namespace

llvm::Error importConvTranspose(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> x = ctx.shape(0), w = ctx.shape(1);
  if (x.size() < 3 || w.size() != x.size())
    return ctx.error("X (" + shapeStr(x) + ") and W (" + shapeStr(w) +
                     ") must have the same rank, 3 or more");
  int64_t group = ctx.attrInt("group", 1), c = x[1];
  if (group < 1 || c % group || w[0] != c)
    return ctx.error("W (" + shapeStr(w) + ") must have the input's " +
                     llvm::Twine(c) + " channels first, in " +
                     llvm::Twine(group) + " groups");
  int64_t cg = c / group, mg = w[1], m = mg * group;
  auto dims = transposedDims(ctx, x.drop_front(2), w.drop_front(2));
  if (!dims)
    return dims.takeError();
  Space s = spaceOf(x[0], group, cg, mg, *dims);
  Value *t = windowValues(ctx, s);
  // Summed through the window into the output.
  auto op = ctx.newOp(OpKind::ScatterAdd);
  op->iters = s.iters;
  op->iters.pop_back(); // ci
  AccessMap ym = {AccessExpr::dim(s.n), s.channel(s.co)};
  llvm::SmallVector<int64_t, 5> yshape = {x[0], m};
  for (size_t i = 0; i < dims->size(); ++i) {
    const TransposedDim &d = (*dims)[i];
    ym.push_back(
        AccessExpr::window(s.at[i], s.k[i], d.stride, d.dilation, -d.padBegin));
    yshape.push_back(d.out);
  }
  op->operands.push_back({t, identityMap(s.ci)});
  TensorType yt{ctx.type(0).elem, {yshape.begin(), yshape.end()}};
  op->addResult(yt, ym);
  if (!ctx.hasInput(2))
    return ctx.finish(std::move(op));
  if (ctx.shape(2).size() != 1 || ctx.shape(2)[0] != m)
    return ctx.error("B has shape " + shapeStr(ctx.shape(2)) + ", expected " +
                     llvm::Twine(m));
  Value *y = ctx.emit(std::move(op));
  auto add = ctx.newOp(OpKind::Add);
  add->iters = parallelSpace(yshape);
  add->operands.push_back({y, identityMap(yshape.size())});
  add->operands.push_back({ctx.value(2), {AccessExpr::dim(1)}});
  add->addResult(yt, identityMap(yshape.size()));
  return ctx.finish(std::move(add));
}

} // namespace pax
