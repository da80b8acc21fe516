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
#include <initializer_list>
#include <memory>
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

/// A row-major matrix of costs. Repeated layers have equal edge tables, so
/// copies share one array: copying a CostMatrix copies a pointer, and
/// edit() copies the array first when it is shared.
class CostMatrix {
public:
  CostMatrix() : costs(std::make_shared<std::vector<int64_t>>()) {}
  CostMatrix(std::initializer_list<int64_t> values)
      : costs(std::make_shared<std::vector<int64_t>>(values)) {}
  CostMatrix(std::vector<int64_t> values)
      : costs(std::make_shared<std::vector<int64_t>>(std::move(values))) {}

  size_t size() const { return costs->size(); }
  const int64_t &operator[](size_t i) const { return (*costs)[i]; }
  const int64_t *data() const { return costs->data(); }
  std::vector<int64_t>::const_iterator begin() const { return costs->begin(); }
  std::vector<int64_t>::const_iterator end() const { return costs->end(); }
  operator llvm::ArrayRef<int64_t>() const { return *costs; }
  /// Whether two matrices share their array.
  bool sameArray(const CostMatrix &o) const { return costs == o.costs; }
  /// The array, for writing; unshared first.
  std::vector<int64_t> &edit() {
    if (costs.use_count() > 1)
      costs = std::make_shared<std::vector<int64_t>>(*costs);
    return *costs;
  }

private:
  std::shared_ptr<std::vector<int64_t>> costs;
};

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
    CostMatrix cost;
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
