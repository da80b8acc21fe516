//===- Elementwise.cpp - Importers of elementwise ONNX ops ----------------===//
#include "frontend/OnnxOps.h"

#include "frontend/TensorProto.h"

#include "llvm/ADT/StringSwitch.h"

namespace pax {

/// The trigonometric and hyperbolic functions past sin and cos.
static std::optional<OpKind> trigKind(llvm::StringRef t) {
  return llvm::StringSwitch<std::optional<OpKind>>(t)
      .Case("Tan", OpKind::Tan)
      .Case("Asin", OpKind::Asin)
      .Case("Acos", OpKind::Acos)
      .Case("Atan", OpKind::Atan)
      .Case("Sinh", OpKind::Sinh)
      .Case("Cosh", OpKind::Cosh)
      .Case("Asinh", OpKind::Asinh)
      .Case("Acosh", OpKind::Acosh)
      .Case("Atanh", OpKind::Atanh)
      .Default(std::nullopt);
}

static std::optional<OpKind> elementwiseKind(llvm::StringRef t) {
  if (auto k = trigKind(t))
    return k;
  return llvm::StringSwitch<std::optional<OpKind>>(t)
      .Case("Abs", OpKind::Abs)
      .Case("Ceil", OpKind::Ceil)
      .Case("Celu", OpKind::Celu)
      .Case("Cos", OpKind::Cos)
      .Case("Elu", OpKind::Elu)
      .Case("Erf", OpKind::Erf)
      .Case("Exp", OpKind::Exp)
      .Case("Floor", OpKind::Floor)
      .Case("Gelu", OpKind::Gelu)
      .Case("HardSigmoid", OpKind::HardSigmoid)
      .Case("HardSwish", OpKind::HardSwish)
      .Case("IsInf", OpKind::IsInf)
      .Case("IsNaN", OpKind::IsNaN)
      .Case("LeakyRelu", OpKind::LeakyRelu)
      .Case("Log", OpKind::Log)
      .Case("Mish", OpKind::Mish)
      .Case("Neg", OpKind::Neg)
      .Case("Not", OpKind::Not)
      .Case("Reciprocal", OpKind::Reciprocal)
      .Case("Relu", OpKind::Relu)
      .Case("Round", OpKind::Round)
      .Case("Selu", OpKind::Selu)
      .Case("Sigmoid", OpKind::Sigmoid)
      .Case("Sign", OpKind::Sign)
      .Case("Sin", OpKind::Sin)
      .Case("Softplus", OpKind::Softplus)
      .Case("Softsign", OpKind::Softsign)
      .Case("Sqrt", OpKind::Sqrt)
      .Case("Tanh", OpKind::Tanh)
      .Case("Add", OpKind::Add)
      .Case("And", OpKind::And)
      .Case("Div", OpKind::Div)
      .Case("Equal", OpKind::Equal)
      .Case("Greater", OpKind::Greater)
      .Case("GreaterOrEqual", OpKind::GreaterOrEqual)
      .Case("Less", OpKind::Less)
      .Case("LessOrEqual", OpKind::LessOrEqual)
      .Case("Max", OpKind::Max)
      .Case("Mean", OpKind::Mean)
      .Case("Min", OpKind::Min)
      .Case("Mod", OpKind::Mod)
      .Case("Mul", OpKind::Mul)
      .Case("Or", OpKind::Or)
      .Case("Pow", OpKind::Pow)
      .Case("PRelu", OpKind::PRelu)
      .Case("Sub", OpKind::Sub)
      .Case("Sum", OpKind::Sum)
      .Case("Where", OpKind::Where)
      .Case("Xor", OpKind::Xor)
      .Default(std::nullopt);
}

static bool isComparison(OpKind k) {
  switch (k) {
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::LessOrEqual:
  case OpKind::Greater:
  case OpKind::GreaterOrEqual:
  case OpKind::And:
  case OpKind::Or:
  case OpKind::Xor:
  case OpKind::Not:
  case OpKind::IsNaN:
  case OpKind::IsInf:
    return true;
  default:
    return false;
  }
}

/// The most operands of one elementwise op: the CUDA backend's generic
/// kernel takes 8; a variadic Sum, Max, Min or Mean of more is a tree.
constexpr size_t kMaxOperands = 8;

/// An elementwise op of \p kind over the broadcast of \p values, not yet
/// emitted.
static llvm::Expected<std::unique_ptr<Op>>
elementwiseOver(NodeContext &ctx, OpKind kind, llvm::ArrayRef<Value *> values,
                DType resultType) {
  llvm::SmallVector<int64_t, 4> shape;
  for (Value *v : values) {
    auto s = broadcastShapes(ctx, shape, v->type.shape);
    if (!s)
      return s.takeError();
    shape = *s;
  }
  auto op = ctx.newOp(kind);
  op->iters = parallelSpace(shape);
  for (Value *v : values)
    op->operands.push_back({v, broadcastMap(v->type.shape, shape)});
  op->addResult(TensorType{resultType, {shape.begin(), shape.end()}},
                identityMap(shape.size()));
  copyAttributes(ctx, *op);
  return op;
}

/// An elementwise op over the broadcast of the given inputs. A variadic
/// one of more than kMaxOperands inputs folds them kMaxOperands at a time
/// (a Mean as Sums, then divided by the count).
static llvm::Error buildElementwise(NodeContext &ctx, OpKind kind,
                                    llvm::ArrayRef<unsigned> inputs,
                                    DType resultType) {
  std::vector<Value *> values;
  for (unsigned i : inputs)
    values.push_back(ctx.value(i));
  bool mean = kind == OpKind::Mean && values.size() > kMaxOperands;
  OpKind fold = mean ? OpKind::Sum : kind;
  while (values.size() > kMaxOperands) {
    std::vector<Value *> next;
    for (size_t k = 0; k < values.size(); k += kMaxOperands) {
      size_t n = std::min(kMaxOperands, values.size() - k);
      auto op = elementwiseOver(
          ctx, fold, llvm::ArrayRef<Value *>(values).slice(k, n), resultType);
      if (!op)
        return op.takeError();
      next.push_back(n == 1 ? values[k] : ctx.emit(std::move(*op)));
    }
    values = std::move(next);
  }
  if (mean) {
    double count = double(inputs.size());
    auto sum = elementwiseOver(ctx, OpKind::Sum, values, resultType);
    if (!sum)
      return sum.takeError();
    values = {ctx.emit(std::move(*sum)),
              ctx.constantValue(
                  ConstTensor::splat(TensorType{resultType, {}}, 1.0 / count),
                  "inverse_count")};
    kind = OpKind::Mul;
  }
  auto op = elementwiseOver(ctx, kind, values, resultType);
  if (!op)
    return op.takeError();
  return ctx.finish(std::move(*op));
}

llvm::Error importUnary(NodeContext &ctx) {
  if (!ctx.hasInput(0))
    return ctx.error("missing input 0");
  OpKind kind = *elementwiseKind(ctx.opType());
  DType out = isComparison(kind) ? DType::I1 : ctx.type(0).elem;
  return buildElementwise(ctx, kind, {0}, out);
}

llvm::Error importBroadcast(NodeContext &ctx) {
  OpKind kind = *elementwiseKind(ctx.opType());
  llvm::SmallVector<unsigned, 4> inputs;
  for (unsigned i = 0; i < ctx.numInputs(); ++i)
    if (ctx.hasInput(i))
      inputs.push_back(i);
  unsigned need = kind == OpKind::Where ? 3 : 2;
  bool variadic = kind == OpKind::Sum || kind == OpKind::Max ||
                  kind == OpKind::Min || kind == OpKind::Mean;
  if (variadic ? inputs.empty() : inputs.size() != need)
    return ctx.error("expects " + llvm::Twine(need) + " inputs, has " +
                     llvm::Twine(inputs.size()));
  // Operands must agree on their element type (Where's condition and Pow's
  // exponent excepted).
  unsigned first = kind == OpKind::Where ? 1 : 0;
  unsigned last = kind == OpKind::Pow ? 1 : inputs.size();
  for (unsigned k = first + 1; k < last; ++k)
    if (ctx.type(inputs[k]).elem != ctx.type(inputs[first]).elem)
      return ctx.error("input types " +
                       dtypeName(ctx.type(inputs[first]).elem) + " and " +
                       dtypeName(ctx.type(inputs[k]).elem) + " differ");
  DType out = isComparison(kind) ? DType::I1 : ctx.type(inputs[first]).elem;
  return buildElementwise(ctx, kind, inputs, out);
}

llvm::Error importCast(NodeContext &ctx) {
  auto to = dtypeFromOnnx(int32_t(ctx.attrInt("to", 0)));
  if (!to)
    return ctx.error("unsupported target type " +
                     llvm::Twine(ctx.attrInt("to", 0)));
  if (*to == ctx.type(0).elem) {
    ctx.forward(0, 0);
    return llvm::Error::success();
  }
  return buildElementwise(ctx, OpKind::Cast, {0}, *to);
}

/// BitShift: x shifted by y bits, `direction` LEFT or RIGHT (unsigned
/// integers; ONNX defines no other types).
llvm::Error importBitShift(NodeContext &ctx) {
  std::string direction = ctx.attrString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return ctx.error("direction '" + direction + "' is not LEFT or RIGHT");
  DType t = ctx.type(0).elem;
  if (t != DType::U8 && t != DType::U16 && t != DType::U32 && t != DType::U64)
    return ctx.error("shifts unsigned integers, not " + dtypeName(t));
  return buildElementwise(
      ctx, direction == "LEFT" ? OpKind::BitShiftLeft : OpKind::BitShiftRight,
      {0, 1}, t);
}

llvm::Error importClip(NodeContext &ctx) {
  llvm::SmallVector<unsigned, 3> inputs = {0};
  for (unsigned i = 1; i < 3; ++i)
    if (ctx.hasInput(i)) {
      if (ctx.rank(i) != 0 && ctx.type(i).numel() != 1)
        return ctx.error("min and max must be scalars");
      inputs.push_back(i);
    }
  // A max alone is a Min (the IR's clip takes a min first).
  if (inputs.size() == 2 && !ctx.hasInput(1))
    return buildElementwise(ctx, OpKind::Min, inputs, ctx.type(0).elem);
  return buildElementwise(ctx, OpKind::Clip, inputs, ctx.type(0).elem);
}

llvm::Error importTrilu(NodeContext &ctx) {
  if (ctx.rank(0) < 2)
    return ctx.error("input must have rank 2 or more, has " +
                     llvm::Twine(ctx.rank(0)));
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    auto c = ctx.requireScalar(1, "k");
    if (!c)
      return c.takeError();
    k = (*c)->integer(0);
  }
  auto op = ctx.newOp(OpKind::Trilu);
  llvm::ArrayRef<int64_t> shape = ctx.shape(0);
  op->iters = parallelSpace(shape);
  op->operands.push_back({ctx.value(0), identityMap(shape.size())});
  op->addResult(ctx.type(0), identityMap(shape.size()));
  op->attrs["upper"] = ctx.attrInt("upper", 1);
  op->attrs["k"] = k;
  return ctx.finish(std::move(op));
}

llvm::Error importIdentity(NodeContext &ctx) {
  if (!ctx.hasInput(0))
    return ctx.error("missing input 0");
  // Dropout is the identity in inference only; training mode is random.
  if (ctx.opType() == "Dropout" && ctx.hasInput(2)) {
    const ConstTensor *mode = ctx.constant(2);
    if (!mode || mode->numel() != 1)
      return ctx.error("training_mode must be a constant of one value");
    if (mode->integer(0) != 0)
      return ctx.error("training mode is not supported (paxc imports "
                       "models for inference)");
  }
  ctx.forward(0, 0);
  // Dropout's mask is all ones in inference.
  if (ctx.numOutputs() > 1 && !ctx.proto().output(1).empty()) {
    TensorType mask = ctx.type(0);
    mask.elem = DType::I1;
    ctx.setConstant(1, ConstTensor::splat(mask, 1));
  }
  return llvm::Error::success();
}

} // namespace pax
