//===- FuseAttention.h - Scaled-dot-product attention as one op -*- C++ -*-===//
//
// Exporters write attention as a chain of ops: Q.K^T (a matmul), scalar
// scales (on the scores, or on Q and K), additive masks and `where` masks,
// a softmax over the keys, an optional Where(IsNaN(p), 0, p) guard, and
// P.V. fuseAttention replaces each such chain by one `attention` op
// (OpKinds.def) whose scores are never stored. Everything is read off the
// ops' access maps: the scores' dims are the matmul's batch dims, the
// queries and the keys; the head dims become whole (`*`) reads.
//
// A chain is left as it is when one of its intermediate tensors has another
// reader or is returned (the probabilities as an output), when a scale is
// not a constant scalar, when a mask depends on a trainable parameter (a
// learned position bias needs its gradient), or when a map is not a plain
// permutation of the scores' dims.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

namespace pax {

/// Replaces every attention chain of \p m by one `attention` op; returns
/// how many it replaced. The ops the chains leave dead are removed.
unsigned fuseAttention(Module &m);

} // namespace pax
