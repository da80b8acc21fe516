//===- ConstTensor.cpp - Host tensors the importer knows the values of ----===//
#include "frontend/ConstTensor.h"

#include <cmath>
#include <limits>

namespace pax {

/// \p v as int64: truncated toward zero and saturated, NaN as 0 (as the
/// runtime casts).
static int64_t toInt(double v) {
  constexpr double limit = 9223372036854775808.0; // 2^63
  if (std::isnan(v))
    return 0;
  if (v >= limit)
    return std::numeric_limits<int64_t>::max();
  if (v < -limit)
    return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}

ConstTensor ConstTensor::splat(TensorType type, double v) {
  ConstTensor t;
  t.type = std::move(type);
  if (t.isReal())
    t.reals = {v};
  else
    t.ints = {toInt(v)};
  return t;
}

ConstTensor ConstTensor::ofInts(DType elem, llvm::ArrayRef<int64_t> shape,
                                llvm::ArrayRef<int64_t> values) {
  ConstTensor t;
  t.type.elem = elem;
  t.type.shape.assign(shape.begin(), shape.end());
  if (t.isReal())
    t.reals.assign(values.begin(), values.end());
  else
    t.ints.assign(values.begin(), values.end());
  return t;
}

ConstTensor ConstTensor::zeros(TensorType type) {
  ConstTensor t;
  t.type = std::move(type);
  if (t.isReal())
    t.reals.assign(t.type.numel(), 0.0);
  else
    t.ints.assign(t.type.numel(), 0);
  return t;
}

void ConstTensor::set(int64_t i, double v) {
  if (isReal()) {
    reals[i] = type.elem == DType::F32 ? double(float(v)) : v;
    return;
  }
  if (type.elem == DType::I1) {
    ints[i] = v != 0;
    return;
  }
  ints[i] = toInt(v);
}

std::vector<int64_t> ConstTensor::toInts() const {
  std::vector<int64_t> out(numel());
  for (int64_t i = 0; i < numel(); ++i)
    out[i] = integer(i);
  return out;
}

} // namespace pax
