//===- PipelineSearch.h - Stages searched over a model ----------*- C++ -*-===//
//
// The outer search of pipeline parallelism (Pipeline.h) over a training
// module: its layers (findLayers), and for each stage count S that divides
// the cluster (or the one --pipeline names) the submesh of N / S devices,
// whose intra-op strategy the existing search chooses for the whole model
// on N / S devices within S memory limits (every stage's layers take their
// part of it: identical layers are solved once, together); it is priced op
// by op (priceEachOp) at every microbatch count the batch allows, with its
// fitted levers and (where the levers allow) with every op recomputed, and
// planStages cuts the layers under the memory limit on each schedule, each
// stage taking the fastest of these variants that fits it. The fastest
// step wins; where a stage of it fits only with every op recomputed, its
// stage count (every count, where none fits) is tried again with a leaner
// strategy too, solved within S / 2 limits, which the stages that keep
// many microbatches in flight may take.
// Exhaustive over its space (stage counts x microbatches x schedules x each
// stage's variant) but for the leaner strategy; the intra-op part is what
// --solver searches. Megatron LM's grid with stages (its layer splits per
// tensor degree inside a node, recomputation none or all, ZeRO 0 or 1, the
// layers cut evenly) is priced the same way, and returned where it simulates
// faster.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/sharding/Pipeline.h"
#include "passes/sharding/Solve.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace pax {

struct PipelineOptions {
  int64_t stages = 0;               ///< 0: every count that divides the cluster
  int64_t microbatches = 0;         ///< 0: every count the batch allows
  std::optional<Schedule> schedule; ///< none: each
  /// Interleaved: the chunks (stages) per rank; 0: every count from 2 up
  /// to kMostChunks that the layers allow.
  int64_t chunks = 0;
  static constexpr int64_t kMostChunks = 8;
  /// Train: a training step's stages (forward and backward per
  /// microbatch); Infer: an inference's (forward only, no recomputation,
  /// no Megatron grid).
  CostMode mode = CostMode::Train;
};

/// The pipeline the search chose.
struct PipelineChoice {
  PipelinePlan plan;
  int64_t stageDevices = 0;
  /// The layers the stages cut (ops of @main in program order).
  std::vector<LayerSpan> layers;
  /// The intra-op strategy of every stage (configurations on stageDevices
  /// devices, levers at plan.microbatches): each stage's ops take the
  /// strategy its variant names.
  Strategy intra;
  /// Per stage: which strategy it takes (the memory budget it was solved
  /// within, whether every op is recomputed) and its levers.
  std::vector<std::string> stageStrategies;
  /// Some stage fits only with every op recomputed.
  bool recomputesAll = false;
};

/// Megatron-LM's pipeline (--solver=megatron's grid with stages): its
/// layer splits at one tensor degree inside a node, the layers cut evenly.
struct MegatronPipeline {
  PipelineChoice choice;
  int64_t tensor = 1;
};

struct PipelineSearchResult {
  std::optional<PipelineChoice> best;
  /// The fastest simulated point of Megatron's grid with stages that fits
  /// (stage counts x tensor degrees x recomputation none/all x ZeRO 0/1 x
  /// microbatches x schedules), for comparison.
  std::optional<MegatronPipeline> megatron;
  /// best is Megatron's point, which simulated faster than the search's
  /// (or was asked for: megatronOnly, --solver=megatron).
  bool fromMegatron = false, megatronOnly = false;
  /// An inference's stages (forward passes only; no Megatron grid).
  bool inference = false;
  /// One line per stage count tried: its best step, or why none fits.
  std::vector<std::string> tried;
  double searchSeconds = 0;
};

/// \p cluster's first \p devices devices: one stage's submesh.
Cluster subCluster(const Cluster &cluster, int64_t devices);

/// Searches pipelines of training module \p m on \p cluster with \p o's
/// intra-op options and memory limit.
llvm::Expected<PipelineSearchResult> searchPipeline(const Module &m,
                                                    const Cluster &cluster,
                                                    const ShardingOptions &o,
                                                    const PipelineOptions &p);

/// The report's lines on \p r, against \p flat, the step simulated
/// without stages (0: none).
void printPipeline(const PipelineSearchResult &r, double flat,
                   llvm::raw_ostream &os);

/// The strategy JSON's "pipeline" object.
llvm::json::Value pipelineJson(const PipelineSearchResult &r);

/// Each layer of \p layers priced from \p prices (ops of \p f, a step of
/// \p microbatches microbatches) on stages of \p stageDevices devices of
/// \p cluster: per microbatch, the activation each layer's end sends on
/// (and its gradient back) split over the stage's devices.
std::vector<LayerCost> layerCosts(const Func &f,
                                  llvm::ArrayRef<LayerSpan> layers,
                                  llvm::ArrayRef<OpPrice> prices,
                                  int64_t microbatches, int64_t stageDevices,
                                  const Cluster &cluster);

} // namespace pax
