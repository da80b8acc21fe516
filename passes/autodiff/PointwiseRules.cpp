//===- PointwiseRules.cpp - Gradients of the elementwise ops --------------===//
//
// dx = dy * f'(x) for the activations and the elementwise functions, f'
// built elementwise over the forward op's result layout; max/min, where
// and the piecewise-constant ops.
//
//===----------------------------------------------------------------------===//
#include "passes/autodiff/Rules.h"

#include <cmath>

namespace pax::gradient_rules {

llvm::Error reluRule(GradientBuilder &b, const Op &op, Value *dy) {
  DType elem = resultOf(op)->type.elem;
  Value *zero = b.constant(0, elem);
  TensorType mask = resultOf(op)->type;
  mask.elem = DType::I1;
  Value *positive = b.over(OpKind::Greater, {operandRead(op, 0), {zero, {}}},
                           b.resultMap(), mask, "positive");
  b.accumulateOperand(
      0,
      overResult(b, OpKind::Where,
                 {{positive, b.resultMap()}, {dy, b.resultMap()}, {zero, {}}},
                 op, "where"));
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
  Value *rest = overResult(b, OpKind::Sub,
                           {{b.constant(1, resultOf(op)->type.elem), {}}, y},
                           op, "one_minus");
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

// pow(a, e): da = dy e a^(e-1); de = dy y log(a).
llvm::Error powRule(GradientBuilder &b, const Op &op, Value *dy) {
  DType elem = resultOf(op)->type.elem;
  Read base = operandRead(op, 0), exponent = operandRead(op, 1);
  Read dyr{dy, b.resultMap()};
  if (b.needs(0)) {
    Value *e1 =
        overResult(b, OpKind::Sub, {exponent, {b.constant(1, elem), {}}}, op,
                   "exponent_minus_one");
    Value *p =
        overResult(b, OpKind::Pow, {base, {e1, b.resultMap()}}, op, "power");
    Value *ep = overResult(b, OpKind::Mul, {exponent, {p, b.resultMap()}}, op,
                           "derivative");
    b.accumulateOperand(
        0, overResult(b, OpKind::Mul, {dyr, {ep, b.resultMap()}}, op, "da"));
  }
  if (b.needs(1)) {
    Value *l = overResult(b, OpKind::Log, {base}, op, "log");
    Value *yl = overResult(b, OpKind::Mul,
                           {{resultOf(op), b.resultMap()}, {l, b.resultMap()}},
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
  return overResult(
      b, OpKind::Mul,
      {{e, b.resultMap()}, {b.constant(1.1283791670955126, elem), {}}}, op,
      "scaled");
}

// sin' = cos x, cos' = -sin x
Value *sinDerivative(GradientBuilder &b, const Op &op) {
  return overResult(b, OpKind::Cos, {operandRead(op, 0)}, op, "cos");
}

Value *cosDerivative(GradientBuilder &b, const Op &op) {
  Value *s = overResult(b, OpKind::Sin, {operandRead(op, 0)}, op, "sin");
  return overResult(b, OpKind::Neg, {{s, b.resultMap()}}, op, "neg");
}

Value *tanDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  Value *c = p.apply(OpKind::Cos, {operandRead(op, 0)}, "cos");
  Value *c2 = p.apply(OpKind::Mul, {p.at(c), p.at(c)}, "cos2");
  return p.apply(OpKind::Reciprocal, {p.at(c2)}, "sec2");
}

/// x^2 + \p s (s: -1 or 1), read from \p op's operand.
static Value *squarePlus(const Pointwise &p, double s) {
  Read x = operandRead(p.op, 0);
  Value *x2 = p.apply(OpKind::Mul, {x, x}, "x2");
  return p.apply(OpKind::Add, {p.at(x2), p.c(s)}, "x2_plus");
}

/// 1 - x^2, read from \p op's operand.
static Value *oneMinusSquare(const Pointwise &p) {
  Read x = operandRead(p.op, 0);
  Value *x2 = p.apply(OpKind::Mul, {x, x}, "x2");
  return p.apply(OpKind::Sub, {p.c(1), p.at(x2)}, "one_minus_x2");
}

/// 1 / sqrt(v).
static Value *rsqrt(const Pointwise &p, Value *v) {
  Value *r = p.apply(OpKind::Sqrt, {p.at(v)}, "sqrt");
  return p.apply(OpKind::Reciprocal, {p.at(r)}, "rsqrt");
}

Value *asinDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  return rsqrt(p, oneMinusSquare(p));
}

Value *acosDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  return p.apply(OpKind::Neg, {p.at(rsqrt(p, oneMinusSquare(p)))}, "neg");
}

Value *atanDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  return p.apply(OpKind::Reciprocal, {p.at(squarePlus(p, 1))}, "inverse");
}

Value *sinhDerivative(GradientBuilder &b, const Op &op) {
  return overResult(b, OpKind::Cosh, {operandRead(op, 0)}, op, "cosh");
}

Value *coshDerivative(GradientBuilder &b, const Op &op) {
  return overResult(b, OpKind::Sinh, {operandRead(op, 0)}, op, "sinh");
}

Value *asinhDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  return rsqrt(p, squarePlus(p, 1));
}

Value *acoshDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  return rsqrt(p, squarePlus(p, -1));
}

Value *atanhDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  return p.apply(OpKind::Reciprocal, {p.at(oneMinusSquare(p))}, "inverse");
}

// dx = gelu_grad(x, dy) = dy gelu'(x), one op: gelu' = Phi(x) + x phi(x)
// (Phi, phi: the standard normal's distribution and density), or with
// approximate = "tanh", t = tanh(k (x + 0.044715 x^3)): 0.5 (1 + t) +
// 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2), k = sqrt(2/pi) (ScalarMath.h).
llvm::Error geluRule(GradientBuilder &b, const Op &op, Value *dy) {
  AttrMap attrs;
  if (auto it = op.attrs.find("approximate"); it != op.attrs.end())
    attrs["approximate"] = it->second;
  b.accumulateOperand(0, b.over(OpKind::GeluGrad,
                                {operandRead(op, 0), {dy, b.resultMap()}},
                                b.resultMap(), resultOf(op)->type, "gelu_grad",
                                std::move(attrs)));
  return llvm::Error::success();
}

/// dx = dy where \p keep holds, 0 elsewhere.
void maskedGradient(GradientBuilder &b, const Op &op, Value *dy, Value *keep) {
  b.accumulateOperand(0, overResult(b, OpKind::Where,
                                    {{keep, b.resultMap()},
                                     {dy, b.resultMap()},
                                     {b.constant(0, dy->type.elem), {}}},
                                    op, "where"));
}

// clip: dy passes where min <= x <= max (torch's convention at the bounds).
llvm::Error clipRule(GradientBuilder &b, const Op &op, Value *dy) {
  Pointwise p{b, op};
  Read x = operandRead(op, 0);
  Read lo = op.operands.size() > 1 ? operandRead(op, 1)
                                   : p.c(op.floatAttr("min", -INFINITY));
  Read hi = op.operands.size() > 2 ? operandRead(op, 2)
                                   : p.c(op.floatAttr("max", INFINITY));
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
                 {p.at(pos), p.c(1), p.c(op.floatAttr("alpha", 0.01))},
                 "slope");
}

// hard_sigmoid' = alpha inside (0 < alpha x + beta < 1), 0 outside.
Value *hardSigmoidDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  Read y = p.at(resultOf(op));
  Value *inside =
      p.mask(OpKind::And,
             {p.at(p.mask(OpKind::Greater, {y, p.c(0)}, "above_zero")),
              p.at(p.mask(OpKind::Less, {y, p.c(1)}, "below_one"))},
             "inside");
  return p.apply(OpKind::Where,
                 {p.at(inside), p.c(op.floatAttr("alpha", 0.2)), p.c(0)},
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
  Value *below =
      p.apply(OpKind::Add, {p.at(resultOf(op)), p.c(op.floatAttr("alpha", 1))},
              "y_plus_alpha");
  return p.apply(OpKind::Where, {p.at(pos), p.c(1), p.at(below)}, "slope");
}

// selu = gamma x above 0, gamma alpha (e^x - 1) at or below: its slope is
// gamma above 0, y + gamma alpha below.
Value *seluDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  double alpha = op.floatAttr("alpha", 1.67326319217681884765625),
         gamma = op.floatAttr("gamma", 1.05070102214813232421875);
  Value *pos =
      p.mask(OpKind::Greater, {operandRead(op, 0), p.c(0)}, "positive");
  Value *below = p.apply(OpKind::Add, {p.at(resultOf(op)), p.c(gamma * alpha)},
                         "y_plus_gamma_alpha");
  return p.apply(OpKind::Where, {p.at(pos), p.c(gamma), p.at(below)}, "slope");
}

// celu = max(0, x) + min(0, alpha (e^(x/alpha) - 1)): slope 1 at or above
// 0, e^(x/alpha) = y / alpha + 1 below.
Value *celuDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  double alpha = op.floatAttr("alpha", 1);
  Value *pos =
      p.mask(OpKind::GreaterOrEqual, {operandRead(op, 0), p.c(0)}, "positive");
  Value *below =
      p.apply(OpKind::Add,
              {p.at(p.apply(OpKind::Mul, {p.at(resultOf(op)), p.c(1 / alpha)},
                            "y_over_alpha")),
               p.c(1)},
              "exp_x_over_alpha");
  return p.apply(OpKind::Where, {p.at(pos), p.c(1), p.at(below)}, "slope");
}

// softsign = x / (1 + |x|): slope 1 / (1 + |x|)^2.
Value *softsignDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  Value *den =
      p.apply(OpKind::Add,
              {p.at(p.apply(OpKind::Abs, {operandRead(op, 0)}, "abs")), p.c(1)},
              "one_plus_abs");
  return p.apply(OpKind::Reciprocal,
                 {p.at(p.apply(OpKind::Mul, {p.at(den), p.at(den)}, "square"))},
                 "slope");
}

// mish = x tanh(softplus(x)): slope t + x sigmoid(x) (1 - t^2), t =
// tanh(softplus(x)).
Value *mishDerivative(GradientBuilder &b, const Op &op) {
  Pointwise p{b, op};
  Read x = operandRead(op, 0);
  Value *t = p.apply(
      OpKind::Tanh, {p.at(p.apply(OpKind::Softplus, {x}, "softplus"))}, "tanh");
  Value *sech2 = p.apply(
      OpKind::Sub,
      {p.c(1), p.at(p.apply(OpKind::Mul, {p.at(t), p.at(t)}, "t_square"))},
      "sech_square");
  Value *xs =
      p.apply(OpKind::Mul, {x, p.at(p.apply(OpKind::Sigmoid, {x}, "sigmoid"))},
              "x_sigmoid");
  return p.apply(
      OpKind::Add,
      {p.at(t), p.at(p.apply(OpKind::Mul, {p.at(xs), p.at(sech2)}, "right"))},
      "slope");
}

// prelu(x, slope) = x at or above 0, slope x below: dx = dy where x >= 0,
// dy slope below; dslope = dy x below, 0 above (summed over the dims the
// slope is broadcast along).
llvm::Error preluRule(GradientBuilder &b, const Op &op, Value *dy) {
  Pointwise p{b, op};
  Read x = operandRead(op, 0);
  Value *pos = p.mask(OpKind::GreaterOrEqual, {x, p.c(0)}, "positive");
  if (b.needs(0)) {
    Value *slope = p.apply(OpKind::Where,
                           {p.at(pos), p.c(1), operandRead(op, 1)}, "slope");
    b.accumulateOperand(0, p.apply(OpKind::Mul, {p.at(dy), p.at(slope)}, "dx"));
  }
  if (b.needs(1)) {
    Value *below = p.apply(OpKind::Where, {p.at(pos), p.c(0), x}, "x_below");
    b.accumulateOperand(
        1, p.apply(OpKind::Mul, {p.at(dy), p.at(below)}, "dslope"));
  }
  return llvm::Error::success();
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
        "autodiff: op '" + op.name().str() + "' (" + opKindName(op.kind).str() +
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

} // namespace pax::gradient_rules
