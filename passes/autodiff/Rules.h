//===- Rules.h - What the gradient rules share ------------------*- C++ -*-===//
//
// Internal to passes/autodiff: the helpers the rule files share and the
// rules the table in GradientRules.cpp names from PointwiseRules.cpp and
// WindowRules.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_PASSES_AUTODIFF_RULES_H
#define PAX_PASSES_AUTODIFF_RULES_H

#include "passes/autodiff/GradientBuilder.h"

#include <optional>
#include <utility>
#include <variant>
#include <vector>

namespace pax::gradient_rules {

using Rule = llvm::Error (*)(GradientBuilder &b, const Op &op, Value *dy);

inline Value *resultOf(const Op &op) { return op.results[0].value.get(); }

/// `v * (1 - v)`-style helpers over the forward op's result layout.
inline Value *overResult(GradientBuilder &b, OpKind kind,
                         llvm::ArrayRef<Read> ins, const Op &op,
                         llvm::StringRef what) {
  return b.over(kind, ins, b.resultMap(), resultOf(op)->type, what);
}

inline Read operandRead(const Op &op, unsigned k) {
  return {op.operands[k].value, op.operands[k].map};
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

/// dx = dy * f'(x), with f'(x) computed from y = f(x) by \p derivative.
template <Value *(*Derivative)(GradientBuilder &, const Op &)>
llvm::Error fromResultRule(GradientBuilder &b, const Op &op, Value *dy) {
  Value *d = Derivative(b, op);
  b.accumulateOperand(0, overResult(b, OpKind::Mul,
                                    {{dy, b.resultMap()}, {d, b.resultMap()}},
                                    op, "mul"));
  return llvm::Error::success();
}

// Shared by the rule files.

/// The product of the extents of the dims \p map does not use.
int64_t summedPoints(const Op &op, const AccessMap &map);

/// The result map with the normalized (reduction) dims' entries made
/// broadcasts, and the matching type: where a normalization's row sums go.
std::pair<AccessMap, TensorType> rowsOf(const Op &op);

/// Plain dims for every forward dim \p map uses, and the tensor they span:
/// a value laid out over the points a window reads.
std::pair<AccessMap, TensorType> pointsOf(const Op &op, const AccessMap &map,
                                          DType elem);

/// Sums \p g, laid out by \p gMap over the forward dims, into operand
/// \p k through its own map (a window's overlapping reads add up; reads
/// into the padding are dropped).
void scatterInto(GradientBuilder &b, const Op &op, unsigned k, Value *g,
                 const AccessMap &gMap);

/// dx = dy where \p keep holds, 0 elsewhere.
void maskedGradient(GradientBuilder &b, const Op &op, Value *dy, Value *keep);

// The rules and derivatives of PointwiseRules.cpp and WindowRules.cpp.

llvm::Error reluRule(GradientBuilder &b, const Op &op, Value *dy);

/// tanh' = 1 - y^2
Value *tanhDerivative(GradientBuilder &b, const Op &op);

/// sigmoid' = y (1 - y)
Value *sigmoidDerivative(GradientBuilder &b, const Op &op);

/// exp' = y
Value *expDerivative(GradientBuilder &b, const Op &op);

/// log' = 1 / x
Value *logDerivative(GradientBuilder &b, const Op &op);

/// sqrt' = 0.5 / y
Value *sqrtDerivative(GradientBuilder &b, const Op &op);

/// pow(a, e): da = dy e a^(e-1); de = dy y log(a).
llvm::Error powRule(GradientBuilder &b, const Op &op, Value *dy);

/// where(c, a, b): a gets dy where c holds, b where it does not.
llvm::Error whereRule(GradientBuilder &b, const Op &op, Value *dy);

/// reciprocal' = -y^2
Value *reciprocalDerivative(GradientBuilder &b, const Op &op);

/// erf' = 2/sqrt(pi) exp(-x^2)
Value *erfDerivative(GradientBuilder &b, const Op &op);

/// sin' = cos x, cos' = -sin x
Value *sinDerivative(GradientBuilder &b, const Op &op);
Value *cosDerivative(GradientBuilder &b, const Op &op);
/// tan' = 1/cos^2 x; asin' = 1/sqrt(1 - x^2), acos' its negative; atan'
/// = 1/(1 + x^2); sinh' = cosh x, cosh' = sinh x; asinh' = 1/sqrt(x^2 +
/// 1); acosh' = 1/sqrt(x^2 - 1); atanh' = 1/(1 - x^2).
Value *tanDerivative(GradientBuilder &b, const Op &op);
Value *asinDerivative(GradientBuilder &b, const Op &op);
Value *acosDerivative(GradientBuilder &b, const Op &op);
Value *atanDerivative(GradientBuilder &b, const Op &op);
Value *sinhDerivative(GradientBuilder &b, const Op &op);
Value *coshDerivative(GradientBuilder &b, const Op &op);
Value *asinhDerivative(GradientBuilder &b, const Op &op);
Value *acoshDerivative(GradientBuilder &b, const Op &op);
Value *atanhDerivative(GradientBuilder &b, const Op &op);

/// gelu' = Phi(x) + x phi(x) (Phi, phi: the standard normal's distribution
/// and density); with approximate = "tanh", t = tanh(k (x + 0.044715 x^3)):
/// 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2), k = sqrt(2/pi).
llvm::Error geluRule(GradientBuilder &b, const Op &op, Value *dy);

/// clip: dy passes where min <= x <= max (torch's convention at the bounds).
llvm::Error clipRule(GradientBuilder &b, const Op &op, Value *dy);

/// leaky_relu' = 1 for x >= 0, alpha below.
Value *leakyReluDerivative(GradientBuilder &b, const Op &op);

/// hard_sigmoid' = alpha inside (0 < alpha x + beta < 1), 0 outside.
Value *hardSigmoidDerivative(GradientBuilder &b, const Op &op);

/// hard_swish = x clamp(x/6 + 1/2, 0, 1): 0 below -3, 1 above 3, x/3 + 1/2
/// between.
Value *hardSwishDerivative(GradientBuilder &b, const Op &op);

/// abs' = sign(x) (0 at 0).
Value *absDerivative(GradientBuilder &b, const Op &op);

/// softplus' = sigmoid(x).
Value *softplusDerivative(GradientBuilder &b, const Op &op);

/// elu' = 1 for x >= 0, y + alpha below (y = alpha (e^x - 1)).
Value *eluDerivative(GradientBuilder &b, const Op &op);

/// selu, celu, softsign and mish: their slopes.
Value *seluDerivative(GradientBuilder &b, const Op &op);
Value *celuDerivative(GradientBuilder &b, const Op &op);
Value *softsignDerivative(GradientBuilder &b, const Op &op);
Value *mishDerivative(GradientBuilder &b, const Op &op);

/// prelu: x's gradient and the slope's (summed where it is broadcast).
llvm::Error preluRule(GradientBuilder &b, const Op &op, Value *dy);

/// Piecewise-constant ops (floor, ceil, round, sign): zero almost everywhere,
/// so nothing flows back.
llvm::Error zeroRule(GradientBuilder &, const Op &, Value *);

/// max(a, b) and min(a, b): dy goes to the operand that is chosen, the
/// first on a tie.
llvm::Error maxMinRule(GradientBuilder &b, const Op &op, Value *dy);

/// layer_norm and rms_norm over the red dims (the row), y = xhat g + b with
/// xhat = (x - mean) rstd (rms_norm: no mean):
///   db = sum dy, dg = sum dy xhat,
///   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g
/// (rms_norm: without the mean(dxhat) term). The statistics are computed
/// again from x.
llvm::Error normRule(GradientBuilder &b, const Op &op, Value *dy);

/// conv: the weight's gradient contracts dy with the input's windows; the
/// bias's sums dy; the input's contracts dy with the weight over the output
/// channels at every window point, then sums the points into the input
/// through the window (scatter_add).
llvm::Error convRule(GradientBuilder &b, const Op &op, Value *dy);

/// max_pool: dy goes to the window points equal to the maximum (every one of
/// them on a tie), summed through the window.
llvm::Error maxPoolRule(GradientBuilder &b, const Op &op, Value *dy);

/// average_pool: every window point gets dy over the count the forward
/// divided by: the window's size unpadded; padded, the points inside the
/// input (or, with count_include_pad, inside the padded input) of each
/// output position's window, a constant over the output positions.
llvm::Error averagePoolRule(GradientBuilder &b, const Op &op, Value *dy);

/// reduce_max and reduce_min: dy goes to every point equal to the result
/// (every one of them on a tie, as max_pool's rule).
llvm::Error reduceMaxRule(GradientBuilder &b, const Op &op, Value *dy);

/// cum_sum: x's gradient is the running sum of dy the other way (exclusive
/// stays exclusive).
llvm::Error cumSumRule(GradientBuilder &b, const Op &op, Value *dy);

/// pad (constant): x's gradient is dy where x lies, the padding dropped
/// (a scatter_add through x's shifted map).
llvm::Error padRule(GradientBuilder &b, const Op &op, Value *dy);

/// scatter_add: the values' gradient is dy where each went, read back
/// through the result's map (a gather through the same indices when it
/// scatters through a lookup).
llvm::Error scatterAddRule(GradientBuilder &b, const Op &op, Value *dy);

/// lrn: y_i = x_i s_i^-beta, s_i = bias + alpha/size sum over the window of
/// x_j^2, so dx_k = dy_k s_k^-beta - 2 alpha beta / size x_k sum over the
/// windows i that hold k of dy_i x_i s_i^(-beta-1). The window sums are a
/// reduce_sum through the window (reads past the channels count zero) and a
/// scatter_add back through it.
llvm::Error lrnRule(GradientBuilder &b, const Op &op, Value *dy);

/// batch_norm with its running statistics (inference form):
/// y = (x - mean) rstd scale + bias, rstd = 1/sqrt(var + eps):
/// dx = dy scale rstd, dscale = sum dy (x - mean) rstd, dbias = sum dy.
llvm::Error batchNormRule(GradientBuilder &b, const Op &op, Value *dy);

} // namespace pax::gradient_rules

#endif // PAX_PASSES_AUTODIFF_RULES_H
