//===- OnnxOps.h - The registry of ONNX op importers ----------------------===//
#pragma once

#include "frontend/Importer.h"

namespace pax {

#define PAX_ONNX_OP(OpType, ImportFn, WeightSlots)                             \
  llvm::Error ImportFn(NodeContext &ctx);
#include "frontend/OnnxOps.def"

/// The importer of \p opType in \p domain, or nullptr when paxc has none.
OpImportFn findOpImporter(llvm::StringRef domain, llvm::StringRef opType);
/// True when input \p input of \p opType carries a weight.
bool isWeightSlot(llvm::StringRef opType, unsigned input);
/// True for Add/Sub/Mul/Div: a constant vector operand is a bias or scale.
bool isAffineOpType(llvm::StringRef opType);

// Shared helpers for importers.

/// The iteration space `d0..dn` over \p shape, all parallel.
llvm::SmallVector<IterDim, 6> parallelSpace(llvm::ArrayRef<int64_t> shape);
/// The identity map `[d0, ..., dn]` for the first \p rank dims.
AccessMap identityMap(unsigned rank);
/// A map for \p shape, aligned to the trailing dims of a space of rank
/// \p spaceRank (numpy broadcasting): size-1 dims read `_` where the space
/// is wider.
AccessMap broadcastMap(llvm::ArrayRef<int64_t> shape,
                       llvm::ArrayRef<int64_t> space);
/// The numpy broadcast of \p a and \p b, or an error naming both shapes.
llvm::Expected<llvm::SmallVector<int64_t, 4>>
broadcastShapes(const NodeContext &ctx, llvm::ArrayRef<int64_t> a,
                llvm::ArrayRef<int64_t> b);
/// Copies every ONNX attribute of the node that has a plain value onto \p op
/// (ints, floats, strings and their lists), so kernels see them.
void copyAttributes(const NodeContext &ctx, Op &op);
/// Reads a list of ints given as attribute \p attr (older opsets) or as
/// input \p input (newer ones); empty when neither is present.
llvm::Expected<std::vector<int64_t>>
intsFromAttrOrInput(NodeContext &ctx, llvm::StringRef attr, unsigned input);
/// Output size and padding of one spatial dim of a conv or pool.
struct WindowDim {
  int64_t out = 0, padBegin = 0, padEnd = 0;
};
/// Output sizes and pads of a conv or pool (pads, auto_pad, ceil_mode).
llvm::Expected<llvm::SmallVector<WindowDim, 3>>
windowDims(NodeContext &ctx, llvm::ArrayRef<int64_t> in,
           llvm::ArrayRef<int64_t> kernel, llvm::ArrayRef<int64_t> strides,
           llvm::ArrayRef<int64_t> dilations, bool ceilMode);
/// Builds a data-movement op (reshape, transpose, ...) from input 0.
llvm::Error finishReshape(NodeContext &ctx, llvm::ArrayRef<int64_t> outShape);

} // namespace pax
