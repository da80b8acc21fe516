//===- ScalarOps.cpp - Per-element functions of the generic kernel --------===//
#include "runtime/cpu/ScalarOps.h"

#include "runtime/cpu/KernelContext.h"

#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pax::runtime::cpu {

/// The trigonometric and hyperbolic functions past sin and cos.
static std::optional<ScalarOp> trigScalarOp(llvm::StringRef kind) {
  using S = ScalarOp;
  return llvm::StringSwitch<std::optional<ScalarOp>>(kind)
      .Case("tan", S::Tan)
      .Case("asin", S::Asin)
      .Case("acos", S::Acos)
      .Case("atan", S::Atan)
      .Case("sinh", S::Sinh)
      .Case("cosh", S::Cosh)
      .Case("asinh", S::Asinh)
      .Case("acosh", S::Acosh)
      .Case("atanh", S::Atanh)
      .Default(std::nullopt);
}

/// The arithmetic on two inputs (and the reductions sum and mean), with
/// mod and the bit shifts.
static std::optional<ScalarOp> arithmeticScalarOp(llvm::StringRef kind) {
  using S = ScalarOp;
  return llvm::StringSwitch<std::optional<ScalarOp>>(kind)
      .Case("add", S::Add)
      .Case("sub", S::Sub)
      .Case("mul", S::Mul)
      .Case("div", S::Div)
      .Case("pow", S::Pow)
      .Case("max", S::Max)
      .Case("min", S::Min)
      .Case("sum", S::Sum)
      .Case("mean", S::Mean)
      .Case("mod", S::Mod)
      .Case("bit_shift_left", S::BitShiftLeft)
      .Case("bit_shift_right", S::BitShiftRight)
      .Default(std::nullopt);
}

/// Where, the comparisons, the logical operations and the NaN and
/// infinity tests.
static std::optional<ScalarOp> logicScalarOp(llvm::StringRef kind) {
  using S = ScalarOp;
  return llvm::StringSwitch<std::optional<ScalarOp>>(kind)
      .Case("where", S::Where)
      .Case("equal", S::Equal)
      .Case("less", S::Less)
      .Case("less_or_equal", S::LessOrEqual)
      .Case("greater", S::Greater)
      .Case("greater_or_equal", S::GreaterOrEqual)
      .Case("and", S::And)
      .Case("or", S::Or)
      .Case("xor", S::Xor)
      .Case("not", S::Not)
      .Case("is_nan", S::IsNaN)
      .Case("is_inf", S::IsInf)
      .Default(std::nullopt);
}

/// The activation functions and their gradients.
static std::optional<ScalarOp> activationScalarOp(llvm::StringRef kind) {
  using S = ScalarOp;
  return llvm::StringSwitch<std::optional<ScalarOp>>(kind)
      .Case("relu", S::Relu)
      .Case("leaky_relu", S::LeakyRelu)
      .Case("prelu", S::PRelu)
      .Case("elu", S::Elu)
      .Case("selu", S::Selu)
      .Case("celu", S::Celu)
      .Case("sigmoid", S::Sigmoid)
      .Case("hard_sigmoid", S::HardSigmoid)
      .Case("hard_swish", S::HardSwish)
      .Case("softplus", S::Softplus)
      .Case("softsign", S::Softsign)
      .Case("gelu", S::Gelu)
      .Case("gelu_grad", S::GeluGrad)
      .Case("mish", S::Mish)
      .Case("tanh", S::Tanh)
      .Default(std::nullopt);
}

/// The other functions of one input: exp, log, roots, rounding, sin and
/// cos, clip, cast and trilu.
static std::optional<ScalarOp> unaryScalarOp(llvm::StringRef kind) {
  using S = ScalarOp;
  return llvm::StringSwitch<std::optional<ScalarOp>>(kind)
      .Case("erf", S::Erf)
      .Case("exp", S::Exp)
      .Case("log", S::Log)
      .Case("sqrt", S::Sqrt)
      .Case("reciprocal", S::Reciprocal)
      .Case("neg", S::Neg)
      .Case("abs", S::Abs)
      .Case("sign", S::Sign)
      .Case("floor", S::Floor)
      .Case("ceil", S::Ceil)
      .Case("round", S::Round)
      .Case("cos", S::Cos)
      .Case("sin", S::Sin)
      .Case("clip", S::Clip)
      .Case("cast", S::Cast)
      .Case("trilu", S::Trilu)
      .Default(std::nullopt);
}

std::optional<ScalarOp> parseScalarOp(llvm::StringRef kind) {
  if (auto op = trigScalarOp(kind))
    return op;
  if (auto op = arithmeticScalarOp(kind))
    return op;
  if (auto op = logicScalarOp(kind))
    return op;
  if (auto op = activationScalarOp(kind))
    return op;
  return unaryScalarOp(kind);
}

ScalarParams scalarParams(ScalarOp op, NumberAttr number, StringAttr text) {
  auto real = [&](llvm::StringRef name, double dflt) {
    return number(name).value_or(dflt);
  };
  ScalarParams p;
  switch (op) {
  case ScalarOp::LeakyRelu:
    p.alpha = real("alpha", 0.01);
    break;
  case ScalarOp::Selu:
    p.alpha = real("alpha", 1.67326319217681884765625);
    p.gamma = real("gamma", 1.05070102214813232421875);
    break;
  case ScalarOp::HardSigmoid:
    p.alpha = real("alpha", 0.2);
    p.beta = real("beta", 0.5);
    break;
  default:
    p.alpha = real("alpha", 1.0);
    break;
  }
  p.min = real("min", -INFINITY);
  p.max = real("max", INFINITY);
  p.tanhGelu = text("approximate").value_or("none") == "tanh";
  p.upper = real("upper", 1) != 0;
  p.k = int64_t(real("k", 0));
  p.fmod = real("fmod", 0) != 0;
  p.detectPositive = real("detect_positive", 1) != 0;
  p.detectNegative = real("detect_negative", 1) != 0;
  return p;
}

ScalarParams scalarParams(ScalarOp op, const plan::Compute &c) {
  return scalarParams(
      op,
      [&](llvm::StringRef name) -> std::optional<double> {
        const plan::Attr *a = findAttr(c, name);
        if (a && a->has_f())
          return a->f();
        if (a && a->has_i())
          return double(a->i());
        return std::nullopt;
      },
      [&](llvm::StringRef name) -> std::optional<std::string> {
        const plan::Attr *a = findAttr(c, name);
        if (a && a->has_s())
          return a->s();
        return std::nullopt;
      });
}

double applyReal(ScalarOp op, llvm::ArrayRef<double> a, const ScalarParams &p) {
  return runtime::applyReal(op, a.data(), int(a.size()), p);
}

int64_t applyInteger(ScalarOp op, llvm::ArrayRef<int64_t> a,
                     const ScalarParams &p) {
  return runtime::applyInteger(op, a.data(), int(a.size()), p);
}

} // namespace pax::runtime::cpu
