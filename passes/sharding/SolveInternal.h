//===- SolveInternal.h - What the search's files share ----------*- C++ -*-===//
//
// Private to passes/sharding: the search space's data (each op's candidate
// configurations, the uses, the SOAP roles and cost signatures) and the
// searches built on it in files of their own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/sharding/CostGraph.h"
#include "passes/sharding/Solve.h"

#include "ir/Soap.h"

#include "llvm/ADT/DenseMap.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
  /// The baselines searched in this space (solveBaseline), by solver, cost
  /// model and options: the strategy, or why none fits.
  struct Baseline {
    std::optional<Strategy> strategy;
    std::string error;
  };
  mutable std::mutex baselineMutex;
  mutable std::map<std::string, Baseline> baselines;
};

/// Costs are searched in integer picoseconds, so that every solver sums
/// exactly and ties break the same way.
int64_t toPicos(double seconds);

/// The restricted configurations of the baselines (Solve.cpp): data
/// parallel (\p tensor 1) or expert with tensor-parallel degree \p tensor;
/// without \p wholeDataParallel (Megatron's), no op may leave the
/// tensor-parallel grid for data parallel on every device.
std::vector<Config> baselineConfigs(const Op &op,
                                    llvm::ArrayRef<SoapRole> roles,
                                    const std::vector<Config> &all,
                                    int64_t devices, int64_t tensor,
                                    bool wholeDataParallel = true);

/// The tensor-parallel degrees of the expert and Megatron baselines on \p
/// devices: 1, and each divisor of the device count within a node of \p
/// perNode (Fit.cpp).
std::vector<int64_t> tensorDegrees(int64_t devices, int64_t perNode);

/// \p d's vertices with baselineConfigs' configurations only (Fit.cpp).
std::vector<Vertex> baselineVertices(const SearchSpace::Data &d,
                                     int64_t devices, int64_t tensor,
                                     bool wholeDataParallel = true);

/// Whether \p configs (one per op) split every sample dim into blocks that
/// \p microbatches microbatches divide (Fit.cpp).
bool samplesDivide(const SearchSpace::Data &d, llvm::ArrayRef<Config> configs,
                   int64_t microbatches);

/// Every vertex's configurations priced once for any price of memory:
/// vertices alike (repeated layers) share one table, \p table[vertex]. Per
/// configuration, the (seconds, persistent bytes) of the lever choices that
/// no other choice beats in both.
struct VertexPrices {
  std::vector<unsigned> table;
  std::vector<std::vector<llvm::SmallVector<std::pair<double, double>, 4>>>
      configs;
};

/// PaSE's cost graph of one candidate set: its edges are built once, its
/// vertex costs anew for each price of memory (each op's levers as they
/// price best there).
class Searcher {
public:
  Searcher(const SearchSpace::Data &space, const CostModel &model,
           const std::vector<Vertex> &vertices, const ShardingOptions &o);
  /// The best strategy with memory priced at \p lambda seconds per byte.
  llvm::Expected<Solution> run(double lambda);
  /// \p s's configuration of every op.
  std::vector<Config> configs(const Solution &s) const;

private:
  const SearchSpace::Data &space;
  const CostModel &model;
  const std::vector<Vertex> &vertices;
  const ShardingOptions &o;
  CostGraph graph;
  VertexPrices prices;
};

/// The best strategy of \p o's solver (the DP, or a baseline's restricted
/// spaces) under the memory limit, over the microbatch counts the levers
/// allow (Fit.cpp).
llvm::Expected<Strategy> solveWithinMemory(const SearchSpace &space,
                                           const CostModel &model,
                                           const ShardingOptions &o);

/// The levers that fit \p configs in a training step of \p microbatches
/// microbatches under \p o's memory limit (Fit.cpp), and whether they do
/// (configurations whose sample blocks the count does not divide do not);
/// inference: none, fitting.
struct FittedLevers {
  std::vector<OpChoice> choices;
  bool fits = true;
};
FittedLevers fitLevers(const SearchSpace &space, const CostModel &model,
                       const ShardingOptions &o, int64_t microbatches,
                       llvm::ArrayRef<Config> configs);

/// Megatron's layer splits at tensor degree \p t on \p space's devices
/// (Megatron.cpp): the DP's fastest configurations among baselineConfigs'
/// at one microbatch, memory unpriced.
llvm::Expected<std::vector<Config>> megatronConfigs(const SearchSpace &space,
                                                    const CostModel &model,
                                                    const ShardingOptions &o,
                                                    int64_t t);

/// Megatron-LM's grid, the training baseline (Megatron.cpp): per
/// tensor-parallel degree Megatron's layer splits, then the microbatches,
/// recomputation and ZeRO stage that fit; the fastest simulated wins.
llvm::Expected<Strategy> solveMegatron(const SearchSpace &space,
                                       const CostModel &model,
                                       const ShardingOptions &o);

/// FlexFlow's MCMC search (Mcmc.cpp); with \p from, one chain that
/// refines that strategy (its microbatches and levers kept).
llvm::Expected<Strategy> searchMcmc(const SearchSpace &space,
                                    const CostModel &model,
                                    const ShardingOptions &o,
                                    const Strategy *from = nullptr);

} // namespace pax
