//===- CarryUpdates.h - Training updates kept on the devices ---*- C++ -*-===//
//
// A training step's program keeps on its device each weight block it
// updates where it loads that block: the load's buffer becomes persistent
// (alive for the whole program, in the arena from step to step), the
// update (output `update/NAME` bound to the same box) is computed in it
// (the optimizer's last op, a pointwise kernel writing the whole block and
// reading the weight, like the rest of its fused group, only at the points
// it writes, after which nothing reads the weight; what read the update
// reads the buffer) or copied into it by a slice at the program's end, and
// the buffer is listed in the program's `carried`, so that the next step's
// load is skipped (RunOptions::carryWeights).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace pax {

/// Carries \p prog's updates as above (before its buffers are planned).
/// \p names: the program's output names, by index.
void carryUpdates(plan::DeviceProgram &prog, llvm::ArrayRef<std::string> names);

} // namespace pax
