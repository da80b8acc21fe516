//===- ControlFlow.h - If nodes with a known condition, inlined -*- C++ -*-===//
//
// An If whose condition is constant (an initializer, a Constant, a value
// computed from them and static shapes, or an input bound with --bind)
// takes one branch every time: its nodes replace the If in the graph, their
// names prefixed with the If's (the branch may read the outer graph's
// values, which keep their names; its initializers become Constant nodes),
// the branch's outputs renamed to the If's. Inlined branches holding Ifs
// are inlined in turn. An If whose condition is computed at run time is an
// error naming it and its condition (paxc has no importer for control
// flow).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// Inlines each If of \p model's graph with a constant condition; errors
/// name \p path and the node (a branch missing, its outputs not the If's).
llvm::Error inlineConstantIfs(llvm::StringRef path, onnx::ModelProto &model);

} // namespace pax
