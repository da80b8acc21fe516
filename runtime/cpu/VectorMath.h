//===- VectorMath.h - f32 functions on vector lanes ------------*- C++ -*-===//
//
// The transcendental functions of the f32 fast paths (elementwise ops, the
// softmax rows), on GCC/Clang vector extensions so that any x86-64 or
// AArch64 target vectorizes them. Each is within a few ulp of the f32
// rounding of the exact function (the unit tests bound it); lanes outside
// the range a polynomial covers (overflow, denormal results, NaN) take the
// library's function in double, as the generic kernels do.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_VECTORMATH_H
#define PAX_RUNTIME_CPU_VECTORMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace pax::runtime::cpu {

/// Four floats, and four 32-bit integers (lane masks: -1 true, 0 false);
/// sixteen of each for the AVX-512 paths (VectorWidth.h). The functions
/// below take any of these widths and compute every lane alike, so a
/// lane's result does not depend on the width (no contraction into fused
/// multiply-adds: paxc compiles as ISO C++, -ffp-contract=off).
typedef float V4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
typedef float V16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));

/// The lane count and lane-mask type of a float vector type.
template <typename V> struct VecTraits;
template <> struct VecTraits<V4> {
  static constexpr int lanes = 4;
  using Mask = I4;
};
template <> struct VecTraits<V16> {
  static constexpr int lanes = 16;
  using Mask = I16;
};
template <typename V> using MaskOf = typename VecTraits<V>::Mask;

#define PAX_VECTOR_INLINE inline __attribute__((always_inline))

template <typename V = V4> PAX_VECTOR_INLINE V splatT(float v) {
  return V{} + v;
}
PAX_VECTOR_INLINE V4 splat(float v) { return V4{v, v, v, v}; }

template <typename V> PAX_VECTOR_INLINE V loadT(const float *p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline V4 loadV4(const float *p) { return loadT<V4>(p); }

template <typename V> PAX_VECTOR_INLINE void storeT(float *p, V v) {
  std::memcpy(p, &v, sizeof(v));
}
inline void storeV4(float *p, V4 v) { storeT(p, v); }

/// True when every lane of \p m is set.
template <typename I> PAX_VECTOR_INLINE bool allLanes(I m) {
  constexpr int n = int(sizeof(I) / sizeof(int32_t));
  int32_t all = -1;
  for (int i = 0; i < n; ++i)
    all &= m[i];
  return all != 0;
}

/// True when some lane of \p m is set.
template <typename I> PAX_VECTOR_INLINE bool anyLane(I m) {
  constexpr int n = int(sizeof(I) / sizeof(int32_t));
  int32_t any = 0;
  for (int i = 0; i < n; ++i)
    any |= m[i];
  return any != 0;
}

/// |x|, by clearing the sign bit.
template <typename V> PAX_VECTOR_INLINE V absV(V x) {
  MaskOf<V> bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits &= 0x7fffffff;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}
inline V4 absV4(V4 x) { return absV(x); }

/// e^x: x = j ln 2 + r with |r| <= ln 2 / 2 (ln 2 split in two for the
/// reduction), e^r by Cephes' degree-7 polynomial, times 2^j through the
/// exponent bits; within 2 ulp. Lanes outside [-87, 88] (where 2^j or the
/// result leaves the normal range) and NaN lanes are std::exp in double.
template <typename V> PAX_VECTOR_INLINE V fastExp(V x) {
  using I = MaskOf<V>;
  I inRange = (x >= splatT<V>(-87.0f)) & (x <= splatT<V>(88.0f));
  V xc = inRange ? x : splatT<V>(0.0f);
  // Round to nearest through the 1.5 * 2^23 trick (|x log2 e| < 2^22).
  const V magic = splatT<V>(12582912.0f);
  V j = (xc * 1.44269504088896341f + magic) - magic;
  V r = xc - j * 0.693359375f;
  r = r - j * -2.12194440e-4f;
  V p = splatT<V>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  V y = p * (r * r) + r + 1.0f;
  I e = (__builtin_convertvector(j, I) + 127) << 23;
  V scale;
  std::memcpy(&scale, &e, sizeof(scale));
  y *= scale;
  if (!allLanes(inRange))
    for (int i = 0; i < VecTraits<V>::lanes; ++i)
      if (!inRange[i])
        y[i] = float(std::exp(double(x[i])));
  return y;
}

/// tanh: Cephes' odd polynomial below |x| = 0.625, 1 - 2 / (e^2|x| + 1)
/// with x's sign above (|x| capped at 9, where tanh rounds to 1); within 3
/// ulp. NaN stays NaN.
template <typename V> PAX_VECTOR_INLINE V fastTanh(V x) {
  V a = absV(x);
  V z = x * x;
  V p = splatT<V>(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  V small = p * z * x + x;
  V capped = a < splatT<V>(9.0f) ? a : splatT<V>(9.0f);
  V big = 1.0f - 2.0f / (fastExp(capped + capped) + 1.0f);
  big = x < splatT<V>(0.0f) ? -big : big;
  V y = a < splatT<V>(0.625f) ? small : big;
  return x != x ? x : y;
}

/// 1 / (1 + e^-x), on fastExp; below x = -80 (a denormal result) in
/// double.
template <typename V> PAX_VECTOR_INLINE V fastSigmoid(V x) {
  V y = 1.0f / (1.0f + fastExp(-x));
  MaskOf<V> deep = x < splatT<V>(-80.0f);
  if (anyLane(deep))
    for (int i = 0; i < VecTraits<V>::lanes; ++i)
      if (deep[i])
        y[i] = float(1 / (1 + std::exp(-double(x[i]))));
  return y;
}

/// erf as the rational approximation Eigen and XLA use for f32: x * P(x^2)
/// / Q(x^2) on x clamped to [-4, 4], within 5e-7 of erf.
template <typename V> PAX_VECTOR_INLINE V fastErf(V v) {
  V lo = splatT<V>(-4.0f), hi = splatT<V>(4.0f);
  V x = v < lo ? lo : v; // NaN compares false and stays NaN
  x = x > hi ? hi : x;
  V x2 = x * x;
  V p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  V q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  return x * p / q;
}

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_VECTORMATH_H
