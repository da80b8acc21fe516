//===- Tensor.cpp - A host tensor the CPU kernels read and write ----------===//
#include "runtime/Tensor.h"

#include "codegen/plan/PlanFile.h"
#include "runtime/Elements.h"

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

#define PAX_DTYPE_SAME(Name)                                                   \
  static_assert(int(plan::Name) == int(elements::Name),                        \
                "elements::Type numbers the plan's dtypes");
PAX_DTYPE_SAME(F32)
PAX_DTYPE_SAME(F64)
PAX_DTYPE_SAME(F16)
PAX_DTYPE_SAME(BF16)
PAX_DTYPE_SAME(I8)
PAX_DTYPE_SAME(I16)
PAX_DTYPE_SAME(I32)
PAX_DTYPE_SAME(I64)
PAX_DTYPE_SAME(U8)
PAX_DTYPE_SAME(U16)
PAX_DTYPE_SAME(U32)
PAX_DTYPE_SAME(U64)
PAX_DTYPE_SAME(I1)
#undef PAX_DTYPE_SAME

double Tensor::real(int64_t i) const {
  return elements::readReal(data.data(), dtype, i);
}

int64_t Tensor::integer(int64_t i) const {
  return elements::readInteger(data.data(), dtype, i);
}

void Tensor::setReal(int64_t i, double v) {
  elements::writeReal(data.data(), dtype, i, v);
}

void Tensor::setInteger(int64_t i, int64_t v) {
  elements::writeInteger(data.data(), dtype, i, v);
}

} // namespace pax::runtime
