//===- Zero.h - ZeRO stages of a training plan ----------------------------===//
//
// ZeRO (Rajbhandari et al.) as configurations of the training step's own
// ops. A parameter at stage 1 or more has the ops of its update (those
// appendOptimizer marks `parameter = NAME`) split over the plan's devices
// along the parameter's dims: its optimizer state lives in those shards
// (stage 1), its gradient arrives there by a reduce-scatter of the partial
// sums instead of an all-reduce, and its new value is all-gathered to where
// the next step reads it. Stage 2 also splits the sums that accumulate the
// gradient over microbatches, so that each microbatch's share is
// reduce-scattered as it comes and no device holds the whole gradient.
// Stage 3 keeps the new value in its shards (`zero = 3` on the update):
// every reader gathers it before use (nextStepReaders), and the gathered
// copy dies after that reader.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "passes/sharding/ConfigSpace.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

namespace pax {

/// The configuration ZeRO gives \p op, an op over a parameter's shape: its
/// dims split, in order, by the largest factors of \p devices that divide
/// them (the product \p devices where the shape allows), replica dims not.
Config zeroConfig(const Op &op, int64_t devices);

/// Gives each parameter's update ops (and at stage 2 or more, the sums of
/// its gradient) the configuration zeroConfig and the attribute `zero`,
/// the stage \p stageOf returns for the parameter (0: left alone).
llvm::Error applyZero(Module &m, int64_t devices,
                      llvm::function_ref<unsigned(const Global &)> stageOf);

} // namespace pax
