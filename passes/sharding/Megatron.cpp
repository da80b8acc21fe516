//===- Megatron.cpp - Megatron-LM's grid, the training baseline -----------===//
//
// What a Megatron-LM user tunes by hand: the tensor-parallel degree t
// (inside a node), data parallel over the other devices, the microbatches
// per step, full recomputation or none, and the distributed optimizer
// (ZeRO-1) or not. At each degree the layers split as Megatron splits
// them (baselineConfigs: column- then row-parallel weights, attention heads,
// the vocabulary of an embedding; every op data parallel over the other
// devices), the DP picking per op among those splits. Each (t, recomputation,
// ZeRO) then takes the fewest microbatches that fit the memory (more are never
// faster), every such point is simulated, and the fastest wins: the hand-tuned
// plan a Megatron user would reach by measuring the grid.
//
//===----------------------------------------------------------------------===//
#include "passes/sharding/SolveInternal.h"

#include "llvm/Support/FormatVariadic.h"

#include <optional>

namespace pax {

namespace {
/// One point of the grid, priced and simulated.
struct GridPoint {
  int64_t tensor = 1;
  Strategy strategy;
};
} // namespace

/// The recomputation settings the grid tries under \p policy: none, all
/// (every op but the contractions), or both when the search may choose.
static std::vector<RecomputePolicy> recomputeGrid(RecomputePolicy policy) {
  if (policy == RecomputePolicy::Auto)
    return {RecomputePolicy::None, RecomputePolicy::All};
  return {policy};
}

/// The ZeRO stages the grid tries: Megatron's plain and distributed
/// optimizers (0 and 1), or the one stage \p zero forces.
static std::vector<int> zeroGrid(int zero) {
  if (zero < 0)
    return {0, 1};
  return {zero};
}

llvm::Expected<std::vector<Config>> megatronConfigs(const SearchSpace &space,
                                                    const CostModel &model,
                                                    const ShardingOptions &o,
                                                    int64_t t) {
  const SearchSpace::Data &d = space.data();
  ShardingOptions so = o;
  so.solver = SolverKind::Dp;
  so.progress = nullptr;
  CostModel at = model.getMode() == CostMode::Train
                     ? leveredModel(space, model, o.levers, 1)
                     : model;
  std::vector<Vertex> set =
      baselineVertices(d, o.configs.devices, t, /*wholeDataParallel=*/false);
  Searcher searcher(d, at, set, so);
  auto found = searcher.run(0);
  if (!found)
    return found.takeError();
  return searcher.configs(*found);
}

/// \p configs priced with every op's levers set by \p levers (one
/// recomputation policy, one ZeRO stage, \p microbatches microbatches).
static Strategy priceUniform(const SearchSpace &space, const CostModel &model,
                             std::vector<Config> configs,
                             const LeverOptions &levers, int64_t microbatches) {
  CostModel at = model.getMode() == CostMode::Train
                     ? leveredModel(space, model, levers, microbatches)
                     : model;
  Strategy s;
  s.configs = std::move(configs);
  s.microbatches = microbatches;
  const Func &f = space.module().main;
  for (size_t i = 0; i < f.ops.size(); ++i)
    s.choices.push_back(at.choose(*f.ops[i], s.configs[i], 0));
  s.cost = evaluateStrategy(space, at, s.configs, {}, s.choices);
  s.stats.exact = false;
  return s;
}

namespace {
/// The grid's search: the fastest simulated point that fits, and the
/// leanest of all for the error when none does.
class MegatronGrid {
public:
  MegatronGrid(const SearchSpace &space, const CostModel &model,
               const ShardingOptions &o)
      : space(space), model(model), o(o) {}
  llvm::Expected<Strategy> run();

private:
  llvm::Error degree(int64_t t, llvm::ArrayRef<int64_t> counts);
  void offer(GridPoint p);

  const SearchSpace &space;
  const CostModel &model;
  const ShardingOptions &o;
  std::optional<GridPoint> best, leanest;
};
} // namespace

/// A point priced: the fastest simulated of those that fit stays.
void MegatronGrid::offer(GridPoint p) {
  const StrategyCost &c = p.strategy.cost;
  if (!leanest || c.memoryBytes < leanest->strategy.cost.memoryBytes)
    leanest = p;
  if (o.memoryLimit > 0 && c.memoryBytes > o.memoryLimit)
    return;
  p.strategy.cost.simulatedSeconds =
      simulateStrategy(space, model, o.levers, p.strategy);
  if (!best ||
      p.strategy.cost.simulatedSeconds < best->strategy.cost.simulatedSeconds)
    best = std::move(p);
}

/// Every (recomputation, ZeRO stage) at tensor degree \p t, each with the
/// fewest of \p counts microbatches that fit.
llvm::Error MegatronGrid::degree(int64_t t, llvm::ArrayRef<int64_t> counts) {
  auto configs = megatronConfigs(space, model, o, t);
  if (!configs)
    return configs.takeError();
  bool training = model.getMode() == CostMode::Train;
  for (RecomputePolicy r : recomputeGrid(o.levers.recompute))
    for (int z : zeroGrid(o.levers.zero))
      for (int64_t m : counts) {
        if (!samplesDivide(space.data(), *configs, m))
          continue;
        LeverOptions l = o.levers;
        l.recompute = r;
        l.zero = z;
        GridPoint p{t, priceUniform(space, model, *configs, l, m)};
        bool fits =
            o.memoryLimit <= 0 || p.strategy.cost.memoryBytes <= o.memoryLimit;
        offer(std::move(p));
        if (fits || !training)
          break;
      }
  return llvm::Error::success();
}

llvm::Expected<Strategy> MegatronGrid::run() {
  bool training = model.getMode() == CostMode::Train;
  auto counts = training ? microbatchCounts(space, o.levers.microbatches)
                         : std::vector<int64_t>{1};
  if (!counts)
    return counts.takeError();
  for (int64_t t :
       tensorDegrees(o.configs.devices, model.getCluster().gpusPerNode))
    if (auto err = degree(t, *counts))
      return err;
  if (best)
    return std::move(best->strategy);
  if (!leanest)
    return llvm::createStringError(llvm::formatv(
        "megatron: no tensor degree on {0} devices leaves sample blocks that "
        "the microbatch counts divide",
        o.configs.devices));
  return llvm::createStringError(
      llvm::formatv("megatron: no point of the grid fits in {0:F2} GiB per "
                    "device; the leanest needs {1:F3} GiB (tensor degree "
                    "{2}, {3})",
                    o.memoryLimit / double(1 << 30),
                    leanest->strategy.cost.memoryBytes / double(1 << 30),
                    leanest->tensor,
                    describeLevers(leanest->strategy.microbatches,
                                   leanest->strategy.choices))
          .str());
}

llvm::Expected<Strategy> solveMegatron(const SearchSpace &space,
                                       const CostModel &model,
                                       const ShardingOptions &o) {
  return MegatronGrid(space, model, o).run();
}

} // namespace pax
