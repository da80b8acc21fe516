//===- CostGraph.cpp - Abstract cost graph searched by the solvers --------===//
#include "passes/sharding/CostGraph.h"

#include "llvm/ADT/STLExtras.h"

#include <cassert>

using namespace pax;

static llvm::Error graphError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "cost graph: " + message);
}

static bool hasNegative(llvm::ArrayRef<int64_t> costs) {
  return llvm::any_of(costs, [](int64_t c) { return c < 0; });
}

llvm::Error pax::verifyCostGraph(const CostGraph &graph) {
  unsigned n = graph.size();
  if (graph.vertexCost.size() != n)
    return graphError("vertexCost has " + llvm::Twine(graph.vertexCost.size()) +
                      " rows for " + llvm::Twine(n) + " vertices");
  for (unsigned v = 0; v < n; ++v) {
    unsigned k = graph.numConfigs[v];
    if (k == 0 || k > 65536)
      return graphError("vertex " + llvm::Twine(v) + " has " + llvm::Twine(k) +
                        " configurations (1 to 65536 are allowed)");
    if (graph.vertexCost[v].size() != k)
      return graphError("vertex " + llvm::Twine(v) + " has " +
                        llvm::Twine(graph.vertexCost[v].size()) +
                        " costs for " + llvm::Twine(k) + " configurations");
    if (hasNegative(graph.vertexCost[v]))
      return graphError("vertex " + llvm::Twine(v) + " has a negative cost");
  }
  for (auto [i, e] : llvm::enumerate(graph.edges)) {
    if (e.u >= n || e.v >= n)
      return graphError("edge " + llvm::Twine(i) + " names a vertex out of " +
                        llvm::Twine(n));
    if (e.u == e.v)
      return graphError("edge " + llvm::Twine(i) + " connects vertex " +
                        llvm::Twine(e.u) + " to itself");
    uint64_t want = uint64_t(graph.numConfigs[e.u]) * graph.numConfigs[e.v];
    if (e.cost.size() != want)
      return graphError("edge " + llvm::Twine(i) + " has " +
                        llvm::Twine(e.cost.size()) + " costs, expected " +
                        llvm::Twine(want));
    if (hasNegative(e.cost))
      return graphError("edge " + llvm::Twine(i) + " has a negative cost");
  }
  return llvm::Error::success();
}

int64_t pax::evaluate(const CostGraph &graph,
                      llvm::ArrayRef<unsigned> strategy) {
  assert(strategy.size() == graph.size() && "one configuration per vertex");
  int64_t total = 0;
  for (unsigned v = 0; v < graph.size(); ++v) {
    assert(strategy[v] < graph.numConfigs[v] && "configuration out of range");
    total = addCost(total, clampCost(graph.vertexCost[v][strategy[v]]));
  }
  for (const CostGraph::Edge &e : graph.edges) {
    size_t index =
        size_t(strategy[e.u]) * graph.numConfigs[e.v] + strategy[e.v];
    total = addCost(total, clampCost(e.cost[index]));
  }
  return total;
}
