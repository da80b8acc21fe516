//===- Types.h - Element and tensor types of the paxc IR ------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace pax {

/// Element types. The spelling is the IR text name (`f32`, `i64`, `i1`).
enum class DType : uint8_t {
#define PAX_DTYPE(Enum, Text, Bytes, IsFloat) Enum,
#include "ir/DTypes.def"
};

/// The IR text name of \p t, e.g. "f32".
llvm::StringRef dtypeName(DType t);
/// Size of one element in bytes.
unsigned dtypeBytes(DType t);
/// True for floating-point element types.
bool isFloat(DType t);
/// Parses an IR text name; std::nullopt when unknown.
std::optional<DType> parseDType(llvm::StringRef text);

/// Largest extent or element count paxc accepts: 2^48. Larger dims come from
/// broken models and would overflow cost arithmetic.
inline constexpr int64_t kMaxExtent = int64_t(1) << 48;

/// A statically shaped tensor type: `tensor<2x3xf32>`, `tensor<f32>` (scalar).
struct TensorType {
  DType elem = DType::F32;
  llvm::SmallVector<int64_t, 4> shape;

  unsigned rank() const { return shape.size(); }
  /// Number of elements (1 for a scalar).
  int64_t numel() const;
  /// Size in bytes.
  int64_t bytes() const { return numel() * dtypeBytes(elem); }
  /// IR text, e.g. "tensor<2x3xf32>".
  std::string str() const;

  friend bool operator==(const TensorType &a, const TensorType &b) {
    return a.elem == b.elem && a.shape == b.shape;
  }
};

/// "2x3x4" (or "scalar" for rank 0), for diagnostics.
std::string shapeStr(llvm::ArrayRef<int64_t> shape);

} // namespace pax
