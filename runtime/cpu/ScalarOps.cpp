//===- ScalarOps.cpp - Per-element functions of the generic kernel --------===//
#include "runtime/cpu/ScalarOps.h"

#include "runtime/cpu/KernelContext.h"

#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pax::runtime::cpu {

std::optional<ScalarOp> parseScalarOp(llvm::StringRef kind) {
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
      .Case("mish", S::Mish)
      .Case("tanh", S::Tanh)
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
      .Case("is_nan", S::IsNaN)
      .Case("is_inf", S::IsInf)
      .Case("mod", S::Mod)
      .Default(std::nullopt);
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

/// Ops of one or more operands that fold over all of them.
static double foldReal(ScalarOp op, llvm::ArrayRef<double> a) {
  double r = op == ScalarOp::Sum || op == ScalarOp::Mean ? 0 : a[0];
  for (double v : a)
    r = op == ScalarOp::Max   ? std::max(r, v)
        : op == ScalarOp::Min ? std::min(r, v)
                              : r + v;
  return op == ScalarOp::Mean ? r / double(a.size()) : r;
}

/// The activations: one operand (prelu's slope is the second).
static double activation(ScalarOp op, double x, double y,
                         const ScalarParams &p) {
  switch (op) {
  case ScalarOp::Relu:
    return x > 0 ? x : 0;
  case ScalarOp::LeakyRelu:
    return x >= 0 ? x : x * p.alpha;
  case ScalarOp::PRelu:
    return x >= 0 ? x : x * y;
  case ScalarOp::Elu:
    return x >= 0 ? x : p.alpha * std::expm1(x);
  case ScalarOp::Selu:
    return p.gamma * (x > 0 ? x : p.alpha * std::expm1(x));
  case ScalarOp::Celu:
    return std::max(0.0, x) + std::min(0.0, p.alpha * std::expm1(x / p.alpha));
  case ScalarOp::Sigmoid:
    return 1 / (1 + std::exp(-x));
  case ScalarOp::HardSigmoid:
    return std::clamp(p.alpha * x + p.beta, 0.0, 1.0);
  case ScalarOp::HardSwish:
    return x * std::clamp(x / 6 + 0.5, 0.0, 1.0);
  case ScalarOp::Softplus:
    // log(1 + e^x) without overflow for large x.
    return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  case ScalarOp::Softsign:
    return x / (1 + std::fabs(x));
  case ScalarOp::Gelu:
    if (p.tanhGelu)
      return 0.5 * x *
             (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + std::erf(x * 0.7071067811865476));
  case ScalarOp::Mish: {
    double sp = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    return x * std::tanh(sp);
  }
  default:
    return NAN;
  }
}

/// The one-operand math functions.
static double unaryReal(ScalarOp op, double x) {
  switch (op) {
  case ScalarOp::Tanh:
    return std::tanh(x);
  case ScalarOp::Erf:
    return std::erf(x);
  case ScalarOp::Exp:
    return std::exp(x);
  case ScalarOp::Log:
    return std::log(x);
  case ScalarOp::Sqrt:
    return std::sqrt(x);
  case ScalarOp::Reciprocal:
    return 1 / x;
  case ScalarOp::Neg:
    return -x;
  case ScalarOp::Abs:
    return std::fabs(x);
  case ScalarOp::Sign:
    return x > 0 ? 1 : (x < 0 ? -1 : 0);
  case ScalarOp::Floor:
    return std::floor(x);
  case ScalarOp::Ceil:
    return std::ceil(x);
  case ScalarOp::Round:
    return std::nearbyint(x); // halves to even, like ONNX
  case ScalarOp::Cos:
    return std::cos(x);
  case ScalarOp::Sin:
    return std::sin(x);
  case ScalarOp::Cast:
  case ScalarOp::Trilu:
    return x;
  default:
    return activation(op, x, 0, ScalarParams());
  }
}

/// Comparisons and logic: the same for floats and integers.
template <typename T> static std::optional<T> predicate(ScalarOp op, T x, T y) {
  switch (op) {
  case ScalarOp::Equal:
    return x == y;
  case ScalarOp::Less:
    return x < y;
  case ScalarOp::LessOrEqual:
    return x <= y;
  case ScalarOp::Greater:
    return x > y;
  case ScalarOp::GreaterOrEqual:
    return x >= y;
  case ScalarOp::And:
    return (x != 0) && (y != 0);
  case ScalarOp::Or:
    return (x != 0) || (y != 0);
  case ScalarOp::Xor:
    return (x != 0) != (y != 0);
  case ScalarOp::Not:
    return x == 0;
  default:
    return std::nullopt;
  }
}

double applyReal(ScalarOp op, llvm::ArrayRef<double> a, const ScalarParams &p) {
  double x = a.empty() ? 0.0 : a[0];
  double y = a.size() > 1 ? a[1] : 0.0;
  if (std::optional<double> b = predicate(op, x, y))
    return *b;
  switch (op) {
  case ScalarOp::Add:
    return x + y;
  case ScalarOp::Sub:
    return x - y;
  case ScalarOp::Mul:
    return x * y;
  case ScalarOp::Div:
    return x / y;
  case ScalarOp::Pow:
    // Small integer exponents (a layer norm's square, gelu's cube, their
    // gradients' powers) as products: exact for 2, and far cheaper.
    if (y == 2)
      return x * x;
    if (y == 1)
      return x;
    if (y == 3)
      return x * x * x;
    return std::pow(x, y);
  case ScalarOp::Mod: {
    // fmod keeps the dividend's sign; Python's % (fmod = 0) the divisor's.
    double r = std::fmod(x, y);
    if (!p.fmod && r != 0 && ((r < 0) != (y < 0)))
      r += y;
    return r;
  }
  case ScalarOp::IsNaN:
    return std::isnan(x);
  case ScalarOp::IsInf:
    return std::isinf(x) && (x > 0 ? p.detectPositive : p.detectNegative);
  case ScalarOp::Max:
  case ScalarOp::Min:
  case ScalarOp::Sum:
  case ScalarOp::Mean:
    return a.empty() ? 0.0 : foldReal(op, a);
  case ScalarOp::Where:
    return x != 0 ? y : (a.size() > 2 ? a[2] : 0.0);
  case ScalarOp::Clip: {
    // Bounds are operands from opset 11, attributes `min` and `max` before.
    double lo = a.size() > 1 ? a[1] : p.min;
    double hi = a.size() > 2 ? a[2] : p.max;
    return std::min(std::max(x, lo), hi);
  }
  case ScalarOp::Relu:
  case ScalarOp::LeakyRelu:
  case ScalarOp::PRelu:
  case ScalarOp::Elu:
  case ScalarOp::Selu:
  case ScalarOp::Celu:
  case ScalarOp::Sigmoid:
  case ScalarOp::HardSigmoid:
  case ScalarOp::HardSwish:
  case ScalarOp::Softplus:
  case ScalarOp::Softsign:
  case ScalarOp::Gelu:
  case ScalarOp::Mish:
    return activation(op, x, y, p);
  default:
    return unaryReal(op, x);
  }
}

/// Integer division truncating toward zero; a zero divisor gives 0 rather
/// than undefined behaviour.
static int64_t divInteger(int64_t x, int64_t y) {
  if (y == 0)
    return 0;
  if (y == -1)
    return int64_t(0ull - uint64_t(x)); // INT64_MIN / -1 wraps
  return x / y;
}

int64_t applyInteger(ScalarOp op, llvm::ArrayRef<int64_t> a,
                     const ScalarParams &p) {
  int64_t x = a.empty() ? 0 : a[0];
  int64_t y = a.size() > 1 ? a[1] : 0;
  auto wrap = [](uint64_t v) { return int64_t(v); };
  if (std::optional<int64_t> b = predicate(op, x, y))
    return *b;
  switch (op) {
  case ScalarOp::Add:
    return wrap(uint64_t(x) + uint64_t(y));
  case ScalarOp::Sub:
    return wrap(uint64_t(x) - uint64_t(y));
  case ScalarOp::Mul:
    return wrap(uint64_t(x) * uint64_t(y));
  case ScalarOp::Div:
    return divInteger(x, y);
  case ScalarOp::Mod: {
    if (y == 0 || y == -1)
      return 0;
    int64_t r = x % y;
    if (!p.fmod && r != 0 && ((r < 0) != (y < 0)))
      r += y;
    return r;
  }
  case ScalarOp::IsNaN:
  case ScalarOp::IsInf:
    return 0;
  case ScalarOp::Max:
    return *std::max_element(a.begin(), a.end());
  case ScalarOp::Min:
    return *std::min_element(a.begin(), a.end());
  case ScalarOp::Sum: {
    uint64_t s = 0;
    for (int64_t v : a)
      s += uint64_t(v);
    return wrap(s);
  }
  case ScalarOp::Where:
    return x != 0 ? y : (a.size() > 2 ? a[2] : 0);
  case ScalarOp::Neg:
    return wrap(0ull - uint64_t(x));
  case ScalarOp::Abs:
    return x < 0 ? wrap(0ull - uint64_t(x)) : x;
  case ScalarOp::Sign:
    return x > 0 ? 1 : (x < 0 ? -1 : 0);
  case ScalarOp::Relu:
    return x > 0 ? x : 0;
  case ScalarOp::Cast:
  case ScalarOp::Trilu:
  case ScalarOp::Floor:
  case ScalarOp::Ceil:
  case ScalarOp::Round:
    return x;
  default: {
    llvm::SmallVector<double, 3> r(a.begin(), a.end());
    double v = applyReal(op, r, p);
    if (std::isnan(v))
      return 0;
    return int64_t(
        std::clamp(v, -9.2233720368547758e18, 9.2233720368547748e18));
  }
  }
}

} // namespace pax::runtime::cpu
