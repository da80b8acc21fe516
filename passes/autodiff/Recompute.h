//===- Recompute.h - Activations computed again in the backward pass ------===//
//
// A training step keeps every forward result its backward pass reads, from
// the forward op that makes it to the backward op that last reads it: at
// the backward pass's start a device holds every layer's activations.
// Recomputing a result instead (Chen et al.'s gradient checkpointing, the
// `--recompute` of paxc --mode=train --loss) frees it after its forward
// readers and computes it again right before its first backward reader,
// from the results that are kept.
//
// recomputeInBackward() rewrites a training step (after autodiff and the
// optimizer): every backward op that reads a result of a forward op the
// predicate chooses reads a copy of that op instead, made just before it
// (and the copies of the chosen ops that copy reads, in turn). A copy is
// the same op on the same operands, so its results are bit for bit the
// forward's (random ops draw by their name, the step and the element).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace pax {

/// \p f's first \p forwardOps ops are the forward pass; the rest read the
/// results of the forward ops \p recompute chooses from copies made right
/// before their first reader. Returns the number of ops copied.
size_t recomputeInBackward(Func &f, size_t forwardOps,
                           llvm::function_ref<bool(const Op &)> recompute);

} // namespace pax
