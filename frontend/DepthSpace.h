//===- DepthSpace.h - DepthToSpace and SpaceToDepth as layout ops -*- C++
//-*-===//
//
// DepthToSpace and SpaceToDepth move blocks between the channels and the
// spatial dims: each is a reshape, a transpose and a reshape (ONNX's own
// definition), written as those nodes before import so that the moves are
// split and differentiated as layout ops.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// Replaces each DepthToSpace and SpaceToDepth node of \p model's graph
/// (default-domain opset \p opset) by its reshapes and transpose. Errors
/// name \p path and the node: an input of unknown or wrong rank, channels
/// or spatial dims the block size does not divide, an unknown mode.
llvm::Error lowerDepthSpace(llvm::StringRef path, onnx::ModelProto &model,
                            int64_t opset);

} // namespace pax
