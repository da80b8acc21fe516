//===- PointwiseVector.h - Vectorized elementwise ops of any width -*- C++
//-*-===//
//
// The elementwise fast paths (cpu/Pointwise.h) as templates over the
// vector type: Pointwise.cpp instantiates them on four lanes (any x86-64
// or AArch64), PointwiseWide.cpp on sixteen, compiled for AVX-512 and
// taken where the processor has it (VectorWidth.h). Every lane computes
// what a four-lane one does. Its definitions are internal to each file
// that includes it (the kernels' own files only).
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_POINTWISEVECTOR_H
#define PAX_RUNTIME_CPU_POINTWISEVECTOR_H

#include "runtime/ScalarMath.h"
#include "runtime/cpu/VectorMath.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace pax::runtime::cpu {
namespace {

/// Applies \p f to \p n lanes of \p a into \p o, a vector of V at a time;
/// the last partial vector is padded with zeros, which never reach \p o.
template <typename V, typename F>
PAX_VECTOR_INLINE void map1(const float *a, float *o, int64_t n, F f) {
  constexpr int64_t w = VecTraits<V>::lanes;
  int64_t j = 0;
  for (; j + w <= n; j += w) {
    V x;
    std::memcpy(&x, a + j, sizeof(x));
    V r = f(x);
    std::memcpy(o + j, &r, sizeof(r));
  }
  if (j < n) {
    V x = {};
    std::memcpy(&x, a + j, size_t(n - j) * sizeof(float));
    V r = f(x);
    std::memcpy(o + j, &r, size_t(n - j) * sizeof(float));
  }
}

/// Like map1 over two operands.
template <typename V, typename F>
PAX_VECTOR_INLINE void map2(const float *a, const float *b, float *o, int64_t n,
                            F f) {
  constexpr int64_t w = VecTraits<V>::lanes;
  int64_t j = 0;
  for (; j + w <= n; j += w) {
    V x, y;
    std::memcpy(&x, a + j, sizeof(x));
    std::memcpy(&y, b + j, sizeof(y));
    V r = f(x, y);
    std::memcpy(o + j, &r, sizeof(r));
  }
  if (j < n) {
    V x = {}, y = {};
    std::memcpy(&x, a + j, size_t(n - j) * sizeof(float));
    std::memcpy(&y, b + j, size_t(n - j) * sizeof(float));
    V r = f(x, y);
    std::memcpy(o + j, &r, size_t(n - j) * sizeof(float));
  }
}

/// x^y as applyReal computes it: small integer exponents as products (in
/// double, so that a cube rounds once), others std::pow.
inline void applyPow(const float *x, const float *y, float *o, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double b = x[j], e = y[j];
    o[j] = float(e == 2   ? b * b
                 : e == 1 ? b
                 : e == 3 ? b * b * b
                          : std::pow(b, e));
  }
}

/// The one-operand arithmetic on vectors of V (cast, relu, neg,
/// reciprocal, sqrt): exactly the generic kernel's f32 results; false for
/// the other ops.
template <typename V>
PAX_VECTOR_INLINE bool applyUnaryOf(ScalarOp op, const float *x, float *o,
                                    int64_t n) {
  V zero = {};
  switch (op) {
  case ScalarOp::Cast:
    // f32 to f32, or to bools its caller stores as x != 0.
    map1<V>(x, o, n, [](V v) { return v; });
    return true;
  case ScalarOp::Relu:
    map1<V>(x, o, n, [&](V v) { return v > zero ? v : zero; });
    return true;
  case ScalarOp::Neg:
    map1<V>(x, o, n, [](V v) { return -v; });
    return true;
  case ScalarOp::Reciprocal:
    map1<V>(x, o, n, [](V v) { return 1.0f / v; });
    return true;
  case ScalarOp::Sqrt:
    // The f32 square root is the f32 rounding of the double one.
    map1<V>(x, o, n, [](V v) {
      for (int i = 0; i < VecTraits<V>::lanes; ++i)
        v[i] = std::sqrt(v[i]);
      return v;
    });
    return true;
  default:
    return false;
  }
}

/// Arithmetic on vectors of V (add, sub, mul, div, sum, max, min, where,
/// pow, and applyUnaryOf's): exactly the generic kernel's f32 results;
/// false for the other ops.
template <typename V>
PAX_VECTOR_INLINE bool applyArithmeticOf(ScalarOp op, const float *const *a,
                                         size_t na, float *o, int64_t n) {
  V zero = {};
  switch (op) {
  case ScalarOp::Add:
    map2<V>(a[0], a[1], o, n, [](V x, V y) { return x + y; });
    return true;
  case ScalarOp::Sub:
    map2<V>(a[0], a[1], o, n, [](V x, V y) { return x - y; });
    return true;
  case ScalarOp::Mul:
    map2<V>(a[0], a[1], o, n, [](V x, V y) { return x * y; });
    return true;
  case ScalarOp::Div:
    map2<V>(a[0], a[1], o, n, [](V x, V y) { return x / y; });
    return true;
  case ScalarOp::Sum:
    // 0 + x + y in double, rounded once, is x + y rounded once.
    if (na > 2)
      return false;
    if (na == 1)
      map1<V>(a[0], o, n, [](V x) { return x; });
    else
      map2<V>(a[0], a[1], o, n, [](V x, V y) { return x + y; });
    return true;
  case ScalarOp::Max:
  case ScalarOp::Min: {
    // std::max and std::min, folded left: NaN wins only from the left.
    bool isMax = op == ScalarOp::Max;
    map1<V>(a[0], o, n, [](V x) { return x; });
    for (size_t k = 1; k < na; ++k)
      map2<V>(o, a[k], o, n, [&](V r, V v) {
        return isMax ? (r < v ? v : r) : (v < r ? v : r);
      });
    return true;
  }
  case ScalarOp::Where: {
    if (na != 3)
      return false;
    // A lane select: the condition's 1.0f or 0.0f (a NaN selects x, as
    // the scalar test does).
    constexpr int lanes = VecTraits<V>::lanes;
    int64_t j = 0;
    for (; j + lanes <= n; j += lanes) {
      V c = loadT<V>(a[0] + j), x = loadT<V>(a[1] + j), y = loadT<V>(a[2] + j);
      storeT(o + j, c != zero ? x : y);
    }
    for (; j < n; ++j)
      o[j] = a[0][j] != 0 ? a[1][j] : a[2][j];
    return true;
  }
  case ScalarOp::Pow:
    if (na != 2)
      return false;
    applyPow(a[0], a[1], o, n);
    return true;
  default:
    return na >= 1 && applyUnaryOf<V>(op, a[0], o, n);
  }
}

/// exp, tanh, sigmoid, erf, gelu and gelu_grad on vectors of V
/// (VectorMath.h, a few ulp from the generic kernel's); false for the
/// other ops.
template <typename V>
PAX_VECTOR_INLINE bool
applyTranscendentalOf(ScalarOp op, const ScalarParams &params,
                      const float *const *a, size_t na, float *o, int64_t n) {
  switch (op) {
  case ScalarOp::Exp:
    map1<V>(a[0], o, n, [](V x) { return fastExp(x); });
    return true;
  case ScalarOp::Tanh:
    map1<V>(a[0], o, n, [](V x) { return fastTanh(x); });
    return true;
  case ScalarOp::Sigmoid:
    map1<V>(a[0], o, n, [](V x) { return fastSigmoid(x); });
    return true;
  case ScalarOp::Erf:
    map1<V>(a[0], o, n, [](V x) { return fastErf(x); });
    return true;
  case ScalarOp::Gelu:
    if (params.tanhGelu)
      map1<V>(a[0], o, n, [](V x) {
        V inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + fastTanh(inner));
      });
    else
      map1<V>(a[0], o, n, [](V x) {
        return 0.5f * x * (1.0f + fastErf(x * 0.70710678118654752f));
      });
    return true;
  case ScalarOp::GeluGrad:
    if (na != 2)
      return false;
    if (params.tanhGelu)
      map2<V>(a[0], a[1], o, n, [](V x, V dy) {
        V t = fastTanh(0.7978845608028654f * (x + 0.044715f * x * x * x));
        V d = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) *
                                      0.7978845608028654f *
                                      (1.0f + 0.134145f * x * x);
        return dy * d;
      });
    else
      map2<V>(a[0], a[1], o, n, [](V x, V dy) {
        V d = 0.5f * (1.0f + fastErf(x * 0.70710678118654752f)) +
              x * fastExp(-0.5f * x * x) * 0.3989422804014327f;
        return dy * d;
      });
    return true;
  default:
    return false;
  }
}

/// Comparisons of two operands on vectors of V, 1 or 0 as floats; false
/// for the other ops.
template <typename V>
PAX_VECTOR_INLINE bool applyComparisonOf(ScalarOp op, const float *const *a,
                                         size_t na, float *o, int64_t n) {
  switch (op) {
  case ScalarOp::Equal:
  case ScalarOp::Less:
  case ScalarOp::LessOrEqual:
  case ScalarOp::Greater:
  case ScalarOp::GreaterOrEqual: {
    // 1 or 0, as the generic kernel's predicate; NaN compares false.
    if (na != 2)
      return false;
    const V one = splatT<V>(1.0f), none = splatT<V>(0.0f);
    auto pick = [&](MaskOf<V> m) { return m ? one : none; };
    if (op == ScalarOp::Equal)
      map2<V>(a[0], a[1], o, n, [&](V x, V y) { return pick(x == y); });
    else if (op == ScalarOp::Less)
      map2<V>(a[0], a[1], o, n, [&](V x, V y) { return pick(x < y); });
    else if (op == ScalarOp::LessOrEqual)
      map2<V>(a[0], a[1], o, n, [&](V x, V y) { return pick(x <= y); });
    else if (op == ScalarOp::Greater)
      map2<V>(a[0], a[1], o, n, [&](V x, V y) { return pick(x > y); });
    else
      map2<V>(a[0], a[1], o, n, [&](V x, V y) { return pick(x >= y); });
    return true;
  }
  default:
    return false;
  }
}

/// The vectorized ops on vectors of V, \p na operands \p a; false for the
/// others. Each gives what the generic kernel gives (the f32 result of the
/// double one), but erf, gelu, exp, tanh and sigmoid (VectorMath.h, a few
/// ulp from it); every lane alike whatever V's width.
template <typename V>
PAX_VECTOR_INLINE bool applyVectorOf(ScalarOp op, const ScalarParams &params,
                                     const float *const *a, size_t na, float *o,
                                     int64_t n) {
  bool binary = op == ScalarOp::Add || op == ScalarOp::Sub ||
                op == ScalarOp::Mul || op == ScalarOp::Div;
  if (binary ? na != 2 : na == 0)
    return false; // as the generic kernel, through applyReal
  return applyArithmeticOf<V>(op, a, na, o, n) ||
         applyTranscendentalOf<V>(op, params, a, na, o, n) ||
         applyComparisonOf<V>(op, a, na, o, n);
}

/// Attention's softmax weights on vectors of V from point \p jj of \p nb
/// scores \p x: exp(x - m) in place (0 for NaN, +inf and x - m below
/// -87), added to \p sum four lanes at a time, in order. Returns the
/// point it stopped at (the rest, fewer than a vector, left).
template <typename V>
PAX_VECTOR_INLINE int64_t expWeightsOf(float *x, int64_t jj, int64_t nb,
                                       float m, double &sum) {
  using I = MaskOf<V>;
  constexpr int64_t w = VecTraits<V>::lanes;
  const V mv = splatT<V>(m), low = splatT<V>(-87.0f), inf = splatT<V>(INFINITY);
  for (; jj + w <= nb; jj += w) {
    V v = loadT<V>(x + jj), d = v - mv;
    I keep = (v == v) & (v != inf) & (d >= low);
    V e = fastExp(keep ? d : low);
    e = keep ? e : splatT<V>(0.0f);
    storeT(x + jj, e);
    for (int64_t g = 0; g < w; g += 4)
      sum +=
          double(e[g]) + double(e[g + 1]) + double(e[g + 2]) + double(e[g + 3]);
  }
  return jj;
}

/// A softmax row's exponentials e^(x - mx) on vectors of V from point \p j
/// of \p n into \p e, point j's added to \p part[j % 4] in order. Returns
/// the point it stopped at (the rest, fewer than a vector, left).
template <typename V>
PAX_VECTOR_INLINE int64_t expRowOf(const float *x, int64_t j, int64_t n,
                                   float mx, float *e, double part[4]) {
  constexpr int64_t w = VecTraits<V>::lanes;
  for (; j + w <= n; j += w) {
    V v = fastExp(loadT<V>(x + j) - mx);
    storeT(e + j, v);
    for (int64_t i = 0; i < w; ++i)
      part[i % 4] += v[i];
  }
  return j;
}

} // namespace
} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_POINTWISEVECTOR_H
