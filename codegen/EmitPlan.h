//===- EmitPlan.h - A module as per-device programs -----------------------===//
//
// Codegen's partition-devices: one program per device. Every compute op runs
// on the devices of its `config` (mixed radix over its split dims, the last
// dim fastest, as passes/sharding/Layout.h numbers them) over its block of
// the iteration space, with local shapes and access maps rebased onto the
// boxes its buffers hold. Every collective op (pax-insert-collectives)
// becomes a plan Exchange (what each device holds before and after, as boxes
// of the global tensor) and a Collective instruction on each device of its
// groups. Weights and inputs are loaded as the boxes their readers need,
// referenced in the source model, not copied. Buffers are planned by
// liveness, weights kept for the whole program.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace pax {

struct PlanOptions {
  /// The ONNX model the weights are read from.
  std::string source;
  /// Per-device memory the cost model predicts (0: unknown).
  double predictedBytes = 0;
  double predictedStepSeconds = 0;
  double simulatedStepSeconds = 0;
  /// A pipelined plan's stages (stages 0: none).
  plan::Pipeline pipeline;
};

/// The plan of \p m. A module with collectives (a `devices` attribute) gives
/// one program per device; any other module one program for one device.
/// Either way the plan also holds the unpartitioned reference program.
llvm::Expected<plan::Plan> emitPlan(const Module &m, const PlanOptions &o);

/// One block to measure: device 0's block of \p op split by \p config.
struct ProbeBlock {
  const Op *op = nullptr;
  llvm::SmallVector<int64_t, 6> config;
  /// An op computed from constants (whole): its results are the model's
  /// values, which the blocks after it read (an exponent computed as 2 - 1
  /// is 1, whose fast path the plan takes too).
  bool constant = false;
};

/// A cost probe: a one-device plan (`probe` set, no reference) that
/// computes each of \p blocks once, in order, each compute carrying its
/// block's cost_key. Constants are read from \p source (the ONNX model),
/// values computed from them are the constant blocks' results;
/// activations, weights and inputs are fills (0.731 for floats, 0 for
/// integers). `paxrun --write-cost-db` times it on the machine that will
/// run the plans.
llvm::Expected<plan::Plan> emitProbePlan(const Module &m,
                                         llvm::ArrayRef<ProbeBlock> blocks,
                                         llvm::StringRef source);

} // namespace pax
