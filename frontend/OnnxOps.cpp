//===- OnnxOps.cpp - The registry of ONNX op importers --------------------===//
#include "frontend/OnnxOps.h"

#include "llvm/ADT/StringSwitch.h"

namespace pax {

namespace {
struct OnnxOpInfo {
  const char *opType;
  OpImportFn fn;
  unsigned weightSlots;
};
constexpr OnnxOpInfo kOnnxOps[] = {
#define PAX_ONNX_OP(OpType, ImportFn, WeightSlots)                             \
  {#OpType, ImportFn, WeightSlots},
#include "frontend/OnnxOps.def"
};

const OnnxOpInfo *findInfo(llvm::StringRef opType) {
  for (const auto &info : kOnnxOps)
    if (opType == info.opType)
      return &info;
  return nullptr;
}
} // namespace

OpImportFn findOpImporter(llvm::StringRef domain, llvm::StringRef opType) {
  if (!domain.empty() && domain != "ai.onnx")
    return nullptr;
  const OnnxOpInfo *info = findInfo(opType);
  return info ? info->fn : nullptr;
}

bool isWeightSlot(llvm::StringRef opType, unsigned input) {
  const OnnxOpInfo *info = findInfo(opType);
  return info && input < 32 && (info->weightSlots >> input) & 1;
}

bool isAffineOpType(llvm::StringRef opType) {
  return opType == "Add" || opType == "Sub" || opType == "Mul" ||
         opType == "Div";
}

llvm::SmallVector<IterDim, 6> parallelSpace(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<IterDim, 6> space;
  for (size_t i = 0; i < shape.size(); ++i)
    space.push_back({"d" + std::to_string(i), std::max<int64_t>(shape[i], 1),
                     IterKind::Parallel});
  return space;
}

AccessMap identityMap(unsigned rank) {
  AccessMap m;
  for (unsigned i = 0; i < rank; ++i)
    m.push_back(AccessExpr::dim(i));
  return m;
}

AccessMap broadcastMap(llvm::ArrayRef<int64_t> shape,
                       llvm::ArrayRef<int64_t> space) {
  AccessMap m;
  size_t lead = space.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    m.push_back(shape[i] == 1 && space[lead + i] != 1
                    ? AccessExpr::broadcast()
                    : AccessExpr::dim(unsigned(lead + i)));
  return m;
}

llvm::Expected<llvm::SmallVector<int64_t, 4>>
broadcastShapes(const NodeContext &ctx, llvm::ArrayRef<int64_t> a,
                llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t, 4> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t y = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (x != y && x != 1 && y != 1)
      return ctx.error("shapes " + shapeStr(a) + " and " + shapeStr(b) +
                       " do not broadcast (dim " + llvm::Twine(i) + ": " +
                       llvm::Twine(x) + " vs " + llvm::Twine(y) + ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

void copyAttributes(const NodeContext &ctx, Op &op) {
  for (const auto &a : ctx.proto().attribute()) {
    switch (a.type()) {
    case onnx::AttributeProto::INT:
      op.attrs[a.name()] = int64_t(a.i());
      break;
    case onnx::AttributeProto::FLOAT:
      op.attrs[a.name()] = a.f();
      break;
    case onnx::AttributeProto::STRING:
      op.attrs[a.name()] = a.s();
      break;
    case onnx::AttributeProto::INTS:
      op.attrs[a.name()] =
          std::vector<int64_t>(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      if (a.floats_size())
        op.attrs[a.name()] =
            std::vector<float>(a.floats().begin(), a.floats().end());
      break;
    default:
      break;
    }
  }
}

llvm::Expected<std::vector<int64_t>>
intsFromAttrOrInput(NodeContext &ctx, llvm::StringRef attr, unsigned input) {
  if (ctx.attr(attr))
    return ctx.attrInts(attr);
  if (!ctx.hasInput(input))
    return std::vector<int64_t>();
  auto c = ctx.requireConstant(input, attr);
  if (!c)
    return c.takeError();
  return (*c)->toInts();
}

} // namespace pax
