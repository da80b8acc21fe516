//===- ControlFlow.h - Ifs inlined, Loops unrolled, when known -*- C++ -*-===//
//
// An If whose condition is constant (an initializer, a Constant, a value
// computed from them and static shapes, or an input bound with --bind)
// takes one branch every time: its nodes replace the If in the graph, their
// names prefixed with the If's (the branch may read the outer graph's
// values, which keep their names; its initializers become Constant nodes),
// the branch's outputs renamed to the If's. A Loop whose trip count is
// known (and whose condition, where it has one, is known at every
// iteration: passed through, or computed from constants) is unrolled: its
// body once per iteration (at most 1024, 2^16 nodes in all), the
// loop-carried values threaded through, each scan output the Concat of its
// iterations' values along a new first axis. Inlined branches and bodies
// holding Ifs and Loops are inlined in turn. Control flow decided at run
// time is an error naming the node and the value (and the graph inputs it
// is computed from, which --bind can freeze): paxc has no importer for
// control flow.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// Inlines each If of \p model's graph (default-domain opset \p opset)
/// with a constant condition and unrolls each Loop with a known trip
/// count; errors name \p path and the node (a branch or body missing, its
/// outputs not the node's, control flow decided at run time).
llvm::Error inlineControlFlow(llvm::StringRef path, onnx::ModelProto &model,
                              int64_t opset);

} // namespace pax
