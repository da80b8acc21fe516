//===- GradientRules.cpp - The gradient of each op kind -------------------===//
//
// One rule per op kind, in the table at the end. A rule reads the forward
// op through the builder (its maps, operands, result) and adds the gradient
// of every operand that needs one. Backward ops are built over the forward
// op's iteration dims (GradientBuilder::over), or elementwise over a
// tensor's dims where no forward dim is involved.
//
//===----------------------------------------------------------------------===//
#include "passes/autodiff/GradientBuilder.h"

#include <array>
#include <cmath>
#include <optional>

namespace pax {

namespace {

using Rule = llvm::Error (*)(GradientBuilder &b, const Op &op, Value *dy);

Value *resultOf(const Op &op) { return op.results[0].value.get(); }

/// `v * (1 - v)`-style helpers over the forward op's result layout.
Value *overResult(GradientBuilder &b, OpKind kind, llvm::ArrayRef<Read> ins,
                  const Op &op, llvm::StringRef what) {
  return b.over(kind, ins, b.resultMap(), resultOf(op)->type, what);
}

llvm::Error addRule(GradientBuilder &b, const Op &op, Value *dy) {
  for (unsigned k = 0; k < op.operands.size(); ++k)
    if (b.needs(k))
      b.accumulateOperand(k, dy);
  return llvm::Error::success();
}

llvm::Error subRule(GradientBuilder &b, const Op &op, Value *dy) {
  if (b.needs(0))
    b.accumulateOperand(0, dy);
  if (b.needs(1))
    b.accumulateOperand(1, b.elementwise(OpKind::Neg, {dy}, dy->type, "neg"));
  return llvm::Error::success();
}

llvm::Error negRule(GradientBuilder &b, const Op &op, Value *dy) {
  b.accumulateOperand(0, b.elementwise(OpKind::Neg, {dy}, dy->type, "neg"));
  return llvm::Error::success();
}

void scatterInto(GradientBuilder &b, const Op &op, unsigned k, Value *g,
                 const AccessMap &gMap);

Read operandRead(const Op &op, unsigned k) {
  return {op.operands[k].value, op.operands[k].map};
}

llvm::Error mulRule(GradientBuilder &b, const Op &op, Value *dy) {
  for (unsigned k = 0; k < 2; ++k)
    if (b.needs(k))
      b.accumulateOperand(
          k, overResult(b, OpKind::Mul,
                        {{dy, b.resultMap()}, operandRead(op, 1 - k)}, op,
                        "mul"));
  return llvm::Error::success();
}

// y = a / b: da = dy / b, db = -dy * y / b.
llvm::Error divRule(GradientBuilder &b, const Op &op, Value *dy) {
  Read den = operandRead(op, 1);
  if (b.needs(0))
    b.accumulateOperand(
        0, overResult(b, OpKind::Div, {{dy, b.resultMap()}, den}, op, "div"));
  if (b.needs(1)) {
    Value *dyy = overResult(
        b, OpKind::Mul, {{dy, b.resultMap()}, {resultOf(op), b.resultMap()}},
        op, "mul");
    Value *q = overResult(b, OpKind::Div, {{dyy, b.resultMap()}, den}, op,
                          "div");
    b.accumulateOperand(1, overResult(b, OpKind::Neg, {{q, b.resultMap()}},
                                      op, "neg"));
  }
  return llvm::Error::success();
}

llvm::Error reluRule(GradientBuilder &b, const Op &op, Value *dy) {
  DType elem = resultOf(op)->type.elem;
  Value *zero = b.constant(0, elem);
  TensorType mask = resultOf(op)->type;
  mask.elem = DType::I1;
  Value *positive = b.over(OpKind::Greater,
                           {operandRead(op, 0), {zero, {}}}, b.resultMap(),
                           mask, "positive");
  b.accumulateOperand(
      0, overResult(b, OpKind::Where,
                    {{positive, b.resultMap()}, {dy, b.resultMap()}, {zero, {}}},
                    op, "where"));
  return llvm::Error::success();
}

/// dx = dy * f'(x), with f'(x) computed from y = f(x) by \p derivative.
template <Value *(*Derivative)(GradientBuilder &, const Op &)>
llvm::Error fromResultRule(GradientBuilder &b, const Op &op, Value *dy) {
  Value *d = Derivative(b, op);
  b.accumulateOperand(
      0, overResult(b, OpKind::Mul, {{dy, b.resultMap()}, {d, b.resultMap()}},
                    op, "mul"));
  return llvm::Error::success();
}

// tanh' = 1 - y^2
Value *tanhDerivative(GradientBuilder &b, const Op &op) {
  Read y{resultOf(op), b.resultMap()};
  Value *y2 = overResult(b, OpKind::Mul, {y, y}, op, "square");
  return overResult(
      b, OpKind::Sub,
      {{b.constant(1, resultOf(op)->type.elem), {}}, {y2, b.resultMap()}}, op,
      "one_minus");
}

// sigmoid' = y (1 - y)
Value *sigmoidDerivative(GradientBuilder &b, const Op &op) {
  Read y{resultOf(op), b.resultMap()};
  Value *rest = overResult(
      b, OpKind::Sub, {{b.constant(1, resultOf(op)->type.elem), {}}, y}, op,
      "one_minus");
  return overResult(b, OpKind::Mul, {y, {rest, b.resultMap()}}, op, "mul");
}

// exp' = y
Value *expDerivative(GradientBuilder &b, const Op &op) { return resultOf(op); }

// log' = 1 / x
Value *logDerivative(GradientBuilder &b, const Op &op) {
  return overResult(b, OpKind::Reciprocal, {operandRead(op, 0)}, op,
                    "reciprocal");
}

// sqrt' = 0.5 / y
Value *sqrtDerivative(GradientBuilder &b, const Op &op) {
  return overResult(b, OpKind::Div,
                    {{b.constant(0.5, resultOf(op)->type.elem), {}},
                     {resultOf(op), b.resultMap()}},
                    op, "half_over");
}

// Contractions: each factor's gradient is the contraction of dy with the
// other factor over the same dims, written through the factor's own map;
// the dims it does not have are summed. gemm's alpha scales it; its C gets
// beta times dy, summed over the dims C does not have.
llvm::Error contractionRule(GradientBuilder &b, const Op &op, Value *dy) {
  double alpha = 1, beta = 1;
  if (op.kind == OpKind::Gemm) {
    if (auto it = op.attrs.find("alpha"); it != op.attrs.end())
      alpha = std::get<float>(it->second);
    if (auto it = op.attrs.find("beta"); it != op.attrs.end())
      beta = std::get<float>(it->second);
  }
  for (unsigned k = 0; k < 2; ++k) {
    if (!b.needs(k))
      continue;
    const Operand &x = op.operands[k];
    AttrMap attrs;
    OpKind kind = OpKind::MatMul;
    if (alpha != 1) {
      kind = OpKind::Gemm;
      attrs["alpha"] = float(alpha);
      attrs["beta"] = 0.0f;
    }
    b.accumulate(x.value,
                 b.over(kind, {{dy, b.resultMap()}, operandRead(op, 1 - k)},
                        x.map, x.value->type, k == 0 ? "da" : "db", attrs));
  }
  if (op.operands.size() > 2 && b.needs(2)) {
    Value *dc = dy;
    if (beta != 1)
      dc = overResult(b, OpKind::Mul,
                      {{dy, b.resultMap()},
                       {b.constant(beta, dy->type.elem), {}}},
                      op, "beta");
    b.accumulateOperand(2, dc);
  }
  return llvm::Error::success();
}

/// The product of the extents of the dims \p map does not use.
int64_t summedPoints(const Op &op, const AccessMap &map) {
  int64_t n = 1;
  for (size_t d = 0; d < op.iters.size(); ++d)
    if (llvm::none_of(map, [&](const AccessExpr &e) {
          return e.uses(unsigned(d));
        }))
      n *= op.iters[d].extent;
  return n;
}

// Sums and means: every summed point gets dy (divided by their count).
llvm::Error reduceRule(GradientBuilder &b, const Op &op, Value *dy) {
  const Operand &x = op.operands[0];
  Value *g;
  if (op.kind == OpKind::ReduceMean)
    g = b.over(OpKind::Mul,
               {{dy, b.resultMap()},
                {b.constant(1.0 / double(summedPoints(op, b.resultMap())),
                            dy->type.elem),
                 {}}},
               x.map, x.value->type, "mean");
  else
    g = b.over(OpKind::Expand, {{dy, b.resultMap()}}, x.map, x.value->type,
               "expand");
  b.accumulate(x.value, g);
  return llvm::Error::success();
}

/// The result map with the normalized (reduction) dims' entries made
/// broadcasts, and the matching type: where a normalization's row sums go.
std::pair<AccessMap, TensorType> rowsOf(const Op &op) {
  AccessMap map = op.results[0].map;
  TensorType type = op.results[0].value->type;
  for (size_t i = 0; i < map.size(); ++i)
    if (llvm::any_of(map[i].dims, [&](unsigned d) {
          return op.iters[d].kind == IterKind::Reduction;
        })) {
      map[i] = AccessExpr::broadcast();
      type.shape[i] = 1;
    }
  return {map, type};
}

// log_softmax: dx = dy - exp(y) * sum(dy); softmax: dx = y (dy - sum(dy y)).
llvm::Error softmaxRule(GradientBuilder &b, const Op &op, Value *dy) {
  auto [rowMap, rowType] = rowsOf(op);
  Read y{resultOf(op), b.resultMap()}, dyr{dy, b.resultMap()};
  bool isLog = op.kind == OpKind::LogSoftmax;
  Value *weighted =
      isLog ? dy : overResult(b, OpKind::Mul, {dyr, y}, op, "dy_y");
  Value *sums = b.over(OpKind::ReduceSum, {{weighted, b.resultMap()}}, rowMap,
                       rowType, "row_sum");
  Value *g;
  if (isLog) {
    Value *p = overResult(b, OpKind::Exp, {y}, op, "softmax");
    Value *t = overResult(b, OpKind::Mul,
                          {{p, b.resultMap()}, {sums, rowMap}}, op, "scaled");
    g = overResult(b, OpKind::Sub, {dyr, {t, b.resultMap()}}, op, "dx");
  } else {
    Value *t = overResult(b, OpKind::Sub, {dyr, {sums, rowMap}}, op,
                          "centered");
    g = overResult(b, OpKind::Mul, {y, {t, b.resultMap()}}, op, "dx");
  }
  b.accumulateOperand(0, g);
  return llvm::Error::success();
}

// Reshape, transpose, expand, concat: dy read through the result's map
// lands in each operand's layout (a concat input's `d - offset` writes its
// own range); dims an operand does not have (expand's broadcast) are
// summed.
llvm::Error layoutRule(GradientBuilder &b, const Op &op, Value *dy) {
  for (unsigned k = 0; k < op.operands.size(); ++k) {
    if (!b.needs(k))
      continue;
    const Operand &x = op.operands[k];
    bool sums = summedPoints(op, x.map) > 1;
    b.accumulate(x.value, b.over(sums ? OpKind::ReduceSum : OpKind::Reshape,
                                 {{dy, b.resultMap()}}, x.map, x.value->type,
                                 "layout"));
  }
  return llvm::Error::success();
}

/// For a slice read `x[d + c]` per dim (stride 1) written `[d]`: the
/// offsets c per dim of x, or nullopt when the maps are not of that form.
std::optional<std::vector<int64_t>> sliceOffsets(const Op &op) {
  const AccessMap &in = op.operands[0].map, &out = op.results[0].map;
  if (in.size() != out.size())
    return std::nullopt;
  std::vector<int64_t> offsets;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].kind != AccessExpr::Kind::Affine || in[i].dims.size() != 1 ||
        in[i].stride != 1)
      return std::nullopt;
    if (!out[i].isPlainDim() || out[i].dims[0] != in[i].dims[0])
      return std::nullopt;
    offsets.push_back(in[i].offset);
  }
  return offsets;
}

// slice (stride 1): x's gradient is dy placed at the slice's offsets, zero
// elsewhere: a pad over x's dims.
llvm::Error sliceRule(GradientBuilder &b, const Op &op, Value *dy) {
  std::optional<std::vector<int64_t>> offsets = sliceOffsets(op);
  bool affine = llvm::all_of(op.operands[0].map, [](const AccessExpr &e) {
    return e.kind == AccessExpr::Kind::Affine;
  });
  if (!offsets && affine) {
    // A strided slice: dy summed into x through x's own map (scatter_add).
    scatterInto(b, op, 0, dy, b.resultMap());
    return llvm::Error::success();
  }
  if (!offsets)
    return llvm::createStringError(
        "autodiff: op '" + op.name().str() +
        "' (slice) reads with a stride or across dims; its gradient is not "
        "supported yet");
  const TensorType &xt = op.operands[0].value->type;
  AccessMap read;
  for (size_t i = 0; i < offsets->size(); ++i)
    read.push_back(AccessExpr::shifted(unsigned(i), 1, -(*offsets)[i]));
  b.accumulate(op.operands[0].value,
               b.padded(dy, read, xt, "unslice"));
  return llvm::Error::success();
}

// pow(a, e): da = dy e a^(e-1); de = dy y log(a).
llvm::Error powRule(GradientBuilder &b, const Op &op, Value *dy) {
  DType elem = resultOf(op)->type.elem;
  Read base = operandRead(op, 0), exponent = operandRead(op, 1);
  Read dyr{dy, b.resultMap()};
  if (b.needs(0)) {
    Value *e1 = overResult(b, OpKind::Sub, {exponent, {b.constant(1, elem), {}}},
                           op, "exponent_minus_one");
    Value *p = overResult(b, OpKind::Pow, {base, {e1, b.resultMap()}}, op,
                          "power");
    Value *ep = overResult(b, OpKind::Mul, {exponent, {p, b.resultMap()}}, op,
                           "derivative");
    b.accumulateOperand(
        0, overResult(b, OpKind::Mul, {dyr, {ep, b.resultMap()}}, op, "da"));
  }
  if (b.needs(1)) {
    Value *l = overResult(b, OpKind::Log, {base}, op, "log");
    Value *yl = overResult(
        b, OpKind::Mul, {{resultOf(op), b.resultMap()}, {l, b.resultMap()}},
        op, "y_log");
    b.accumulateOperand(
        1, overResult(b, OpKind::Mul, {dyr, {yl, b.resultMap()}}, op, "de"));
  }
  return llvm::Error::success();
}

// where(c, a, b): a gets dy where c holds, b where it does not.
llvm::Error whereRule(GradientBuilder &b, const Op &op, Value *dy) {
  Value *zero = b.constant(0, dy->type.elem);
  Read cond = operandRead(op, 0), dyr{dy, b.resultMap()}, z{zero, {}};
  if (b.needs(1))
    b.accumulateOperand(
        1, overResult(b, OpKind::Where, {cond, dyr, z}, op, "then"));
  if (b.needs(2))
    b.accumulateOperand(
        2, overResult(b, OpKind::Where, {cond, z, dyr}, op, "else"));
  return llvm::Error::success();
}

// reciprocal' = -y^2
Value *reciprocalDerivative(GradientBuilder &b, const Op &op) {
  Read y{resultOf(op), b.resultMap()};
  Value *y2 = overResult(b, OpKind::Mul, {y, y}, op, "square");
  return overResult(b, OpKind::Neg, {{y2, b.resultMap()}}, op, "neg");
}

// erf' = 2/sqrt(pi) exp(-x^2)
Value *erfDerivative(GradientBuilder &b, const Op &op) {
  DType elem = resultOf(op)->type.elem;
  Read x = operandRead(op, 0);
  Value *x2 = overResult(b, OpKind::Mul, {x, x}, op, "square");
  Value *n = overResult(b, OpKind::Neg, {{x2, b.resultMap()}}, op, "neg");
  Value *e = overResult(b, OpKind::Exp, {{n, b.resultMap()}}, op, "exp");
  return overResult(b, OpKind::Mul,
                    {{e, b.resultMap()},
                     {b.constant(1.1283791670955126, elem), {}}},
                    op, "scaled");
}

// sin' = cos x, cos' = -sin x
Value *sinDerivative(GradientBuilder &b, const Op &op) {
  return overResult(b, OpKind::Cos, {operandRead(op, 0)}, op, "cos");
}
Value *cosDerivative(GradientBuilder &b, const Op &op) {
  Value *s = overResult(b, OpKind::Sin, {operandRead(op, 0)}, op, "sin");
  return overResult(b, OpKind::Neg, {{s, b.resultMap()}}, op, "neg");
}

/// A float attribute of \p op, or \p dflt.
double floatAttr(const Op &op, llvm::StringRef name, double dflt) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end())
    return dflt;
  if (auto *f = std::get_if<float>(&it->second))
    return *f;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return double(*i);
  return dflt;
}

/// Builds f'(x) elementwise over the forward op's result layout.
struct Pointwise {
  GradientBuilder &b;
  const Op &op;
  DType elem = resultOf(op)->type.elem;
  Read at(Value *v) const { return {v, b.resultMap()}; }
  Read c(double v) const { return {b.constant(v, elem), {}}; }
  Value *apply(OpKind kind, llvm::ArrayRef<Read> ins,
               llvm::StringRef what) const {
    return overResult(b, kind, ins, op, what);
  }
  Value *mask(OpKind kind, llvm::ArrayRef<Read> ins,
              llvm::StringRef what) const {
    TensorType t = resultOf(op)->type;
    t.elem = DType::I1;
    return b.over(kind, ins, b.resultMap(), t, what);
  }
};

// gelu' = Phi(x) + x phi(x) (Phi, phi: the standard normal's distribution
// and density); with approximate = "tanh", t = tanh(k (x + 0.044715 x^3)):
// 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2), k = sqrt(2/pi).
Value *geluDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  Read x = operandRead(op, 0);
  Value *x2 = p.apply(OpKind::Mul, {x, x}, "square");
  bool tanhForm = false;
  if (auto it = op.attrs.find("approximate"); it != op.attrs.end())
    if (auto *s = std::get_if<std::string>(&it->second))
      tanhForm = *s == "tanh";
  if (!tanhForm) {
    Value *scaled = p.apply(OpKind::Mul, {x, p.c(M_SQRT1_2)}, "over_sqrt2");
    Value *erf = p.apply(OpKind::Erf, {p.at(scaled)}, "erf");
    Value *cdf = p.apply(OpKind::Mul,
                         {p.at(p.apply(OpKind::Add, {p.at(erf), p.c(1)},
                                       "one_plus")),
                          p.c(0.5)},
                         "cdf");
    Value *g = p.apply(OpKind::Exp,
                       {p.at(p.apply(OpKind::Mul, {p.at(x2), p.c(-0.5)},
                                     "minus_half_square"))},
                       "gauss");
    Value *pdf = p.apply(OpKind::Mul, {p.at(g), p.c(0.3989422804014327)},
                         "pdf");
    Value *xpdf = p.apply(OpKind::Mul, {x, p.at(pdf)}, "x_pdf");
    return p.apply(OpKind::Add, {p.at(cdf), p.at(xpdf)}, "derivative");
  }
  const double k = 0.7978845608028654, a = 0.044715;
  Value *inner = p.apply(
      OpKind::Mul,
      {x, p.at(p.apply(OpKind::Add,
                       {p.c(1), p.at(p.apply(OpKind::Mul, {p.at(x2), p.c(a)},
                                             "a_square"))},
                       "one_plus_a_square"))},
      "inner");
  Value *t = p.apply(OpKind::Tanh,
                     {p.at(p.apply(OpKind::Mul, {p.at(inner), p.c(k)}, "u"))},
                     "tanh");
  Value *left = p.apply(OpKind::Mul,
                        {p.at(p.apply(OpKind::Add, {p.at(t), p.c(1)},
                                      "one_plus_t")),
                         p.c(0.5)},
                        "left");
  Value *sech2 = p.apply(
      OpKind::Sub,
      {p.c(1), p.at(p.apply(OpKind::Mul, {p.at(t), p.at(t)}, "t_square"))},
      "sech_square");
  Value *du = p.apply(
      OpKind::Add,
      {p.c(k), p.at(p.apply(OpKind::Mul, {p.at(x2), p.c(3 * a * k)},
                            "du_square"))},
      "du");
  Value *right = p.apply(
      OpKind::Mul,
      {p.at(p.apply(OpKind::Mul, {x, p.at(sech2)}, "x_sech_square")),
       p.at(p.apply(OpKind::Mul, {p.at(du), p.c(0.5)}, "half_du"))},
      "right");
  return p.apply(OpKind::Add, {p.at(left), p.at(right)}, "derivative");
}

/// dx = dy where \p keep holds, 0 elsewhere.
void maskedGradient(GradientBuilder &b, const Op &op, Value *dy, Value *keep) {
  b.accumulateOperand(
      0, overResult(b, OpKind::Where,
                    {{keep, b.resultMap()}, {dy, b.resultMap()},
                     {b.constant(0, dy->type.elem), {}}},
                    op, "where"));
}

// clip: dy passes where min <= x <= max (torch's convention at the bounds).
llvm::Error clipRule(GradientBuilder &b, const Op &op, Value *dy) {
  Pointwise p{b, op};
  Read x = operandRead(op, 0);
  Read lo = op.operands.size() > 1 ? operandRead(op, 1)
                                   : p.c(floatAttr(op, "min", -INFINITY));
  Read hi = op.operands.size() > 2 ? operandRead(op, 2)
                                   : p.c(floatAttr(op, "max", INFINITY));
  Value *above = p.mask(OpKind::GreaterOrEqual, {x, lo}, "above_min");
  Value *below = p.mask(OpKind::LessOrEqual, {x, hi}, "below_max");
  maskedGradient(b, op, dy,
                 p.mask(OpKind::And, {p.at(above), p.at(below)}, "inside"));
  for (unsigned k = 1; k < op.operands.size(); ++k)
    if (b.needs(k))
      return llvm::createStringError(
          "autodiff: op '" + op.name().str() +
          "' (clip): gradients of its bounds are not supported");
  return llvm::Error::success();
}

// leaky_relu' = 1 for x >= 0, alpha below.
Value *leakyReluDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  Value *pos =
      p.mask(OpKind::GreaterOrEqual, {operandRead(op, 0), p.c(0)}, "positive");
  return p.apply(OpKind::Where,
                 {p.at(pos), p.c(1), p.c(floatAttr(op, "alpha", 0.01))},
                 "slope");
}

// hard_sigmoid' = alpha inside (0 < alpha x + beta < 1), 0 outside.
Value *hardSigmoidDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  Read y = p.at(resultOf(op));
  Value *inside = p.mask(
      OpKind::And,
      {p.at(p.mask(OpKind::Greater, {y, p.c(0)}, "above_zero")),
       p.at(p.mask(OpKind::Less, {y, p.c(1)}, "below_one"))},
      "inside");
  return p.apply(OpKind::Where,
                 {p.at(inside), p.c(floatAttr(op, "alpha", 0.2)), p.c(0)},
                 "slope");
}

// hard_swish = x clamp(x/6 + 1/2, 0, 1): 0 below -3, 1 above 3, x/3 + 1/2
// between.
Value *hardSwishDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  Read x = operandRead(op, 0);
  Value *mid = p.apply(
      OpKind::Add,
      {p.at(p.apply(OpKind::Mul, {x, p.c(1.0 / 3)}, "third")), p.c(0.5)},
      "middle");
  Value *high = p.apply(
      OpKind::Where,
      {p.at(p.mask(OpKind::Greater, {x, p.c(3)}, "above")), p.c(1), p.at(mid)},
      "upper");
  return p.apply(
      OpKind::Where,
      {p.at(p.mask(OpKind::Less, {x, p.c(-3)}, "below")), p.c(0), p.at(high)},
      "slope");
}

// cast between floats: the gradient cast back.
llvm::Error castRule(GradientBuilder &b, const Op &op, Value *dy) {
  const Operand &x = op.operands[0];
  if (!isFloat(x.value->type.elem))
    return llvm::Error::success();
  TensorType t = dy->type;
  t.elem = x.value->type.elem;
  b.accumulateOperand(0, b.over(OpKind::Cast, {{dy, b.resultMap()}},
                                b.resultMap(), t, "cast_back"));
  return llvm::Error::success();
}

// gather: each looked-up row's gradient is the sum of dy over the points
// that read it (scatter_add through the data's own map, indices alike);
// the indices take none.
//
// The scatter_add does not take the gather's configuration: how a sparse
// gradient is aggregated is its own choice (Parallax), searched with the
// updates. Split like the gather's samples, each device scatters its rows
// into a whole table and the partial tables are all-reduced (dense); not
// split over the samples, the devices all-gather the (index, row) pairs and
// each scatters them all (sparse; split over its replica dim, every device
// scatters all the pairs and holds the whole table); split over the
// table's rows, each device keeps the rows it holds (vocabulary-sharded).
llvm::Error gatherRule(GradientBuilder &b, const Op &op, Value *dy) {
  const Operand &data = op.operands[0];
  if (!b.needs(0))
    return llvm::Error::success();
  Value *g = b.over(OpKind::ScatterAdd,
                    {{dy, b.resultMap()}, operandRead(op, 1)}, data.map,
                    data.value->type, "scatter");
  g->def->attrs.erase("config");
  GradientBuilder::replicate(*g->def, b.replicas());
  b.accumulate(data.value, g);
  return llvm::Error::success();
}

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
  auto [rowMap, rowType] = rowsOf(op);
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
  Value *dxhat =
      hasScale ? overResult(b, OpKind::Mul, {at(dy), operandRead(op, 1)}, op,
                            "dxhat")
               : dy;
  Value *prod = overResult(b, OpKind::Mul, {at(dxhat), at(xhat)}, op,
                           "dxhat_xhat");
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
  Value *hit = b.over(OpKind::Equal,
                      {operandRead(op, 0), {resultOf(op), b.resultMap()}}, map,
                      mask, "argmax");
  Value *g = b.over(OpKind::Where,
                    {{hit, map}, {dy, b.resultMap()},
                     {b.constant(0, dy->type.elem), {}}},
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
  Read share{b.constant(1.0 / double(summedPoints(op, b.resultMap())),
                        dy->type.elem),
             {}};
  if (padded) {
    if (dy->type.elem != DType::F32 && dy->type.elem != DType::F64)
      return llvm::createStringError(
          "autodiff: op '" + op.name().str() +
          "' (average_pool) is padded over " +
          dtypeName(dy->type.elem).str() +
          " values; its gradient needs f32 or f64");
    const Operand &x = op.operands[0];
    size_t ns = (op.iters.size() - 2) / 2;
    bool includePad = op.intAttr("count_include_pad", 0) != 0;
    // Per spatial dim, how many of each output position's window points
    // the forward counted; the divisor is their product.
    std::vector<std::vector<double>> counts(ns);
    TensorType inv{dy->type.elem, {}};
    AccessMap invMap;
    for (size_t i = 0; i < ns; ++i) {
      const AccessExpr &e = x.map[2 + i];
      int64_t size = x.value->type.shape[2 + i];
      int64_t lo = includePad ? -pads[i] : 0;
      int64_t hi = includePad ? size + pads[i + ns] : size;
      int64_t outs = op.iters[2 + i].extent, window = op.iters[2 + ns + i].extent;
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
  Value *g = b.over(OpKind::Mul, {{dy, b.resultMap()}, share}, map, type,
                    "share");
  scatterInto(b, op, 0, g, map);
  return llvm::Error::success();
}

// abs' = sign(x) (0 at 0).
Value *absDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  return p.apply(OpKind::Sign, {operandRead(op, 0)}, "sign");
}

// softplus' = sigmoid(x).
Value *softplusDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  return p.apply(OpKind::Sigmoid, {operandRead(op, 0)}, "sigmoid");
}

// elu' = 1 for x >= 0, y + alpha below (y = alpha (e^x - 1)).
Value *eluDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  Value *pos =
      p.mask(OpKind::GreaterOrEqual, {operandRead(op, 0), p.c(0)}, "positive");
  Value *below = p.apply(
      OpKind::Add, {p.at(resultOf(op)), p.c(floatAttr(op, "alpha", 1))},
      "y_plus_alpha");
  return p.apply(OpKind::Where, {p.at(pos), p.c(1), p.at(below)}, "slope");
}

// Piecewise-constant ops (floor, ceil, round, sign): zero almost everywhere,
// so nothing flows back.
llvm::Error zeroRule(GradientBuilder &, const Op &, Value *) {
  return llvm::Error::success();
}

// max(a, b) and min(a, b): dy goes to the operand that is chosen, the
// first on a tie.
llvm::Error maxMinRule(GradientBuilder &b, const Op &op, Value *dy) {
  if (op.operands.size() != 2)
    return llvm::createStringError(
        "autodiff: op '" + op.name().str() + "' (" +
        opKindName(op.kind).str() +
        ") has more than two operands; its gradient is not supported yet");
  Pointwise p{b, op};
  Value *first = p.mask(op.kind == OpKind::Max ? OpKind::GreaterOrEqual
                                               : OpKind::LessOrEqual,
                        {operandRead(op, 0), operandRead(op, 1)}, "first");
  Read z = p.c(0), dyr = p.at(dy);
  if (b.needs(0))
    b.accumulateOperand(
        0, p.apply(OpKind::Where, {p.at(first), dyr, z}, "to_first"));
  if (b.needs(1))
    b.accumulateOperand(
        1, p.apply(OpKind::Where, {p.at(first), z, dyr}, "to_second"));
  return llvm::Error::success();
}

// reduce_max and reduce_min: dy goes to every point equal to the result
// (every one of them on a tie, as max_pool's rule).
llvm::Error reduceMaxRule(GradientBuilder &b, const Op &op, Value *dy) {
  const Operand &x = op.operands[0];
  TensorType mask = x.value->type;
  mask.elem = DType::I1;
  Value *hit = b.over(OpKind::Equal,
                      {operandRead(op, 0), {resultOf(op), b.resultMap()}},
                      x.map, mask, "argmax");
  b.accumulate(x.value, b.over(OpKind::Where,
                               {{hit, x.map}, {dy, b.resultMap()},
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

// lrn: y_i = x_i s_i^-beta, s_i = bias + alpha/size sum over the window of
// x_j^2, so dx_k = dy_k s_k^-beta - 2 alpha beta / size x_k sum over the
// windows i that hold k of dy_i x_i s_i^(-beta-1). The window sums are a
// reduce_sum through the window (reads past the channels count zero) and a
// scatter_add back through it.
llvm::Error lrnRule(GradientBuilder &b, const Op &op, Value *dy) {
  const Operand &x = op.operands[0];
  DType elem = dy->type.elem;
  double size = floatAttr(op, "size", 1), alpha = floatAttr(op, "alpha", 1e-4),
         beta = floatAttr(op, "beta", 0.75), bias = floatAttr(op, "bias", 1);
  Pointwise p{b, op};
  Read xi{x.value, b.resultMap()}, dyr = p.at(dy);
  Value *sq = b.elementwise(OpKind::Mul, {x.value, x.value}, x.value->type,
                            "square");
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
  b.accumulate(x.value,
               b.elementwise(OpKind::Add, {direct, cross}, x.value->type, "dx"));
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
  Value *shifted = overResult(
      b, OpKind::Add, {operandRead(op, 4), {b.constant(eps, elem), {}}}, op,
      "var_eps");
  Value *sd = overResult(b, OpKind::Sqrt, {at(shifted)}, op, "std");
  Value *rstd = overResult(b, OpKind::Reciprocal, {at(sd)}, op, "rstd");
  if (op.operands.size() > 2 && b.needs(2))
    b.accumulateOperand(2, dy);
  if (b.needs(1)) {
    Value *c = overResult(b, OpKind::Sub,
                          {operandRead(op, 0), operandRead(op, 3)}, op,
                          "centered");
    Value *xhat = overResult(b, OpKind::Mul, {at(c), at(rstd)}, op, "xhat");
    b.accumulateOperand(1, overResult(b, OpKind::Mul, {dyr, at(xhat)}, op,
                                      "dscale"));
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

struct RuleEntry {
  OpKind kind;
  Rule rule;
};

/// Every op kind with a gradient rule.
constexpr RuleEntry kRules[] = {
    {OpKind::Add, addRule},
    {OpKind::Sub, subRule},
    {OpKind::Mul, mulRule},
    {OpKind::Div, divRule},
    {OpKind::Neg, negRule},
    {OpKind::Relu, reluRule},
    {OpKind::Tanh, fromResultRule<tanhDerivative>},
    {OpKind::Sigmoid, fromResultRule<sigmoidDerivative>},
    {OpKind::Exp, fromResultRule<expDerivative>},
    {OpKind::Log, fromResultRule<logDerivative>},
    {OpKind::Sqrt, fromResultRule<sqrtDerivative>},
    {OpKind::MatMul, contractionRule},
    {OpKind::Gemm, contractionRule},
    {OpKind::ReduceSum, reduceRule},
    {OpKind::ReduceMean, reduceRule},
    {OpKind::Softmax, softmaxRule},
    {OpKind::LogSoftmax, softmaxRule},
    {OpKind::Reshape, layoutRule},
    {OpKind::Transpose, layoutRule},
    {OpKind::Expand, layoutRule},
    {OpKind::Concat, layoutRule},
    {OpKind::Slice, sliceRule},
    {OpKind::Gather, gatherRule},
    {OpKind::Pow, powRule},
    {OpKind::Where, whereRule},
    {OpKind::Reciprocal, fromResultRule<reciprocalDerivative>},
    {OpKind::Erf, fromResultRule<erfDerivative>},
    {OpKind::Sin, fromResultRule<sinDerivative>},
    {OpKind::Cos, fromResultRule<cosDerivative>},
    {OpKind::Cast, castRule},
    {OpKind::LayerNorm, normRule},
    {OpKind::RmsNorm, normRule},
    {OpKind::InstanceNorm, normRule},
    {OpKind::Conv, convRule},
    {OpKind::MaxPool, maxPoolRule},
    {OpKind::AveragePool, averagePoolRule},
    {OpKind::BatchNorm, batchNormRule},
    {OpKind::Gelu, fromResultRule<geluDerivative>},
    {OpKind::Clip, clipRule},
    {OpKind::LeakyRelu, fromResultRule<leakyReluDerivative>},
    {OpKind::HardSigmoid, fromResultRule<hardSigmoidDerivative>},
    {OpKind::HardSwish, fromResultRule<hardSwishDerivative>},
    {OpKind::Pad, padRule},
    {OpKind::Lrn, lrnRule},
    {OpKind::Abs, fromResultRule<absDerivative>},
    {OpKind::Softplus, fromResultRule<softplusDerivative>},
    {OpKind::Elu, fromResultRule<eluDerivative>},
    {OpKind::Floor, zeroRule},
    {OpKind::Ceil, zeroRule},
    {OpKind::Round, zeroRule},
    {OpKind::Sign, zeroRule},
    {OpKind::Max, maxMinRule},
    {OpKind::Min, maxMinRule},
    {OpKind::ReduceMax, reduceMaxRule},
    {OpKind::ReduceMin, reduceMaxRule},
    {OpKind::CumSum, cumSumRule},
};

} // namespace

// split: its results' gradients side by side (a concat over the forward
// dims, each read through its result's `d - offset`); a result with no
// gradient contributes zeros.
llvm::Error splitRule(GradientBuilder &b, const Op &op,
                      llvm::ArrayRef<Value *> dys) {
  std::vector<Read> parts;
  for (size_t r = 0; r < op.results.size(); ++r) {
    Value *dy = dys[r];
    const TensorType &t = op.results[r].value->type;
    if (!dy)
      dy = b.elementwise(OpKind::Expand, {b.constant(0, t.elem)}, t, "zeros");
    parts.push_back({dy, op.results[r].map});
  }
  const Operand &x = op.operands[0];
  b.accumulate(x.value, b.over(OpKind::Concat, parts, x.map, x.value->type,
                               "unsplit"));
  return llvm::Error::success();
}

llvm::Error applyGradientRule(GradientBuilder &b, const Op &op,
                              llvm::ArrayRef<Value *> dys) {
  if (op.kind == OpKind::Split)
    return splitRule(b, op, dys);
  if (op.kind == OpKind::Lstm || op.kind == OpKind::Gru)
    return recurrentRule(b, op, dys);
  if (dys.size() != 1)
    return llvm::createStringError(
        "autodiff: op '" + op.name().str() + "' (" +
        opKindName(op.kind).str() +
        ") has several results; their gradients are not supported yet");
  for (const RuleEntry &e : kRules)
    if (e.kind == op.kind)
      return e.rule(b, op, dys[0]);
  return llvm::createStringError(
      "autodiff: op '" + op.name().str() + "' (" + opKindName(op.kind).str() +
      ") has no gradient rule yet; the loss depends on it through a "
      "trainable parameter");
}

} // namespace pax
