//===- PipelineFlags.h - paxc's pipeline options ----------------*- C++ -*-===//
//
// --pipeline and --schedule: the pipeline search of a training step
// (passes/sharding/PipelineSearch.h), and a pipelined training plan's
// stages placed and ordered (passes/sharding/Stages.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"
#include "passes/sharding/PipelineSearch.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace pax::paxc {

/// The search options' category (paxc --help).
extern llvm::cl::OptionCategory searchCategory;

/// --pipeline=off (the default).
bool pipelineOff();

/// An error where --schedule or --chunks is given without --pipeline.
llvm::Error checkPipelineFlagsUsed();

/// --pipeline=auto: the stage count searched (the plan pipelines only
/// where stages simulate faster).
bool pipelineAuto();

/// --pipeline, --schedule and --chunks checked for malformed values,
/// whatever the path takes.
llvm::Error checkPipelineFlagValues();

/// --pipeline=N's stage count; nullopt for off and auto, an error for
/// anything else.
llvm::Expected<std::optional<int64_t>> pipelineStages();

/// --emit=cost-probe's devices: with --pipeline=S, one stage's submesh of
/// \p cluster (a pipelined plan's blocks are those of the step built for
/// its stage's devices), else all of it; an error for auto or a count that
/// does not divide the devices.
llvm::Expected<Cluster> probedStage(const Cluster &cluster);

/// --pipeline and --schedule with \p microbatches (0: every count the
/// batch allows), or an error naming the flag.
llvm::Expected<PipelineOptions> pipelineOptionsFromFlags(int64_t microbatches);

/// The pipeline search's choice for a plan, or an error with what each
/// stage count tried.
llvm::Expected<PipelineChoice> chosenPipeline(const PipelineSearchResult &r);

/// A pipelined plan's step, built: every op placed on its stage's devices
/// and the ops in \p c's schedule order.
llvm::Error placePipeline(Module &m, const PipelineChoice &c);

/// The plan's record of \p c.
plan::Pipeline pipelineRecord(const PipelineChoice &c);

} // namespace pax::paxc
