//===- Tensor.h - A host tensor for the CPU kernels ------------*- C++ -*-===//
#ifndef PAX_RUNTIME_TENSOR_H
#define PAX_RUNTIME_TENSOR_H

#include "codegen/plan/Plan.pb.h"

#include <cstdint>
#include <vector>

namespace pax::runtime {

/// Bytes one element of \p dtype takes (I1 takes a byte).
int64_t dtypeBytes(plan::DType dtype);

/// True for F32, F64, F16 and BF16.
bool isFloatDType(plan::DType dtype);

/// A dense row-major tensor in host memory.
struct Tensor {
  plan::DType dtype = plan::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  /// A zero-filled tensor of \p shape.
  static Tensor zeros(plan::DType dtype, std::vector<int64_t> shape);

  /// Number of elements (1 for a scalar).
  int64_t numel() const;
  /// Bytes the elements take.
  int64_t bytes() const { return numel() * dtypeBytes(dtype); }

  /// Element \p i as a double (any dtype; integers convert).
  double real(int64_t i) const;
  /// Element \p i as an int64 (floats truncate toward zero, NaN reads 0).
  int64_t integer(int64_t i) const;
  /// Stores \p v at \p i, converted to the dtype (integers truncate toward
  /// zero and saturate, NaN stores 0; I1 stores v != 0).
  void setReal(int64_t i, double v);
  /// Stores \p v at \p i, converted to the dtype (integers wrap).
  void setInteger(int64_t i, int64_t v);
};

} // namespace pax::runtime

#endif // PAX_RUNTIME_TENSOR_H
