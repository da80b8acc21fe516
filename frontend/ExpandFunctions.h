//===- ExpandFunctions.h - ONNX ops defined as functions, expanded -------===//
//
// Many ONNX ops are defined by the standard as functions of other ops
// (SoftmaxCrossEntropyLoss, NLLLoss, MeanVarianceNormalization, Range,
// Shrink, ...): their schemas carry the body, fixed or built from the
// node's attributes and input types. A node paxc has no importer for but
// whose schema has such a body is replaced by that body before import (the
// node's inputs, outputs and attributes substituted, the body's own values
// named with a prefix per node), so that it imports as the ops it is made
// of: each an iteration space the search can split, with the kernels and
// gradient rules those ops have.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// Expands, in place and in order, each node of \p model's graph whose op
/// paxc has no importer for (or that asks for what its importer does not
/// produce: LayerNormalization's statistics outputs) and whose schema at
/// the model's opset \p opset
/// defines as a function, again for the nodes of those bodies, until none
/// is left (or a body's op would mean something else at \p opset, which
/// leaves the node as it is). Returns how many nodes were expanded.
unsigned expandFunctionOps(onnx::ModelProto &model, int64_t opset);

} // namespace pax
