//===- Solve.h - Choosing a configuration for every op --------------------===//
#pragma once

#include "passes/cost/CostModel.h"
#include "passes/sharding/DpSolver.h"

#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <memory>

namespace pax {

/// The solvers of `--solver=`.
enum class SolverKind : uint8_t {
  Dp,           ///< PaSE's DP, GenerateSeq order (exact)
  DpBfs,        ///< the same DP in breadth-first order
  Exhaustive,   ///< every strategy (tiny graphs; the test oracle)
  DataParallel, ///< split only sample dims
  Expert,       ///< data parallel plus one tensor-parallel dim, best degree
  Mcmc,         ///< FlexFlow's MCMC over the simulated step time
  /// Megatron-LM's grid (tensor degree x data parallel x microbatches x
  /// recomputation x ZeRO-1), the fastest simulated point that fits
  Megatron,
};

llvm::StringRef solverName(SolverKind k);
/// Whether \p k is a baseline: data-parallel, expert or megatron.
bool isBaseline(SolverKind k);
std::optional<SolverKind> parseSolver(llvm::StringRef name);

struct ShardingOptions {
  ConfigOptions configs;
  SolverKind solver = SolverKind::Dp;
  uint64_t maxStates = kDefaultMaxStates;
  /// Fail when the exact DP does not fit in maxStates, instead of returning
  /// the best strategy found within it (DpOptions::exact).
  bool exactSearch = false;
  unsigned threads = 0;
  /// Hard limit on the bytes one device holds; 0 for none.
  double memoryLimit = 0;
  /// Training: what a step may do to fit the limit (Levers.h).
  LeverOptions levers;
  /// buildReport: return the fastest simulated of the search's strategy
  /// and the baselines (false: the search's, by its additive cost).
  bool chooseBySimulation = true;
  /// buildReport, choosing by simulation a program's strategy (not a
  /// lever-priced training step's): then an MCMC chain of at most this
  /// many proposals refines the chosen strategy; 0: none.
  uint64_t refineSteps = 0;
  std::function<void(double fraction)> progress;
  /// MCMC: the proposals each chain may make (0: 100 per op, at least
  /// 2000), the wall-clock cap on the whole search (0: none; a search it
  /// cuts short is no longer deterministic, and says so), the seed, and
  /// the acceptance temperature (a proposal that is a fraction f slower is
  /// taken with probability exp(-beta f), FlexFlow's eq. 2).
  uint64_t mcmcSteps = 0;
  double searchBudget = 0;
  uint64_t seed = 0;
  double mcmcBeta = 50;
  /// MCMC: price each proposal by simulating the whole step again instead
  /// of delta simulation (the same timelines, slower: for benchmarks).
  bool mcmcFullSimulation = false;
};

/// What a strategy costs, per the cost model.
struct StrategyCost {
  double seconds = 0;        ///< predicted step time
  double computeSeconds = 0; ///< of which arithmetic
  double commSeconds = 0;    ///< of which communication
  double commBytes = 0;      ///< bytes one device sends or receives
  double memoryBytes = 0;    ///< bytes one device holds at its peak
  /// The step simulated with compute and communication overlapped
  /// (Simulator.h); 0 where not simulated.
  double simulatedSeconds = 0;
};

/// A configuration for every op of `@main`, in op order, and its cost.
struct Strategy {
  std::vector<Config> configs;
  /// Each op's first device (Layout.h's placements): ops placed apart run
  /// at once. Empty: every op from device 0 (what the DP and the baselines
  /// choose; only MCMC places).
  std::vector<int64_t> offsets;
  /// Training: microbatches per step, and each op's levers in op order
  /// (empty: the defaults).
  int64_t microbatches = 1;
  std::vector<OpChoice> choices;
  StrategyCost cost;
  /// The searched cost in integer picoseconds (solvers compare exactly).
  int64_t searchCost = 0;
  DpStats stats;
  /// Configurations per op (the search space), in op order.
  std::vector<size_t> spaceSizes;
  /// MCMC: proposals made and taken over every chain, and whether the
  /// wall-clock budget cut a chain short.
  uint64_t proposals = 0, accepted = 0;
  bool budgetHit = false;
  /// MCMC: the DP's strategy's simulated step (where the first chain
  /// started).
  double dpSimulatedSeconds = 0;
};

/// What every search of one module in one configuration space shares:
/// each op's configurations, the producer-consumer uses, the ops computed
/// everywhere (constantOps()), the SOAP roles and each op's cost signature.
/// Built once, it serves the search, the baselines and the pricing of their
/// strategies. \p m must outlive it.
class SearchSpace {
public:
  SearchSpace(const Module &m, const ConfigOptions &options);
  SearchSpace(SearchSpace &&);
  ~SearchSpace();
  const Module &module() const;
  const ConfigOptions &configOptions() const;

  struct Data; ///< defined in Solve.cpp
  const Data &data() const { return *d; }

private:
  std::unique_ptr<Data> d;
};

/// Searches a strategy for \p m with \p options.solver.
llvm::Expected<Strategy> solveSharding(const Module &m, const CostModel &model,
                                       const ShardingOptions &options);
/// The same in a space built before; options.configs must be the space's.
llvm::Expected<Strategy> solveSharding(const SearchSpace &space,
                                       const CostModel &model,
                                       const ShardingOptions &options);

/// Searches the baseline \p kind (data-parallel, expert or megatron) in \p
/// space with \p o's options and at least the default state budget.
llvm::Expected<Strategy> solveBaseline(const SearchSpace &space,
                                       const CostModel &model,
                                       const ShardingOptions &o,
                                       SolverKind kind);

/// Whether a graph input is small side data every device reads whole:
/// integer or boolean (token ids, attention masks, positions) or a float of
/// at most one dim (a rotary inv_freq written as an input).
bool isReplicatedInput(const Value &arg);

/// Ops computed from constants and replicated inputs only, never from an
/// activation or a weight (rotary tables, masks, position ids): every device
/// computes them whole, so they are never split, their readers take what
/// they need for free, and no gradient flows back to them. Their compute is
/// priced as what it is, the whole op on every device. Pinning them keeps
/// the high-degree vertices they would be out of the DP's dependent sets.
llvm::DenseSet<const Op *> constantOps(const Module &m);

/// Where the next training step reads result \p index of @main: for a
/// result `update/NAME` (a training step's new value of the global NAME),
/// The readers of result \p index as the next step reads it, when it is
/// an update `update/NAME` of a global NAME: the first reader and operand
/// in program order (the forward op that reads a weight, the update that
/// reads its optimizer state), or every reader when the update keeps it in
/// its own shards (ZeRO-3, `zero = 3` on the update: each reader gathers
/// it); empty for other results. The cost model prices moving the result
/// to those operands' layouts, and insert-collectives emits the moves, so
/// a sharded update of a replicated weight pays its all-gather (ZeRO-1's
/// shape) and optimizer state that stays sharded pays nothing.
std::vector<std::pair<const Op *, unsigned>> nextStepReaders(const Module &m,
                                                             size_t index);

/// Whether result \p index is an update that stays in its own shards.
bool storedAtUpdate(const Module &m, size_t index);

/// Where an op runs: its configuration and first device.
using OpPlacement =
    llvm::function_ref<llvm::Expected<std::pair<Config, int64_t>>(const Op &)>;

/// Each global a training step updates, with the layout it is kept in
/// between steps: its first reader's operand layout (the update moves
/// there), or at ZeRO-3 (storedAtUpdate) the update's own result layout.
llvm::Expected<std::vector<std::pair<const Value *, TensorLayout>>>
keptLayouts(const Module &m, OpPlacement where);

/// An operand of one op read from a result of another (op indices in
/// program order).
struct Use {
  unsigned producer, result, consumer, operand;
};

/// Every use of a result by an operand of `@main`, and each training-step
/// update's use by its next-step readers (nextStepReaders): the edges the
/// cost model prices.
std::vector<Use> usesOf(const Module &m);

/// Prices a given strategy (one configuration per op, in op order, each
/// op from its device offset in \p offsets; none: from device 0; each with
/// its levers in \p choices; none: the defaults).
StrategyCost evaluateStrategy(const Module &m, const CostModel &model,
                              llvm::ArrayRef<Config> configs,
                              llvm::ArrayRef<int64_t> offsets = {},
                              llvm::ArrayRef<OpChoice> choices = {});
StrategyCost evaluateStrategy(const SearchSpace &space, const CostModel &model,
                              llvm::ArrayRef<Config> configs,
                              llvm::ArrayRef<int64_t> offsets = {},
                              llvm::ArrayRef<OpChoice> choices = {});

/// One op's share of a strategy's price (priceEachOp).
struct OpPrice {
  /// Its own compute and communication (its gradient sync excluded) and
  /// the moves into its operands, both directions.
  double seconds = 0;
  /// Of seconds, the forward pass's: its arithmetic once, its reductions
  /// inside (the backward pass needs none), the forward moves into it.
  double forwardSeconds = 0;
  /// The synchronization of its weights' gradients, once per step.
  double syncSeconds = 0;
  /// Its weights' state on one device (weight, gradient, optimizer state).
  double weightBytes = 0;
  /// Its results kept for the backward pass, one microbatch's.
  double keptBytes = 0;
};

/// The strategy \p configs with \p choices, priced op by op in \p space
/// (each use's moves charged to its consumer): the sums evaluateStrategy
/// adds up, less the returns' moves.
std::vector<OpPrice> priceEachOp(const SearchSpace &space,
                                 const CostModel &model,
                                 llvm::ArrayRef<Config> configs,
                                 llvm::ArrayRef<OpChoice> choices);

/// \p model with \p levers for a step of \p microbatches microbatches of
/// \p space's module (which ops and values carry the sample dim come from
/// the space).
CostModel leveredModel(const SearchSpace &space, const CostModel &model,
                       const LeverOptions &levers, int64_t microbatches);

/// \p s's step simulated (Simulator.h, whole, not delta) with its
/// microbatches and levers.
double simulateStrategy(const SearchSpace &space, const CostModel &model,
                        const LeverOptions &levers, const Strategy &s);

/// The microbatch counts a step of \p space's module may run: those that
/// divide every sample dim's extent (powers of two, and their greatest
/// common divisor), ascending; \p requested (> 0) alone, or an error naming
/// the op whose sample dim it does not divide.
llvm::Expected<std::vector<int64_t>> microbatchCounts(const SearchSpace &space,
                                                      int64_t requested);

} // namespace pax
