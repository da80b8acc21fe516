//===- Elements.h - Reading and writing one element of any type -*- C++ -*-===//
//
// How an element of each plan dtype converts to and from double and int64:
// the one definition the host's Tensor and the CUDA kernels share, so a
// value stored on either side is the same bits. Plain C++ built by the host
// compiler and by nvcc.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_ELEMENTS_H
#define PAX_RUNTIME_ELEMENTS_H

#include "runtime/HostDevice.h"

namespace pax::runtime::elements {

/// The plan's dtypes (plan::DType, same numbers: Tensor.cpp checks).
enum Type : int32_t {
  F32 = 0,
  F64 = 1,
  F16 = 2,
  BF16 = 3,
  I8 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  U8 = 8,
  U16 = 9,
  U32 = 10,
  U64 = 11,
  I1 = 12
};

PAX_HD inline int64_t bytes(int32_t t) {
  switch (t) {
  case F64:
  case I64:
  case U64:
    return 8;
  case F32:
  case I32:
  case U32:
    return 4;
  case F16:
  case BF16:
  case I16:
  case U16:
    return 2;
  default:
    return 1;
  }
}

PAX_HD inline bool isFloat(int32_t t) {
  return t == F32 || t == F64 || t == F16 || t == BF16;
}

template <typename T> PAX_HD inline T load(const uint8_t *p) {
  T v;
  memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T> PAX_HD inline void store(uint8_t *p, T v) {
  memcpy(p, &v, sizeof(T));
}

PAX_HD inline float floatOfBits(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}
PAX_HD inline uint32_t bitsOfFloat(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}

/// IEEE half to float, exact.
PAX_HD inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f,
           man = h & 0x3ff;
  if (exp == 0x1f)
    return floatOfBits(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float v = float(man) * 5.9604644775390625e-08f; // man * 2^-24, exact
    return sign ? -v : v;
  }
  return floatOfBits(sign | ((exp + 112) << 23) | (man << 13));
}

/// Float to IEEE half, rounding to nearest even.
PAX_HD inline uint16_t floatToHalf(float f) {
  uint32_t x = bitsOfFloat(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  if (f != f)
    return sign | 0x7e00;
  float a = fabsf(f);
  if (a >= 65520.0f)
    return sign | 0x7c00;
  if (a < 6.103515625e-05f) // subnormal: a multiple of 2^-24
    return sign | uint16_t(nearbyintf(a * 16777216.0f));
  uint32_t bits = bitsOfFloat(a);
  uint32_t lsb = (bits >> 13) & 1;
  bits += 0xfff + lsb;
  return sign | uint16_t(((bits >> 23) - 112) << 10 | ((bits >> 13) & 0x3ff));
}

/// Float to bfloat16, rounding to nearest even.
PAX_HD inline uint16_t floatToBf16(float f) {
  uint32_t x = bitsOfFloat(f);
  if (f != f)
    return uint16_t((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

/// A double as int64: truncated toward zero, saturated, NaN as 0.
PAX_HD inline int64_t saturate(double v) {
  if (v != v)
    return 0;
  if (v >= 9.2233720368547758e18)
    return INT64_MAX;
  if (v <= -9.2233720368547758e18)
    return INT64_MIN;
  return int64_t(v);
}

PAX_HD inline int64_t readInteger(const uint8_t *base, int32_t t, int64_t i);

/// Element \p i of type \p t at \p base as a double (integers convert).
PAX_HD inline double readReal(const uint8_t *base, int32_t t, int64_t i) {
  const uint8_t *p = base + i * bytes(t);
  switch (t) {
  case F32:
    return load<float>(p);
  case F64:
    return load<double>(p);
  case F16:
    return halfToFloat(load<uint16_t>(p));
  case BF16:
    return floatOfBits(uint32_t(load<uint16_t>(p)) << 16);
  case U64:
    return double(load<uint64_t>(p));
  default:
    return double(readInteger(base, t, i));
  }
}

/// Element \p i as an int64 (floats truncate toward zero, NaN reads 0).
PAX_HD inline int64_t readInteger(const uint8_t *base, int32_t t, int64_t i) {
  const uint8_t *p = base + i * bytes(t);
  switch (t) {
  case I8:
    return load<int8_t>(p);
  case I16:
    return load<int16_t>(p);
  case I32:
    return load<int32_t>(p);
  case I64:
    return load<int64_t>(p);
  case U8:
  case I1:
    return load<uint8_t>(p);
  case U16:
    return load<uint16_t>(p);
  case U32:
    return load<uint32_t>(p);
  case U64:
    return int64_t(load<uint64_t>(p));
  default:
    return saturate(readReal(base, t, i));
  }
}

PAX_HD inline void writeInteger(uint8_t *base, int32_t t, int64_t i,
                                int64_t v);

/// Stores \p v at \p i, converted to the type (integers truncate toward
/// zero and saturate, NaN stores 0; I1 stores v != 0).
PAX_HD inline void writeReal(uint8_t *base, int32_t t, int64_t i, double v) {
  uint8_t *p = base + i * bytes(t);
  switch (t) {
  case F32:
    return store<float>(p, float(v));
  case F64:
    return store<double>(p, v);
  case F16:
    return store<uint16_t>(p, floatToHalf(float(v)));
  case BF16:
    return store<uint16_t>(p, floatToBf16(float(v)));
  case I1:
    return store<uint8_t>(p, v != 0);
  case U64:
    if (v >= 0)
      return store<uint64_t>(p, v >= 1.8446744073709552e19 ? UINT64_MAX
                                                            : uint64_t(v));
    return writeInteger(base, t, i, saturate(v));
  default:
    return writeInteger(base, t, i, saturate(v));
  }
}

/// Stores \p v at \p i, converted to the type (integers wrap).
PAX_HD inline void writeInteger(uint8_t *base, int32_t t, int64_t i,
                                int64_t v) {
  uint8_t *p = base + i * bytes(t);
  switch (t) {
  case I8:
  case U8:
    return store<uint8_t>(p, uint8_t(v));
  case I1:
    return store<uint8_t>(p, v != 0);
  case I16:
  case U16:
    return store<uint16_t>(p, uint16_t(v));
  case I32:
  case U32:
    return store<uint32_t>(p, uint32_t(v));
  case I64:
  case U64:
    return store<int64_t>(p, v);
  default:
    return writeReal(base, t, i, double(v));
  }
}

} // namespace pax::runtime::elements

#endif // PAX_RUNTIME_ELEMENTS_H
