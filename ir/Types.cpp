//===- Types.cpp - Element and tensor types of the paxc IR ----------------===//
#include "ir/Types.h"

#include "llvm/ADT/StringSwitch.h"

namespace pax {

namespace {
struct DTypeInfo {
  const char *text;
  unsigned bytes;
  bool isFloat;
};
constexpr DTypeInfo kDTypes[] = {
#define PAX_DTYPE(Enum, Text, Bytes, IsFloat) {Text, Bytes, IsFloat},
#include "ir/DTypes.def"
};
} // namespace

llvm::StringRef dtypeName(DType t) { return kDTypes[unsigned(t)].text; }
unsigned dtypeBytes(DType t) { return kDTypes[unsigned(t)].bytes; }
bool isFloat(DType t) { return kDTypes[unsigned(t)].isFloat; }

std::optional<DType> parseDType(llvm::StringRef text) {
  for (unsigned i = 0; i < std::size(kDTypes); ++i)
    if (text == kDTypes[i].text)
      return DType(i);
  return std::nullopt;
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

std::string TensorType::str() const {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  s += dtypeName(elem).str();
  s += ">";
  return s;
}

} // namespace pax
