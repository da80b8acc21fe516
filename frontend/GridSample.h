//===- GridSample.h - GridSample as gathers and weighted sums ---*- C++ -*-===//
//
// GridSample (4-D: X [N, C, H, W], grid [N, Ho, Wo, 2]) samples X at the
// grid's normalized coordinates. It is written before import as ONNX ops
// paxc imports, ONNX's reference definition step by step: each coordinate
// denormalized (align_corners), rounded (nearest), moved inside (border:
// clamped; reflection: reflected about the borders); the taps (nearest 1,
// linear 2, cubic 4 per axis, Keys' a = -0.75) read from X flattened to
// [N, C, H*W] by GatherElements through computed indices, each weighted
// and, with zeros padding, masked where it falls outside. So it splits
// over the batch and the channels and differentiates (through X and the
// grid's weights) like the gathers and products it is made of.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// Replaces each GridSample node of \p model's graph (default-domain
/// opset \p opset). Errors name \p path and the node: shapes that are not
/// static, spatial ranks other than 2, unknown modes.
llvm::Error lowerGridSamples(llvm::StringRef path, onnx::ModelProto &model,
                             int64_t opset);

} // namespace pax
