//===- StrategyIO.h - Strategies as JSON and as a report ------------------===//
//
// `paxc --emit=strategy --format=json` writes a strategy; `--strategy=FILE`
// reads the same JSON back to fix it instead of searching, so strategies
// can be saved, edited, diffed and reused. `--emit=report` prints it for
// people: configurations (repeated layers grouped), predicted time,
// memory, communication, baselines and search statistics.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/sharding/PipelineSearch.h"
#include "passes/sharding/Solve.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace pax {

/// "1.234 s", "12.345 ms" or "123.4 us", as reports print a time.
std::string formatSeconds(double s);

/// Everything a report shows.
struct StrategyReport {
  std::string model;
  const Cluster *cluster = nullptr;
  CostMode mode = CostMode::Train;
  SolverKind solver = SolverKind::Dp;
  Strategy strategy;
  double searchSeconds = 0;
  double peakMemoryBytes = 0; ///< of the search process
  std::map<std::string, StrategyCost> baselines;
  /// The baselines that fit no strategy within the limit, with why.
  std::map<std::string, std::string> baselineErrors;
  /// Training: how each baseline fits (describeLevers).
  std::map<std::string, std::string> baselineLevers;
  /// The bytes one device may hold (0: no limit).
  double memoryLimit = 0;
  /// The strategy was given (--strategy), not searched.
  bool given = false;
  /// The baseline whose strategy simulated faster than the search's and
  /// was chosen instead (ShardingOptions::chooseBySimulation); empty: the
  /// search's own.
  std::string chosenFrom;
  /// The chosen strategy's simulated step before an MCMC chain refined it
  /// (ShardingOptions::refineSteps; 0: not refined), and the chain's
  /// proposals.
  double refinedFrom = 0;
  uint64_t refineProposals = 0;
  /// The program is a whole training step (backward and updates built in,
  /// each op priced once as it runs): reported as training.
  bool trainingProgram = false;
  /// Training under --pipeline: the stages searched (PipelineSearch.h).
  std::optional<PipelineSearchResult> pipeline;
  /// Under --pipeline with a memory limit that no strategy without stages
  /// fits: why (the strategy is then the search without the limit, for
  /// comparison only); empty where one fits.
  std::string unfit;
};

/// The training levers a strategy JSON gives: its microbatch count (0:
/// none given) and each op's recomputation and ZeRO stage (empty: none).
struct GivenLevers {
  int64_t microbatches = 0;
  std::vector<OpChoice> choices;
};

/// Searches (or, given \p fixed, prices) a strategy for \p m and the
/// baselines it is compared with (data-parallel, expert; training:
/// megatron), timing the search. A searched strategy that simulates slower
/// than a baseline gives way to it (ShardingOptions::chooseBySimulation).
llvm::Expected<StrategyReport>
buildReport(const Module &m, const Cluster &cluster, CostMode mode,
            const ShardingOptions &options,
            const std::optional<std::vector<Config>> &fixed,
            llvm::ArrayRef<int64_t> fixedOffsets = {},
            const GivenLevers *fixedLevers = nullptr);

/// The strategy JSON: model, cluster, mode, solver, cost_s, compute_s,
/// comm_s, memory_bytes, comm_bytes, search_s, baselines, stats, and ops
/// (name, kind, config as {dim: factor}).
llvm::json::Value strategyToJson(const Module &m, const StrategyReport &r);

/// Reads the configurations of a strategy JSON for \p m: ops are matched by
/// name in order; every factor must be a legal split of its dim. An op's
/// `offset` (its first device: a multiple of its device count that keeps
/// it inside the cluster) goes to \p offsets, sized to the ops; without
/// \p offsets an offset is an error. A training step's levers (the
/// top-level `microbatches`, an op's `recompute` and `zero`) go to \p
/// levers; without \p levers they are an error. Errors name \p origin and
/// the op.
llvm::Expected<std::vector<Config>>
strategyFromJson(const Module &m, llvm::StringRef text, llvm::StringRef origin,
                 const ConfigOptions &o,
                 std::vector<int64_t> *offsets = nullptr,
                 GivenLevers *levers = nullptr);

/// The text report.
void printReport(const Module &m, const StrategyReport &r,
                 llvm::raw_ostream &os);

/// Writes \p m's op graph as Graphviz DOT, each op a box labelled with its
/// kind, name and configuration in \p s and filled with one colour per
/// distinct configuration (grey: computed on every device), each use an
/// edge (dashed: read by the next training step).
void writeStrategyDot(const Module &m, const Strategy &s,
                      llvm::raw_ostream &os);

} // namespace pax
