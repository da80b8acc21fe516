//===- Resize.cpp - Resize and Upsample as gathers and weighted sums ------===//
#include "frontend/Resize.h"

#include "frontend/GraphBuilder.h"
#include "frontend/TensorProto.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace pax {
namespace {

using Types = llvm::StringMap<onnx::TypeProto>;

/// How a resize maps output positions onto input ones.
struct ResizeAttrs {
  std::string mode = "nearest", transform = "half_pixel",
              nearestMode = "round_prefer_floor";
  double cubicA = -0.75, extrapolation = 0;
  bool excludeOutside = false;
};

/// One resized axis: per output position, the input positions it reads
/// and their weights (unused taps weigh 0), and whether it lies outside
/// the input (tf_crop_and_resize: the extrapolation value).
struct AxisTaps {
  int n = 0;
  std::vector<std::array<int64_t, 4>> idx;
  std::vector<std::array<double, 4>> w;
  std::vector<bool> outside;
};

/// Output position \p x's coordinate in the input (ONNX's reference), of
/// an axis of \p in positions resized to \p out by \p scale; roi \p r0 to
/// \p r1 (tf_crop_and_resize).
double inputCoordinate(const ResizeAttrs &a, int64_t x, double scale,
                       int64_t in, int64_t out, double r0, double r1) {
  double xd = double(x);
  if (a.transform == "align_corners")
    return out == 1 ? 0.0 : xd * double(in - 1) / double(out - 1);
  if (a.transform == "asymmetric")
    return xd / scale;
  if (a.transform == "tf_half_pixel_for_nn")
    return (xd + 0.5) / scale;
  if (a.transform == "tf_crop_and_resize")
    return out > 1 ? r0 * double(in - 1) +
                         xd * (r1 - r0) * double(in - 1) / double(out - 1)
                   : 0.5 * (r0 + r1) * double(in - 1);
  if (a.transform == "pytorch_half_pixel")
    return out == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
  if (a.transform == "half_pixel_symmetric") {
    double adjustment = double(out) / (scale * double(in));
    double offset = double(in) / 2 * (1 - adjustment);
    return offset + (xd + 0.5) / scale - 0.5;
  }
  return (xd + 0.5) / scale - 0.5; // half_pixel
}

/// The weights of the taps around a coordinate \p ratio past the one
/// before it (1 on an input position), and how many taps there are.
std::array<double, 4> coefficients(const ResizeAttrs &a, double ratio, int &n) {
  if (a.mode == "cubic") {
    n = 4;
    double A = a.cubicA, r = ratio, s = 1 - ratio;
    return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
            ((A + 2) * r - (A + 3)) * r * r + 1,
            ((A + 2) * s - (A + 3)) * s * s + 1,
            ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A};
  }
  n = 2;
  if (a.mode == "linear")
    return {1 - ratio, ratio, 0, 0};
  if (ratio == 1 || a.nearestMode == "ceil")
    return {0, 1, 0, 0};
  if (a.nearestMode == "floor")
    return {1, 0, 0, 0};
  bool up = a.nearestMode == "round_prefer_ceil" ? ratio >= 0.5 : ratio > 0.5;
  return {up ? 0.0 : 1.0, up ? 1.0 : 0.0, 0, 0};
}

/// The \p n input positions nearest \p x (ties to the lower), ascending, as
/// ONNX's reference picks them from the input padded by its edge values.
std::array<int64_t, 4> neighbours(double x, int n, int64_t in) {
  int64_t pad = (n + 1) / 2, len = in + 2 * pad;
  double xp = x + double(pad);
  std::vector<int64_t> cand;
  for (int64_t j = int64_t(std::floor(xp)) - n;
       j <= int64_t(std::floor(xp)) + n; ++j)
    if (j >= 0 && j < len)
      cand.push_back(j);
  std::stable_sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) {
    double dp = std::fabs(xp - double(p)), dq = std::fabs(xp - double(q));
    return dp != dq ? dp < dq : p < q;
  });
  cand.resize(std::min<size_t>(cand.size(), size_t(n)));
  std::sort(cand.begin(), cand.end());
  std::array<int64_t, 4> out{};
  for (size_t k = 0; k < cand.size(); ++k)
    out[k] = cand[k] - pad;
  return out;
}

/// The taps of an axis of \p in positions resized to \p out.
AxisTaps axisTaps(const ResizeAttrs &a, int64_t in, int64_t out, double scale,
                  double r0, double r1) {
  AxisTaps t;
  for (int64_t x = 0; x < out; ++x) {
    double xo = inputCoordinate(a, x, scale, in, out, r0, r1);
    bool outside =
        a.transform == "tf_crop_and_resize" && (xo < 0 || xo > double(in - 1));
    double ratio = xo == std::floor(xo) ? 1.0 : xo - std::floor(xo);
    std::array<double, 4> w = coefficients(a, ratio, t.n);
    std::array<int64_t, 4> idx = neighbours(xo, t.n, in);
    double sum = 0;
    for (int k = 0; k < t.n; ++k) {
      if (a.excludeOutside && (idx[k] < 0 || idx[k] >= in))
        w[k] = 0;
      sum += w[k];
      idx[k] = std::clamp<int64_t>(idx[k], 0, in - 1); // the edge values
    }
    for (int k = 0; a.excludeOutside && sum != 0 && k < t.n; ++k)
      w[k] /= sum;
    if (outside)
      w = {0, 0, 0, 0};
    t.idx.push_back(idx);
    t.w.push_back(w);
    t.outside.push_back(outside);
  }
  return t;
}

/// True when \p t reads position x, wholly, for every output x.
bool identity(const AxisTaps &t, int64_t in) {
  if (int64_t(t.idx.size()) != in)
    return false;
  for (size_t x = 0; x < t.idx.size(); ++x)
    for (int k = 0; k < t.n; ++k)
      if (t.outside[x] ||
          (t.w[x][k] != 0 && (t.w[x][k] != 1 || t.idx[x][k] != int64_t(x))))
        return false;
  return true;
}

/// A Resize or Upsample node as its attributes, the input's shape and the
/// output's, per axis the scale and the roi.
struct ResizeNode {
  ResizeAttrs attrs;
  std::vector<int64_t> in, out;
  std::vector<double> scales, roiStart, roiEnd;
  int32_t elem = 0;
};

/// The attributes of \p n at \p opset (Upsample and Resize-10: asymmetric
/// coordinates and nearest rounded down).
llvm::Expected<ResizeAttrs> attrsOf(const onnx::NodeProto &n, int64_t opset,
                                    const std::string &where) {
  ResizeAttrs a;
  auto str = [&](llvm::StringRef name, std::string &v) {
    if (const auto *x = findAttribute(n, name))
      v = x->s();
  };
  str("mode", a.mode);
  if (a.mode == "bilinear") // Upsample-7's name for linear
    a.mode = "linear";
  bool legacy = n.op_type() == "Upsample" || opset < 11;
  if (legacy) {
    a.transform = "asymmetric";
    a.nearestMode = "floor";
  }
  str("coordinate_transformation_mode", a.transform);
  str("nearest_mode", a.nearestMode);
  if (const auto *x = findAttribute(n, "cubic_coeff_a"))
    a.cubicA = x->f();
  if (const auto *x = findAttribute(n, "exclude_outside"))
    a.excludeOutside = x->i() != 0;
  if (const auto *x = findAttribute(n, "extrapolation_value"))
    a.extrapolation = x->f();
  auto fail = [&](const llvm::Twine &m) {
    return llvm::createStringError(where + ": " + m);
  };
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic")
    return fail("mode '" + a.mode + "' is not nearest, linear or cubic");
  if (const auto *x = findAttribute(n, "antialias"); x && x->i() != 0)
    return fail("antialias is not supported");
  if (const auto *x = findAttribute(n, "keep_aspect_ratio_policy");
      x && x->s() != "stretch")
    return fail("keep_aspect_ratio_policy '" + x->s() +
                "' is not supported (only stretch)");
  return a;
}

/// The axes \p n resizes (its `axes`, or all of \p rank), or an error.
llvm::Expected<std::vector<int64_t>>
resizedAxes(const onnx::NodeProto &n, int64_t rank, const std::string &where) {
  std::vector<int64_t> axes;
  if (const auto *a = findAttribute(n, "axes"))
    for (int64_t v : a->ints())
      axes.push_back(v < 0 ? v + rank : v);
  else
    for (int64_t k = 0; k < rank; ++k)
      axes.push_back(k);
  for (int64_t v : axes)
    if (v < 0 || v >= rank)
      return llvm::createStringError(where + ": axes out of range");
  return axes;
}

/// \p n's sizes input: a constant, or where it is computed (from the
/// input's shape, as exporters write it), the resized axes' extents of the
/// output's static shape in \p types (ONNX's inference propagates them).
llvm::Expected<std::optional<std::vector<double>>>
sizesOf(const onnx::GraphProto &g, const onnx::NodeProto &n,
        const std::vector<int64_t> &axes, const Types &types,
        const std::string &where) {
  auto z = constantInput(g, n, 3, "sizes", where);
  if (z)
    return z;
  if (auto v = shapeValues(g, n.input(3), types)) {
    llvm::consumeError(z.takeError());
    return v;
  }
  auto out = staticShape(types, n.output(0), where);
  if (!out) {
    llvm::consumeError(out.takeError());
    return z;
  }
  llvm::consumeError(z.takeError());
  std::vector<double> sizes;
  for (int64_t a : axes)
    if (a < int64_t(out->size()))
      sizes.push_back(double((*out)[size_t(a)]));
  return sizes;
}

/// Scales, sizes and roi of \p n (per its version's inputs) into \p r for
/// \p axes: each axis's output extent and scale.
llvm::Error sizeAxes(const onnx::GraphProto &g, const onnx::NodeProto &n,
                     int64_t opset, const std::vector<int64_t> &axes,
                     const Types &types, const std::string &where,
                     ResizeNode &r) {
  bool upsample7 = n.op_type() == "Upsample" && opset < 9;
  bool scalesOnly = n.op_type() == "Upsample" || opset < 11;
  std::optional<std::vector<double>> scales, sizes, roi;
  if (upsample7) {
    if (const auto *a = findAttribute(n, "scales"))
      scales = std::vector<double>(a->floats().begin(), a->floats().end());
  } else {
    auto s = constantInput(g, n, scalesOnly ? 1 : 2, "scales", where);
    if (!s)
      return s.takeError();
    scales = *s;
  }
  if (!scalesOnly) {
    auto z = sizesOf(g, n, axes, types, where);
    if (!z)
      return z.takeError();
    sizes = *z;
    if (r.attrs.transform == "tf_crop_and_resize") {
      auto o = constantInput(g, n, 1, "roi", where);
      if (!o)
        return o.takeError();
      roi = *o;
    }
  }
  size_t na = axes.size();
  const std::vector<double> *given = sizes    ? &*sizes
                                     : scales ? &*scales
                                              : nullptr;
  if (!given || given->size() != na || (roi && roi->size() != 2 * na))
    return llvm::createStringError(
        where + ": needs one scale or size per resized axis (" +
        std::to_string(na) + ")" + (roi ? " and two roi values per axis" : ""));
  for (size_t k = 0; k < na; ++k) {
    int64_t ax = axes[k], in = r.in[size_t(ax)];
    if (roi)
      r.roiStart[size_t(ax)] = (*roi)[k], r.roiEnd[size_t(ax)] = (*roi)[na + k];
    if (in < 1)
      return llvm::createStringError(where + ": the size of axis " +
                                     std::to_string(ax) +
                                     " must be known (bind it with --dim)");
    double span = r.roiEnd[size_t(ax)] - r.roiStart[size_t(ax)];
    double extent =
        sizes ? (*sizes)[k] : std::floor(double(in) * span * (*scales)[k]);
    if (auto e = checkBuiltSize(where, {extent}))
      return e;
    int64_t out = int64_t(extent);
    if (out < 1)
      return llvm::createStringError(where + ": axis " + std::to_string(ax) +
                                     " would have no positions");
    r.out[size_t(ax)] = out;
    r.scales[size_t(ax)] = sizes ? double(out) / double(in) : (*scales)[k];
  }
  return llvm::Error::success();
}

/// A tensor of \p dims holding \p v in element type \p elem (FLOAT or
/// DOUBLE; INT64 for indices).
onnx::TensorProto tensorOf(const std::vector<double> &v,
                           const std::vector<int64_t> &dims, int32_t elem) {
  onnx::TensorProto t;
  t.set_data_type(elem);
  for (int64_t d : dims)
    t.add_dims(d);
  for (double x : v) {
    if (elem == onnx::TensorProto::INT64)
      t.add_int64_data(int64_t(x));
    else if (elem == onnx::TensorProto::DOUBLE)
      t.add_double_data(x);
    else
      t.add_float_data(float(x));
  }
  return t;
}

/// A constant of \p v over axis \p axis of a rank-\p rank tensor (size 1
/// along the later axes), in \p elem (cast from float for 16-bit types).
std::string axisConstant(GraphBuilder &b, const std::vector<double> &v,
                         int64_t axis, int64_t rank, int32_t elem) {
  std::vector<int64_t> dims{int64_t(v.size())};
  dims.resize(size_t(rank - axis), 1);
  bool wide = elem == onnx::TensorProto::DOUBLE;
  std::string c = b.constant(tensorOf(
      v, dims, wide ? onnx::TensorProto::DOUBLE : onnx::TensorProto::FLOAT));
  if (wide || elem == onnx::TensorProto::FLOAT)
    return c;
  return b.cast(c, elem);
}

/// \p x resized along \p axis by \p t: per tap with any weight, a Gather
/// through its indices times its weights, summed (nearest: the one
/// gather), plus the extrapolation value where \p t lies outside.
std::string resizeAxis(GraphBuilder &b, const std::string &x, const AxisTaps &t,
                       const ResizeNode &r, int64_t axis) {
  int64_t rank = int64_t(r.in.size()), out = int64_t(t.idx.size());
  std::string sum;
  for (int k = 0; k < t.n; ++k) {
    std::vector<double> idx, w;
    bool used = false, ones = true;
    for (int64_t p = 0; p < out; ++p) {
      // Nearest: each position's one tap of weight 1, whichever it is.
      int pick = k;
      if (r.attrs.mode == "nearest")
        for (int j = 0; j < t.n; ++j)
          if (t.w[size_t(p)][j] != 0)
            pick = j;
      idx.push_back(double(t.idx[size_t(p)][pick]));
      w.push_back(t.w[size_t(p)][pick]);
      used |= w.back() != 0;
      ones &= w.back() == 1;
    }
    // Nearest: the one gather. Otherwise the taps with weight, and at
    // least one (every position outside: x's values weigh nothing).
    bool last = k == t.n - 1;
    if (r.attrs.mode == "nearest" ? k > 0 : !used && !(last && sum.empty()))
      continue;
    onnx::NodeProto &g =
        b.node("Gather",
               {x, b.constant(tensorOf(idx, {out}, onnx::TensorProto::INT64))});
    GraphBuilder::intAttr(g, "axis", axis);
    std::string term = g.output(0);
    if (!ones)
      term = b.apply("Mul", {term, axisConstant(b, w, axis, rank, r.elem)});
    sum = sum.empty() ? term : b.apply("Add", {sum, term});
  }
  if (std::find(t.outside.begin(), t.outside.end(), true) != t.outside.end()) {
    std::vector<double> e;
    for (bool o : t.outside)
      e.push_back(o ? r.attrs.extrapolation : 0.0);
    sum = b.apply("Add", {sum, axisConstant(b, e, axis, rank, r.elem)});
  }
  return sum;
}

/// \p n (the graph's node \p index) described: attributes, shapes, scales.
llvm::Expected<ResizeNode>
describe(const onnx::GraphProto &g, const onnx::NodeProto &n, int64_t opset,
         const llvm::StringMap<onnx::TypeProto> &types,
         const std::string &where) {
  ResizeNode r;
  auto attrs = attrsOf(n, opset, where);
  if (!attrs)
    return attrs.takeError();
  r.attrs = *attrs;
  auto it = types.find(n.input(0));
  if (it == types.end() || !it->second.tensor_type().has_shape())
    return llvm::createStringError(where + ": the input's rank is not known");
  const onnx::TypeProto::Tensor &xt = it->second.tensor_type();
  r.elem = xt.elem_type();
  for (const auto &d : xt.shape().dim())
    r.in.push_back(d.has_dim_value() ? d.dim_value() : -1);
  int64_t rank = int64_t(r.in.size());
  r.out = r.in;
  r.scales.assign(size_t(rank), 1.0);
  r.roiStart.assign(size_t(rank), 0.0);
  r.roiEnd.assign(size_t(rank), 1.0);
  bool isFloat = r.elem == onnx::TensorProto::FLOAT ||
                 r.elem == onnx::TensorProto::DOUBLE ||
                 r.elem == onnx::TensorProto::FLOAT16 ||
                 r.elem == onnx::TensorProto::BFLOAT16;
  if (!isFloat && r.attrs.mode != "nearest")
    return llvm::createStringError(where + ": " + r.attrs.mode +
                                   " interpolation of " + onnxElemName(r.elem) +
                                   " data");
  auto axes = resizedAxes(n, rank, where);
  if (!axes)
    return axes.takeError();
  if (auto err = sizeAxes(g, n, opset, *axes, types, where, r))
    return err;
  return r;
}

/// The nodes computing \p n's output, appended to \p b's graph.
void lowerOne(GraphBuilder &b, const onnx::NodeProto &n, const ResizeNode &r) {
  std::string x = n.input(0);
  for (int64_t axis = 0; axis < int64_t(r.in.size()); ++axis) {
    int64_t in = r.in[size_t(axis)], out = r.out[size_t(axis)];
    if (in < 1)
      continue; // unknown extent: not resized (sizeAxes checked)
    AxisTaps t = axisTaps(r.attrs, in, out, r.scales[size_t(axis)],
                          r.roiStart[size_t(axis)], r.roiEnd[size_t(axis)]);
    if (!identity(t, in))
      x = resizeAxis(b, x, t, r, axis);
  }
  if (x == n.input(0))
    x = b.apply("Identity", {x});
  b.rename(x, n.output(0));
}

} // namespace

llvm::Error lowerResizes(llvm::StringRef path, onnx::ModelProto &model,
                         int64_t opset) {
  onnx::GraphProto &g = *model.mutable_graph();
  auto isResize = [](const onnx::NodeProto &n) {
    return (n.domain().empty() || n.domain() == "ai.onnx") &&
           (n.op_type() == "Resize" || n.op_type() == "Upsample");
  };
  return rewriteNodes(
      path, model, opset, isResize,
      [&](const onnx::NodeProto &n, int i, GraphBuilder &b,
          const llvm::StringMap<onnx::TypeProto> &types) -> llvm::Error {
        auto r = describe(g, n, opset, types, nodeWhere(path, n, i));
        if (!r)
          return r.takeError();
        lowerOne(b, n, *r);
        return llvm::Error::success();
      });
}

} // namespace pax
