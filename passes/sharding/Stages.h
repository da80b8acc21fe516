//===- Stages.h - A pipelined plan's stages, placed and ordered -*- C++ -*-===//
//
// A pipelined training plan (paxc --pipeline with a plan) runs each stage's
// ops on its own submesh of the devices, the stages' microbatches on a
// schedule (Pipeline.h):
//
// - markStages() gives the forward program's ops (before
//   splitMicrobatches, whose copies keep it) the attribute `stage` from the
//   layer spans the pipeline search cut. Autodiff gives each backward op its
//   forward op's stage.
// - markForward() tags the ops of the forward program as it stands (the
//   microbatches split, the loss appended, before autodiff): the passes
//   they belong to are forward passes.
// - placeStages() (after autodiff, the optimizer and ZeRO) gives every op
//   without a stage one: the latest stage of the ops it reads (a gradient's
//   sum over the microbatches, its weight's update), else the first stage
//   of the ops that read it (a graph input's microbatch slices); then each
//   op's `offset` is its stage's first device. insertCollectives then moves
//   what crosses stages point to point.
// - orderStages() orders the ops by the schedule: each op belongs to a pass
//   (its stage, its microbatch, forward or backward); the passes run in the
//   order of their start times in simulatePasses (each stage's own order
//   is the schedule's), an op without a microbatch (an update) as soon as
//   what it reads is there, the ops of a pass in program order. Every
//   device runs its ops in this one global order, so both ends of every
//   point-to-point transfer and every collective meet in the same order
//   and no device waits on one that waits on it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/sharding/ConfigSpace.h"
#include "passes/sharding/Pipeline.h"

#include "llvm/Support/Error.h"

namespace pax {

struct Cluster;
struct Func;
struct Module;

/// Sets `stage` on the ops of \p f in \p layers that \p stages cut.
void markStages(Func &f, llvm::ArrayRef<LayerSpan> layers,
                llvm::ArrayRef<PipelineStage> stages);

/// Tags every op of \p f as the forward program's (`forward`).
void markForward(Func &f);

/// Gives every op of \p f a stage and the offset of its stage's first
/// device, stages of \p stageDevices devices each, stage s on rank
/// s % \p ranks (interleaved: several stages a rank).
void placeStages(Func &f, int64_t stageDevices, int64_t ranks);

/// Orders \p f's ops by schedule \p k over \p stages stages (\p chunks
/// a rank) and \p microbatches microbatches; an error names an op whose
/// stage or microbatch is out of range.
llvm::Error orderStages(Func &f, int64_t stages, int64_t microbatches,
                        Schedule k, int64_t chunks = 1);

/// The step of \p m, placed and ordered in stages, simulated on every
/// stage's devices of \p cluster: each op once as it runs (in \p configs,
/// from its `offset`), each device's ops in program order, the transfers
/// between stages on their links.
double simulatePlacedStep(const Module &m, const Cluster &cluster,
                          llvm::ArrayRef<Config> configs);

} // namespace pax
