//===- Exhaustive.cpp - Brute-force sharding search, the DP's test oracle -===//
#include "passes/sharding/Exhaustive.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>

using namespace pax;

/// The number of strategies of \p graph, or UINT64_MAX when it does not fit.
static uint64_t countStrategies(const CostGraph &graph) {
  uint64_t count = 1;
  for (unsigned n : graph.numConfigs)
    if (__builtin_mul_overflow(count, uint64_t(n), &count))
      return UINT64_MAX;
  return count;
}

/// Steps \p strategy to its lexicographic successor; false after the last.
static bool nextStrategy(const CostGraph &graph,
                         std::vector<unsigned> &strategy) {
  for (size_t v = strategy.size(); v-- > 0;) {
    if (++strategy[v] < graph.numConfigs[v])
      return true;
    strategy[v] = 0;
  }
  return false;
}

llvm::Expected<Solution> pax::solveExhaustive(const CostGraph &graph,
                                              uint64_t maxStrategies) {
  auto start = std::chrono::steady_clock::now();
  if (llvm::Error err = verifyCostGraph(graph))
    return err;
  uint64_t count = countStrategies(graph);
  if (count > maxStrategies)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("too many strategies for exhaustive search: {0} (the "
                      "limit is {1})",
                      count == UINT64_MAX ? std::string("more than 2^64")
                                          : std::to_string(count),
                      maxStrategies)
            .str());

  Solution solution;
  std::vector<unsigned> strategy(graph.size(), 0);
  solution.strategy = strategy;
  solution.cost = evaluate(graph, strategy);
  // Strategies come in lexicographic order, so strict < keeps the smallest.
  while (nextStrategy(graph, strategy)) {
    int64_t cost = evaluate(graph, strategy);
    if (cost < solution.cost) {
      solution.cost = cost;
      solution.strategy = strategy;
    }
  }
  solution.stats.states = count;
  solution.stats.combinationsEvaluated = count;
  solution.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return solution;
}
