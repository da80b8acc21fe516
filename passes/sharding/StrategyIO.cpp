//===- StrategyIO.cpp - Strategies as JSON and as a report ----------------===//
#include "passes/sharding/StrategyIO.h"

#include "codegen/plan/JsonValues.h"
#include "passes/sharding/Simulator.h"
#include "passes/sharding/SolveInternal.h"

#include "passes/sharding/Aggregation.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <sys/resource.h>

namespace pax {

/// Peak resident memory of this process, bytes.
static double peakRss() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024;
}

/// Prices the given strategy \p s: in training, with the microbatches and
/// each op's levers the strategy gives (\p given), else the microbatches
/// asked for (1 for auto) and each op's levers as they price best without
/// memory pressure. A microbatch count that does not divide is an error.
static llvm::Error priceGiven(const SearchSpace &space, const CostModel &model,
                              const LeverOptions &levers,
                              const GivenLevers *given, Strategy &s) {
  if (model.getMode() != CostMode::Train) {
    s.cost = evaluateStrategy(space, model, s.configs, s.offsets);
    return llvm::Error::success();
  }
  s.microbatches = given && given->microbatches
                       ? given->microbatches
                       : std::max<int64_t>(levers.microbatches, 1);
  auto counts = microbatchCounts(space, s.microbatches);
  if (!counts)
    return counts.takeError();
  CostModel levered = leveredModel(space, model, levers, s.microbatches);
  const Func &f = space.module().main;
  s.choices.clear();
  for (size_t i = 0; i < f.ops.size(); ++i)
    s.choices.push_back(given && !given->choices.empty()
                            ? given->choices[i]
                            : levered.choose(*f.ops[i], s.configs[i], 0));
  s.cost = evaluateStrategy(space, levered, s.configs, s.offsets, s.choices);
  return llvm::Error::success();
}

/// The baselines a report compares with: data-parallel and expert, and
/// for a training step Megatron's grid.
static std::vector<SolverKind> reportedBaselines(CostMode mode) {
  std::vector<SolverKind> kinds = {SolverKind::DataParallel,
                                   SolverKind::Expert};
  if (mode == CostMode::Train)
    kinds.push_back(SolverKind::Megatron);
  return kinds;
}

/// The simulator judges a step better than the additive cost the search
/// minimizes: when a baseline of \p baselines simulates faster than the
/// search's strategy, it becomes the strategy and the search's is listed
/// among the baselines in its place. The search's proof, if any, becomes
/// the lower bound on the additive cost.
static void chooseBySimulation(StrategyReport &r,
                               std::map<std::string, Strategy> &baselines) {
  auto fastest = baselines.end();
  for (auto it = baselines.begin(); it != baselines.end(); ++it)
    if (it->second.cost.simulatedSeconds <
        (fastest == baselines.end() ? r.strategy.cost.simulatedSeconds
                                    : fastest->second.cost.simulatedSeconds))
      fastest = it;
  if (fastest == baselines.end())
    return;
  Strategy searched = std::move(r.strategy);
  r.strategy = std::move(fastest->second);
  r.chosenFrom = fastest->first;
  baselines.erase(fastest);
  r.strategy.stats = searched.stats;
  r.strategy.stats.exact = false;
  if (searched.stats.exact)
    r.strategy.stats.lowerBound = searched.searchCost;
  r.strategy.spaceSizes = searched.spaceSizes;
  r.strategy.proposals = searched.proposals;
  r.strategy.accepted = searched.accepted;
  r.strategy.budgetHit = searched.budgetHit;
  r.strategy.dpSimulatedSeconds = searched.dpSimulatedSeconds;
  baselines[solverName(r.solver).str()] = std::move(searched);
}

/// A short MCMC chain from the chosen strategy (a program's): where it
/// finds one that simulates faster and fits, that one is returned.
static llvm::Error refineByMcmc(const SearchSpace &space,
                                const CostModel &model,
                                const ShardingOptions &options,
                                StrategyReport &r) {
  if (options.refineSteps == 0)
    return llvm::Error::success();
  ShardingOptions o = options;
  o.mcmcSteps = options.refineSteps;
  auto refined = searchMcmc(space, model, o, &r.strategy);
  if (!refined)
    return refined.takeError();
  r.refineProposals = refined->proposals;
  double before = r.strategy.cost.simulatedSeconds;
  bool fits = options.memoryLimit <= 0 ||
              refined->cost.memoryBytes <= options.memoryLimit;
  if (!fits || !(refined->cost.simulatedSeconds < before * (1 - 1e-9)))
    return llvm::Error::success();
  r.refinedFrom = before;
  Strategy &s = r.strategy;
  s.configs = std::move(refined->configs);
  s.offsets = std::move(refined->offsets);
  s.choices = std::move(refined->choices);
  s.cost = refined->cost;
  if (s.stats.exact) // the search's proof bounds the additive cost
    s.stats.lowerBound = s.searchCost;
  s.stats.exact = false;
  return llvm::Error::success();
}

/// Takes the given strategy \p fixed (with \p fixedOffsets and \p
/// fixedLevers) as the report's and prices it.
static llvm::Error
priceFixed(const Module &m, const SearchSpace &space, const CostModel &model,
           const ShardingOptions &options, const std::vector<Config> &fixed,
           llvm::ArrayRef<int64_t> fixedOffsets, const GivenLevers *fixedLevers,
           StrategyReport &r) {
  r.strategy.configs = fixed;
  r.strategy.offsets.assign(fixedOffsets.begin(), fixedOffsets.end());
  r.given = true;
  r.strategy.stats.exact = false;
  if (auto err =
          priceGiven(space, model, options.levers, fixedLevers, r.strategy))
    return err;
  for (const auto &op : m.main.ops)
    r.strategy.spaceSizes.push_back(
        enumerateConfigs(*op, options.configs).size());
  return llvm::Error::success();
}

/// Solves and simulates the baselines a report compares with (skipping
/// the searched solver's own unless \p fixed), by solver name; those that
/// fail go to the report's baseline errors.
static std::map<std::string, Strategy>
solveReportedBaselines(const SearchSpace &space, const CostModel &model,
                       const ShardingOptions &options, CostMode mode,
                       bool fixed, StrategyReport &r) {
  std::map<std::string, Strategy> baselines;
  for (SolverKind k : reportedBaselines(mode)) {
    if (!fixed && k == options.solver)
      continue;
    auto s = solveBaseline(space, model, options, k);
    if (!s) { // reported as not fitting; the strategy still stands
      r.baselineErrors[solverName(k).str()] = llvm::toString(s.takeError());
      continue;
    }
    s->cost.simulatedSeconds =
        simulateStrategy(space, model, options.levers, *s);
    baselines[solverName(k).str()] = std::move(*s);
  }
  return baselines;
}

/// Lists \p baselines' costs (and, in training, levers) in the report.
static void listBaselines(const std::map<std::string, Strategy> &baselines,
                          CostMode mode, StrategyReport &r) {
  for (const auto &[name, s] : baselines) {
    r.baselines[name] = s.cost;
    if (mode == CostMode::Train)
      r.baselineLevers[name] = describeLevers(s.microbatches, s.choices);
  }
}

llvm::Expected<StrategyReport>
buildReport(const Module &m, const Cluster &cluster, CostMode mode,
            const ShardingOptions &options,
            const std::optional<std::vector<Config>> &fixed,
            llvm::ArrayRef<int64_t> fixedOffsets,
            const GivenLevers *fixedLevers) {
  CostModel model(cluster, mode);
  StrategyReport r;
  r.model = m.name;
  r.cluster = &cluster;
  r.mode = mode;
  r.solver = options.solver;
  r.memoryLimit = options.memoryLimit;
  auto start = std::chrono::steady_clock::now();
  SearchSpace space(m, options.configs);
  if (fixed) {
    if (auto err = priceFixed(m, space, model, options, *fixed, fixedOffsets,
                              fixedLevers, r))
      return err;
  } else {
    auto s = solveSharding(space, model, options);
    if (!s)
      return s.takeError();
    r.strategy = std::move(*s);
  }
  r.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // Every strategy listed is also simulated, on the same scale.
  r.strategy.cost.simulatedSeconds =
      simulateStrategy(space, model, options.levers, r.strategy);
  std::map<std::string, Strategy> baselines =
      solveReportedBaselines(space, model, options, mode, fixed.has_value(), r);
  if (!fixed && options.chooseBySimulation && !isBaseline(options.solver)) {
    chooseBySimulation(r, baselines);
    if (mode == CostMode::Infer && options.solver != SolverKind::Mcmc)
      if (auto err = refineByMcmc(space, model, options, r))
        return err;
  }
  listBaselines(baselines, mode, r);
  r.peakMemoryBytes = peakRss();
  return r;
}

/// The search's lower bound on the step time, seconds. The search sums
/// costs rounded to picoseconds, so the bound is clipped at the cost.
static double lowerBoundSeconds(const StrategyReport &r) {
  if (r.strategy.stats.exact)
    return r.strategy.cost.seconds;
  return std::min(double(r.strategy.stats.lowerBound) * 1e-12,
                  r.strategy.cost.seconds);
}

/// How far the strategy may be from the optimum: (cost - bound) / cost.
static double gap(const StrategyReport &r) {
  double c = r.strategy.cost.seconds;
  return r.strategy.stats.exact || c <= 0
             ? 0.0
             : std::max(0.0, (c - lowerBoundSeconds(r)) / c);
}

static llvm::json::Object costJson(const StrategyCost &c) {
  return llvm::json::Object{
      {"cost_s", c.seconds},           {"simulated_s", c.simulatedSeconds},
      {"compute_s", c.computeSeconds}, {"comm_s", c.commSeconds},
      {"comm_bytes", c.commBytes},     {"memory_bytes", c.memoryBytes}};
}

/// How many ops of \p configs the cluster's cost database prices, of all.
static std::pair<size_t, size_t> measuredOps(const Module &m,
                                             const Cluster &cluster,
                                             llvm::ArrayRef<Config> configs) {
  CostModel model(cluster, CostMode::Infer);
  size_t measured = 0;
  for (size_t i = 0; i < m.main.ops.size() && i < configs.size(); ++i)
    measured += model.measuredSeconds(*m.main.ops[i], configs[i]).has_value();
  return {measured, m.main.ops.size()};
}

static llvm::json::Object configJson(const Op &op, const Config &c) {
  llvm::json::Object o;
  for (size_t d = 0; d < c.size(); ++d)
    if (c[d] > 1)
      o[op.iters[d].name] = c[d];
  return o;
}

/// Per parameter of a training program: how its gradient is aggregated.
static llvm::json::Array aggregationJson(const Module &m,
                                         const StrategyReport &r) {
  llvm::json::Array aggregation;
  for (const GradientAggregation &a :
       describeAggregation(m, r.strategy.configs, *r.cluster)) {
    llvm::json::Array moves;
    for (const auto &[kind, bytes] : a.moves)
      moves.push_back(
          llvm::json::Object{{"collective", kind}, {"bytes", bytes}});
    aggregation.push_back(
        llvm::json::Object{{"parameter", a.parameter},
                           {"kind", a.kind},
                           {"bytes", a.bytes},
                           {"local_aggregation", a.innerRing > 1},
                           {"collectives", std::move(moves)}});
  }
  return aggregation;
}

/// The baselines: each one's costs and levers, or why none fits.
static llvm::json::Object baselinesJson(const StrategyReport &r) {
  llvm::json::Object baselines;
  for (const auto &[name, cost] : r.baselines) {
    llvm::json::Object b = costJson(cost);
    if (auto it = r.baselineLevers.find(name); it != r.baselineLevers.end())
      b["levers"] = it->second;
    baselines[name] = std::move(b);
  }
  for (const auto &[name, why] : r.baselineErrors)
    baselines[name] = llvm::json::Object{{"fits", false}, {"error", why}};
  return baselines;
}

/// The search's statistics.
static llvm::json::Object statsJson(const StrategyReport &r) {
  const DpStats &s = r.strategy.stats;
  size_t total = 0, largest = 0;
  for (size_t n : r.strategy.spaceSizes)
    total += n, largest = std::max(largest, n);
  return llvm::json::Object{
      {"configs_total", int64_t(total)},
      {"configs_max", int64_t(largest)},
      {"largest_dependent_set", int64_t(s.largestDependentSet)},
      {"dp_states", int64_t(s.states)},
      {"built_dp_states", int64_t(s.builtStates)},
      {"split_vertices", int64_t(s.splitVertices)},
      {"conditioned_classes", int64_t(s.conditionedClasses)},
      {"order", vertexOrderName(s.order)},
      {"largest_dependent_set_generateseq", int64_t(s.largestGenerateSeq)},
      {"largest_dependent_set_minwork", int64_t(s.largestMinWork)},
      {"exact_dp_states", s.exactStates > uint64_t(INT64_MAX)
                              ? INT64_MAX
                              : int64_t(s.exactStates)},
      {"peak_memory_bytes", r.peakMemoryBytes}};
}

/// Every op: name, kind, configuration, dims, offset and levers.
static llvm::json::Array opsJson(const Module &m, const Strategy &strategy) {
  // Reserved: json::Value's move may throw, so a growing vector copies.
  llvm::json::Array ops;
  const Func &f = m.main;
  ops.reserve(f.ops.size());
  for (size_t i = 0; i < f.ops.size(); ++i) {
    // Every dim with its extent and role, so strategies can be edited.
    const Op &op = *f.ops[i];
    auto split = splittableDims(op), runs = splittableDims(op, true);
    llvm::json::Array dims;
    dims.reserve(op.iters.size());
    for (size_t d = 0; d < op.iters.size(); ++d)
      dims.push_back(llvm::json::Object{
          {"name", op.iters[d].name},
          {"extent", op.iters[d].extent},
          {"kind", iterKindName(op.iters[d].kind)},
          {"splittable",
           split[d] ? (runs[d] ? "yes" : "cost-model-only") : "no"}});
    llvm::json::Object entry{{"name", op.name()},
                             {"kind", opKindName(op.kind)},
                             {"config", configJson(op, strategy.configs[i])},
                             {"dims", std::move(dims)}};
    if (int64_t at = offsetOf(strategy.offsets, i))
      entry["offset"] = at;
    if (i < strategy.choices.size()) {
      if (strategy.choices[i].recompute)
        entry["recompute"] = true;
      if (strategy.choices[i].zero)
        entry["zero"] = int64_t(strategy.choices[i].zero);
    }
    ops.push_back(std::move(entry));
  }
  return ops;
}

/// How many attention ops \p m holds (pax-fuse-attention's).
static size_t attentionOps(const Module &m) {
  return size_t(llvm::count_if(m.main.ops, [](const auto &op) {
    return op->kind == OpKind::Attention;
  }));
}

/// The report's work floor (workFloorSeconds).
static double workFloor(const Module &m, const StrategyReport &r) {
  return workFloorSeconds(m.main, *r.cluster,
                          r.mode == CostMode::Train && !r.trainingProgram);
}

llvm::json::Value strategyToJson(const Module &m, const StrategyReport &r) {
  llvm::json::Object out = costJson(r.strategy.cost);
  out["model"] = m.name;
  if (double floor = workFloor(m, r))
    out["work_floor_s"] = floor;
  out["cluster"] = clusterToJson(*r.cluster);
  out["gpus"] = int64_t(r.cluster->gpus);
  if (size_t n = attentionOps(m))
    out["attention_ops"] = int64_t(n);
  if (r.cluster->measured) {
    auto [measured, all] = measuredOps(m, *r.cluster, r.strategy.configs);
    out["measured_ops"] = int64_t(measured);
    out["priced_ops"] = int64_t(all);
  }
  out["mode"] =
      r.mode == CostMode::Train || r.trainingProgram ? "train" : "infer";
  out["training_program"] = r.trainingProgram;
  if (r.trainingProgram)
    out["aggregation"] = aggregationJson(m, r);
  out["solver"] = solverName(r.solver);
  if (!r.chosenFrom.empty())
    out["chosen_from"] = r.chosenFrom;
  if (r.refinedFrom > 0)
    out["refined_from_s"] = r.refinedFrom;
  out["search_s"] = r.searchSeconds;
  out["memory_limit_bytes"] = r.memoryLimit;
  if (r.mode == CostMode::Train && !r.trainingProgram) {
    out["microbatches"] = r.strategy.microbatches;
    out["levers"] = describeLevers(r.strategy.microbatches, r.strategy.choices);
  }
  if (r.solver == SolverKind::Mcmc)
    out["mcmc"] =
        llvm::json::Object{{"proposals", int64_t(r.strategy.proposals)},
                           {"accepted", int64_t(r.strategy.accepted)},
                           {"dp_simulated_s", r.strategy.dpSimulatedSeconds},
                           {"budget_hit", r.strategy.budgetHit}};
  const DpStats &st = r.strategy.stats;
  out["exact"] = st.exact && !r.given;
  if (!r.given) {
    out["lower_bound_s"] = lowerBoundSeconds(r);
    out["gap"] = gap(r);
  }
  out["baselines"] = baselinesJson(r);
  if (r.pipeline)
    out["pipeline"] = pipelineJson(*r.pipeline);
  if (!r.unfit.empty())
    out["without_stages_unfit"] = r.unfit;
  out["stats"] = statsJson(r);
  out["ops"] = opsJson(m, r.strategy);
  return out;
}

/// Reads one op's `config` object against its iteration space.
static llvm::Expected<Config> readConfig(const Op &op,
                                         const llvm::json::Object *obj,
                                         const ConfigOptions &o,
                                         const llvm::Twine &where) {
  Config c(op.iters.size(), 1);
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(where + ": " + msg);
  };
  if (!obj)
    return fail("'config' must be an object of {dim: factor}");
  auto split = splittableDims(op, o.executable);
  for (const auto &[key, value] : *obj) {
    int d = op.findIter(key.str());
    if (d < 0)
      return fail("op has no iteration dim '" + key.str() + "'");
    auto f = jsonInteger(value);
    if (!f || *f < 1)
      return fail("the factor of '" + key.str() +
                  "' must be a positive integer");
    if (op.iters[d].extent % *f)
      return fail(llvm::formatv("{0} does not divide the extent {1} of '{2}'",
                                *f, op.iters[d].extent, key.str()));
    if (*f > 1 && !split[d])
      return fail("dim '" + key.str() + "' cannot be split" +
                  (o.executable && splittableDims(op)[d]
                       ? " in a plan (its statistics or partial results "
                         "would cross devices; plans cannot run that yet)"
                       : ""));
    c[d] = *f;
  }
  if (configDevices(c) > o.devices)
    return fail(llvm::formatv("the configuration uses {0} devices, more than "
                              "the {1} of the cluster",
                              configDevices(c), o.devices));
  return c;
}

/// Reads one op's `recompute` and `zero` into \p choice; whether it has
/// either.
static llvm::Expected<bool> readChoice(const llvm::json::Object &op,
                                       const llvm::Twine &where,
                                       OpChoice &choice) {
  const llvm::json::Value *recompute = op.get("recompute");
  const llvm::json::Value *zero = op.get("zero");
  if (recompute) {
    auto r = recompute->getAsBoolean();
    if (!r)
      return llvm::createStringError(where + ": 'recompute' must be true or "
                                             "false");
    choice.recompute = *r;
  }
  if (zero) {
    auto z = jsonInteger(*zero);
    if (!z || *z < 0 || *z > 3)
      return llvm::createStringError(where +
                                     ": 'zero' must be a ZeRO stage, 0 to 3");
    choice.zero = uint8_t(*z);
  }
  return recompute || zero;
}

/// The training levers of a strategy JSON (\p root, its ops \p ops) into \p
/// levers; an error where there are some and \p levers is null.
static llvm::Error readLevers(const llvm::json::Object &root,
                              const llvm::json::Array &ops,
                              llvm::StringRef origin, GivenLevers *levers) {
  GivenLevers given;
  bool any = false;
  if (const llvm::json::Value *m = root.get("microbatches")) {
    auto v = jsonInteger(*m);
    if (!v || *v < 1)
      return llvm::createStringError(
          origin + ": 'microbatches' must be a positive integer");
    given.microbatches = *v;
    any = *v > 1;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    OpChoice c;
    std::string where = llvm::formatv("{0}: op {1}", origin, i);
    const llvm::json::Object *op = ops[i].getAsObject();
    if (!op)
      return llvm::createStringError(where + ": expected an object");
    auto has = readChoice(*op, where, c);
    if (!has)
      return has.takeError();
    any |= *has && (c.recompute || c.zero);
    given.choices.push_back(c);
  }
  if (any && !levers)
    return llvm::createStringError(
        origin + ": the strategy's microbatches, recomputation and ZeRO "
                 "stages price a training step of the model (--mode=train "
                 "without --loss); a training plan runs the microbatches of "
                 "--microbatches, and no recomputation or ZeRO stages yet");
  if (levers)
    *levers = std::move(given);
  return llvm::Error::success();
}

llvm::Expected<std::vector<Config>>
strategyFromJson(const Module &m, llvm::StringRef text, llvm::StringRef origin,
                 const ConfigOptions &o, std::vector<int64_t> *offsets,
                 GivenLevers *levers) {
  auto parsed = parseJson(text);
  if (!parsed)
    return llvm::createStringError(
        origin + ": not valid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  const llvm::json::Array *ops = root ? root->getArray("ops") : nullptr;
  if (!ops)
    return llvm::createStringError(origin + ": expected an object with an "
                                            "'ops' array");
  if (auto model = root->getString("model"); model && *model != m.name)
    return llvm::createStringError(origin + ": the strategy is for model '" +
                                   *model + "', not '" + m.name + "'");
  // A training step's levers first: an inference of the same model has
  // other ops (its copies around attention folded).
  if (auto err = readLevers(*root, *ops, origin, levers))
    return err;
  const Func &f = m.main;
  if (ops->size() != f.ops.size())
    return llvm::createStringError(
        llvm::formatv("{0}: the strategy has {1} ops but the model has {2}; "
                      "is it for another model?",
                      origin, ops->size(), f.ops.size()));
  std::vector<Config> configs;
  for (size_t i = 0; i < ops->size(); ++i) {
    const llvm::json::Object *op = (*ops)[i].getAsObject();
    std::string where = llvm::formatv("{0}: op {1}", origin, i);
    auto name = op ? op->getString("name") : std::nullopt;
    if (!name || *name != f.ops[i]->name())
      return llvm::createStringError(
          where + ": expected the op named '" + f.ops[i]->name().str() +
          "'; the strategy is stale or for another model");
    auto c = readConfig(*f.ops[i], op->getObject("config"), o,
                        where + " ('" + *name + "')");
    if (!c)
      return c.takeError();
    if (const llvm::json::Value *at = op->get("offset")) {
      int64_t k = configDevices(*c);
      auto v = jsonInteger(*at);
      if (!v || *v < 0 || *v % k || *v > int64_t(o.devices) - k)
        return llvm::createStringError(llvm::formatv(
            "{0} ('{1}'): 'offset' must be a multiple of its {2} device(s) "
            "from 0 to {3}",
            where, *name, k, o.devices - k));
      if (!offsets)
        return llvm::createStringError(where + " ('" + *name +
                                       "'): 'offset' places an op, which "
                                       "only an inference strategy does");
      offsets->resize(f.ops.size(), 0);
      (*offsets)[i] = *v;
    }
    configs.push_back(std::move(*c));
  }
  return configs;
}

std::string formatSeconds(double s) {
  if (s >= 1)
    return llvm::formatv("{0:F3} s", s).str();
  if (s >= 1e-3)
    return llvm::formatv("{0:F3} ms", s * 1e3).str();
  return llvm::formatv("{0:F1} us", s * 1e6).str();
}

static std::string gib(double bytes) {
  return llvm::formatv("{0:F2} GiB", bytes / double(1 << 30)).str();
}

/// Prints the configuration table, grouping runs of ops that repeat (same
/// kind, iteration space and configuration) as one line with a count.
static void printConfigs(const Module &m, const Strategy &s,
                         llvm::raw_ostream &os) {
  const Func &f = m.main;
  std::vector<std::pair<std::string, std::string>> rows; // key, first name
  std::map<std::string, int> counts;
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op &op = *f.ops[i];
    std::string space;
    for (const IterDim &d : op.iters)
      space += d.name + ":" + std::to_string(d.extent) + " ";
    std::string key = opKindName(op.kind).str() + " " + space + "-> " +
                      configStr(op, s.configs[i]);
    if (int64_t at = offsetOf(s.offsets, i))
      key += " at device " + std::to_string(at);
    if (counts[key]++ == 0)
      rows.push_back({key, op.name().str()});
  }
  os << llvm::formatv("  {0,-6} {1,-14} {2,-28} {3}\n", "count", "kind",
                      "configuration", "first op");
  for (const auto &[key, name] : rows) {
    llvm::StringRef k(key);
    auto kind = k.split(' ').first;
    auto config = k.rsplit("-> ").second;
    os << llvm::formatv("  {0,-6} {1,-14} {2,-28} {3}\n", counts[key], kind,
                        config, name);
  }
}

/// How each gradient is aggregated, one line per kind with its parameters
/// (a few named) and the bytes per device per step.
static void printAggregation(const Module &m, const StrategyReport &r,
                             llvm::raw_ostream &os) {
  auto all = describeAggregation(m, r.strategy.configs, *r.cluster);
  // One line per kind, in order of first appearance.
  std::vector<std::string> kinds;
  for (const GradientAggregation &a : all)
    if (!llvm::is_contained(kinds, a.kind))
      kinds.push_back(a.kind);
  for (const std::string &kind : kinds) {
    std::vector<std::string> names;
    std::map<std::string, int64_t> bytes;
    unsigned inner = 0, nodes = 0;
    for (const GradientAggregation &a : all) {
      if (a.kind != kind)
        continue;
      names.push_back(a.parameter);
      if (a.innerRing > 1)
        inner = a.innerRing, nodes = a.nodes;
      for (const auto &[c, b] : a.moves)
        bytes[c] += b;
    }
    std::string list;
    for (size_t i = 0; i < names.size() && i < 3; ++i)
      list += (i ? ", " : "") + names[i];
    if (names.size() > 3)
      list += llvm::formatv(", ... ({0} in all)", names.size()).str();
    std::string how;
    for (const auto &[c, b] : bytes)
      how += llvm::formatv("{0}{1} {2} B", how.empty() ? "" : ", ", c, b).str();
    os << llvm::formatv("gradients {0,-14} {1}{2}\n", kind, list,
                        how.empty() ? "" : " (" + how + " per device)");
    if (inner > 1)
      os << llvm::formatv("          local aggregation: all-reduced inside "
                          "each node first (rings of {0}), then across {1} "
                          "nodes\n",
                          inner, nodes);
  }
}

/// Each baseline's cost and speedup, or why it fits nothing.
static void printBaselines(const StrategyReport &r, llvm::raw_ostream &os) {
  const StrategyCost &c = r.strategy.cost;
  for (const auto &[name, b] : r.baselines)
    os << llvm::formatv("vs {0,-14} {1}, {2} memory: speedup {3:F2}x "
                        "(simulated {4}: {5:F2}x)\n",
                        name, formatSeconds(b.seconds), gib(b.memoryBytes),
                        b.seconds / std::max(c.seconds, 1e-30),
                        formatSeconds(b.simulatedSeconds),
                        b.simulatedSeconds /
                            std::max(c.simulatedSeconds, 1e-30));
  for (const auto &[name, why] : r.baselineErrors)
    os << llvm::formatv("vs {0,-14} does not fit: {1}\n", name, why);
}

/// The search's size, time and memory.
static void printSearch(const StrategyReport &r, llvm::raw_ostream &os) {
  size_t total = 0, largest = 0;
  for (size_t n : r.strategy.spaceSizes)
    total += n, largest = std::max(largest, n);
  os << "search: " << total << " configurations (at most " << largest
     << " per op), largest dependent set "
     << r.strategy.stats.largestDependentSet << ", " << r.strategy.stats.states
     << " DP states (" << r.strategy.stats.builtStates
     << " built, the rest repeat them), " << formatSeconds(r.searchSeconds)
     << ", peak memory " << gib(r.peakMemoryBytes) << "\n";
}

static void printOptimum(const StrategyReport &r, llvm::raw_ostream &os);

/// A baseline's strategy chosen over the search's by its simulated step:
/// what the search's proves, and what the choice costs and gains.
static void printChosen(const StrategyReport &r, llvm::raw_ostream &os) {
  const StrategyCost &c = r.strategy.cost;
  auto searched = r.baselines.find(solverName(r.solver).str());
  if (searched == r.baselines.end())
    return;
  const StrategyCost &s = searched->second;
  os << llvm::formatv(
      "optimum: by the additive cost the search minimizes no strategy costs "
      "less than {0} (the {1} search's costs {2}); this one costs {3:F2}% "
      "more and simulates {4:F2}x faster than the {1} search's\n",
      formatSeconds(lowerBoundSeconds(r)), solverName(r.solver),
      formatSeconds(s.seconds),
      100 * (c.seconds / std::max(s.seconds, 1e-30) - 1),
      s.simulatedSeconds / std::max(c.simulatedSeconds, 1e-30));
}

/// The peak per device against the limit, and what makes it fit: the
/// training levers and the attention ops.
static void printMemory(const Module &m, const StrategyReport &r,
                        llvm::raw_ostream &os) {
  const StrategyCost &c = r.strategy.cost;
  os << "memory per device:   " << gib(c.memoryBytes)
     << (r.mode == CostMode::Train ? " at its peak" : "")
     << (r.memoryLimit <= 0 ? ""
         : c.memoryBytes > r.memoryLimit
             ? " (over the limit of " + gib(r.memoryLimit) + ": does not fit)"
             : " (limit " + gib(r.memoryLimit) + ")")
     << "\n";
  if (r.mode == CostMode::Train && !r.trainingProgram)
    os << "fits by:             "
       << describeLevers(r.strategy.microbatches, r.strategy.choices) << "\n";
  if (size_t n = attentionOps(m))
    os << "attention:           " << n
       << " attention ops, their scores never stored\n";
}

/// The step: predicted, simulated, against the work floor, and which
/// search or baseline chose it.
static void printSteps(const Module &m, const StrategyReport &r,
                       llvm::raw_ostream &os) {
  const StrategyCost &c = r.strategy.cost;
  os << "\npredicted step time: " << formatSeconds(c.seconds) << " (compute "
     << formatSeconds(c.computeSeconds) << ", communication "
     << formatSeconds(c.commSeconds) << ")\n";
  os << "simulated step time: " << formatSeconds(c.simulatedSeconds)
     << (r.cluster->overlapCollectives
             ? " (compute and communication overlapped)\n"
             : " (each device's work in order, devices at once)\n");
  if (double floor = workFloor(m, r))
    os << llvm::formatv("work floor:          {0} (the step's arithmetic over "
                        "all {1} GPUs at their peak; this step is {2:F2}x of "
                        "it)\n",
                        formatSeconds(floor), r.cluster->gpus,
                        c.simulatedSeconds / floor);
  if (!r.chosenFrom.empty())
    os << "chosen by simulation: the " << r.chosenFrom
       << " baseline's strategy, which simulates faster than the "
       << solverName(r.solver) << " search's (listed below)\n";
  if (r.refinedFrom > 0)
    os << "refined by MCMC:     " << formatSeconds(r.refinedFrom) << " -> "
       << formatSeconds(c.simulatedSeconds) << " simulated ("
       << r.refineProposals << " proposals from the chosen strategy)\n";
}

void printReport(const Module &m, const StrategyReport &r,
                 llvm::raw_ostream &os) {
  const StrategyCost &c = r.strategy.cost;
  os << "strategy for " << m.name << " on " << r.cluster->gpus << " GPUs ("
     << r.cluster->name << ", " << r.cluster->gpusPerNode << " per node), "
     << (r.trainingProgram ? "training step (backward and updates in the "
                             "program)"
         : r.mode == CostMode::Train ? "training"
                                     : "inference")
     << ", solver " << solverName(r.solver) << "\n\n";
  printConfigs(m, r.strategy, os);
  printSteps(m, r, os);
  printMemory(m, r, os);
  if (r.cluster->measured) {
    auto [measured, all] = measuredOps(m, *r.cluster, r.strategy.configs);
    os << llvm::formatv("op costs:            measured for {0} of {1} ops "
                        "(the cost database), the rest at the peak rate\n",
                        measured, all);
  }
  if (r.trainingProgram)
    printAggregation(m, r, os);
  os << "communication:       "
     << llvm::formatv("{0:F1} MiB", c.commBytes / double(1 << 20))
     << " per device per step\n";
  printBaselines(r, os);
  printSearch(r, os);
  if (!r.unfit.empty())
    os << "without stages:      " << r.unfit
       << " (the strategy above is searched without the limit, for "
          "comparison)\n";
  if (r.pipeline)
    printPipeline(*r.pipeline, c.simulatedSeconds, os);
  if (r.given)
    return;
  if (!r.chosenFrom.empty())
    return printChosen(r, os);
  if (r.solver == SolverKind::Mcmc) {
    const Strategy &s = r.strategy;
    os << llvm::formatv(
        "mcmc: {0} proposals, {1} taken, chains from the "
        "DP's strategy, data-parallel, expert and a random "
        "one; the DP's strategy simulates {2}, this one {3} "
        "({4:F2}x){5}\n",
        s.proposals, s.accepted, formatSeconds(s.dpSimulatedSeconds),
        formatSeconds(s.cost.simulatedSeconds),
        s.dpSimulatedSeconds / std::max(s.cost.simulatedSeconds, 1e-30),
        s.budgetHit ? "; --search-budget cut it short (the "
                      "result depends on the machine)"
                    : "");
    return;
  }
  printOptimum(r, os);
}

/// How far the search's strategy is from the optimum of the cost it
/// minimizes.
static void printOptimum(const StrategyReport &r, llvm::raw_ostream &os) {
  const DpStats &st = r.strategy.stats;
  if (st.exact && st.conditionedClasses)
    os << llvm::formatv("optimum: exact (no strategy of this space is faster; "
                        "solved once per class of one op's configurations, "
                        "{0} classes, where the plain DP needs {1} states)\n",
                        st.conditionedClasses, st.exactStates);
  else if (st.exact && st.exactStates)
    os << llvm::formatv("optimum: exact (no strategy of this space is faster; "
                        "proven by a relaxation with {0} vertices split, "
                        "where the exact DP needs {1} states)\n",
                        st.splitVertices, st.exactStates);
  else if (st.exact)
    os << "optimum: exact (no strategy of this space is faster)\n";
  else
    os << llvm::formatv(
        "optimum: not proven; lower bound {0}, so this strategy is within "
        "{1:F2}% of the best{2}\n",
        formatSeconds(lowerBoundSeconds(r)), 100 * gap(r),
        st.exactStates ? llvm::formatv(" (the exact DP needs {0} states, over "
                                       "--max-states; {1} vertices split)",
                                       st.exactStates, st.splitVertices)
                             .str()
                       : std::string());
}

/// A DOT string literal of \p text.
static std::string dotString(llvm::StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') { // DOT's line break
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

void writeStrategyDot(const Module &m, const Strategy &s,
                      llvm::raw_ostream &os) {
  static const char *palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072",
                                  "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
                                  "#bc80bd", "#ccebc5", "#ffed6f", "#a6cee3"};
  const Func &f = m.main;
  llvm::DenseSet<const Op *> constants = constantOps(m);
  std::map<std::string, size_t> colours;
  os << "digraph " << dotString(m.name) << " {\n"
     << "  node [shape=box, style=filled, fontname=\"Helvetica\"];\n";
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op &op = *f.ops[i];
    std::string config =
        i < s.configs.size() ? configStr(op, s.configs[i]) : "<>";
    std::string fill = "#d9d9d9";
    if (!constants.count(&op)) {
      auto [it, fresh] = colours.try_emplace(config, colours.size());
      fill = palette[it->second % std::size(palette)];
    }
    os << "  op" << i << " [label="
       << dotString(
              (opKindName(op.kind) + " " + op.name() + "\n" + config).str())
       << ", fillcolor=\"" << fill << "\"];\n";
  }
  for (const Use &u : usesOf(m))
    os << "  op" << u.producer << " -> op" << u.consumer
       << (u.consumer <= u.producer ? " [style=dashed]" : "") << ";\n";
  os << "}\n";
}

} // namespace pax
