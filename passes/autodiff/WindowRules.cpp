//===- WindowRules.cpp - Gradients of windows, norms and scans ------------===//
//
// Convolution, pooling, padding, LRN, the normalizations, reduce max/min
// and cumulative sums: gradients laid out over the points a window reads,
// summed back through the operand's own map (scatter_add).
//
//===----------------------------------------------------------------------===//
#include "passes/autodiff/Rules.h"

#include <cmath>

namespace pax::gradient_rules {

// layer_norm and rms_norm over the red dims (the row), y = xhat g + b with
// xhat = (x - mean) rstd (rms_norm: no mean):
//   db = sum dy, dg = sum dy xhat,
//   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g
// (rms_norm: without the mean(dxhat) term). The statistics are computed
// again from x.
llvm::Error normRule(GradientBuilder &b, const Op &op, Value *dy) {
  bool rms = op.kind == OpKind::RmsNorm;
  DType elem = dy->type.elem;
  double eps = 1e-5;
  if (auto it = op.attrs.find("epsilon"); it != op.attrs.end())
    eps = std::get<float>(it->second);
  // Named, not bound: lambdas capture them (C++20 lets them capture
  // bindings; clang before 16 does not).
  auto rows = rowsOf(op);
  const auto &rowMap = rows.first;
  const auto &rowType = rows.second;
  const AccessMap &full = b.resultMap();
  auto at = [&](Value *v) { return Read{v, full}; };
  auto row = [&](Value *v) { return Read{v, rowMap}; };
  auto rowMean = [&](Value *v, llvm::StringRef what) {
    return b.over(OpKind::ReduceMean, {at(v)}, rowMap, rowType, what);
  };
  Read x = operandRead(op, 0);
  Value *centered = x.value;
  if (!rms) {
    Value *mean = b.over(OpKind::ReduceMean, {x}, rowMap, rowType, "mean");
    centered = overResult(b, OpKind::Sub, {x, row(mean)}, op, "centered");
  }
  Read xc = rms ? x : at(centered);
  Value *sq = overResult(b, OpKind::Mul, {xc, xc}, op, "square");
  Value *var = rowMean(sq, "variance");
  Value *shifted = b.over(OpKind::Add, {row(var), {b.constant(eps, elem), {}}},
                          rowMap, rowType, "plus_epsilon");
  Value *sd = b.over(OpKind::Sqrt, {row(shifted)}, rowMap, rowType, "std");
  Value *rstd = b.over(OpKind::Reciprocal, {row(sd)}, rowMap, rowType, "rstd");
  Value *xhat = overResult(b, OpKind::Mul, {xc, row(rstd)}, op, "xhat");
  bool hasScale = op.operands.size() > 1;
  if (op.operands.size() > 2 && b.needs(2))
    b.accumulateOperand(2, dy);
  if (hasScale && b.needs(1))
    b.accumulateOperand(
        1, overResult(b, OpKind::Mul, {at(dy), at(xhat)}, op, "dscale"));
  if (!b.needs(0))
    return llvm::Error::success();
  Value *dxhat = hasScale
                     ? overResult(b, OpKind::Mul, {at(dy), operandRead(op, 1)},
                                  op, "dxhat")
                     : dy;
  Value *prod =
      overResult(b, OpKind::Mul, {at(dxhat), at(xhat)}, op, "dxhat_xhat");
  Value *m2 = rowMean(prod, "mean_dxhat_xhat");
  Value *t = overResult(b, OpKind::Mul, {at(xhat), row(m2)}, op, "projected");
  Value *inner = overResult(b, OpKind::Sub, {at(dxhat), at(t)}, op, "inner");
  if (!rms) {
    Value *m1 = rowMean(dxhat, "mean_dxhat");
    inner = overResult(b, OpKind::Sub, {at(inner), row(m1)}, op, "centered_d");
  }
  b.accumulateOperand(
      0, overResult(b, OpKind::Mul, {at(inner), row(rstd)}, op, "dx"));
  return llvm::Error::success();
}

/// Plain dims for every forward dim \p map uses, and the tensor they span:
/// a value laid out over the points a window reads.
std::pair<AccessMap, TensorType> pointsOf(const Op &op, const AccessMap &map,
                                          DType elem) {
  AccessMap out;
  TensorType type{elem, {}};
  for (unsigned d = 0; d < op.iters.size(); ++d)
    if (llvm::any_of(map, [&](const AccessExpr &e) { return e.uses(d); })) {
      out.push_back(AccessExpr::dim(d));
      type.shape.push_back(op.iters[d].extent);
    }
  return {out, type};
}

/// Sums \p g, laid out by \p gMap over the forward dims, into operand
/// \p k through its own map (a window's overlapping reads add up; reads
/// into the padding are dropped).
void scatterInto(GradientBuilder &b, const Op &op, unsigned k, Value *g,
                 const AccessMap &gMap) {
  const Operand &x = op.operands[k];
  b.accumulate(x.value, b.over(OpKind::ScatterAdd, {{g, gMap}}, x.map,
                               x.value->type, "scatter"));
}

// conv: the weight's gradient contracts dy with the input's windows; the
// bias's sums dy; the input's contracts dy with the weight over the output
// channels at every window point, then sums the points into the input
// through the window (scatter_add).
llvm::Error convRule(GradientBuilder &b, const Op &op, Value *dy) {
  Read dyr{dy, b.resultMap()};
  if (b.needs(1)) {
    const Operand &w = op.operands[1];
    b.accumulate(w.value, b.over(OpKind::MatMul, {dyr, operandRead(op, 0)},
                                 w.map, w.value->type, "dweight"));
  }
  if (op.operands.size() > 2 && b.needs(2))
    b.accumulateOperand(2, dy);
  if (b.needs(0)) {
    auto [map, type] = pointsOf(op, op.operands[0].map, dy->type.elem);
    Value *t = b.over(OpKind::MatMul, {dyr, operandRead(op, 1)}, map, type,
                      "window_grads");
    scatterInto(b, op, 0, t, map);
  }
  return llvm::Error::success();
}

// max_pool: dy goes to the window points equal to the maximum (every one of
// them on a tie), summed through the window.
llvm::Error maxPoolRule(GradientBuilder &b, const Op &op, Value *dy) {
  auto [map, type] = pointsOf(op, op.operands[0].map, dy->type.elem);
  TensorType mask = type;
  mask.elem = DType::I1;
  Value *hit =
      b.over(OpKind::Equal, {operandRead(op, 0), {resultOf(op), b.resultMap()}},
             map, mask, "argmax");
  Value *g = b.over(
      OpKind::Where,
      {{hit, map}, {dy, b.resultMap()}, {b.constant(0, dy->type.elem), {}}},
      map, type, "routed");
  scatterInto(b, op, 0, g, map);
  return llvm::Error::success();
}

// average_pool: every window point gets dy over the count the forward
// divided by: the window's size unpadded; padded, the points inside the
// input (or, with count_include_pad, inside the padded input) of each
// output position's window, a constant over the output positions.
llvm::Error averagePoolRule(GradientBuilder &b, const Op &op, Value *dy) {
  std::vector<int64_t> pads;
  if (auto it = op.attrs.find("pads"); it != op.attrs.end())
    pads = std::get<std::vector<int64_t>>(it->second);
  auto [map, type] = pointsOf(op, op.operands[0].map, dy->type.elem);
  bool padded = llvm::any_of(pads, [](int64_t p) { return p != 0; });
  Read share{
      b.constant(1.0 / double(summedPoints(op, b.resultMap())), dy->type.elem),
      {}};
  if (padded) {
    const Operand &x = op.operands[0];
    size_t ns = (op.iters.size() - 2) / 2;
    bool includePad = op.intAttr("count_include_pad", 0) != 0;
    // Per spatial dim, how many of each output position's window points
    // the forward counted; the divisor is their product.
    std::vector<std::vector<double>> counts(ns);
    // The inverse counts in f64 for f64, else f32 (16-bit gradients are
    // multiplied by them in fp32).
    TensorType inv{dy->type.elem == DType::F64 ? DType::F64 : DType::F32, {}};
    AccessMap invMap;
    for (size_t i = 0; i < ns; ++i) {
      const AccessExpr &e = x.map[2 + i];
      int64_t size = x.value->type.shape[2 + i];
      int64_t lo = includePad ? -pads[i] : 0;
      int64_t hi = includePad ? size + pads[i + ns] : size;
      int64_t outs = op.iters[2 + i].extent,
              window = op.iters[2 + ns + i].extent;
      for (int64_t o = 0; o < outs; ++o) {
        int64_t n = 0;
        for (int64_t k = 0; k < window; ++k) {
          int64_t at = e.stride * o + e.dilation * k + e.offset;
          n += at >= lo && at < hi;
        }
        counts[i].push_back(double(std::max<int64_t>(n, 1)));
      }
      inv.shape.push_back(outs);
      invMap.push_back(AccessExpr::dim(unsigned(2 + i)));
    }
    std::vector<double> values(size_t(inv.numel()), 1.0);
    for (size_t flat = 0; flat < values.size(); ++flat) {
      size_t rest = flat;
      double divisor = 1;
      for (size_t i = ns; i-- > 0;) {
        divisor *= counts[i][rest % counts[i].size()];
        rest /= counts[i].size();
      }
      values[flat] = 1.0 / divisor;
    }
    share = {b.dense(inv, values, "inverse_counts"), invMap};
  }
  Value *g =
      b.over(OpKind::Mul, {{dy, b.resultMap()}, share}, map, type, "share");
  scatterInto(b, op, 0, g, map);
  return llvm::Error::success();
}

// reduce_max and reduce_min: dy goes to every point equal to the result
// (every one of them on a tie, as max_pool's rule).
llvm::Error reduceMaxRule(GradientBuilder &b, const Op &op, Value *dy) {
  const Operand &x = op.operands[0];
  TensorType mask = x.value->type;
  mask.elem = DType::I1;
  Value *hit =
      b.over(OpKind::Equal, {operandRead(op, 0), {resultOf(op), b.resultMap()}},
             x.map, mask, "argmax");
  b.accumulate(x.value, b.over(OpKind::Where,
                               {{hit, x.map},
                                {dy, b.resultMap()},
                                {b.constant(0, dy->type.elem), {}}},
                               x.map, x.value->type, "routed"));
  return llvm::Error::success();
}

// cum_sum: x's gradient is the running sum of dy the other way (exclusive
// stays exclusive).
llvm::Error cumSumRule(GradientBuilder &b, const Op &op, Value *dy) {
  AttrMap attrs;
  for (const char *key : {"axis", "exclusive"})
    if (auto it = op.attrs.find(key); it != op.attrs.end())
      attrs[key] = it->second;
  attrs["reverse"] = int64_t(op.intAttr("reverse", 0) == 0);
  Value *g = b.over(OpKind::CumSum, {{dy, b.resultMap()}}, b.resultMap(),
                    resultOf(op)->type, "reverse_sum", attrs);
  // The scan dim stays sequential.
  for (size_t d = 0; d < op.iters.size() && d < g->def->iters.size(); ++d)
    g->def->iters[d].kind = op.iters[d].kind;
  b.accumulateOperand(0, g);
  return llvm::Error::success();
}

// pad (constant): x's gradient is dy where x lies, the padding dropped
// (a scatter_add through x's shifted map).
llvm::Error padRule(GradientBuilder &b, const Op &op, Value *dy) {
  scatterInto(b, op, 0, dy, b.resultMap());
  return llvm::Error::success();
}

// scatter_add of its one operand, read over the whole space, through
// maps without lookups (a ConvTranspose, a pad's or a strided slice's
// gradient): each point's value went to one place, so its gradient is dy
// read there, zero where it fell outside (a pad through the result's map).
llvm::Error scatterAddRule(GradientBuilder &b, const Op &op, Value *dy) {
  if (!b.needs(0))
    return llvm::Error::success();
  const Operand &t = op.operands[0];
  bool lookup = llvm::any_of(op.results[0].map, [](const AccessExpr &e) {
    return e.kind == AccessExpr::Kind::Lookup;
  });
  if (lookup && op.operands.size() == 2) {
    // Through indices (ScatterElements, ScatterND): each update's gradient
    // is dy where it went, a gather through the same maps.
    b.accumulate(t.value, b.over(OpKind::Gather,
                                 {{dy, op.results[0].map}, operandRead(op, 1)},
                                 t.map, t.value->type, "gathered"));
    return llvm::Error::success();
  }
  if (op.operands.size() != 1 || lookup || !isIdentityMap(t.map) ||
      t.map.size() != op.iters.size())
    return llvm::createStringError(
        "autodiff: op '" + op.name().str() +
        "' (scatter_add) reads its values with a map other than the "
        "identity; its gradient is not supported yet");
  b.accumulate(t.value,
               b.padded(dy, op.results[0].map, t.value->type, "gathered"));
  return llvm::Error::success();
}

// lrn: y_i = x_i s_i^-beta, s_i = bias + alpha/size sum over the window of
// x_j^2, so dx_k = dy_k s_k^-beta - 2 alpha beta / size x_k sum over the
// windows i that hold k of dy_i x_i s_i^(-beta-1). The window sums are a
// reduce_sum through the window (reads past the channels count zero) and a
// scatter_add back through it.
llvm::Error lrnRule(GradientBuilder &b, const Op &op, Value *dy) {
  const Operand &x = op.operands[0];
  DType elem = dy->type.elem;
  double size = op.floatAttr("size", 1), alpha = op.floatAttr("alpha", 1e-4),
         beta = op.floatAttr("beta", 0.75), bias = op.floatAttr("bias", 1);
  Pointwise p{b, op};
  Read xi{x.value, b.resultMap()}, dyr = p.at(dy);
  Value *sq =
      b.elementwise(OpKind::Mul, {x.value, x.value}, x.value->type, "square");
  Value *sum = b.over(OpKind::ReduceSum, {{sq, x.map}}, b.resultMap(),
                      resultOf(op)->type, "window_sum");
  Value *s = p.apply(
      OpKind::Add,
      {p.at(p.apply(OpKind::Mul, {p.at(sum), p.c(alpha / size)}, "scaled")),
       p.c(bias)},
      "s");
  Value *ps = p.apply(OpKind::Pow, {p.at(s), p.c(-beta)}, "s_pow");
  Value *direct = p.apply(OpKind::Mul, {dyr, p.at(ps)}, "direct");
  Value *t = p.apply(
      OpKind::Div,
      {p.at(p.apply(OpKind::Mul,
                    {p.at(p.apply(OpKind::Mul, {dyr, xi}, "dy_x")), p.at(ps)},
                    "dy_x_s_pow")),
       p.at(s)},
      "through_s");
  Value *spread = b.over(OpKind::ScatterAdd, {{t, b.resultMap()}}, x.map,
                         x.value->type, "window_spread");
  Value *cross = b.elementwise(
      OpKind::Mul,
      {b.elementwise(OpKind::Mul, {x.value, spread}, x.value->type, "x_spread"),
       b.constant(-2 * alpha * beta / size, elem)},
      x.value->type, "cross");
  b.accumulate(x.value, b.elementwise(OpKind::Add, {direct, cross},
                                      x.value->type, "dx"));
  return llvm::Error::success();
}

// batch_norm with its running statistics (inference form):
// y = (x - mean) rstd scale + bias, rstd = 1/sqrt(var + eps):
// dx = dy scale rstd, dscale = sum dy (x - mean) rstd, dbias = sum dy.
llvm::Error batchNormRule(GradientBuilder &b, const Op &op, Value *dy) {
  DType elem = dy->type.elem;
  double eps = 1e-5;
  if (auto it = op.attrs.find("epsilon"); it != op.attrs.end())
    eps = std::get<float>(it->second);
  Read dyr{dy, b.resultMap()};
  auto at = [&](Value *v) { return Read{v, b.resultMap()}; };
  Value *shifted = overResult(b, OpKind::Add,
                              {operandRead(op, 4), {b.constant(eps, elem), {}}},
                              op, "var_eps");
  Value *sd = overResult(b, OpKind::Sqrt, {at(shifted)}, op, "std");
  Value *rstd = overResult(b, OpKind::Reciprocal, {at(sd)}, op, "rstd");
  if (op.operands.size() > 2 && b.needs(2))
    b.accumulateOperand(2, dy);
  if (b.needs(1)) {
    Value *c =
        overResult(b, OpKind::Sub, {operandRead(op, 0), operandRead(op, 3)}, op,
                   "centered");
    Value *xhat = overResult(b, OpKind::Mul, {at(c), at(rstd)}, op, "xhat");
    b.accumulateOperand(
        1, overResult(b, OpKind::Mul, {dyr, at(xhat)}, op, "dscale"));
  }
  if (b.needs(0)) {
    Value *k = overResult(b, OpKind::Mul, {operandRead(op, 1), at(rstd)}, op,
                          "factor");
    b.accumulateOperand(0, overResult(b, OpKind::Mul, {dyr, at(k)}, op, "dx"));
  }
  if (b.needs(3) || b.needs(4))
    return llvm::createStringError(
        "autodiff: op '" + op.name().str() +
        "' (batch_norm): its statistics are trained parameters; only the "
        "running statistics of an inference export are supported");
  return llvm::Error::success();
}

} // namespace pax::gradient_rules
