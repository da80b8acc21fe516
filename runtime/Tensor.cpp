//===- Tensor.cpp - A host tensor the CPU kernels read and write ----------===//
#include "runtime/Tensor.h"

#include "codegen/plan/PlanFile.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace pax::runtime {

int64_t dtypeBytes(plan::DType dtype) { return planDTypeBytes(dtype); }

bool isFloatDType(plan::DType dtype) {
  return dtype == plan::F32 || dtype == plan::F64 || dtype == plan::F16 ||
         dtype == plan::BF16;
}

Tensor Tensor::zeros(plan::DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = Bytes(size_t(t.bytes()));
  return t;
}

Tensor Tensor::view(plan::DType dtype, std::vector<int64_t> shape,
                    uint8_t *p, bool zero) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = Bytes::view(p, size_t(t.bytes()));
  if (zero && !t.data.empty())
    std::memset(p, 0, t.data.size());
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

/// IEEE half to float, exact.
static float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f,
           man = h & 0x3ff;
  if (exp == 0x1f)
    return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

/// Float to IEEE half, rounding to nearest even.
static uint16_t floatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  if (std::isnan(f))
    return sign | 0x7e00;
  float a = std::fabs(f);
  if (a >= 65520.0f)
    return sign | 0x7c00;
  if (a < 6.103515625e-05f) // subnormal: a multiple of 2^-24
    return sign | uint16_t(std::nearbyint(a * 16777216.0f));
  uint32_t bits = std::bit_cast<uint32_t>(a);
  uint32_t lsb = (bits >> 13) & 1;
  bits += 0xfff + lsb;
  return sign | uint16_t(((bits >> 23) - 112) << 10 | ((bits >> 13) & 0x3ff));
}

/// Float to bfloat16, rounding to nearest even.
static uint16_t floatToBf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f))
    return uint16_t((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

template <typename T> static T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T> static void store(uint8_t *p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

double Tensor::real(int64_t i) const {
  const uint8_t *p = data.data() + i * dtypeBytes(dtype);
  switch (dtype) {
  case plan::F32:
    return load<float>(p);
  case plan::F64:
    return load<double>(p);
  case plan::F16:
    return halfToFloat(load<uint16_t>(p));
  case plan::BF16:
    return std::bit_cast<float>(uint32_t(load<uint16_t>(p)) << 16);
  case plan::U64:
    return double(load<uint64_t>(p));
  default:
    return double(integer(i));
  }
}

int64_t Tensor::integer(int64_t i) const {
  const uint8_t *p = data.data() + i * dtypeBytes(dtype);
  switch (dtype) {
  case plan::I8:
    return load<int8_t>(p);
  case plan::I16:
    return load<int16_t>(p);
  case plan::I32:
    return load<int32_t>(p);
  case plan::I64:
    return load<int64_t>(p);
  case plan::U8:
  case plan::I1:
    return load<uint8_t>(p);
  case plan::U16:
    return load<uint16_t>(p);
  case plan::U32:
    return load<uint32_t>(p);
  case plan::U64:
    return int64_t(load<uint64_t>(p));
  default: {
    double v = real(i);
    if (std::isnan(v))
      return 0;
    if (v >= 9.2233720368547758e18)
      return std::numeric_limits<int64_t>::max();
    if (v <= -9.2233720368547758e18)
      return std::numeric_limits<int64_t>::min();
    return int64_t(v);
  }
  }
}

void Tensor::setReal(int64_t i, double v) {
  uint8_t *p = data.data() + i * dtypeBytes(dtype);
  switch (dtype) {
  case plan::F32:
    return store<float>(p, float(v));
  case plan::F64:
    return store<double>(p, v);
  case plan::F16:
    return store<uint16_t>(p, floatToHalf(float(v)));
  case plan::BF16:
    return store<uint16_t>(p, floatToBf16(float(v)));
  case plan::I1:
    return store<uint8_t>(p, v != 0);
  case plan::U64:
    if (v >= 0)
      return store<uint64_t>(p, v >= 1.8446744073709552e19
                                    ? std::numeric_limits<uint64_t>::max()
                                    : uint64_t(v));
    [[fallthrough]];
  default: {
    int64_t x = 0;
    if (std::isnan(v))
      x = 0;
    else if (v >= 9.2233720368547758e18)
      x = std::numeric_limits<int64_t>::max();
    else if (v <= -9.2233720368547758e18)
      x = std::numeric_limits<int64_t>::min();
    else
      x = int64_t(v);
    return setInteger(i, x);
  }
  }
}

void Tensor::setInteger(int64_t i, int64_t v) {
  uint8_t *p = data.data() + i * dtypeBytes(dtype);
  switch (dtype) {
  case plan::I8:
  case plan::U8:
    return store<uint8_t>(p, uint8_t(v));
  case plan::I1:
    return store<uint8_t>(p, v != 0);
  case plan::I16:
  case plan::U16:
    return store<uint16_t>(p, uint16_t(v));
  case plan::I32:
  case plan::U32:
    return store<uint32_t>(p, uint32_t(v));
  case plan::I64:
  case plan::U64:
    return store<int64_t>(p, v);
  default:
    return setReal(i, double(v));
  }
}

} // namespace pax::runtime
