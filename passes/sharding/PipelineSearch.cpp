//===- PipelineSearch.cpp - Stages searched over a model ------------------===//
#include "passes/sharding/PipelineSearch.h"
#include "passes/sharding/SolveInternal.h"
#include "passes/sharding/StrategyIO.h"

#include "ir/Module.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>

namespace pax {

std::vector<LayerCost> layerCosts(const Func &f,
                                  llvm::ArrayRef<LayerSpan> layers,
                                  llvm::ArrayRef<OpPrice> prices,
                                  int64_t microbatches, int64_t stageDevices,
                                  const Cluster &cluster) {
  double m = double(microbatches);
  const LinkLevel &link = stageDevices >= int64_t(cluster.gpusPerNode)
                              ? cluster.interNode
                              : cluster.intraNode;
  std::vector<LayerCost> out;
  for (const LayerSpan &l : layers) {
    LayerCost c;
    for (size_t i = l.first; i < l.last; ++i) {
      c.seconds += prices[i].seconds / m;
      c.forwardSeconds += prices[i].forwardSeconds / m;
      c.syncSeconds += prices[i].syncSeconds;
      c.staticBytes += prices[i].weightBytes;
      c.activationBytes += prices[i].keptBytes;
    }
    if (l.output) {
      double bytes = double(l.output->type.bytes()) / m / double(stageDevices);
      c.sendSeconds = 2 * (link.latency + bytes / link.bandwidth);
    }
    out.push_back(c);
  }
  return out;
}

Cluster subCluster(const Cluster &cluster, int64_t devices) {
  Cluster sub = cluster;
  sub.gpus = unsigned(devices);
  sub.gpusPerNode = std::min(cluster.gpusPerNode, sub.gpus);
  return sub;
}

namespace {

/// Values every device holds whole: results of ops computed from constants
/// and the small replicated inputs.
struct Everywhere {
  explicit Everywhere(const Module &m) : constants(constantOps(m)) {}
  bool operator()(const Value *v) const {
    if (v->kind == Value::Kind::Argument)
      return isReplicatedInput(*v);
    return v->kind == Value::Kind::Result && constants.count(v->def);
  }
  llvm::DenseSet<const Op *> constants;
};

/// The chunks per rank to try under schedule \p k (1 but interleaved:
/// \p p's, or every count from 2 whose \p stages x chunks stages the
/// \p layers allow).
std::vector<int64_t> chunkCounts(const PipelineOptions &p, Schedule k,
                                 int64_t stages, size_t layers) {
  if (k != Schedule::Interleaved)
    return {1};
  if (p.chunks) // (too many for the layers: planStages says so)
    return {p.chunks};
  // Megatron's virtual pipeline: 2 or more chunks of layers per rank.
  std::vector<int64_t> out;
  for (int64_t v = 2;
       v <= PipelineOptions::kMostChunks && v * stages <= int64_t(layers); ++v)
    out.push_back(v);
  if (out.empty()) // planStages says why none fits
    out.push_back(2);
  return out;
}

/// What pricing the pipelines of one stage count needs: the module, the
/// options, its layers, the stage count and each stage's submesh.
struct StageSetting {
  StageSetting(const Module &m, const Cluster &cluster,
               const ShardingOptions &o, const PipelineOptions &p,
               llvm::ArrayRef<LayerSpan> layers, int64_t stages,
               const SearchSpace &space)
      : m(m), o(o), p(p), layers(layers), stages(stages),
        devices(int64_t(cluster.gpus) / stages),
        sub(subCluster(cluster, devices)), space(space) {}
  const Module &m;
  const ShardingOptions &o;
  const PipelineOptions &p;
  llvm::ArrayRef<LayerSpan> layers;
  int64_t stages, devices;
  Cluster sub;
  /// The module's search space on one stage's devices (shared by the
  /// search's and Megatron's pipelines of this stage count).
  const SearchSpace &space;
};

/// One intra-op strategy a stage may take: the configurations a search
/// chose, with levers at one microbatch count.
struct Variant {
  const Strategy *intra;
  std::vector<OpChoice> choices;
  std::string name;
  bool recomputesAll = false;
};

/// The pipelines of one stage count: its submesh, the intra-op strategies
/// there (each solved for the whole model within a memory budget, with its
/// fitted levers or every op recomputed), each microbatch count, schedule
/// and cut; each stage takes the fastest strategy that fits it.
class StageCount : StageSetting {
public:
  using StageSetting::StageSetting;
  /// The fastest pipeline of this count, or an error saying why none.
  llvm::Expected<PipelineChoice> best();
  /// Also a leaner strategy for the stages that keep many microbatches
  /// in flight (budgets()); \p solved, where given, is the strategy
  /// within S limits, solved before, and \p around the microbatch count
  /// its pipeline took (only counts within a factor of two are tried).
  StageCount &withLeanerStrategy(const Strategy *solved, int64_t around) {
    lean = true;
    given = solved;
    near = around;
    return *this;
  }
  /// After best(): the strategy solved within S limits, where one was.
  const Strategy *solvedWithinStages() const {
    return intras.empty() ? nullptr : &intras.front().second;
  }

private:
  /// The whole model's strategies on the submesh into intras, one per
  /// memory budget (a multiple of the limit: budgets()) where one fits.
  llvm::Error intraStrategies(const ShardingOptions &so);
  std::vector<int64_t> budgets() const;
  void tryCut(llvm::ArrayRef<std::pair<int64_t, Strategy>> intras,
              const LeverOptions &levers, int64_t microbatches);
  /// The cut of \p costs on schedule \p k, kept where it is the fastest;
  /// whether it was, with stages that take different variants.
  bool tryPlan(const LayerVariants &costs, llvm::ArrayRef<Variant> variants,
               Schedule k, int64_t chunks, int64_t microbatches);
  /// found's strategy: each stage's ops take its variant's.
  void composeStrategy();

  std::optional<PipelineChoice> found;
  /// The layer costs and variants found's cut was made of.
  LayerVariants foundCosts;
  std::vector<Variant> foundVariants;
  std::string lastError;
  bool lean = false;
  const Strategy *given = nullptr;
  int64_t near = 0;
  /// The strategies solved, by budget.
  std::vector<std::pair<int64_t, Strategy>> intras;
  /// refineCut's proposals per stage.
  static constexpr unsigned kRefineStepsPerStage = 20;
};

std::vector<int64_t> StageCount::budgets() const {
  // S limits: the whole model's weights and one microbatch's activations
  // of every layer (what 1F1B's first stage keeps); half of it, for the
  // stages that keep many microbatches in flight.
  std::vector<int64_t> out{stages};
  if (lean && o.memoryLimit > 0 && p.mode == CostMode::Train && stages > 1)
    out.push_back((stages + 1) / 2);
  return out;
}

llvm::Error StageCount::intraStrategies(const ShardingOptions &so) {
  for (int64_t b : budgets()) {
    if (b == stages && given) {
      intras.emplace_back(b, *given);
      continue;
    }
    ShardingOptions within = so;
    within.memoryLimit = o.memoryLimit * double(b);
    auto intra = solveSharding(space, CostModel(sub, p.mode), within);
    if (!intra) {
      if (intras.empty())
        return intra.takeError();
      llvm::consumeError(intra.takeError()); // a tighter budget: none fits
      continue;
    }
    if (!intras.empty() && intra->configs == intras.front().second.configs &&
        intra->choices == intras.front().second.choices)
      continue; // the same strategy
    intras.emplace_back(b, std::move(*intra));
  }
  return llvm::Error::success();
}

/// The cost model of a step of \p microbatches microbatches with
/// \p levers on \p sub (an inference: the whole batch, no levers, which
/// layerCosts shares out).
static CostModel stepModel(const SearchSpace &space, const Cluster &sub,
                           CostMode mode, const LeverOptions &levers,
                           int64_t microbatches) {
  if (mode == CostMode::Infer)
    return CostModel(sub, CostMode::Infer);
  return leveredModel(space, CostModel(sub, CostMode::Train), levers,
                      microbatches);
}

void StageCount::tryCut(llvm::ArrayRef<std::pair<int64_t, Strategy>> intras,
                        const LeverOptions &levers, int64_t microbatches) {
  CostModel model = stepModel(space, sub, p.mode, levers, microbatches);
  LeverOptions all = levers;
  all.recompute = RecomputePolicy::All;
  CostModel recomputing = stepModel(space, sub, p.mode, all, microbatches);
  const Func &f = m.main;
  LayerVariants costs;
  std::vector<Variant> variants;
  auto add = [&](const CostModel &priced, Variant v) {
    costs.variants.push_back(layerCosts(
        f, layers, priceEachOp(space, priced, v.intra->configs, v.choices),
        microbatches, devices, sub));
    variants.push_back(std::move(v));
  };
  for (const auto &[budget, intra] : intras) {
    std::string within =
        o.memoryLimit > 0
            ? llvm::formatv("solved within {0}x the memory limit", budget).str()
            : std::string("solved without a memory limit");
    add(model, {&intra, intra.choices, within});
    // (Recomputation where the levers allow it: a plan recomputes only
    // under --recompute=auto or all.)
    if (p.mode != CostMode::Train || levers.recompute == RecomputePolicy::None)
      continue;
    std::vector<OpChoice> every = intra.choices;
    for (size_t i = 0; i < f.ops.size(); ++i)
      every[i] = recomputing.choose(*f.ops[i], intra.configs[i], 0);
    add(recomputing,
        {&intra, std::move(every), within + ", all recomputed", true});
  }
  for (Schedule k :
       {Schedule::OneFOneB, Schedule::GPipe, Schedule::Interleaved}) {
    if (p.schedule ? *p.schedule != k
                   : k == Schedule::Interleaved && microbatches % stages)
      continue;
    for (int64_t chunks : chunkCounts(p, k, stages, layers.size())) {
      // Where the fastest cut so far mixes the stages' choices, each
      // variant on every stage too: the choice is each stage's own, and
      // the schedule's run may favour one strategy for all.
      if (!tryPlan(costs, variants, k, chunks, microbatches))
        continue;
      for (size_t v = 0; v < variants.size(); ++v)
        tryPlan(LayerVariants{{costs.variants[v]}},
                llvm::ArrayRef(variants).slice(v, 1), k, chunks, microbatches);
    }
  }
}

bool StageCount::tryPlan(const LayerVariants &costs,
                         llvm::ArrayRef<Variant> variants, Schedule k,
                         int64_t chunks, int64_t microbatches) {
  auto plan = planStages(costs, stages, microbatches, k, o.memoryLimit, chunks);
  if (!plan) {
    std::string why = llvm::toString(plan.takeError());
    if (lastError.empty())
      lastError = why;
    return false;
  }
  bool mixes = llvm::any_of(plan->stages, [&](const PipelineStage &st) {
    return st.variant != plan->stages.front().variant;
  });
  if (found && found->plan.simulatedSeconds <= plan->simulatedSeconds)
    return false;
  found = PipelineChoice{std::move(*plan),
                         devices,
                         std::vector<LayerSpan>(layers.begin(), layers.end()),
                         *variants.front().intra,
                         {},
                         false};
  found->intra.microbatches = microbatches;
  foundCosts = costs;
  foundVariants.assign(variants.begin(), variants.end());
  return mixes;
}

void StageCount::composeStrategy() {
  Strategy &intra = found->intra;
  intra.choices = foundVariants.front().choices;
  found->stageStrategies.clear();
  for (const PipelineStage &st : found->plan.stages) {
    const Variant &v = foundVariants[size_t(st.variant)];
    found->recomputesAll |= v.recomputesAll;
    size_t a = layers[size_t(st.first)].first;
    size_t b = layers[size_t(st.last - 1)].last;
    std::copy(v.intra->configs.begin() + a, v.intra->configs.begin() + b,
              intra.configs.begin() + a);
    std::string text = v.name;
    if (!v.choices.empty()) { // (an inference has no levers)
      std::copy(v.choices.begin() + a, v.choices.begin() + b,
                intra.choices.begin() + a);
      text +=
          "; " + describeLevers(intra.microbatches,
                                llvm::ArrayRef(intra.choices).slice(a, b - a));
    }
    found->stageStrategies.push_back(std::move(text));
  }
}

llvm::Expected<PipelineChoice> StageCount::best() {
  ShardingOptions so = o;
  so.configs.devices = devices;
  so.progress = nullptr;
  so.refineSteps = 0;
  auto counts = microbatchCounts(space, p.microbatches);
  if (!counts)
    return counts.takeError();
  so.levers.microbatches = p.microbatches; // 0: the fit search chooses
  if (p.mode == CostMode::Infer)
    so.levers = LeverOptions();
  if (auto err = intraStrategies(so))
    return err;
  if (lean && intras.size() < 2)
    return llvm::createStringError(llvm::formatv(
        "no leaner strategy (within {0} limits none fits, or the one "
        "within {1})",
        (stages + 1) / 2, stages));
  for (int64_t mb : *counts)
    if (!near || (2 * mb >= near && mb <= 2 * near))
      tryCut(intras, so.levers, mb);
  if (!found)
    return llvm::createStringError(lastError.empty() ? "no microbatch count"
                                                     : lastError);
  // The exact cut of the slowest stage, refined on the schedule's run.
  found->plan =
      refineCut(foundCosts, found->plan, o.memoryLimit,
                unsigned(kRefineStepsPerStage * found->plan.stages.size()));
  composeStrategy();
  return *found;
}

/// Megatron-LM with pipeline stages at one stage count: each tensor degree
/// inside a node (Megatron's layer splits on the submesh), recomputation
/// none or all, ZeRO 0 or 1, every microbatch count and schedule, the
/// layers cut into equal runs; the fastest simulated whose every stage
/// fits.
class MegatronStages : StageSetting {
public:
  using StageSetting::StageSetting;
  std::optional<MegatronPipeline> best();

private:
  void price(const SearchSpace &space, int64_t t,
             llvm::ArrayRef<Config> configs, const LeverOptions &levers,
             int64_t microbatches);

  std::optional<MegatronPipeline> found;
};

void MegatronStages::price(const SearchSpace &space, int64_t t,
                           llvm::ArrayRef<Config> configs,
                           const LeverOptions &levers, int64_t microbatches) {
  CostModel model = leveredModel(space, CostModel(sub, CostMode::Train), levers,
                                 microbatches);
  const Func &f = m.main;
  std::vector<OpChoice> choices;
  for (size_t i = 0; i < f.ops.size(); ++i)
    choices.push_back(model.choose(*f.ops[i], configs[i], 0));
  std::vector<LayerCost> costs =
      layerCosts(f, layers, priceEachOp(space, model, configs, choices),
                 microbatches, devices, sub);
  for (Schedule k :
       {Schedule::OneFOneB, Schedule::GPipe, Schedule::Interleaved}) {
    if (p.schedule && *p.schedule != k)
      continue;
    for (int64_t chunks : chunkCounts(p, k, stages, layers.size())) {
      auto plan = evenStages(costs, stages, microbatches, k, chunks);
      if (!plan) {
        llvm::consumeError(plan.takeError());
        continue;
      }
      if (!ranksFit(*plan, o.memoryLimit) ||
          (found &&
           found->choice.plan.simulatedSeconds <= plan->simulatedSeconds))
        continue;
      Strategy intra;
      intra.configs.assign(configs.begin(), configs.end());
      intra.choices = choices;
      intra.microbatches = microbatches;
      found = MegatronPipeline{
          PipelineChoice{std::move(*plan),
                         devices,
                         std::vector<LayerSpan>(layers.begin(), layers.end()),
                         std::move(intra),
                         {},
                         false},
          t};
    }
  }
}

std::optional<MegatronPipeline> MegatronStages::best() {
  ShardingOptions so = o;
  so.configs.devices = devices;
  so.progress = nullptr;
  auto counts = microbatchCounts(space, p.microbatches);
  if (!counts) {
    llvm::consumeError(counts.takeError());
    return std::nullopt;
  }
  CostModel base(sub, CostMode::Train);
  for (int64_t t : tensorDegrees(devices, sub.gpusPerNode)) {
    auto configs = megatronConfigs(space, base, so, t);
    if (!configs) {
      llvm::consumeError(configs.takeError());
      continue;
    }
    for (RecomputePolicy r : {RecomputePolicy::None, RecomputePolicy::All})
      for (int z : {0, 1})
        for (int64_t mb : *counts) {
          // (Recomputation where the levers allow it, as the search's.)
          if ((r == RecomputePolicy::All &&
               o.levers.recompute == RecomputePolicy::None) ||
              !samplesDivide(space.data(), *configs, mb))
            continue;
          LeverOptions l = o.levers;
          l.recompute = r;
          l.zero = z;
          price(space, t, *configs, l, mb);
        }
  }
  return found;
}

/// The stage counts to try: \p p's, or each that divides the cluster's
/// devices (at least 2, at most the layers).
llvm::Expected<std::vector<int64_t>>
stageCounts(const Cluster &cluster, const PipelineOptions &p, size_t layers) {
  int64_t n = cluster.gpus;
  if (p.stages) {
    if (p.stages < 1 || p.stages > int64_t(layers) || n % p.stages)
      return llvm::createStringError(llvm::formatv(
          "--pipeline={0}: a pipeline needs 1 to {1} stages (the model's "
          "layers) that divide the {2} devices",
          p.stages, layers, n));
    return std::vector<int64_t>{p.stages};
  }
  std::vector<int64_t> out;
  for (int64_t s = 2; s <= std::min<int64_t>(n, int64_t(layers)); ++s)
    if (n % s == 0)
      out.push_back(s);
  return out;
}

/// One stage count's part of searchPipeline: its space, Megatron's grid
/// and the search's pipelines.
class CountSearch {
public:
  CountSearch(const Module &m, const Cluster &cluster, const ShardingOptions &o,
              const PipelineOptions &p, llvm::ArrayRef<LayerSpan> layers,
              PipelineSearchResult &r)
      : m(m), cluster(cluster), o(o), p(p), layers(layers), r(r) {}
  /// Prices \p s stages (with \p lean, a leaner strategy too; Megatron's
  /// grid without).
  void run(int64_t s, bool lean);
  /// Whether a leaner strategy is worth a second try: a training step
  /// under a memory limit.
  bool leanApplies() const {
    return o.memoryLimit > 0 && p.mode == CostMode::Train;
  }

private:
  const Module &m;
  const Cluster &cluster;
  const ShardingOptions &o;
  const PipelineOptions &p;
  llvm::ArrayRef<LayerSpan> layers;
  PipelineSearchResult &r;
  /// The fastest count's space and strategy within S limits so far, which
  /// its second try reuses.
  std::unique_ptr<SearchSpace> fastestSpace;
  std::optional<Strategy> fastestSolved;
  int64_t fastest = 0;
};

void CountSearch::run(int64_t s, bool lean) {
  auto began = std::chrono::steady_clock::now();
  ConfigOptions co = o.configs;
  co.devices = int64_t(cluster.gpus) / s;
  // A stage's ops are placed at its first device: counts that divide.
  co.dividing = true;
  bool reuse = lean && fastest == s && fastestSpace;
  std::unique_ptr<SearchSpace> space =
      reuse ? std::move(fastestSpace) : std::make_unique<SearchSpace>(m, co);
  auto meg = p.mode == CostMode::Train && !lean
                 ? MegatronStages(m, cluster, o, p, layers, s, *space).best()
                 : std::nullopt;
  if (meg && (!r.megatron || meg->choice.plan.simulatedSeconds <
                                 r.megatron->choice.plan.simulatedSeconds))
    r.megatron = std::move(*meg);
  StageCount count(m, cluster, o, p, layers, s, *space);
  if (lean)
    count.withLeanerStrategy(reuse && fastestSolved ? &*fastestSolved : nullptr,
                             reuse ? r.best->plan.microbatches : 0);
  auto best = count.best();
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  std::string what = lean ? " with a leaner strategy too" : "";
  if (!best) {
    r.tried.push_back(llvm::formatv("{0} stages{1} ({2:F1} s): {3}", s, what,
                                    took, llvm::toString(best.takeError())));
    return;
  }
  r.tried.push_back(llvm::formatv(
      "{0} stages of {1} devices{2} ({3:F1} s): {4}, {5} microbatches, {6}", s,
      best->stageDevices, what, took,
      formatSeconds(best->plan.simulatedSeconds), best->plan.microbatches,
      scheduleText(scheduleName(best->plan.schedule), best->plan.chunks)));
  if (r.best && best->plan.simulatedSeconds >= r.best->plan.simulatedSeconds)
    return;
  r.best = std::move(*best);
  if (lean)
    return;
  fastest = s;
  fastestSpace = std::move(space);
  if (const Strategy *solved = count.solvedWithinStages())
    fastestSolved = *solved;
}

} // namespace

llvm::Expected<PipelineSearchResult> searchPipeline(const Module &m,
                                                    const Cluster &cluster,
                                                    const ShardingOptions &o,
                                                    const PipelineOptions &p) {
  auto start = std::chrono::steady_clock::now();
  std::vector<LayerSpan> layers = findLayers(m.main, Everywhere(m));
  auto counts = stageCounts(cluster, p, layers.size());
  if (!counts)
    return counts.takeError();
  PipelineSearchResult r;
  CountSearch search(m, cluster, o, p, layers, r);
  for (int64_t s : *counts)
    search.run(s, /*lean=*/false);
  // Each stage may take a leaner strategy of its own where the one solved
  // within S limits leaves stages short of memory (they fit only with
  // every op recomputed): tried on the fastest stage count, or on every
  // count where none fits.
  if (search.leanApplies() && !r.best)
    for (int64_t s : *counts)
      search.run(s, /*lean=*/true);
  else if (search.leanApplies() && r.best->recomputesAll)
    search.run(r.best->plan.ranks(), /*lean=*/true);
  // Megatron's point is a pipeline too: the faster of the two is returned
  // (with --solver=megatron, Megatron's).
  bool megatronOnly = o.solver == SolverKind::Megatron;
  if (megatronOnly)
    r.best.reset();
  if (r.megatron && (!r.best || r.megatron->choice.plan.simulatedSeconds <
                                    r.best->plan.simulatedSeconds)) {
    r.best = r.megatron->choice;
    r.fromMegatron = true;
  }
  r.megatronOnly = megatronOnly;
  r.inference = p.mode == CostMode::Infer;
  r.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return r;
}

/// One line per stage of \p c: layers, ops, devices, time, peak.
static void printStages(const PipelineChoice &c, llvm::raw_ostream &os) {
  const PipelinePlan &p = c.plan;
  const std::vector<LayerSpan> &layers = c.layers;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const PipelineStage &st = p.stages[s];
    os << llvm::formatv(
        "  stage {0}: layers {1}-{2} of {3} (ops {4}-{5}), devices {6}-{7}, "
        "{8} per microbatch, peak {9:F2} GiB ({10} in flight){11}\n",
        s, st.first, st.last - 1, layers.size(), layers[size_t(st.first)].first,
        layers[size_t(st.last - 1)].last - 1,
        int64_t(s) % p.ranks() * c.stageDevices,
        (int64_t(s) % p.ranks() + 1) * c.stageDevices - 1,
        formatSeconds(st.seconds), st.peakBytes / 1073741824.0, st.inFlight,
        s < c.stageStrategies.size() ? "; " + c.stageStrategies[s]
                                     : std::string());
  }
}

void printPipeline(const PipelineSearchResult &r, double flat,
                   llvm::raw_ostream &os) {
  if (!r.best) {
    os << llvm::formatv("pipeline:            none fits (searched in {0:F1} "
                        "s)\n",
                        r.searchSeconds);
  } else {
    const PipelinePlan &p = r.best->plan;
    os << llvm::formatv(
        "pipeline:            {0} stages x {1} devices, {2} microbatches, "
        "{3}: step {4} simulated ({5} by the formula, bubble {6:F1}%)",
        p.ranks(), r.best->stageDevices, p.microbatches,
        scheduleText(scheduleName(p.schedule), p.chunks),
        formatSeconds(p.simulatedSeconds), formatSeconds(p.stepSeconds),
        100 * p.bubble);
    if (flat > 0)
      os << llvm::formatv(", {0:F2}x the step without stages ({1})",
                          flat / p.simulatedSeconds, formatSeconds(flat));
    if (p.refinedFrom > 0)
      os << llvm::formatv("; MCMC moved the exact cut's boundaries ({0} "
                          "simulated)",
                          formatSeconds(p.refinedFrom));
    os << llvm::formatv("; searched in {0:F1} s (stage counts x "
                        "microbatches x schedules x each stage's strategy "
                        "and recomputation, exhaustive but for the leaner "
                        "strategies, tried on the fastest stage count; each "
                        "schedule simulated on the stages' additive "
                        "prices)\n",
                        r.searchSeconds);
    printStages(*r.best, os);
  }
  for (const std::string &line : r.tried)
    os << "  tried " << line << "\n";
  if (!r.megatron) {
    if (!r.inference)
      os << "  megatron with stages: no point of its grid fits\n";
    return;
  }
  const PipelineChoice &meg = r.megatron->choice;
  os << llvm::formatv(
      "  megatron with stages: {0} stages x {1} devices (tensor degree {2}), "
      "{3} microbatches, {4}, {5}, layers cut evenly: step {6} simulated",
      meg.plan.ranks(), meg.stageDevices, r.megatron->tensor,
      meg.plan.microbatches,
      scheduleText(scheduleName(meg.plan.schedule), meg.plan.chunks),
      describeLevers(meg.intra.microbatches, meg.intra.choices),
      formatSeconds(meg.plan.simulatedSeconds));
  if (r.fromMegatron && r.megatronOnly)
    os << "; --solver=megatron: the pipeline above";
  else if (r.fromMegatron)
    os << "; faster than the search's, so the pipeline above";
  else if (r.best)
    os << llvm::formatv("; the pipeline above is {0:F2}x of it",
                        meg.plan.simulatedSeconds /
                            r.best->plan.simulatedSeconds);
  os << "\n";
}

llvm::json::Value pipelineJson(const PipelineSearchResult &r) {
  llvm::json::Object out{{"search_s", r.searchSeconds}};
  llvm::json::Array tried;
  for (const std::string &line : r.tried)
    tried.push_back(line);
  out["tried"] = std::move(tried);
  if (r.megatron)
    out["megatron"] = llvm::json::Object{
        {"stages", r.megatron->choice.plan.ranks()},
        {"stage_devices", r.megatron->choice.stageDevices},
        {"tensor", r.megatron->tensor},
        {"microbatches", r.megatron->choice.plan.microbatches},
        {"schedule", scheduleName(r.megatron->choice.plan.schedule)},
        {"chunks", r.megatron->choice.plan.chunks},
        {"levers", describeLevers(r.megatron->choice.intra.microbatches,
                                  r.megatron->choice.intra.choices)},
        {"simulated_s", r.megatron->choice.plan.simulatedSeconds}};
  if (!r.best)
    return out;
  const PipelineChoice &c = *r.best;
  llvm::json::Array stages;
  for (size_t s = 0; s < c.plan.stages.size(); ++s) {
    const PipelineStage &st = c.plan.stages[s];
    llvm::json::Object stage{
        {"layers", llvm::json::Array{st.first, st.last}},
        {"ops", llvm::json::Array{int64_t(c.layers[size_t(st.first)].first),
                                  int64_t(c.layers[size_t(st.last - 1)].last)}},
        {"devices",
         llvm::json::Array{int64_t(s) % c.plan.ranks() * c.stageDevices,
                           (int64_t(s) % c.plan.ranks() + 1) * c.stageDevices}},
        {"seconds", st.seconds},
        {"peak_bytes", st.peakBytes},
        {"in_flight", st.inFlight}};
    if (s < c.stageStrategies.size())
      stage["strategy"] = c.stageStrategies[s];
    stages.push_back(std::move(stage));
  }
  out["stages"] = std::move(stages);
  out["chosen_from"] = r.fromMegatron ? "megatron" : "search";
  out["stage_devices"] = c.stageDevices;
  out["microbatches"] = c.plan.microbatches;
  out["schedule"] = scheduleName(c.plan.schedule);
  out["chunks"] = c.plan.chunks;
  out["step_s"] = c.plan.stepSeconds;
  out["simulated_s"] = c.plan.simulatedSeconds;
  out["bubble"] = c.plan.bubble;
  if (c.plan.refinedFrom > 0)
    out["refined_from_s"] = c.plan.refinedFrom;
  out["levers"] = describeLevers(c.intra.microbatches, c.intra.choices);
  return out;
}

} // namespace pax
