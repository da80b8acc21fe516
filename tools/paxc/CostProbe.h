//===- CostProbe.h - The blocks paxc --emit=cost-probe measures -*- C++ -*-===//
//
// A cost probe times device 0's block of every op in every configuration
// the plan search may choose, each distinct block once (codegen's
// emitProbePlan writes the one-device plan; paxrun --write-cost-db times
// it).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/EmitPlan.h"
#include "passes/sharding/ConfigSpace.h"

#include <vector>

namespace pax::paxc {

struct ProbeSet {
  /// In op order; an op computed from constants each time (its results
  /// are read by the blocks after it), any other block once.
  std::vector<ProbeBlock> blocks;
  size_t distinct = 0; ///< distinct block keys
  size_t configs = 0;  ///< configurations over every op
};

/// The blocks of \p m's ops over the configurations \p co allows.
ProbeSet probeBlocks(const Module &m, const ConfigOptions &co);

} // namespace pax::paxc
