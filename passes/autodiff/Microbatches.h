//===- Microbatches.h - A training step's batch in microbatches -*- C++ -*-===//
//
// A training step over a global batch that does not fit a device runs its
// batch as M microbatches, one after another, with the gradients
// accumulated (paxc --mode=train --loss=... --microbatches=M).
//
// splitMicrobatches() rewrites the forward program (the loss appended,
// before autodiff): every op with a sample dim becomes M copies over 1/M of
// it, each reading slice k of the values that carry the sample dim (graph
// inputs are sliced by `slice` ops); a result reduced over the sample dim
// (the loss's mean, a sum) becomes one `mean` or `sum` of the M copies'.
// An op that reads every sample of such a value (a lookup into the batch
// dim) reads the copies concatenated, and runs once.
// Autodiff then differentiates each copy and sums every weight's gradient
// over the copies, microbatch 0's first; the optimizer applies the sum once.
//
// orderMicrobatches() (after autodiff and the optimizer) orders the ops so
// that microbatch k's forward and backward both run before microbatch
// k + 1's forward: a plan's buffers, placed by liveness, then hold one
// microbatch's activations at a time.
//
// A statistic over the batch (batch norm's mean and variance) is a
// reduction over the sample dim: the mean of the copies' partial means is
// the full batch's, so the step computes what the full batch does, but
// every microbatch runs up to it before any goes on. An op that pairs the
// batch's samples with each other (two of its dims carry the batch: a
// contrastive loss) is refused.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace pax {

/// Splits \p m's batch into \p count microbatches (1: nothing changes).
/// Errors name the op whose sample dim \p count does not divide, a result
/// other than a reduction over the sample dim that carries it, or a
/// reduction over it that does not sum.
llvm::Error splitMicrobatches(Module &m, int64_t count);

/// An inference's batch in \p count microbatches (a pipelined plan's): as
/// splitMicrobatches, and a result that carries the sample dim is the
/// copies' results concatenated.
llvm::Error splitInferenceBatch(Module &m, int64_t count);

/// Orders \p f's ops by microbatch (an op's attribute `microbatch`; an op
/// without one goes with the latest microbatch its operands come from),
/// keeping program order among equals: microbatch 0's forward and backward
/// first. No-op without microbatches.
void orderMicrobatches(Func &f);

} // namespace pax
