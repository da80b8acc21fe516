//===- Exhaustive.h - Brute-force sharding search, the DP's test oracle ---===//
#pragma once

#include "passes/sharding/DpSolver.h"

namespace pax {

/// Evaluates every strategy of \p graph and returns one of minimum cost, the
/// lexicographically smallest on a tie (vertex 0 most significant). Fails on
/// a malformed graph or when there are more than \p maxStrategies
/// strategies. For tiny graphs: it is the oracle the DP must match exactly.
llvm::Expected<Solution> solveExhaustive(const CostGraph &graph,
                                         uint64_t maxStrategies = 50'000'000);

} // namespace pax
