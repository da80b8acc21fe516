//===- Aggregation.h - How a training step aggregates each gradient -------===//
//
// Parallax's question, answered for a strategy: how does each parameter's
// gradient reach the update? From the configurations alone (the moves are
// planReshard's, the ones insert-collectives emits and the cost model
// prices), for each parameter autodiff marked (`gradient_of`):
//
//   dense    partial sums (a split sample dim) all-reduced, or
//            reduce-scattered into a split update
//   sparse   a lookup's gradient: the (index, row) pairs travel to the
//            devices that scatter them (an all-gather, or point to point),
//            and no partial tables are summed
//   sharded  a lookup's gradient split over the table (its rows: a
//            vocabulary-sharded table, or its columns): each device keeps
//            the block it holds
//   local    no move (replicated, or split like its update)
//
// The moves listed include the new weights' way to where the next step
// reads them (an all-gather after an update split over the weight: the
// ZeRO-1 shape, a reduce-scatter and an all-gather where data parallelism
// all-reduces).
//
// A gradient may be several at once ("sparse+sharded": the pairs
// all-gathered, each device scattering them into the rows it holds;
// "dense+sparse": a table read by a lookup and by a matmul).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "passes/cost/Cluster.h"
#include "passes/sharding/ConfigSpace.h"

#include <string>
#include <vector>

namespace pax {

struct GradientAggregation {
  std::string parameter;
  /// "dense", "sparse", "sharded", several joined by '+', or "local".
  std::string kind;
  /// The collectives, "all_gather" etc., with the bytes each moves per
  /// device (as the cost model counts them).
  std::vector<std::pair<std::string, int64_t>> moves;
  int64_t bytes = 0;
  /// An all-reduce that crosses nodes runs inside each node first (inner
  /// rings of `innerRing` devices), then across `nodes` nodes: Parallax's
  /// local aggregation, as the cost model prices it; 0 when none does.
  unsigned innerRing = 0, nodes = 0;
};

/// The aggregation of every marked gradient of \p m under \p configs (one
/// per op of @main) on \p cluster; in the order of the parameters'
/// gradients.
std::vector<GradientAggregation>
describeAggregation(const Module &m, llvm::ArrayRef<Config> configs,
                    const Cluster &cluster);

} // namespace pax
