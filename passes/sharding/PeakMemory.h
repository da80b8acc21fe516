//===- PeakMemory.h - A program's peak memory per device ------------------===//
//
// The bytes a device holds at the busiest point of a program run in a given
// strategy, as the plan's buffers hold them: each op's result blocks from
// the op until their last reader (returned values to the end); each box of
// a weight or an input that a device reads (the box its block of the
// reader's iteration space reaches, one buffer per distinct box, as the
// plan loads them), for the whole program (a training step's from its
// first reader to its last, but for the blocks of updated globals kept on
// the device, which the plan carries from step to step; an updated global
// a reader must gather, in the blocks it is kept in); and the buffers of each
// operand's moves while that reader runs: one per collective of the resharding
// plan, each step's and the one before it held at once, each operand's last
// kept for the op, a source that only moves read freed once its last move has
// read it. Program order is the op order. This is the peak of a program (an
// inference run or a training step with its backward pass and updates in
// it), not the lever-priced step of CostModel's training mode.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "passes/sharding/ConfigSpace.h"

namespace pax {

/// The largest per-device peak of \p m's program with \p configs (and op
/// \p offsets, empty: all from device 0) on \p devices devices,
/// \p perNode to a node.
double programPeakBytes(const Module &m, llvm::ArrayRef<Config> configs,
                        llvm::ArrayRef<int64_t> offsets, int64_t devices,
                        int64_t perNode);

} // namespace pax
