//===- PeakMemory.h - A program's peak memory per device ------------------===//
//
// The bytes a device holds at the busiest point of a program run in a given
// strategy, as the plan's buffers hold them: each op's result blocks from
// the op until their last reader (returned values to the end), each weight
// block a reader loads for the whole program (one per distinct layout;
// an updated global also in the layout it is kept in), and a moved copy of
// each operand that the producer's layout does not give the reader, while
// that reader runs. Program order is the op order. This is the peak of a
// program (an inference run or a training step with its backward pass and
// updates in it), not the lever-priced step of CostModel's training mode.
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
