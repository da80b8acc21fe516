//===- DpSolver.h - PaSE's exact dynamic program over a cost graph --------===//
//
// PaSE (section III) orders the vertices as a sequence v_1..v_n. For v_i:
//   - its connected set C(i) is the set of vertices among v_1..v_i reachable
//     from v_i through vertices of v_1..v_i;
//   - its dependent set D(i) is the set of neighbours of C(i) after v_i;
//   - its connected subsets are the components of C(i) minus v_i; each is
//     C(j) for its last vertex v_j, and D(j) is a subset of D(i) plus v_i.
// The recurrence (4) fills one table per vertex, keyed by an assignment a of
// configurations to D(i):
//   f(i, a) = min over configurations c of v_i of
//             vertexCost(v_i, c)
//           + sum over edges (v_i, u), u in D(i), of edgeCost(c, a(u))
//           + sum over connected subsets j of f(j, a|D(j) with v_i = c).
// Each edge is paid at its earlier endpoint. The optimum is the sum of
// f(last, {}) over the connected components; back-substitution in reverse
// sequence order recovers every vertex's configuration.
//
// The work is exponential in the largest dependent set only; GenerateSeq
// (Fig. 3) picks the order that keeps dependent sets small.
//
// When the tables would still hold more than the state budget (a value read
// by every layer, a long skip), solveDp first conditions on the vertex that
// widens the most tables: the rest is solved once per class of its
// configurations, exactly. When that does not fit either, it does not give
// up unless asked to (DpOptions::exact). It relaxes the graph: a vertex that sits in many
// dependent sets is split into one copy per neighbour, each copy free to
// take its own configuration, the vertex's costs shared among the copies.
// Every strategy of the graph is a strategy of the relaxation (all copies
// alike) with the same cost, so the relaxation's optimum, found exactly by
// the DP within the budget, is a lower bound. Its strategy, with each split
// vertex given the best of its copies' configurations and then improved one
// vertex at a time, is the answer; when its cost equals the bound it is
// optimal, and the solution says exact.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/sharding/CostGraph.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pax {

/// How the DP sequences the vertices.
enum class VertexOrder {
  /// GenerateSeq, or MinWork where that does strictly less work (the
  /// default; never more work than GenerateSeq).
  Best,
  /// PaSE's GenerateSeq: the smallest dependent set first (min-degree).
  GenerateSeq,
  /// The smallest table work first: entries times configurations.
  MinWork,
  /// Breadth-first from the lowest vertex id: PaSE's baseline.
  BreadthFirst,
};

/// "best", "generate-seq", "min-work" or "breadth-first".
const char *vertexOrderName(VertexOrder order);

/// The default state budget (--max-states): the DP keeps 2 bytes per state
/// until back-substitution, plus the costs of the tables not yet consumed,
/// so 200M states stay well under 2 GB on the models measured
/// (docs/PERFORMANCE.md).
inline constexpr uint64_t kDefaultMaxStates = 200'000'000;

/// Options of solveDp().
struct DpOptions {
  VertexOrder order = VertexOrder::Best;
  /// Limit on the DP table entries of all vertices together.
  uint64_t maxStates = kDefaultMaxStates;
  /// Worker threads; 0 lets TBB choose. The result does not depend on it.
  unsigned threads = 0;
  /// Fail when the exact DP would exceed maxStates, instead of relaxing.
  bool exact = false;
  /// Called on the calling thread after each vertex's table, with the
  /// fraction of the table entries done so far.
  std::function<void(double fraction)> progress;
};

/// What a solver did.
struct DpStats {
  /// Size of the largest dependent set in the sequence.
  unsigned largestDependentSet = 0;
  /// Table entries (DP) or strategies (exhaustive), in total.
  uint64_t states = 0;
  /// Table entries built: repeated layers give equal tables, built once.
  uint64_t builtStates = 0;
  /// (entry, configuration) pairs evaluated.
  uint64_t combinationsEvaluated = 0;
  /// Wall-clock time of the solve.
  double seconds = 0;
  /// Largest number of bytes held by DP tables at any one time.
  size_t peakTableBytes = 0;
  /// Whether the strategy is proven optimal.
  bool exact = true;
  /// A cost no strategy beats (the solution's cost when exact).
  int64_t lowerBound = 0;
  /// Vertices split by the relaxation (0 when the exact DP fit).
  unsigned splitVertices = 0;
  /// States the exact DP would have held (equal tables once; saturating),
  /// when they did not fit.
  uint64_t exactStates = 0;
  /// When the plain DP did not fit but conditioning on one hub vertex did:
  /// the classes of its configurations solved (0 otherwise).
  unsigned conditionedClasses = 0;
  /// The order the DP used.
  VertexOrder order = VertexOrder::GenerateSeq;
  /// Largest dependent set of GenerateSeq's order, and of the min-work
  /// order (0 when it was not computed).
  unsigned largestGenerateSeq = 0, largestMinWork = 0;
};

/// An optimal strategy. cost == kInfCost when every strategy is forbidden.
struct Solution {
  /// Configuration of each vertex.
  std::vector<unsigned> strategy;
  /// evaluate(graph, strategy).
  int64_t cost = 0;
  DpStats stats;
};

/// Finds a strategy of minimum cost with PaSE's DP. Fails on a malformed
/// graph. When the tables would hold more than options.maxStates entries,
/// fails with options.exact (naming the vertex with the largest table via
/// \p vertexName), and otherwise returns the relaxation's strategy with
/// stats.exact telling whether it is proven optimal and stats.lowerBound.
/// Deterministic: the result is the same for any thread count.
llvm::Expected<Solution>
solveDp(const CostGraph &graph, const DpOptions &options,
        llvm::function_ref<std::string(unsigned vertex)> vertexName);

/// PaSE's GenerateSeq: repeatedly sequences the vertex whose dependent set
/// would be smallest; on a tie, the one with the fewest sequenced vertices
/// merged into it (repeated layers are reduced alike), then the lowest id.
std::vector<unsigned> generateSeq(const CostGraph &graph);

/// GenerateSeq's elimination keyed by work: the vertex whose table entries
/// times configurations would be smallest next, ties broken alike.
std::vector<unsigned> minWorkOrder(const CostGraph &graph);

/// Breadth-first order: from the lowest unvisited vertex id, neighbours in
/// increasing id order.
std::vector<unsigned> breadthFirstOrder(const CostGraph &graph);

/// The vertex order solveDp uses for \p order.
std::vector<unsigned> vertexOrder(const CostGraph &graph, VertexOrder order);

/// |D(i)| for each position i of \p order (a permutation of the vertices).
std::vector<unsigned> dependentSetSizes(const CostGraph &graph,
                                        llvm::ArrayRef<unsigned> order);

} // namespace pax
