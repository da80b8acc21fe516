//===- PipelineSearch.cpp - Stages searched over a model ------------------===//
#include "passes/sharding/PipelineSearch.h"
#include "passes/sharding/SolveInternal.h"
#include "passes/sharding/StrategyIO.h"

#include "ir/Module.h"

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

/// The pipelines of one stage count: its submesh, the intra-op strategy
/// there, each microbatch count, schedule and lever setting cut.
class StageCount : StageSetting {
public:
  using StageSetting::StageSetting;
  /// The fastest pipeline of this count, or an error saying why none.
  llvm::Expected<PipelineChoice> best();

private:
  void tryCut(const SearchSpace &space, const Strategy &intra,
              const LeverOptions &levers, int64_t microbatches);
  /// The cut of \p costs on schedule \p k, kept where it is the fastest.
  void tryPlan(llvm::ArrayRef<LayerCost> costs, Schedule k, int64_t chunks,
               const Strategy &intra, llvm::ArrayRef<OpChoice> choices,
               int64_t microbatches);

  std::optional<PipelineChoice> found;
  /// The layer costs found's cut was made of.
  std::vector<LayerCost> foundCosts;
  std::string lastError;
  /// refineCut's proposals per stage.
  static constexpr unsigned kRefineStepsPerStage = 20;
};

void StageCount::tryCut(const SearchSpace &space, const Strategy &intra,
                        const LeverOptions &levers, int64_t microbatches) {
  // An inference prices the whole batch (no levers) and layerCosts takes
  // a microbatch's share.
  CostModel model = p.mode == CostMode::Infer
                        ? CostModel(sub, CostMode::Infer)
                        : leveredModel(space, CostModel(sub, CostMode::Train),
                                       levers, microbatches);
  std::vector<OpChoice> choices = intra.choices;
  const Func &f = m.main;
  if (levers.recompute == RecomputePolicy::All)
    for (size_t i = 0; i < f.ops.size(); ++i)
      choices[i] = model.choose(*f.ops[i], intra.configs[i], 0);
  std::vector<LayerCost> costs =
      layerCosts(f, layers, priceEachOp(space, model, intra.configs, choices),
                 microbatches, devices, sub);
  for (Schedule k :
       {Schedule::OneFOneB, Schedule::GPipe, Schedule::Interleaved}) {
    if (p.schedule ? *p.schedule != k
                   : k == Schedule::Interleaved && microbatches % stages)
      continue;
    for (int64_t chunks : chunkCounts(p, k, stages, layers.size()))
      tryPlan(costs, k, chunks, intra, choices, microbatches);
  }
}


void StageCount::tryPlan(llvm::ArrayRef<LayerCost> costs, Schedule k,
                         int64_t chunks, const Strategy &intra,
                         llvm::ArrayRef<OpChoice> choices,
                         int64_t microbatches) {
  auto plan = planStages(costs, stages, microbatches, k, o.memoryLimit, chunks);
  if (!plan) {
    std::string why = llvm::toString(plan.takeError());
    if (lastError.empty())
      lastError = why;
    return;
  }
  if (found && found->plan.simulatedSeconds <= plan->simulatedSeconds)
    return;
  found = PipelineChoice{std::move(*plan), devices,
                         std::vector<LayerSpan>(layers.begin(), layers.end()),
                         intra};
  foundCosts.assign(costs.begin(), costs.end());
  found->intra.choices.assign(choices.begin(), choices.end());
  found->intra.microbatches = microbatches;
}

llvm::Expected<PipelineChoice> StageCount::best() {
  ShardingOptions so = o;
  so.configs.devices = devices;
  // The whole model on the submesh holds S stages' weights and, at one
  // microbatch each, as many layers' activations as 1F1B's first stage
  // keeps: its levers are chosen to fit S limits (the cut then checks each
  // stage's own peak).
  so.memoryLimit = o.memoryLimit * double(stages);
  so.progress = nullptr;
  so.refineSteps = 0;
  auto counts = microbatchCounts(space, p.microbatches);
  if (!counts)
    return counts.takeError();
  so.levers.microbatches = p.microbatches; // 0: the fit search chooses
  if (p.mode == CostMode::Infer)
    so.levers = LeverOptions();
  auto intra = solveSharding(space, CostModel(sub, p.mode), so);
  if (!intra)
    return intra.takeError();
  LeverOptions all = so.levers;
  all.recompute = RecomputePolicy::All;
  for (int64_t mb : *counts) {
    tryCut(space, *intra, so.levers, mb);
    if (p.mode == CostMode::Train)
      tryCut(space, *intra, all, mb);
  }
  if (!found)
    return llvm::createStringError(lastError.empty() ? "no microbatch count"
                                                     : lastError);
  // The exact cut of the slowest stage, refined on the schedule's run.
  found->plan =
      refineCut(foundCosts, found->plan, o.memoryLimit,
                unsigned(kRefineStepsPerStage * found->plan.stages.size()));
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
          PipelineChoice{std::move(*plan), devices,
                         std::vector<LayerSpan>(layers.begin(), layers.end()),
                         std::move(intra)},
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
          if (!samplesDivide(space.data(), *configs, mb))
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
  for (int64_t s : *counts) {
    auto began = std::chrono::steady_clock::now();
    ConfigOptions co = o.configs;
    co.devices = int64_t(cluster.gpus) / s;
    // A stage's ops are placed at its first device: counts that divide.
    co.dividing = true;
    SearchSpace space(m, co);
    auto meg = p.mode == CostMode::Train
                   ? MegatronStages(m, cluster, o, p, layers, s, space).best()
                   : std::nullopt;
    if (meg && (!r.megatron || meg->choice.plan.simulatedSeconds <
                                   r.megatron->choice.plan.simulatedSeconds))
      r.megatron = std::move(*meg);
    auto best = StageCount(m, cluster, o, p, layers, s, space).best();
    double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
            .count();
    if (!best) {
      r.tried.push_back(llvm::formatv("{0} stages ({1:F1} s): {2}", s, took,
                                      llvm::toString(best.takeError())));
      continue;
    }
    r.tried.push_back(llvm::formatv(
        "{0} stages of {1} devices ({2:F1} s): {3}, {4} microbatches, {5}", s,
        best->stageDevices, took, formatSeconds(best->plan.simulatedSeconds),
        best->plan.microbatches,
        scheduleText(scheduleName(best->plan.schedule), best->plan.chunks)));
    if (!r.best || best->plan.simulatedSeconds < r.best->plan.simulatedSeconds)
      r.best = std::move(*best);
  }
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
        "{8} per microbatch, peak {9:F2} GiB ({10} in flight)\n",
        s, st.first, st.last - 1, layers.size(), layers[size_t(st.first)].first,
        layers[size_t(st.last - 1)].last - 1,
        int64_t(s) % p.ranks() * c.stageDevices,
        (int64_t(s) % p.ranks() + 1) * c.stageDevices - 1,
        formatSeconds(st.seconds), st.peakBytes / 1073741824.0, st.inFlight);
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
                        "microbatches x schedules x recomputation, "
                        "exhaustive; each schedule simulated on the stages' "
                        "additive prices)\n",
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
    stages.push_back(llvm::json::Object{
        {"layers", llvm::json::Array{st.first, st.last}},
        {"ops", llvm::json::Array{int64_t(c.layers[size_t(st.first)].first),
                                  int64_t(c.layers[size_t(st.last - 1)].last)}},
        {"devices",
         llvm::json::Array{int64_t(s) % c.plan.ranks() * c.stageDevices,
                           (int64_t(s) % c.plan.ranks() + 1) * c.stageDevices}},
        {"seconds", st.seconds},
        {"peak_bytes", st.peakBytes},
        {"in_flight", st.inFlight}});
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
