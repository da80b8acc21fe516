//===- Order.h - Ops ordered by a key, dependences kept ---------*- C++ -*-===//
//
// Passes that schedule a program (microbatches one after another, a
// pipeline's passes) give each op a key and reorder the ops: among the ops
// whose operands are computed, the least key runs first, program order
// breaking ties. Each op's producers are also what such passes derive keys
// from.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/ArrayRef.h"

#include <vector>

namespace pax {

/// Per op of \p f (by index), the indices of the ops whose results it
/// reads, ascending, each once.
std::vector<llvm::SmallVector<size_t, 4>> producersOf(const Func &f);

/// Reorders \p f's ops topologically by \p key (one per op, by index): the
/// ready op of least key first, the earlier in program order among equals.
void orderByKey(Func &f, llvm::ArrayRef<double> key);

} // namespace pax
