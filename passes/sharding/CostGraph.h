//===- CostGraph.h - Abstract cost graph searched by the sharding solvers -===//
//
// The solvers (DP, exhaustive) do not see the IR: the cost model lowers a
// function to this graph, with one vertex per op and one cost per
// configuration of that op, and one edge per producer-consumer pair with a
// resharding cost per pair of configurations. A strategy picks one
// configuration per vertex; its cost is the sum of the vertex costs and the
// edge costs (PaSE, eq. 1).
//
// Costs are int64 fixed point (e.g. picoseconds), never floating point, so
// that sums do not depend on the order in which a solver adds them: the DP
// and the exhaustive oracle agree exactly. Every cost lies in [0, kInfCost];
// kInfCost marks a forbidden configuration (over a memory limit, say) and
// every sum saturates at kInfCost, so the cost of a strategy is
// min(true sum, kInfCost) whatever the summation order.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace pax {

/// The cost of a forbidden configuration, and the value every sum saturates
/// at. Two costs up to kInfCost add without overflowing an int64.
inline constexpr int64_t kInfCost = INT64_MAX / 4;

/// Adds two costs in [0, kInfCost], saturating at kInfCost.
inline int64_t addCost(int64_t a, int64_t b) {
  // Both are at most kInfCost, so the sum cannot overflow; min() rather than
  // a branch lets the DP's inner loops vectorize.
  return std::min(a + b, kInfCost);
}

/// Clamps a raw cost entry to kInfCost (entries >= kInfCost mean forbidden).
inline int64_t clampCost(int64_t c) { return c >= kInfCost ? kInfCost : c; }

/// A graph of vertices with per-configuration costs and edges with
/// per-configuration-pair costs; see the file comment.
struct CostGraph {
  /// Number of configurations of each vertex; at least 1 and at most 65536.
  std::vector<unsigned> numConfigs;
  /// vertexCost[v][c]: the cost of vertex v in configuration c.
  std::vector<std::vector<int64_t>> vertexCost;

  /// An undirected edge between two distinct vertices.
  struct Edge {
    unsigned u, v;
    /// Row-major: cost[cu * numConfigs[v] + cv].
    std::vector<int64_t> cost;
  };
  /// Parallel edges between the same pair (either orientation) are allowed
  /// and their costs add up.
  std::vector<Edge> edges;

  /// Number of vertices.
  unsigned size() const { return numConfigs.size(); }
};

/// Checks the shape of \p graph: table sizes, vertex indices, no self-loops,
/// 1..65536 configurations per vertex, no negative cost.
llvm::Error verifyCostGraph(const CostGraph &graph);

/// The cost of \p strategy (one configuration per vertex): vertex costs in
/// vertex order, then edge costs in edge order, saturating at kInfCost.
int64_t evaluate(const CostGraph &graph, llvm::ArrayRef<unsigned> strategy);

} // namespace pax
