//===- ConstTensor.h - Host tensors the importer knows the values of ------===//
#pragma once

#include "runtime/Elements.h"

#include <cstdint>

#include "ir/Types.h"

#include <vector>

namespace pax {

/// A constant with known values: shape tensors, axes, folded results, small
/// initializers. Integers (and booleans) are held as int64, floats as double;
/// a splat holds one value for any number of elements, so a 7-billion
/// element `ConstantOfShape` costs nothing.
struct ConstTensor {
  TensorType type;
  std::vector<int64_t> ints; ///< non-float dtypes
  std::vector<double> reals; ///< float dtypes

  bool isReal() const { return isFloat(type.elem); }
  /// One stored value stands for every element.
  bool isSplat() const { return count() == 1 && type.numel() != 1; }
  size_t count() const { return isReal() ? reals.size() : ints.size(); }
  int64_t numel() const { return type.numel(); }

  double real(int64_t i) const {
    size_t k = isSplat() ? 0 : size_t(i);
    return isReal() ? reals[k] : double(ints[k]);
  }
  /// Element \p i as an integer; a real out of int64's range saturates
  /// (NaN is 0) rather than being undefined.
  int64_t integer(int64_t i) const {
    size_t k = isSplat() ? 0 : size_t(i);
    return isReal() ? runtime::elements::saturate(reals[k]) : ints[k];
  }

  static ConstTensor splat(TensorType type, double v);
  static ConstTensor ofInts(DType elem, llvm::ArrayRef<int64_t> shape,
                            llvm::ArrayRef<int64_t> values);
  /// A zero-filled tensor of \p type with numel() stored values.
  static ConstTensor zeros(TensorType type);
  /// Stores \p v at element \p i (converting to the dtype's domain).
  void set(int64_t i, double v);
  /// The values as a list of int64 (shape tensors, axes).
  std::vector<int64_t> toInts() const;
};

} // namespace pax
