//===- OpRewrites.h - Small ONNX ops written as other ONNX ops -*- C++ -*-===//
//
// Ops whose definition is a few ops paxc already imports, written as
// those ops before import (GraphBuilder's rewriteNodes), so they split,
// differentiate and run like them:
//
//   Hardmax(x, axis)        = Cast(Equal(iota along axis, ArgMax(x, axis)))
//                             (the first maximum, as ONNX's reference)
//   EyeLike(x, k, dtype)    = a Constant of x's shape, ones on diagonal k
//   ThresholdedRelu(x, a)   = Where(Greater(x, a), x, 0)
//   OneHot(i, depth, v)     = Where(Equal(i along a new axis, iota), v[1],
//                             v[0]) (depth constant)
//   Shrink(x, lambd, bias)  = Where(x > lambd, x - bias,
//                                   Where(x < -lambd, x + bias, 0))
//   ReduceLogSum(x)         = Log(ReduceSum(x)) over the same axes
//   Compress(x, c, axis)    = Gather(x, indices where c holds, axis)
//                             (c constant: the output's shape depends on it)
//   ReverseSequence(x, l)   = GatherElements(x, per entry reversed time
//                             indices) (l constant)
//   Pad(x, edge | reflect | wrap) = a Gather per padded axis through
//                             constant source positions
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// Rewrites the ops above in \p model (default-domain opset \p opset);
/// errors name \p path and the node (shapes that are not known, inputs
/// that must be constant and are not, Hardmax below opset 13 on an axis
/// other than the last).
llvm::Error rewriteSmallOps(llvm::StringRef path, onnx::ModelProto &model,
                            int64_t opset);

} // namespace pax
