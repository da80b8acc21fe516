//===- VectorMath.h - f32 functions on four lanes at once ------*- C++ -*-===//
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

/// Four floats, and four 32-bit integers (lane masks: -1 true, 0 false).
typedef float V4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));

inline V4 splat(float v) { return V4{v, v, v, v}; }

inline V4 loadV4(const float *p) {
  V4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void storeV4(float *p, V4 v) { std::memcpy(p, &v, sizeof(v)); }

/// True when every lane of \p m is set.
inline bool allLanes(I4 m) { return (m[0] & m[1] & m[2] & m[3]) != 0; }

/// |x|, by clearing the sign bit.
inline V4 absV4(V4 x) {
  I4 bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits &= 0x7fffffff;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

/// e^x: x = j ln 2 + r with |r| <= ln 2 / 2 (ln 2 split in two for the
/// reduction), e^r by Cephes' degree-7 polynomial, times 2^j through the
/// exponent bits; within 2 ulp. Lanes outside [-87, 88] (where 2^j or the
/// result leaves the normal range) and NaN lanes are std::exp in double.
inline V4 fastExp(V4 x) {
  I4 inRange = (x >= splat(-87.0f)) & (x <= splat(88.0f));
  V4 xc = inRange ? x : splat(0.0f);
  // Round to nearest through the 1.5 * 2^23 trick (|x log2 e| < 2^22).
  const V4 magic = splat(12582912.0f);
  V4 j = (xc * 1.44269504088896341f + magic) - magic;
  V4 r = xc - j * 0.693359375f;
  r = r - j * -2.12194440e-4f;
  V4 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  V4 y = p * (r * r) + r + 1.0f;
  I4 e = (__builtin_convertvector(j, I4) + 127) << 23;
  V4 scale;
  std::memcpy(&scale, &e, sizeof(scale));
  y *= scale;
  if (!allLanes(inRange))
    for (int i = 0; i < 4; ++i)
      if (!inRange[i])
        y[i] = float(std::exp(double(x[i])));
  return y;
}

/// tanh: Cephes' odd polynomial below |x| = 0.625, 1 - 2 / (e^2|x| + 1)
/// with x's sign above (|x| capped at 9, where tanh rounds to 1); within 3
/// ulp. NaN stays NaN.
inline V4 fastTanh(V4 x) {
  V4 a = absV4(x);
  V4 z = x * x;
  V4 p = splat(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  V4 small = p * z * x + x;
  V4 capped = a < splat(9.0f) ? a : splat(9.0f);
  V4 big = 1.0f - 2.0f / (fastExp(capped + capped) + 1.0f);
  big = x < splat(0.0f) ? -big : big;
  V4 y = a < splat(0.625f) ? small : big;
  return x != x ? x : y;
}

/// 1 / (1 + e^-x), on fastExp; below x = -80 (a denormal result) in
/// double.
inline V4 fastSigmoid(V4 x) {
  V4 y = 1.0f / (1.0f + fastExp(-x));
  I4 deep = x < splat(-80.0f);
  if (deep[0] | deep[1] | deep[2] | deep[3])
    for (int i = 0; i < 4; ++i)
      if (deep[i])
        y[i] = float(1 / (1 + std::exp(-double(x[i]))));
  return y;
}

/// erf as the rational approximation Eigen and XLA use for f32: x * P(x^2)
/// / Q(x^2) on x clamped to [-4, 4], within 5e-7 of erf.
inline V4 fastErf(V4 v) {
  V4 lo = splat(-4.0f), hi = splat(4.0f);
  V4 x = v < lo ? lo : v; // NaN compares false and stays NaN
  x = x > hi ? hi : x;
  V4 x2 = x * x;
  V4 p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  V4 q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  return x * p / q;
}

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_VECTORMATH_H
