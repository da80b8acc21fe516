//===- GradientRules.cpp - The gradient of each op kind -------------------===//
//
// One rule per op kind, in the table at the end. A rule reads the forward
// op through the builder (its maps, operands, result) and adds the gradient
// of every operand that needs one. Backward ops are built over the forward
// op's iteration dims (GradientBuilder::over), or elementwise over a
// tensor's dims where no forward dim is involved.
//
//===----------------------------------------------------------------------===//
#include "passes/autodiff/Rules.h"

#include <array>
#include <cmath>
#include <optional>

namespace pax {

namespace gradient_rules {

llvm::Error addRule(GradientBuilder &b, const Op &op, Value *dy) {
  for (unsigned k = 0; k < op.operands.size(); ++k)
    if (b.needs(k))
      b.accumulateOperand(k, dy);
  return llvm::Error::success();
}

// mean of n operands: each gets dy / n (summed where it is broadcast).
llvm::Error meanRule(GradientBuilder &b, const Op &op, Value *dy) {
  Value *share = overResult(
      b, OpKind::Mul,
      {{dy, b.resultMap()},
       {b.constant(1.0 / double(op.operands.size()), dy->type.elem), {}}},
      op, "share");
  for (unsigned k = 0; k < op.operands.size(); ++k)
    if (b.needs(k))
      b.accumulateOperand(k, share);
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

llvm::Error mulRule(GradientBuilder &b, const Op &op, Value *dy) {
  for (unsigned k = 0; k < 2; ++k)
    if (b.needs(k))
      b.accumulateOperand(
          k,
          overResult(b, OpKind::Mul,
                     {{dy, b.resultMap()}, operandRead(op, 1 - k)}, op, "mul"));
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
    Value *q =
        overResult(b, OpKind::Div, {{dyy, b.resultMap()}, den}, op, "div");
    b.accumulateOperand(
        1, overResult(b, OpKind::Neg, {{q, b.resultMap()}}, op, "neg"));
  }
  return llvm::Error::success();
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
      dc = overResult(
          b, OpKind::Mul,
          {{dy, b.resultMap()}, {b.constant(beta, dy->type.elem), {}}}, op,
          "beta");
    b.accumulateOperand(2, dc);
  }
  return llvm::Error::success();
}

/// The product of the extents of the dims \p map does not use.
int64_t summedPoints(const Op &op, const AccessMap &map) {
  int64_t n = 1;
  for (size_t d = 0; d < op.iters.size(); ++d)
    if (llvm::none_of(map,
                      [&](const AccessExpr &e) { return e.uses(unsigned(d)); }))
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
    Value *t = overResult(b, OpKind::Mul, {{p, b.resultMap()}, {sums, rowMap}},
                          op, "scaled");
    g = overResult(b, OpKind::Sub, {dyr, {t, b.resultMap()}}, op, "dx");
  } else {
    Value *t =
        overResult(b, OpKind::Sub, {dyr, {sums, rowMap}}, op, "centered");
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
    b.accumulate(x.value,
                 b.over(sums ? OpKind::ReduceSum : OpKind::Reshape,
                        {{dy, b.resultMap()}}, x.map, x.value->type, "layout"));
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
  b.accumulate(op.operands[0].value, b.padded(dy, read, xt, "unslice"));
  return llvm::Error::success();
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
  Value *g =
      b.over(OpKind::ScatterAdd, {{dy, b.resultMap()}, operandRead(op, 1)},
             data.map, data.value->type, "scatter");
  g->def->attrs.erase("config");
  GradientBuilder::replicate(*g->def, b.replicas());
  b.accumulate(data.value, g);
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
    {OpKind::Tan, fromResultRule<tanDerivative>},
    {OpKind::Asin, fromResultRule<asinDerivative>},
    {OpKind::Acos, fromResultRule<acosDerivative>},
    {OpKind::Atan, fromResultRule<atanDerivative>},
    {OpKind::Sinh, fromResultRule<sinhDerivative>},
    {OpKind::Cosh, fromResultRule<coshDerivative>},
    {OpKind::Asinh, fromResultRule<asinhDerivative>},
    {OpKind::Acosh, fromResultRule<acoshDerivative>},
    {OpKind::Atanh, fromResultRule<atanhDerivative>},
    {OpKind::Cast, castRule},
    {OpKind::LayerNorm, normRule},
    {OpKind::RmsNorm, normRule},
    {OpKind::InstanceNorm, normRule},
    {OpKind::Conv, convRule},
    {OpKind::MaxPool, maxPoolRule},
    {OpKind::AveragePool, averagePoolRule},
    {OpKind::BatchNorm, batchNormRule},
    {OpKind::Gelu, geluRule},
    {OpKind::Clip, clipRule},
    {OpKind::LeakyRelu, fromResultRule<leakyReluDerivative>},
    {OpKind::HardSigmoid, fromResultRule<hardSigmoidDerivative>},
    {OpKind::HardSwish, fromResultRule<hardSwishDerivative>},
    {OpKind::Pad, padRule},
    {OpKind::ScatterAdd, scatterAddRule},
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
    {OpKind::Selu, fromResultRule<seluDerivative>},
    {OpKind::Celu, fromResultRule<celuDerivative>},
    {OpKind::Softsign, fromResultRule<softsignDerivative>},
    {OpKind::Mish, fromResultRule<mishDerivative>},
    {OpKind::PRelu, preluRule},
    {OpKind::Tile, layoutRule},
    {OpKind::Sum, addRule},
    {OpKind::Mean, meanRule},
};

} // namespace gradient_rules

using namespace gradient_rules;

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
  b.accumulate(x.value,
               b.over(OpKind::Concat, parts, x.map, x.value->type, "unsplit"));
  return llvm::Error::success();
}

// top_k: x's gradient is the values' gradient where each value came from,
// a scatter_add through the indices (the indices take none), built as the
// gather's gradient is: x's map with the axis read through the indices
// (`over` makes the k results, which the map drops, a reduction).
llvm::Error topKRule(GradientBuilder &b, const Op &op,
                     llvm::ArrayRef<Value *> dys) {
  const Operand &x = op.operands[0];
  if (!b.needs(0) || dys.empty() || !dys[0])
    return llvm::Error::success();
  unsigned axis = unsigned(op.intAttr("axis", 0));
  AccessMap into = x.map;
  into[axis] = AccessExpr::lookup(axis);
  Value *g = b.over(OpKind::ScatterAdd,
                    {{dys[0], op.results[0].map},
                     {op.results[1].value.get(), op.results[1].map}},
                    into, x.value->type, "scatter");
  g->def->attrs.erase("config");
  b.accumulate(x.value, g);
  return llvm::Error::success();
}

llvm::Error applyGradientRule(GradientBuilder &b, const Op &op,
                              llvm::ArrayRef<Value *> dys) {
  if (op.kind == OpKind::TopK)
    return topKRule(b, op, dys);
  if (op.kind == OpKind::Split)
    return splitRule(b, op, dys);
  if (op.kind == OpKind::Lstm || op.kind == OpKind::Gru)
    return recurrentRule(b, op, dys);
  if (op.kind == OpKind::Attention)
    return attentionRule(b, op, dys);
  if (dys.size() != 1)
    return llvm::createStringError(
        "autodiff: op '" + op.name().str() + "' (" + opKindName(op.kind).str() +
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
