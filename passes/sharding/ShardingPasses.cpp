//===- ShardingPasses.cpp - annotate-configs and solve-sharding -----------===//
#include "passes/sharding/ShardingPasses.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace pax {

static llvm::Error badOption(llvm::StringRef pass, llvm::StringRef key,
                             llvm::StringRef value, llvm::StringRef want) {
  return llvm::createStringError("pass '" + pass + "': option " + key + "=" +
                                 value + ": expected " + want);
}

/// The training levers: microbatches=auto|M (default 1), recompute=none|auto|
/// all (default none), zero=auto|0..3 (default 0).
static llvm::Error parseLevers(llvm::StringRef pass, const PassOptions &o,
                               LeverOptions &l) {
  std::string micro = o.get("microbatches", "1");
  auto m = parseMicrobatches(micro);
  if (!m)
    return badOption(pass, "microbatches", micro, "auto or a positive count");
  l.microbatches = *m;
  std::string recompute = o.get("recompute", "none");
  auto r = parseRecompute(recompute);
  if (!r)
    return badOption(pass, "recompute", recompute, "none, auto or all");
  l.recompute = *r;
  std::string zero = o.get("zero", "0");
  auto z = parseZeroStage(zero);
  if (!z)
    return badOption(pass, "zero", zero, "auto, 0, 1, 2 or 3");
  l.zero = *z;
  return llvm::Error::success();
}

llvm::Expected<ShardingPassOptions>
ShardingPassOptions::parse(llvm::StringRef pass, const PassOptions &o,
                           bool withSolver) {
  llvm::SmallVector<llvm::StringRef, 12> known = {
      "gpus", "gpus-per-node", "cluster", "pow2", "exact", "max-split"};
  if (withSolver)
    known.append({"mode", "solver", "max-states", "exact-search", "mem-limit",
                  "threads", "microbatches", "recompute", "zero"});
  if (auto err = o.checkKnown(pass, known))
    return err;
  ShardingPassOptions r;
  r.cluster = o.get("cluster", "pase");
  auto integer = [&](llvm::StringRef key, int64_t dflt,
                     int64_t min) -> llvm::Expected<int64_t> {
    std::string v = o.get(key, std::to_string(dflt));
    int64_t n;
    if (llvm::StringRef(v).getAsInteger(10, n) || n < min)
      return badOption(pass, key, v,
                       "an integer of at least " + std::to_string(min));
    return n;
  };
  auto gpus = integer("gpus", 1, 1), perNode = integer("gpus-per-node", 0, 0),
       pow2 = integer("pow2", 0, 0), exact = integer("exact", 0, 0),
       maxSplit = integer("max-split", 0, 0),
       states = integer("max-states", int64_t(kDefaultMaxStates), 1),
       threads = integer("threads", 0, 0),
       exactSearch = integer("exact-search", 0, 0);
  for (auto *e : {&gpus, &perNode, &pow2, &exact, &maxSplit, &states, &threads,
                  &exactSearch})
    if (!*e)
      return e->takeError();
  r.gpus = unsigned(*gpus);
  if (*perNode)
    r.gpusPerNode = unsigned(*perNode);
  r.sharding.configs.powersOfTwo = *pow2;
  r.sharding.configs.exact = *exact;
  r.sharding.configs.maxPerDim = *maxSplit;
  r.sharding.maxStates = uint64_t(*states);
  r.sharding.exactSearch = *exactSearch;
  r.sharding.threads = unsigned(*threads);
  std::string mode = o.get("mode", "train");
  if (mode != "train" && mode != "infer")
    return badOption(pass, "mode", mode, "train or infer");
  r.mode = mode == "train" ? CostMode::Train : CostMode::Infer;
  std::string solver = o.get("solver", "dp");
  auto kind = parseSolver(solver);
  if (!kind)
    return badOption(pass, "solver", solver,
                     "dp, dp-bfs, exhaustive, data-parallel or expert");
  r.sharding.solver = *kind;
  std::string mem = o.get("mem-limit", "0");
  double gib;
  if (llvm::StringRef(mem).getAsDouble(gib) || gib < 0)
    return badOption(pass, "mem-limit", mem, "a size in GiB");
  r.sharding.memoryLimit = gib * double(1 << 30);
  if (auto err = parseLevers(pass, o, r.sharding.levers))
    return err;
  return r;
}

llvm::Expected<std::unique_ptr<Pass>>
AnnotateConfigsPass::create(const PassOptions &o) {
  auto opts = ShardingPassOptions::parse("pax-annotate-configs", o, false);
  if (!opts)
    return opts.takeError();
  return std::make_unique<AnnotateConfigsPass>(std::move(*opts));
}

llvm::Error AnnotateConfigsPass::run(Module &m, PassContext &) {
  ConfigOptions c = options.sharding.configs;
  c.devices = *options.gpus;
  double log10 = 0;
  for (auto &op : m.main.ops) {
    size_t n = enumerateConfigs(*op, c).size();
    op->attrs["configs"] = int64_t(n);
    log10 += std::log10(double(n));
  }
  m.attrs["search_space_log10"] = float(log10);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
SolveShardingPass::create(const PassOptions &o) {
  auto opts = ShardingPassOptions::parse("pax-solve-sharding", o, true);
  if (!opts)
    return opts.takeError();
  return std::make_unique<SolveShardingPass>(std::move(*opts));
}

llvm::Error SolveShardingPass::run(Module &m, PassContext &) {
  auto cluster =
      makeCluster(options.cluster, options.gpus, options.gpusPerNode);
  if (!cluster)
    return cluster.takeError();
  CostModel model(*cluster, options.mode);
  ShardingOptions so = options.sharding;
  so.configs.devices = cluster->gpus;
  auto strategy = solveSharding(m, model, so);
  if (!strategy)
    return strategy.takeError();
  for (size_t i = 0; i < m.main.ops.size(); ++i) {
    const Config &c = strategy->configs[i];
    m.main.ops[i]->attrs["config"] = std::vector<int64_t>(c.begin(), c.end());
    // A training step's levers, where they are not the defaults.
    if (i < strategy->choices.size() && strategy->choices[i].recompute)
      m.main.ops[i]->attrs["recompute"] = int64_t(1);
    if (i < strategy->choices.size() && strategy->choices[i].zero)
      m.main.ops[i]->attrs["zero"] = int64_t(strategy->choices[i].zero);
  }
  if (strategy->microbatches > 1)
    m.attrs["microbatches"] = strategy->microbatches;
  m.attrs["predicted_step_s"] = float(strategy->cost.seconds);
  return llvm::Error::success();
}

} // namespace pax
