//===- ConstTensor.cpp - Host tensors the importer knows the values of ----===//
#include "frontend/ConstTensor.h"

#include <cmath>

namespace pax {

ConstTensor ConstTensor::splat(TensorType type, double v) {
  ConstTensor t;
  t.type = std::move(type);
  if (t.isReal())
    t.reals = {v};
  else
    t.ints = {int64_t(v)};
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
  ints[i] = std::isfinite(v) ? int64_t(v) : 0;
}

std::vector<int64_t> ConstTensor::toInts() const {
  std::vector<int64_t> out(numel());
  for (int64_t i = 0; i < numel(); ++i)
    out[i] = integer(i);
  return out;
}

} // namespace pax
