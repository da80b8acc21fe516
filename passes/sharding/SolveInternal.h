//===- SolveInternal.h - What the search's files share ----------*- C++ -*-===//
//
// Private to passes/sharding: the search space's data (each op's candidate
// configurations, the uses, the SOAP roles and cost signatures) and the
// searches built on it in files of their own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/sharding/Solve.h"

#include "ir/Soap.h"

#include "llvm/ADT/DenseMap.h"

#include <memory>
#include <string>
#include <vector>

namespace pax {

/// One op's candidate configurations and its producers.
struct Vertex {
  const Op *op;
  std::vector<Config> configs;
};

struct SearchSpace::Data {
  const Module *module;
  ConfigOptions options;
  llvm::DenseSet<const Op *> constants;
  llvm::DenseSet<const Value *> returned;
  /// Every op with its configurations (one for an op computed everywhere).
  std::vector<Vertex> vertices;
  std::vector<Use> uses;
  llvm::DenseMap<const Op *, llvm::SmallVector<SoapRole, 6>> roles;
  std::vector<std::string> signatures;
  /// Which ops and values carry the sample dim (microbatches).
  std::shared_ptr<const SampleInfo> samples;
};

/// Costs are searched in integer picoseconds, so that every solver sums
/// exactly and ties break the same way.
int64_t toPicos(double seconds);

/// FlexFlow's MCMC search (Mcmc.cpp).
llvm::Expected<Strategy> searchMcmc(const SearchSpace &space,
                                    const CostModel &model,
                                    const ShardingOptions &o);

} // namespace pax
