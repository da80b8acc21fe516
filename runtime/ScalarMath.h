//===- ScalarMath.h - Per-element functions, host and device ---*- C++ -*-===//
//
// The one definition of every elementwise op's arithmetic: the CPU kernels,
// the constant folder and the CUDA kernels all evaluate an element through
// applyReal / applyInteger, so the backends agree by construction. Plain
// C++ (no LLVM, no allocation) compiled by the host compiler and by nvcc.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_SCALARMATH_H
#define PAX_RUNTIME_SCALARMATH_H

#include "runtime/HostDevice.h"

namespace pax::runtime {

/// The elementwise op kinds evaluated point by point.
enum class ScalarOp {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Max,
  Min,
  Sum,
  Mean,
  Where,
  Equal,
  Less,
  LessOrEqual,
  Greater,
  GreaterOrEqual,
  And,
  Or,
  Xor,
  Not,
  Relu,
  LeakyRelu,
  PRelu,
  Elu,
  Selu,
  Celu,
  Sigmoid,
  HardSigmoid,
  HardSwish,
  Softplus,
  Softsign,
  Gelu,
  GeluGrad,
  Mish,
  Tanh,
  Erf,
  Exp,
  Log,
  Sqrt,
  Reciprocal,
  Neg,
  Abs,
  Sign,
  Floor,
  Ceil,
  Round,
  Cos,
  Sin,
  Clip,
  Cast,
  Trilu,
  IsNaN,
  IsInf,
  Mod,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
  BitShiftLeft,
  BitShiftRight
};

/// An op's attributes, resolved once per call rather than per element.
struct ScalarParams {
  double alpha = 0, beta = 0, gamma = 0;
  double min = -INFINITY, max = INFINITY; // clip bounds given as attributes
  bool tanhGelu = false;                  // gelu approximate = "tanh"
  bool upper = true;                      // trilu
  int64_t k = 0;                          // trilu diagonal
  bool fmod = false;                      // mod: C's fmod, else Python's %
  bool detectPositive = true, detectNegative = true; // is_inf
};

namespace scalar {

PAX_HD inline double maxReal(double a, double b) { return a < b ? b : a; }
PAX_HD inline double minReal(double a, double b) { return b < a ? b : a; }
PAX_HD inline double clampReal(double x, double lo, double hi) {
  return x < lo ? lo : (hi < x ? hi : x);
}

/// Ops of one or more operands that fold over all of them.
PAX_HD inline double foldReal(ScalarOp op, const double *a, int n) {
  double r = op == ScalarOp::Sum || op == ScalarOp::Mean ? 0 : a[0];
  for (int i = 0; i < n; ++i)
    r = op == ScalarOp::Max   ? maxReal(r, a[i])
        : op == ScalarOp::Min ? minReal(r, a[i])
                              : r + a[i];
  return op == ScalarOp::Mean ? r / double(n) : r;
}

/// log(1 + e^x) without overflow for large x.
PAX_HD inline double softplus(double x) {
  return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

/// The activations: one operand (prelu's slope is the second).
PAX_HD inline double activation(ScalarOp op, double x, double y,
                                const ScalarParams &p) {
  switch (op) {
  case ScalarOp::Relu:
    return x > 0 ? x : 0;
  case ScalarOp::LeakyRelu:
    return x >= 0 ? x : x * p.alpha;
  case ScalarOp::PRelu:
    return x >= 0 ? x : x * y;
  case ScalarOp::Elu:
    return x >= 0 ? x : p.alpha * expm1(x);
  case ScalarOp::Selu:
    return p.gamma * (x > 0 ? x : p.alpha * expm1(x));
  case ScalarOp::Celu:
    return maxReal(0.0, x) + minReal(0.0, p.alpha * expm1(x / p.alpha));
  case ScalarOp::Sigmoid:
    return 1 / (1 + exp(-x));
  case ScalarOp::HardSigmoid:
    return clampReal(p.alpha * x + p.beta, 0.0, 1.0);
  case ScalarOp::HardSwish:
    return x * clampReal(x / 6 + 0.5, 0.0, 1.0);
  case ScalarOp::Softplus:
    return softplus(x);
  case ScalarOp::Softsign:
    return x / (1 + fabs(x));
  case ScalarOp::Gelu:
    if (p.tanhGelu)
      return 0.5 * x *
             (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x * 0.7071067811865476));
  case ScalarOp::Mish:
    return x * tanh(softplus(x));
  default:
    return NAN;
  }
}

/// GELU's derivative at \p x: Phi(x) + x phi(x), or that of tanh's
/// approximation.
PAX_HD inline double geluDerivative(double x, bool tanhForm) {
  if (tanhForm) {
    const double k = 0.7978845608028654, a = 0.044715;
    double t = tanh(k * (x + a * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * a * x * x);
  }
  return 0.5 * (1 + erf(x * 0.7071067811865476)) +
         x * exp(-0.5 * x * x) * 0.3989422804014327;
}

/// The one-operand math functions.
PAX_HD inline double unaryReal(ScalarOp op, double x) {
  switch (op) {
  case ScalarOp::Tanh:
    return tanh(x);
  case ScalarOp::Erf:
    return erf(x);
  case ScalarOp::Exp:
    return exp(x);
  case ScalarOp::Log:
    return log(x);
  case ScalarOp::Sqrt:
    return sqrt(x);
  case ScalarOp::Reciprocal:
    return 1 / x;
  case ScalarOp::Neg:
    return -x;
  case ScalarOp::Abs:
    return fabs(x);
  case ScalarOp::Sign:
    return x > 0 ? 1 : (x < 0 ? -1 : 0);
  case ScalarOp::Floor:
    return floor(x);
  case ScalarOp::Ceil:
    return ceil(x);
  case ScalarOp::Round:
    return nearbyint(x); // halves to even, like ONNX
  case ScalarOp::Cos:
    return cos(x);
  case ScalarOp::Sin:
    return sin(x);
  case ScalarOp::Tan:
    return tan(x);
  case ScalarOp::Asin:
    return asin(x);
  case ScalarOp::Acos:
    return acos(x);
  case ScalarOp::Atan:
    return atan(x);
  case ScalarOp::Sinh:
    return sinh(x);
  case ScalarOp::Cosh:
    return cosh(x);
  case ScalarOp::Asinh:
    return asinh(x);
  case ScalarOp::Acosh:
    return acosh(x);
  case ScalarOp::Atanh:
    return atanh(x);
  case ScalarOp::Cast:
  case ScalarOp::Trilu:
    return x;
  default:
    return activation(op, x, 0, ScalarParams());
  }
}

/// Comparisons and logic, the same for floats and integers: true when
/// \p op is one, with its value in \p out.
template <typename T>
PAX_HD inline bool predicate(ScalarOp op, T x, T y, T &out) {
  switch (op) {
  case ScalarOp::Equal:
    out = x == y;
    return true;
  case ScalarOp::Less:
    out = x < y;
    return true;
  case ScalarOp::LessOrEqual:
    out = x <= y;
    return true;
  case ScalarOp::Greater:
    out = x > y;
    return true;
  case ScalarOp::GreaterOrEqual:
    out = x >= y;
    return true;
  case ScalarOp::And:
    out = (x != 0) && (y != 0);
    return true;
  case ScalarOp::Or:
    out = (x != 0) || (y != 0);
    return true;
  case ScalarOp::Xor:
    out = (x != 0) != (y != 0);
    return true;
  case ScalarOp::Not:
    out = x == 0;
    return true;
  default:
    return false;
  }
}

/// Integer division truncating toward zero; a zero divisor gives 0 rather
/// than undefined behaviour.
PAX_HD inline int64_t divInteger(int64_t x, int64_t y) {
  if (y == 0)
    return 0;
  if (y == -1)
    return int64_t(0ull - uint64_t(x)); // INT64_MIN / -1 wraps
  return x / y;
}

PAX_HD inline int64_t wrap(uint64_t v) { return int64_t(v); }

/// NaN and infinity tests without the <cmath> macros' namespaces, so the
/// host compiler and nvcc read them alike.
PAX_HD inline bool isNaN(double x) { return x != x; }
PAX_HD inline bool isInf(double x) { return fabs(x) == INFINITY; }

/// \p x mod \p y on integers: C's remainder with \p fmod, else Python's
/// (the divisor's sign); a divisor of 0 or -1 gives 0.
PAX_HD inline int64_t modInteger(int64_t x, int64_t y, bool fmod) {
  if (y == 0 || y == -1)
    return 0;
  int64_t r = x % y;
  if (!fmod && r != 0 && ((r < 0) != (y < 0)))
    r += y;
  return r;
}

/// \p x to the \p y: small integer exponents (a layer norm's square,
/// gelu's cube, their gradients' powers) as products: exact for 2, and far
/// cheaper.
PAX_HD inline double power(double x, double y) {
  if (y == 2)
    return x * x;
  if (y == 1)
    return x;
  if (y == 3)
    return x * x * x;
  return pow(x, y);
}

/// \p x shifted \p y bits left (or right) as an unsigned integer; shifts
/// of 64 or more (or negative) give 0.
PAX_HD inline int64_t shift(bool left, int64_t x, int64_t y) {
  if (y < 0 || y >= 64)
    return 0;
  return int64_t(left ? uint64_t(x) << y : uint64_t(x) >> y);
}

/// \p x mod \p y on reals: C's fmod with \p p.fmod, else Python's %.
PAX_HD inline double modReal(double x, double y, const ScalarParams &p) {
  // fmod keeps the dividend's sign; Python's % (fmod = 0) the divisor's.
  double r = fmod(x, y);
  if (!p.fmod && r != 0 && ((r < 0) != (y < 0)))
    r += y;
  return r;
}

/// \p x clipped to the bounds in the \p n operands \p a, or to \p p's.
PAX_HD inline double clipReal(double x, const double *a, int n,
                              const ScalarParams &p) {
  // Bounds are operands from opset 11, attributes `min` and `max` before.
  double lo = n > 1 ? a[1] : p.min;
  double hi = n > 2 ? a[2] : p.max;
  return minReal(maxReal(x, lo), hi);
}

/// The largest (\p op Max) or smallest of the \p n integers \p a.
PAX_HD inline int64_t minMaxInteger(ScalarOp op, const int64_t *a, int n) {
  int64_t r = a[0];
  for (int i = 1; i < n; ++i)
    r = op == ScalarOp::Max ? (r < a[i] ? a[i] : r) : (a[i] < r ? a[i] : r);
  return r;
}

/// The sum of the \p n integers \p a, wrapping on overflow.
PAX_HD inline int64_t sumInteger(const int64_t *a, int n) {
  uint64_t s = 0;
  for (int i = 0; i < n; ++i)
    s += uint64_t(a[i]);
  return wrap(s);
}

} // namespace scalar

/// Applies \p op to the \p n operands \p a in double precision (float
/// tensors). Trilu returns its input; the kernel zeroes the dropped side.
PAX_HD inline double applyReal(ScalarOp op, const double *a, int n,
                               const ScalarParams &p) {
  using namespace scalar;
  double x = n > 0 ? a[0] : 0.0;
  double y = n > 1 ? a[1] : 0.0;
  double b = 0;
  if (predicate(op, x, y, b))
    return b;
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
    return power(x, y);
  case ScalarOp::BitShiftLeft:
  case ScalarOp::BitShiftRight:
    return op == ScalarOp::BitShiftLeft ? ldexp(x, int(y))
                                        : floor(ldexp(x, -int(y)));
  case ScalarOp::Mod:
    return modReal(x, y, p);
  case ScalarOp::IsNaN:
    return isNaN(x);
  case ScalarOp::IsInf:
    return isInf(x) && (x > 0 ? p.detectPositive : p.detectNegative);
  case ScalarOp::Max:
  case ScalarOp::Min:
  case ScalarOp::Sum:
  case ScalarOp::Mean:
    return n == 0 ? 0.0 : foldReal(op, a, n);
  case ScalarOp::Where:
    return x != 0 ? y : (n > 2 ? a[2] : 0.0);
  case ScalarOp::GeluGrad:
    return y * geluDerivative(x, p.tanhGelu);
  case ScalarOp::Clip:
    return clipReal(x, a, n, p);
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

namespace scalar {

/// \p op on the first three of the \p n integers \p a through applyReal,
/// for ops with no integer meaning: NaN gives 0, the rest is clamped to
/// int64's range.
PAX_HD inline int64_t integerViaReal(ScalarOp op, const int64_t *a, int n,
                                     const ScalarParams &p) {
  double r[3] = {0, 0, 0};
  int m = n < 3 ? n : 3;
  for (int i = 0; i < m; ++i)
    r[i] = double(a[i]);
  double v = applyReal(op, r, m, p);
  if (isNaN(v))
    return 0;
  return int64_t(clampReal(v, -9.2233720368547758e18, 9.2233720368547748e18));
}

} // namespace scalar

/// Applies \p op to the \p n operands \p a in int64 (integer and bool
/// tensors). Division truncates toward zero like C++ (ONNX's Div on
/// integers), a zero divisor gives 0; ops with no integer meaning go
/// through applyReal (at most three operands).
PAX_HD inline int64_t applyInteger(ScalarOp op, const int64_t *a, int n,
                                   const ScalarParams &p) {
  using namespace scalar;
  int64_t x = n > 0 ? a[0] : 0;
  int64_t y = n > 1 ? a[1] : 0;
  int64_t b = 0;
  if (predicate(op, x, y, b))
    return b;
  switch (op) {
  case ScalarOp::Add:
    return wrap(uint64_t(x) + uint64_t(y));
  case ScalarOp::Sub:
    return wrap(uint64_t(x) - uint64_t(y));
  case ScalarOp::Mul:
    return wrap(uint64_t(x) * uint64_t(y));
  case ScalarOp::Div:
    return divInteger(x, y);
  case ScalarOp::BitShiftLeft:
  case ScalarOp::BitShiftRight:
    return scalar::shift(op == ScalarOp::BitShiftLeft, x, y);
  case ScalarOp::Mod:
    return scalar::modInteger(x, y, p.fmod);
  case ScalarOp::IsNaN:
  case ScalarOp::IsInf:
    return 0;
  case ScalarOp::Max:
  case ScalarOp::Min:
    return minMaxInteger(op, a, n);
  case ScalarOp::Sum:
    return sumInteger(a, n);
  case ScalarOp::Where:
    return x != 0 ? y : (n > 2 ? a[2] : 0);
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
  default:
    return integerViaReal(op, a, n, p);
  }
}

} // namespace pax::runtime

#endif // PAX_RUNTIME_SCALARMATH_H
