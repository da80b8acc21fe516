//===- ShardingPasses.h - annotate-configs and solve-sharding -------------===//
#pragma once

#include "passes/Pass.h"
#include "passes/sharding/Solve.h"

namespace pax {

/// The options both passes share: the cluster and the configuration space.
struct ShardingPassOptions {
  std::string cluster = "pase";
  std::optional<unsigned> gpus, gpusPerNode;
  ShardingOptions sharding;
  CostMode mode = CostMode::Train;

  /// Reads `gpus=4 gpus-per-node=8 cluster=NAME mode=train|infer
  /// solver=dp|... pow2=0|1 exact=0|1 max-split=N max-states=N
  /// exact-search=0|1 mem-limit=GiB`.
  static llvm::Expected<ShardingPassOptions>
  parse(llvm::StringRef pass, const PassOptions &o, bool withSolver);
};

/// Records on every op how many configurations it has (`configs = N`) and
/// on the module the size of the search space (`search_space_log10`).
class AnnotateConfigsPass : public Pass {
public:
  explicit AnnotateConfigsPass(ShardingPassOptions o) : options(std::move(o)) {}
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-annotate-configs"; }
  llvm::Error run(Module &m, PassContext &ctx) override;

private:
  ShardingPassOptions options;
};

/// Chooses a configuration for every op (`config = [factor per dim]`) and
/// records the predicted step time on the module (`predicted_step_s`).
class SolveShardingPass : public Pass {
public:
  explicit SolveShardingPass(ShardingPassOptions o) : options(std::move(o)) {}
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-solve-sharding"; }
  llvm::Error run(Module &m, PassContext &ctx) override;

private:
  ShardingPassOptions options;
};

} // namespace pax
