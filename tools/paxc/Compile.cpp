//===- Compile.cpp - What paxc does, from its options ---------------------===//
//
// paxc's options (the one table of them, LLVM command-line options) and
// the path from an ONNX model to what they ask for: import, the training
// step built, the strategy searched, the plan emitted. The command line
// (tools/paxc/paxc.cpp) and the driver library (tools/driver/) call it.
//
//===----------------------------------------------------------------------===//
#include "tools/paxc/Compile.h"
#include "codegen/EmitPlan.h"
#include "codegen/PlanStats.h"
#include "codegen/plan/PlanFile.h"
#include "frontend/OnnxImporter.h"
#include "frontend/OnnxSharding.h"
#include "ir/Printer.h"
#include "ir/Summary.h"
#include "ir/Verifier.h"
#include "passes/Autocast.h"
#include "passes/FuseKernels.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/autodiff/Microbatches.h"
#include "passes/autodiff/Optimizer.h"
#include "passes/autodiff/Recompute.h"
#include "passes/sharding/InsertCollectives.h"
#include "passes/sharding/Simulator.h"
#include "passes/sharding/Stages.h"
#include "passes/sharding/StrategyIO.h"
#include "passes/sharding/Zero.h"
#include "runtime/GenerateKernels.h"
#include "tools/common/Printable.h"
#include "tools/common/Runnable.h"
#include "tools/paxc/CostProbe.h"
#include "tools/paxc/ImportFlags.h"
#include "tools/paxc/OnnxShardedOutput.h"
#include "tools/paxc/PipelineFlags.h"
#include "tools/paxc/Rewrites.h"
#include "tools/paxc/StepFlags.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include <google/protobuf/text_format.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <unistd.h>

using namespace pax;
namespace cl = llvm::cl;

cl::OptionCategory pax::paxc::paxcCategory("paxc options");
using pax::paxc::paxcCategory;

static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::cat(paxcCategory));

enum class Emit {
  IR,
  Summary,
  Report,
  Strategy,
  Trace,
  Dot,
  Plan,
  PlanText,
  CostProbe,
  OnnxSharded,
  Kernels
};
static cl::opt<Emit> emit(
    "emit",
    cl::desc("What to produce (default: summary, or report with --gpus, "
             "--cluster, --cost-db or --strategy)"),
    cl::values(clEnumValN(Emit::IR, "ir", "the iteration-space IR (.pir text)"),
               clEnumValN(Emit::Summary, "summary",
                          "parameters, forward FLOPs, op counts, inputs and "
                          "outputs"),
               clEnumValN(Emit::Report, "report",
                          "the chosen strategy: configurations, predicted "
                          "time, memory, baselines, search statistics"),
               clEnumValN(Emit::Strategy, "strategy",
                          "the chosen strategy as JSON (reusable with "
                          "--strategy)"),
               clEnumValN(Emit::Trace, "trace",
                          "the chosen strategy's step simulated (compute and "
                          "communication overlapped) as a Chrome/Perfetto "
                          "trace (JSON)"),
               clEnumValN(Emit::Dot, "dot",
                          "the op graph as Graphviz DOT, each op coloured by "
                          "its configuration in the chosen strategy"),
               clEnumValN(Emit::Plan, "plan",
                          "the plan paxrun executes (binary; the default "
                          "when -o ends in .paxplan)"),
               clEnumValN(Emit::PlanText, "plan-text",
                          "the plan as protobuf text"),
               clEnumValN(Emit::OnnxSharded, "onnx-sharded",
                          "the source model with ONNX IR 11's multi-device "
                          "annotations of the chosen strategy (binary "
                          "ONNX)"),
               clEnumValN(Emit::CostProbe, "cost-probe",
                          "a one-device plan computing every distinct op "
                          "block of the search space once, for paxrun "
                          "--write-cost-db to time"),
               clEnumValN(Emit::Kernels, "kernels",
                          "the plan's generated kernels, each a "
                          "self-contained .cu file in the folder -o names "
                          "(created; compile with -I the repository)")),
    cl::cat(paxcCategory));

enum class Format { Text, Json };
static cl::opt<Format>
    format("format", cl::desc("Output format of --emit=summary"),
           cl::init(Format::Text),
           cl::values(clEnumValN(Format::Text, "text", "human-readable text"),
                      clEnumValN(Format::Json, "json", "one JSON object")),
           cl::cat(paxcCategory));

static cl::opt<std::string>
    outputPath("o", cl::desc("Output file (default: stdout)"),
               cl::value_desc("file"), cl::init("-"), cl::cat(paxcCategory));

static cl::OptionCategory lossCategory("paxc training loss options");
static cl::opt<std::string> lossKind(
    "loss",
    cl::desc("Append a loss to the model's output and make it the only "
             "output: cross-entropy (over the output's last axis, int64 "
             "'labels' input), mse (float 'labels' of the output's shape), "
             "or output (the output already is the loss)"),
    cl::value_desc("cross-entropy|mse|output"), cl::cat(lossCategory));
static cl::opt<std::string>
    lossOutput("loss-output",
               cl::desc("The output the loss reads (default: the first)"),
               cl::value_desc("NAME"), cl::cat(lossCategory));
static cl::opt<std::string> ignoreIndex(
    "ignore-index",
    cl::desc("Cross-entropy: positions with this label count neither in "
             "the sum nor in the mean"),
    cl::value_desc("N"), cl::cat(lossCategory));

static cl::opt<std::string> batchNormMode(
    "batchnorm",
    cl::desc("BatchNormalization statistics: graph (each node's "
             "training_mode: the running statistics unless it is 1) or "
             "batch-stats (every node normalizes with its batch's statistics "
             "and, in a training step, updates its running statistics)"),
    cl::value_desc("graph|batch-stats"), cl::init("graph"),
    cl::cat(lossCategory));

static cl::opt<uint64_t> seed(
    "seed",
    cl::desc("Seed of random ops (training-mode Dropout, RandomUniform): "
             "with the op, the training step and the element's index it "
             "keys a counter-based generator, so every partition draws the "
             "same numbers"),
    cl::init(0), cl::cat(lossCategory));

static cl::opt<bool> gradients(
    "gradients",
    cl::desc("Append the gradient of the loss (the first output) with "
             "respect to every parameter as outputs grad/NAME"),
    cl::cat(lossCategory));
static cl::opt<std::string>
    freeze("freeze",
           cl::desc("With --gradients: parameters whose name matches this "
                    "regular expression stay fixed (no gradient)"),
           cl::value_desc("REGEX"), cl::cat(lossCategory));

static cl::opt<bool> quiet("quiet", cl::desc("Do not print warnings"),
                           cl::cat(paxcCategory));
static cl::opt<bool> fuseKernelsFlag(
    "fuse-kernels", cl::init(true),
    cl::desc("In a plan, group ops into fused kernels (pax-fuse-kernels) and "
             "generate one kernel per run of a group's pointwise ops, which "
             "the CUDA and cuda-emulated backends compile and run in place "
             "of the ops (default true; =false: every op its own kernel)"),
    cl::cat(paxcCategory));

using pax::paxc::searchCategory;

static cl::opt<unsigned> gpus("gpus",
                              cl::desc("Number of devices to split over"),
                              cl::value_desc("N"), cl::cat(searchCategory));
static cl::opt<unsigned> gpusPerNode("gpus-per-node",
                                     cl::desc("Devices per node"),
                                     cl::value_desc("G"),
                                     cl::cat(searchCategory));
static cl::opt<std::string>
    clusterName("cluster",
                cl::desc("A cluster preset (--list-clusters) or a JSON file"),
                cl::value_desc("PRESET|FILE.json"), cl::init("pase"),
                cl::cat(searchCategory));
static cl::opt<bool> listClusters("list-clusters",
                                  cl::desc("List the cluster presets and exit"),
                                  cl::cat(searchCategory));
static cl::opt<std::string>
    mode("mode",
         cl::desc("What a step is: infer (forward; the default) or train "
                  "(forward, backward, gradient synchronization)"),
         cl::value_desc("train|infer"), cl::init("infer"),
         cl::cat(searchCategory));
static cl::opt<std::string> solver(
    "solver",
    cl::desc("dp (PaSE's DP, default), dp-bfs, exhaustive, data-parallel, "
             "expert, megatron (Megatron-LM's grid of tensor degree, "
             "microbatches, recomputation and ZeRO-1, the fastest simulated), "
             "mcmc (FlexFlow's search over the simulated step)"),
    cl::value_desc("name"), cl::init("dp"), cl::cat(searchCategory));
static cl::opt<std::string> chooseBy(
    "choose",
    cl::desc("simulation (default): return the search's strategy or a "
             "baseline's, whichever simulates faster; cost: the search's, by "
             "its additive cost"),
    cl::value_desc("simulation|cost"), cl::init("simulation"),
    cl::cat(searchCategory));
static cl::opt<double> searchBudget(
    "search-budget",
    cl::desc("--solver=mcmc: the most seconds the search may take (0: no "
             "limit; a search cut short depends on the machine)"),
    cl::value_desc("seconds"), cl::init(0), cl::cat(searchCategory));
static cl::opt<uint64_t> refineSteps(
    "refine-steps",
    cl::desc("After choosing by simulation, an MCMC chain of at most N "
             "proposals refines the chosen strategy of a program (inference, "
             "or a training plan's step); 0: none"),
    cl::value_desc("N"), cl::init(0), cl::cat(searchCategory));
static cl::opt<uint64_t> mcmcSteps(
    "mcmc-steps",
    cl::desc("--solver=mcmc: proposals per chain (0: 100 per op, at least "
             "2000)"),
    cl::value_desc("N"), cl::init(0), cl::cat(searchCategory));
static cl::opt<bool> mcmcFull(
    "mcmc-full-simulation",
    cl::desc("--solver=mcmc: simulate the whole step for every proposal "
             "instead of delta simulation (same answer, slower; benchmarks)"),
    cl::cat(searchCategory));
static cl::opt<uint64_t> searchSeed("search-seed",
                                    cl::desc("--solver=mcmc: the chains' seed"),
                                    cl::value_desc("N"), cl::init(0),
                                    cl::cat(searchCategory));
static cl::opt<double>
    memLimit("mem-limit", cl::desc("Most memory one device may hold, GiB"),
             cl::value_desc("GiB"), cl::init(0), cl::cat(searchCategory));
static cl::opt<double> memReserve(
    "mem-reserve",
    cl::desc("Training: memory of each device kept out of the plan "
             "(workspaces, fragmentation), GiB; the limit is the device's "
             "memory less it unless --mem-limit is given (default: 10% of "
             "the device's memory)"),
    cl::value_desc("GiB"), cl::init(-1), cl::cat(searchCategory));
static cl::opt<std::string> microbatches(
    "microbatches",
    cl::desc("Training: microbatches per step, gradients accumulated (auto: "
             "the search chooses when pricing a step; a training plan, "
             "--loss, runs M, auto being 1)"),
    cl::value_desc("auto|M"), cl::init("auto"), cl::cat(searchCategory));
static cl::opt<std::string> recompute(
    "recompute",
    cl::desc("Training: recompute results in the backward pass instead of "
             "keeping them: none, auto (the search chooses per op), all "
             "(every op but contractions); a training plan recomputes none "
             "unless given"),
    cl::value_desc("none|auto|all"), cl::init("auto"), cl::cat(searchCategory));
static cl::opt<std::string> zeroStage(
    "zero",
    cl::desc("Training: shard weights' state over their data-parallel "
             "replicas: 1 optimizer state, 2 also gradients, 3 also the "
             "weights (auto: the search chooses per op)"),
    cl::value_desc("auto|0|1|2|3"), cl::init("auto"), cl::cat(searchCategory));
static cl::opt<uint64_t>
    maxStates("max-states",
              cl::desc("Most DP table entries the search may hold"),
              cl::value_desc("N"), cl::init(pax::kDefaultMaxStates),
              cl::cat(searchCategory));
static cl::opt<bool> exactSearch(
    "exact",
    cl::desc("Fail when the exact search does not fit in --max-states, "
             "instead of returning the best strategy found within it"),
    cl::cat(searchCategory));
static cl::opt<unsigned> threads("threads",
                                 cl::desc("Search threads (0: all cores)"),
                                 cl::value_desc("N"), cl::init(0),
                                 cl::cat(searchCategory));
static cl::opt<bool> pow2("config-pow2",
                          cl::desc("Only split factors that are powers of two"),
                          cl::cat(searchCategory));
static cl::opt<bool>
    exact("config-exact", cl::desc("Only configurations that use every device"),
          cl::cat(searchCategory));
static cl::opt<int64_t>
    maxSplit("config-max-split",
             cl::desc("Largest split factor of any one dim"),
             cl::value_desc("N"), cl::init(0), cl::cat(searchCategory));
static cl::opt<unsigned>
    maxDims("config-max-dims",
            cl::desc("Most dims of one op split at once (0: any)"),
            cl::value_desc("N"), cl::init(0), cl::cat(searchCategory));
static cl::opt<std::string> costDbPath(
    "cost-db",
    cl::desc("Price each op block measured in this cost database (paxrun "
             "--write-cost-db) by its measurement instead of the peak rate"),
    cl::value_desc("FILE.json"), cl::cat(searchCategory));
static cl::opt<std::string> planStatsPath(
    "plan-stats",
    cl::desc("With a plan: write per device its ops, kernels, memory traffic "
             "(and the least of it) and a roofline step, as JSON"),
    cl::value_desc("FILE.json"), cl::cat(searchCategory));

static cl::opt<std::string> strategyPath(
    "strategy",
    cl::desc("Use the strategy in this JSON file instead of searching"),
    cl::value_desc("FILE.json"), cl::cat(searchCategory));

static int fail(const llvm::Twine &msg) {
  llvm::WithColor::error(llvm::errs(), "paxc") << printable(msg) << "\n";
  return 1;
}

/// The cluster of --cluster, --gpus and --gpus-per-node; kept for the
/// report, which refers to it.
static std::optional<Cluster> theCluster;

/// Searches (or reads with --strategy) the strategy of \p m.
/// Whether the program is a training step (backward and updates built in).
static bool trainingStep = false;
/// A training plan's --microbatches=auto: the search that chooses the count.
static bool choosingMicrobatches = false;
/// A pipelined training plan's stages, once chosen: the flags' cluster is
/// then one stage's submesh.
static std::optional<PipelineChoice> pipelined;
/// A pipelined plan's cluster, every stage's devices (theCluster is then
/// one stage's).
static std::optional<Cluster> wholeCluster;
/// A training step's report: the pipelines its forward program's search
/// priced (the step's own search is of the step as built).
static std::optional<PipelineSearchResult> forwardPipelines;

/// The cluster of --cluster, --gpus, --gpus-per-node and --cost-db.
static llvm::Expected<Cluster> clusterFromFlags() {
  auto cluster = makeCluster(
      clusterName,
      gpus.getNumOccurrences() ? std::optional<unsigned>(gpus) : std::nullopt,
      gpusPerNode.getNumOccurrences() ? std::optional<unsigned>(gpusPerNode)
                                      : std::nullopt);
  if (!cluster)
    return cluster.takeError();
  if (!costDbPath.empty()) {
    auto db = readCostDb(costDbPath);
    if (!db)
      return db.takeError();
    cluster->measured = std::make_shared<const CostDb>(std::move(*db));
  }
  if (pipelined)
    return subCluster(*cluster, pipelined->stageDevices);
  if (emit == Emit::CostProbe)
    return paxc::probedStage(*cluster);
  return cluster;
}

/// theCluster, made from the flags the first time.
static llvm::Expected<const Cluster *> flagsCluster() {
  if (!theCluster) {
    auto cluster = clusterFromFlags();
    if (!cluster)
      return cluster.takeError();
    theCluster = *cluster;
  }
  return &*theCluster;
}

/// --plan-stats: \p p's per-device stats, its roofline on one device of
/// the flags' cluster.
static llvm::Error writePlanStats(const plan::Plan &p) {
  if (planStatsPath.empty())
    return llvm::Error::success();
  if (auto c = flagsCluster(); !c)
    return c.takeError();
  llvm::json::Value stats =
      planStatsJson(p, theCluster->peakFlops, theCluster->memoryBandwidth);
  return writeFileBytes(planStatsPath, llvm::formatv("{0:2}\n", stats).str(),
                        /*text=*/true);
}

/// The configuration space of the --config-* flags on \p cluster.
static ConfigOptions configOptionsFromFlags(const Cluster &cluster,
                                            bool forPlan, bool keepGiven) {
  ConfigOptions o;
  o.devices = cluster.gpus;
  o.powersOfTwo = pow2;
  o.exact = exact;
  o.maxPerDim = maxSplit;
  o.executable = forPlan;
  o.keepGiven = keepGiven;
  // A pipelined plan places each op at its stage's first device.
  o.dividing = pipelined.has_value();
  // Past 16 devices the full space grows faster than it pays: two split
  // dims per op keep the search in seconds at 1024 GPUs (docs/PERFORMANCE.md).
  o.maxSplitDims = maxDims.getNumOccurrences() ? unsigned(maxDims)
                   : cluster.gpus > 16         ? 2u
                                               : 0u;
  return o;
}

/// A training plan: --mode=train with a loss (the backward pass and the
/// updates in the program).
static bool trainingPlan() {
  return mode == "train" && lossKind.getNumOccurrences();
}

/// --microbatches: 0 for auto, else the count.
static llvm::Expected<int64_t> microbatchesFromFlag() {
  auto m = parseMicrobatches(microbatches);
  if (!m)
    return llvm::createStringError("--microbatches=" + microbatches +
                                   ": expected auto or a positive count");
  return *m;
}

/// The levers the search prices. A training plan runs its microbatches in
/// the program (splitMicrobatches) and prices none.
/// (main has refused levers a step cannot take.)
static llvm::Expected<LeverOptions> leversFromFlags() {
  LeverOptions l;
  if (auto fp32 = paxc::fp32Gradients(); fp32)
    l.fp32Gradients = *fp32;
  else
    return fp32.takeError();
  auto m = microbatchesFromFlag();
  if (!m)
    return m.takeError();
  // (checkFlagValues has refused malformed values.)
  std::optional<int> z = parseZeroStage(zeroStage);
  std::optional<RecomputePolicy> r = parseRecompute(recompute);
  if (trainingPlan()) {
    // --microbatches=auto: a first search of the unsplit forward program
    // chooses the count.
    if (choosingMicrobatches)
      l.microbatches = 0;
    // The forward program's search (phase one) weighs the ZeRO stages and
    // the recomputation when asked to (none and stage 0 unless given); the
    // step's own search prices the program as it is.
    if (!trainingStep && zeroStage.getNumOccurrences())
      l.zero = *z;
    if (!trainingStep && recompute.getNumOccurrences())
      l.recompute = *r;
    return l;
  }
  l.microbatches = *m;
  l.recompute = *r;
  l.zero = *z;
  return l;
}

/// The bytes one device may hold: --mem-limit; else, pricing a training
/// step (--mode=train without --loss), the device's memory less
/// --mem-reserve; else none.
static llvm::Expected<double> memoryLimitFromFlags(const Cluster &c) {
  constexpr double kGiB = double(1 << 30);
  // (checkFlagValues has refused negative values.)
  if (memReserve.getNumOccurrences() &&
      (memLimit > 0 || mode != "train" || trainingStep))
    return llvm::createStringError(
        "--mem-reserve sets aside memory of the default limit of a training "
        "step (--mode=train without --loss, no --mem-limit)");
  if (memLimit > 0)
    return memLimit * kGiB;
  if (mode != "train" || trainingStep)
    return 0.0;
  double reserve = memReserve >= 0 ? memReserve * kGiB : 0.1 * c.memoryBytes;
  if (reserve >= c.memoryBytes)
    return llvm::createStringError(llvm::formatv(
        "--mem-reserve={0} GiB leaves nothing of the {1} GiB of a device of "
        "cluster '{2}'",
        reserve / kGiB, c.memoryBytes / kGiB, c.name));
  return c.memoryBytes - reserve;
}

/// The search's options from the flags, for the solver \p kind.
static llvm::Expected<ShardingOptions>
shardingOptionsFromFlags(SolverKind kind, bool forPlan, bool keepGiven) {
  // (checkFlagValues has refused malformed values.)
  ShardingOptions o;
  o.configs = configOptionsFromFlags(*theCluster, forPlan, keepGiven);
  auto levers = leversFromFlags();
  if (!levers)
    return levers.takeError();
  o.levers = *levers;
  // A training step's second phase searches what no forward op decided
  // (how gradients are aggregated, where updates run) with the cost model,
  // whatever solver chose the forward configurations.
  o.solver = keepGiven && isBaseline(kind) ? SolverKind::Dp : kind;
  o.chooseBySimulation = chooseBy == "simulation";
  o.maxStates = maxStates;
  o.exactSearch = exactSearch;
  o.threads = threads;
  auto limit = memoryLimitFromFlags(*theCluster);
  if (!limit)
    return limit.takeError();
  o.memoryLimit = *limit;
  o.searchBudget = searchBudget;
  o.mcmcSteps = mcmcSteps;
  o.refineSteps = refineSteps;
  o.seed = searchSeed;
  o.mcmcFullSimulation = mcmcFull;
  return o;
}

/// An error when a training step's program, as \p report prices it, peaks
/// over \p limit bytes per device (0: none).
static llvm::Error checkStepPeak(const StrategyReport &report, double limit) {
  double peak = report.strategy.cost.memoryBytes;
  if (limit <= 0 || peak <= limit)
    return llvm::Error::success();
  return llvm::createStringError(llvm::formatv(
      "the training step's plan needs {0:F3} GiB per device, more than the "
      "limit of {1:F3} GiB (try --microbatches, --recompute=auto or --zero)",
      peak / double(1 << 30), limit / double(1 << 30)));
}

/// --mode and --solver checked: the solver, or an error naming the flag.
static llvm::Expected<SolverKind> solverFromFlags() {
  if (mode != "train" && mode != "infer")
    return llvm::createStringError("--mode=" + mode +
                                   ": expected train or infer");
  auto kind = parseSolver(solver);
  if (!kind)
    return llvm::createStringError(
        "--solver=" + solver +
        ": expected dp, dp-bfs, exhaustive, data-parallel, expert, megatron "
        "or mcmc");
  return *kind;
}

/// A count flag \p o given as 0 (or below): an error, else success.
template <typename T>
static llvm::Error positive(const cl::opt<T> &o, llvm::StringRef what) {
  if (!o.getNumOccurrences() || o.getValue() > 0)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::formatv("--{0}={1}: expected {2}", o.ArgStr, o.getValue(), what));
}

/// The search's and the model's options: malformed values and numbers out
/// of range.
static llvm::Error checkSearchFlagValues() {
  if (auto kind = solverFromFlags(); !kind) // --mode, --solver
    return kind.takeError();
  if (auto err = positive(gpus, "at least 1 device"))
    return err;
  if (auto err = positive(gpusPerNode, "at least 1 device per node"))
    return err;
  if (auto err = positive(maxStates, "at least 1 state"))
    return err;
  if (auto err = positive(maxSplit, "a split factor of at least 1"))
    return err;
  if (memLimit < 0)
    return llvm::createStringError("--mem-limit must not be negative");
  if (memReserve.getNumOccurrences() && memReserve < 0)
    return llvm::createStringError("--mem-reserve must not be negative");
  if (searchBudget < 0)
    return llvm::createStringError("--search-budget must not be negative");
  if (chooseBy != "simulation" && chooseBy != "cost")
    return llvm::createStringError("--choose=" + chooseBy +
                                   ": expected simulation or cost");
  if (auto m = microbatchesFromFlag(); !m)
    return m.takeError();
  if (!parseZeroStage(zeroStage))
    return llvm::createStringError("--zero=" + zeroStage +
                                   ": expected auto, 0, 1, 2 or 3");
  if (!parseRecompute(recompute))
    return llvm::createStringError("--recompute=" + recompute +
                                   ": expected none, auto or all");
  return llvm::Error::success();
}

/// Every option's value checked before any work, whatever path the flags
/// take: a malformed or out-of-range value is an error even where the
/// path would not read it (a one-device plan with --solver=zzz).
static llvm::Error checkFlagValues() {
  if (auto err = checkSearchFlagValues())
    return err;
  if (lossKind.getNumOccurrences() && !parseLossKind(lossKind))
    return llvm::createStringError("--loss=" + lossKind +
                                   ": expected cross-entropy, mse or output");
  if (batchNormMode != "graph" && batchNormMode != "batch-stats")
    return llvm::createStringError("--batchnorm=" + batchNormMode +
                                   ": expected graph or batch-stats");
  if (auto err = paxc::checkPipelineFlagValues())
    return err;
  // A cost database is read only where a search prices ops: read it here
  // too, so a bad one is an error whatever the path.
  if (!costDbPath.empty())
    if (auto db = readCostDb(costDbPath); !db)
      return db.takeError();
  return paxc::checkStepFlagValues();
}

/// A progress line on a terminal when a search runs for more than about
/// two seconds, redrawn at most ten times a second.
struct ProgressLine {
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  bool shown = false;
  double drawn = 0;
  bool terminal = !quiet && llvm::errs().is_displayed();
  void draw(double fraction) {
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (!terminal || elapsed < 2 || elapsed - drawn < 0.1)
      return;
    drawn = elapsed;
    llvm::errs() << llvm::formatv("\rpaxc: searching... {0,3}% ({1:F1} s)",
                                  int(fraction * 100), elapsed);
    shown = true;
  }
};

/// --pipeline: the stages searched for \p m into \p report.
static llvm::Error searchStages(const Module &m, const ShardingOptions &o,
                                double limit, StrategyReport &report) {
  if (gradients)
    return llvm::createStringError(
        "--pipeline pipelines a training step or an inference, not "
        "--gradients");
  auto count = microbatchesFromFlag();
  if (!count)
    return count.takeError();
  auto p = paxc::pipelineOptionsFromFlags(*count);
  if (!p)
    return p.takeError();
  p->mode = mode == "train" ? CostMode::Train : CostMode::Infer;
  ShardingOptions so = o;
  so.memoryLimit = limit;
  auto found = searchPipeline(m, *theCluster, so, *p);
  if (!found)
    return found.takeError();
  report.pipeline = std::move(*found);
  return llvm::Error::success();
}

/// --strategy's configurations for \p m (none without the flag), its
/// offsets (an inference step's) and levers (a training step's pricing).
static llvm::Expected<std::optional<std::vector<Config>>>
readStrategyFlag(const Module &m, const ShardingOptions &o,
                 std::vector<int64_t> &offsets, GivenLevers &given) {
  if (strategyPath.empty())
    return std::nullopt;
  auto text = llvm::MemoryBuffer::getFile(strategyPath);
  if (!text)
    return llvm::createStringError("cannot read '" + strategyPath +
                                   "': " + text.getError().message());
  // Only an inference step places ops apart (a training step's backward
  // ops run where their forward ops do).
  bool placing = mode == "infer" && !trainingStep;
  bool pricingTraining = mode == "train" && !trainingStep;
  auto configs = strategyFromJson(m, (*text)->getBuffer(), strategyPath,
                                  o.configs, placing ? &offsets : nullptr,
                                  pricingTraining ? &given : nullptr);
  if (!configs)
    return configs.takeError();
  return std::optional<std::vector<Config>>(std::move(*configs));
}

/// --emit=trace: \p sim's run of the strategy; with --pipeline, the best
/// pipeline's schedule too (process 1, a thread per stage).
static void writeTrace(const Simulator &sim, const StrategyReport &r,
                       llvm::raw_ostream &os) {
  llvm::json::Array events = sim.traceEvents();
  if (r.pipeline && r.pipeline->best) {
    for (auto [pid, name] :
         {std::pair{0, "strategy without stages"}, std::pair{1, "pipeline"}})
      events.push_back(
          llvm::json::Object{{"name", "process_name"},
                             {"ph", "M"},
                             {"pid", pid},
                             {"args", llvm::json::Object{{"name", name}}}});
    for (llvm::json::Value &e : pipelineTraceEvents(r.pipeline->best->plan, 1))
      events.push_back(std::move(e));
  }
  llvm::json::Object trace{{"traceEvents", std::move(events)},
                           {"displayTimeUnit", "ms"}};
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(trace))) << "\n";
}

/// Under --pipeline: why no strategy without stages fits the limit, once
/// a search found none (StrategyReport::unfit).
static std::string unfitWithoutStages;

/// Under --pipeline, where no strategy without stages fits the limit
/// (\p unfit): \p search's report without the limit, marked as not
/// fitting; \p unfit where that fails too.
template <typename Search>
static llvm::Expected<StrategyReport>
searchUnlimited(const ShardingOptions &o, llvm::Error unfit, Search search) {
  ShardingOptions unlimited = o;
  unlimited.memoryLimit = 0;
  auto report = search(unlimited);
  if (!report) {
    llvm::consumeError(report.takeError());
    return unfit;
  }
  unfitWithoutStages = llvm::toString(std::move(unfit));
  return report;
}

/// buildReport with the flags' cluster and mode: the search (or \p
/// fixed's pricing) of \p m with \p o. Under --pipeline, where no strategy
/// without stages fits \p limit, that one searched without it (its report
/// says why: StrategyReport::unfit), as stages may fit.
static llvm::Expected<StrategyReport>
searchReport(const Module &m, const ShardingOptions &o,
             const std::optional<std::vector<Config>> &fixed,
             llvm::ArrayRef<int64_t> offsets, const GivenLevers &given,
             double limit) {
  bool pricingTraining = mode == "train" && !trainingStep;
  auto search = [&](const ShardingOptions &with) {
    return buildReport(m, *theCluster,
                       pricingTraining ? CostMode::Train : CostMode::Infer,
                       with, fixed, offsets, &given);
  };
  auto report = search(o);
  bool searchingStages = !paxc::pipelineOff() && !pipelined && !fixed;
  if (!report && searchingStages && o.memoryLimit > 0)
    report = searchUnlimited(o, report.takeError(), search);
  if (report && searchingStages && !unfitWithoutStages.empty()) {
    report->unfit = unfitWithoutStages;
    report->memoryLimit = limit;
  }
  return report;
}

/// The report of the flags' search (or of --strategy's strategy) for \p m.
static llvm::Expected<StrategyReport> shardModel(const Module &m, bool forPlan,
                                                 bool keepGiven = false) {
  auto cluster = clusterFromFlags();
  if (!cluster)
    return cluster.takeError();
  theCluster = *cluster;
  auto kind = solverFromFlags();
  if (!kind)
    return kind.takeError();
  auto options = shardingOptionsFromFlags(*kind, forPlan, keepGiven);
  if (!options)
    return options.takeError();
  ShardingOptions &o = *options;
  ProgressLine line;
  o.progress = [&line](double fraction) { line.draw(fraction); };
  std::vector<int64_t> offsets;
  GivenLevers given;
  auto fixed = readStrategyFlag(m, o, offsets, given);
  if (!fixed)
    return fixed.takeError();
  // A training step's backward ops are in the program: each op is priced
  // once, as it runs.
  // A training step's second phase searches with what the first fit (its
  // per-op memory would count the backward pass's results as held
  // throughout); its strategy's peak, the program's, is checked after.
  double limit = o.memoryLimit;
  if (keepGiven)
    o.memoryLimit = 0;
  auto report = searchReport(m, o, *fixed, offsets, given, limit);
  if (line.shown)
    llvm::errs() << "\n";
  // (A pipelined plan's stages were fit by the pipeline search: the
  // program on one stage's devices counts every stage's weights.)
  if (report && keepGiven && !pipelined && report->unfit.empty())
    if (auto err = checkStepPeak(*report, limit))
      return err;
  if (report) {
    report->trainingProgram = trainingStep;
    report->solver = *kind;
  }
  // The forward program's search prices the pipelines too (a pipelined
  // plan's second phase is one stage's).
  if (report && !paxc::pipelineOff() && !trainingStep && !pipelined &&
      !forwardPipelines)
    if (auto err = searchStages(m, o, limit, *report))
      return err;
  if (report && trainingStep && forwardPipelines)
    report->pipeline = *forwardPipelines;
  return report;
}

/// --emit=cost-probe: device 0's block of every op in every configuration
/// the plan search may choose, each distinct block once.
static llvm::Error writeCostProbe(const Module &m, llvm::raw_ostream &os) {
  if (auto err = checkRunnable(m))
    return err;
  auto cluster = clusterFromFlags();
  if (!cluster)
    return cluster.takeError();
  ConfigOptions co = configOptionsFromFlags(*cluster, /*forPlan=*/true,
                                            /*keepGiven=*/false);
  paxc::ProbeSet probe = paxc::probeBlocks(m, co);
  llvm::SmallString<256> source(inputPath);
  llvm::sys::fs::make_absolute(source);
  auto p = emitProbePlan(m, probe.blocks, source);
  if (!p)
    return p.takeError();
  os << encodePlan(*p);
  if (!quiet && outputPath != "-")
    llvm::errs() << llvm::formatv(
        "paxc: wrote {0}: {1} distinct op blocks of {2} ops in {3} "
        "configurations on up to {4} devices\n",
        outputPath, probe.distinct, m.main.ops.size(), probe.configs,
        cluster->gpus);
  return llvm::Error::success();
}

/// --gradients: the backward pass. A training step: the backward pass,
/// the optimizer's updates, the recomputation \p recomputing asks for
/// (auto: of the forward ops in \p chosen), and the ops in microbatch
/// order.
static llvm::Error buildBackward(Module &m, int64_t replicas,
                                 RecomputePolicy recomputing,
                                 const llvm::DenseSet<const Op *> &chosen) {
  size_t forwardOps = m.main.ops.size();
  if (!gradients && !trainingStep)
    return llvm::Error::success();
  AutodiffOptions ad;
  ad.freeze = freeze;
  ad.replicas = replicas;
  auto inModel = [](llvm::Error err) {
    return llvm::createStringError(inputPath + ": " +
                                   llvm::toString(std::move(err)));
  };
  auto scaling = paxc::lossScaling(trainingStep);
  if (!scaling)
    return scaling.takeError();
  const Global *scale =
      *scaling ? addLossScale(m, paxc::lossScaleInitial()) : nullptr;
  ad.seedScale = scale;
  if (auto err = appendBackward(m, ad))
    return inModel(std::move(err));
  // Gradients summed in fp32: each product whose gradient a cast widens
  // writes fp32 itself.
  if (auto fp32 = paxc::fp32Gradients(); fp32 && *fp32)
    foldCasts(m, CastFold::All);
  else if (!fp32)
    return fp32.takeError();
  if (!trainingStep)
    return llvm::Error::success();
  auto opt = paxc::optimizerFromFlags(replicas, scale);
  if (!opt)
    return opt.takeError();
  if (auto err = appendOptimizer(m, *opt))
    return inModel(std::move(err));
  // Every result but the contractions' computed again where the backward
  // pass reads it.
  if (recomputing == RecomputePolicy::All)
    recomputeInBackward(m.main, forwardOps,
                        [](const Op &op) { return !op.reducesAway(); });
  // The forward search's choice per op.
  if (recomputing == RecomputePolicy::Auto)
    recomputeInBackward(m.main, forwardOps,
                        [&](const Op &op) { return chosen.count(&op) > 0; });
  // One microbatch's activations at a time.
  orderMicrobatches(m.main);
  return llvm::Error::success();
}

/// Refuses the flags of a training step that this step cannot take;
/// returns --recompute's policy.
static llvm::Expected<RecomputePolicy> checkStepFlags() {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(msg.str());
  };
  if (trainingStep && gradients)
    return error("--gradients makes gradients outputs; a training step "
                 "(--mode=train with --loss) applies them instead");
  if (freeze.getNumOccurrences() && !gradients && !trainingStep)
    return error("--freeze needs --gradients or a training step");
  if (auto scaling = paxc::lossScaling(trainingStep); !scaling)
    return scaling.takeError();
  if (auto fp32 = paxc::fp32Gradients(); !fp32)
    return fp32.takeError();
  if (mode != "train" && microbatches.getNumOccurrences() &&
      paxc::pipelineOff())
    return error("--microbatches splits a training step's batch "
                 "(--mode=train)");
  if (mode != "train" &&
      (recompute.getNumOccurrences() || zeroStage.getNumOccurrences()))
    return error("--recompute and --zero price or run a training step "
                 "(--mode=train)");
  // (checkFlagValues has refused a malformed --recompute.)
  return recompute.getNumOccurrences() ? *parseRecompute(recompute)
                                       : RecomputePolicy::None;
}

/// --microbatches=auto in a training plan: the count a search of the
/// unsplit forward program, priced as a training step, chooses.
static llvm::Expected<int64_t> chooseMicrobatches(const Module &m,
                                                  bool planning) {
  trainingStep = false;
  choosingMicrobatches = true;
  auto report = shardModel(m, /*forPlan=*/planning);
  choosingMicrobatches = false;
  trainingStep = true;
  if (!report)
    return report.takeError();
  return std::max<int64_t>(1, report->strategy.microbatches);
}

/// Each parameter's ZeRO stage as the forward program's search chose it:
/// the highest of the ops reading it (--zero=auto in a training plan).
static llvm::DenseMap<const Global *, unsigned>
chosenZeroStages(const Module &m, const Strategy &s) {
  llvm::DenseMap<const Global *, unsigned> out;
  for (size_t i = 0; i < m.main.ops.size() && i < s.choices.size(); ++i)
    for (const Operand &o : m.main.ops[i]->operands)
      if (o.value->global && o.value->global->isParameter) {
        unsigned &z = out[o.value->global];
        z = std::max<unsigned>(z, s.choices[i].zero);
      }
  return out;
}

/// A training plan's microbatches: \p perStep copies of the forward
/// program over slices of the batch (the search and the plan see them
/// all), or with --microbatches=auto (0) the count a search chooses.
static llvm::Error splitStep(Module &m, int64_t perStep, bool searched,
                             bool planning) {
  if (perStep == 0 && microbatches.getNumOccurrences()) {
    if (!searched)
      return llvm::createStringError(
          "--microbatches=auto takes the search's count, and a training "
          "plan is searched only on more than one device (--gpus, "
          "--cluster) without --strategy; give a count");
    auto chosen = chooseMicrobatches(m, planning);
    if (!chosen)
      return chosen.takeError();
    perStep = *chosen;
    if (!quiet)
      llvm::errs() << "paxc: --microbatches=auto: " << perStep
                   << " microbatch(es) per step\n";
  }
  if (perStep <= 1)
    return llvm::Error::success();
  if (auto err = splitMicrobatches(m, perStep))
    return llvm::createStringError(inputPath + ": " +
                                   llvm::toString(std::move(err)));
  return llvm::Error::success();
}

/// splitStep, the ops of \p recompute (chosen before the split) replaced
/// by their microbatch copies.
static llvm::Error splitRecomputing(Module &m, int64_t perStep, bool searched,
                                    bool planning,
                                    llvm::DenseSet<const Op *> &recompute) {
  constexpr const char *kMark = "recompute_chosen";
  for (const Op *op : recompute)
    const_cast<Op *>(op)->attrs[kMark] = int64_t(1);
  auto err = splitStep(m, perStep, searched, planning);
  recompute.clear();
  for (auto &op : m.main.ops)
    if (op->attrs.erase(kMark))
      recompute.insert(op.get());
  return err;
}

/// What the forward program's search of a training step chose, beyond
/// each forward op's configuration (set as its `config`).
struct ForwardChoices {
  llvm::DenseMap<const Global *, unsigned> zero; ///< per weight
  llvm::DenseSet<const Op *> recompute;          ///< forward ops
};

/// A training step's first phase: the forward program, priced as a
/// training step (forward, backward, gradient synchronization), decides
/// each op's configuration, which its backward ops then share.
static llvm::Expected<StrategyReport> searchForwardProgram(const Module &m,
                                                           bool planning) {
  trainingStep = false; // price the forward program as a training step
  auto first = shardModel(m, /*forPlan=*/planning);
  trainingStep = true;
  return first;
}

/// Sets \p s's configuration on each forward op of \p m; its ZeRO stages
/// and recomputation.
static ForwardChoices takeForwardChoices(Module &m, const Strategy &s) {
  ForwardChoices out;
  for (size_t i = 0; i < m.main.ops.size(); ++i)
    m.main.ops[i]->attrs["config"] =
        std::vector<int64_t>(s.configs[i].begin(), s.configs[i].end());
  out.zero = chosenZeroStages(m, s);
  for (size_t i = 0; i < s.choices.size(); ++i)
    if (s.choices[i].recompute)
      out.recompute.insert(m.main.ops[i].get());
  return out;
}

static llvm::Expected<ForwardChoices> searchForward(Module &m, bool planning) {
  auto first = searchForwardProgram(m, planning);
  if (!first)
    return first.takeError();
  if (first->pipeline)
    forwardPipelines = first->pipeline;
  return takeForwardChoices(m, first->strategy);
}

/// The pipeline of \p first (the search of the unsplit forward program,
/// its pipelines priced): its stages, microbatches, schedule and each op's
/// configuration on its stage's submesh, which the ops take (and the
/// microbatch copies after them); the flags' cluster becomes one stage's.
/// With --pipeline=auto, where the step without stages simulates faster,
/// that step's configurations instead.
static llvm::Expected<ForwardChoices>
takePipeline(Module &m, const StrategyReport &first) {
  auto choice = paxc::chosenPipeline(*first.pipeline);
  if (!choice && !first.unfit.empty()) // neither fits
    return llvm::createStringError(first.unfit + "; " +
                                   llvm::toString(choice.takeError()));
  if (!choice && paxc::pipelineAuto()) {
    std::string why = llvm::toString(choice.takeError());
    if (!quiet)
      llvm::errs() << "paxc: " << llvm::StringRef(why).split('\n').first
                   << ": the plan has no stages\n";
    return takeForwardChoices(m, first.strategy);
  }
  if (!choice)
    return choice.takeError();
  // --pipeline=auto: stages only where they simulate faster.
  double flat = first.strategy.cost.simulatedSeconds;
  if (paxc::pipelineAuto() && first.unfit.empty() &&
      flat <= choice->plan.simulatedSeconds) {
    if (!quiet)
      llvm::errs() << "paxc: --pipeline=auto: the step without stages ("
                   << formatSeconds(flat) << ") simulates faster than the "
                   << "best pipeline ("
                   << formatSeconds(choice->plan.simulatedSeconds)
                   << "): the plan has no stages\n";
    return takeForwardChoices(m, first.strategy);
  }
  markStages(m.main, choice->layers, choice->plan.stages);
  pipelined = std::move(*choice);
  wholeCluster = *theCluster;
  theCluster = subCluster(*theCluster, pipelined->stageDevices);
  if (!quiet)
    llvm::errs() << llvm::formatv(
        "paxc: --pipeline: {0} stages of {1} device(s), {2} microbatches, "
        "{3}\n",
        pipelined->plan.ranks(), pipelined->stageDevices,
        pipelined->plan.microbatches,
        scheduleText(scheduleName(pipelined->plan.schedule),
                     pipelined->plan.chunks));
  return takeForwardChoices(m, pipelined->intra);
}

/// A pipelined training plan's first phase (--pipeline with a training
/// plan): takePipeline of the forward program's search.
static llvm::Expected<ForwardChoices> choosePipeline(Module &m) {
  auto first = searchForwardProgram(m, /*planning=*/true);
  if (!first)
    return first.takeError();
  return takePipeline(m, *first);
}

/// A pipelined inference plan (--pipeline with --mode=infer and a plan):
/// the pipeline search of the model chooses the stages, microbatches and
/// configurations; the batch is split, every op placed on its stage and
/// ordered by the schedule (each output the microbatches' concatenated).
static llvm::Error pipelineInference(Module &m) {
  auto first = shardModel(m, /*forPlan=*/true);
  if (!first)
    return first.takeError();
  auto chosen = takePipeline(m, *first);
  if (!chosen)
    return chosen.takeError();
  if (!pipelined)
    return llvm::Error::success();
  if (auto err = splitInferenceBatch(m, pipelined->plan.microbatches))
    return llvm::createStringError(inputPath + ": " +
                                   llvm::toString(std::move(err)));
  markForward(m.main);
  return paxc::placePipeline(m, *pipelined);
}

/// `paxc: wrote PLAN: ...`: devices, collectives, the peak buffers and,
/// for a searched strategy, the cost model's peak and step.
static void printPlanSummary(const Module &m, const plan::Plan &p,
                             const PlanOptions &po, bool partitioned) {
  int64_t peak = 0, collectives = 0, placed = 0;
  for (const auto &op : m.main.ops)
    placed += op->intAttr("offset", 0) != 0;
  for (const plan::DeviceProgram &prog : p.programs()) {
    peak = std::max(peak, prog.arena_bytes());
    for (const plan::Instruction &inst : prog.instructions())
      collectives += inst.has_collective();
  }
  std::string searched;
  if (partitioned)
    searched = llvm::formatv(" (cost model: {0:F1} MiB); step {1:F3} ms "
                             "predicted, {2:F3} ms simulated{3}",
                             po.predictedBytes / (1 << 20),
                             po.predictedStepSeconds * 1e3,
                             po.simulatedStepSeconds * 1e3,
                             placed ? llvm::formatv("; {0} op(s) placed off "
                                                    "device 0",
                                                    placed)
                                          .str()
                                    : std::string());
  llvm::errs() << llvm::formatv("paxc: wrote {0}: {1} device(s), {2} "
                                "collective call(s), peak buffers {3:F1} MiB "
                                "per device{4}\n",
                                outputPath, p.devices(), collectives,
                                double(peak) / (1 << 20), searched);
}

/// The importer's options from the flags: dims, batch, loss, batch norm.
static llvm::Expected<ImportOptions> importOptionsFromFlags() {
  ImportOptions options;
  if (auto err = paxc::shapeOptionsFromFlags(options))
    return err;

  if (lossKind.getNumOccurrences()) {
    auto kind = parseLossKind(lossKind);
    if (!kind)
      return llvm::createStringError("--loss=" + lossKind +
                                     ": expected cross-entropy, mse or output");
    options.loss.kind = *kind;
  } else if (lossOutput.getNumOccurrences() ||
             ignoreIndex.getNumOccurrences()) {
    return llvm::createStringError(std::string(lossOutput.getNumOccurrences()
                                                   ? "--loss-output"
                                                   : "--ignore-index") +
                                   " needs --loss");
  }
  options.loss.output = lossOutput;
  if (ignoreIndex.getNumOccurrences()) {
    int64_t n;
    if (llvm::StringRef(ignoreIndex).getAsInteger(10, n))
      return llvm::createStringError("--ignore-index=" + ignoreIndex +
                                     ": expected an integer");
    options.loss.ignoreIndex = n;
  }

  if (batchNormMode != "graph" && batchNormMode != "batch-stats")
    return llvm::createStringError("--batchnorm=" + batchNormMode +
                                   ": expected graph or batch-stats");
  options.seed = seed;
  options.trainingMode.batchStats = batchNormMode == "batch-stats";
  options.trainingMode.updateRunningStats =
      lossKind.getNumOccurrences() && (mode == "train" || gradients);
  return options;
}

/// What the pipeline search predicts of a pipelined plan's step: the
/// slowest stage's peak, the schedule's step; the plan's own step \p m
/// simulated.
static void pipelinedPrediction(const Module &m, const PipelineChoice &c,
                                llvm::ArrayRef<Config> configs,
                                PlanOptions &po) {
  po.predictedBytes = 0;
  for (const PipelineStage &st : c.plan.stages)
    po.predictedBytes = std::max(po.predictedBytes, st.peakBytes);
  po.predictedStepSeconds = c.plan.stepSeconds;
  po.simulatedStepSeconds = simulatePlacedStep(m, *wholeCluster, configs);
  po.pipeline = paxc::pipelineRecord(c);
}

/// Where compilePlan keeps the report of the plan's strategy (null on the
/// command line).
static paxc::CompiledPlan *reportSink = nullptr;

/// \p r, the report of \p m's strategy, as JSON and text into \p out.
static void keepReport(const Module &m, const StrategyReport &r,
                       paxc::CompiledPlan &out) {
  out.reportJson = llvm::formatv("{0:2}", strategyToJson(m, r)).str();
  llvm::raw_string_ostream os(out.reportText);
  printReport(m, r, os);
}

/// The plan's options for \p m: its source and, \p partitioned, the
/// strategy searched (or given) for it, its configs set on the ops and its
/// collectives inserted, with what the cost model predicts.
static llvm::Expected<PlanOptions> partitionForPlan(Module &m, bool partitioned,
                                                    bool twoPhase) {
  PlanOptions po;
  // The plan reads its weights from the model, found by absolute path.
  llvm::SmallString<256> source(inputPath);
  llvm::sys::fs::make_absolute(source);
  po.source = source.str().str();
  if (partitioned) {
    // (A pipelined plan's ops have their stage's configurations.)
    auto report = shardModel(m, /*forPlan=*/true,
                             /*keepGiven=*/twoPhase || pipelined);
    if (!report)
      return report.takeError();
    if (reportSink)
      keepReport(m, *report, *reportSink);
    const Strategy &s = report->strategy;
    for (size_t i = 0; i < m.main.ops.size(); ++i) {
      m.main.ops[i]->attrs["config"] =
          std::vector<int64_t>(s.configs[i].begin(), s.configs[i].end());
      if (int64_t at = offsetOf(s.offsets, i))
        m.main.ops[i]->attrs["offset"] = at;
    }
    po.predictedBytes = s.cost.memoryBytes;
    po.predictedStepSeconds = s.cost.seconds;
    po.simulatedStepSeconds = s.cost.simulatedSeconds;
    if (pipelined)
      pipelinedPrediction(m, *pipelined, s.configs, po);
    int64_t stages = pipelined ? pipelined->plan.ranks() : 1;
    if (auto err = insertCollectives(m, theCluster->gpus * stages,
                                     theCluster->gpusPerNode))
      return err;
  }
  if (fuseKernelsFlag)
    fuseKernels(m);
  return po;
}

/// The plan of \p m: partitioned (its options in \p po), emitted, and its
/// fused groups' kernels generated.
static llvm::Expected<plan::Plan> buildPlan(Module &m, bool partitioned,
                                            bool twoPhase, PlanOptions &po) {
  if (auto err = checkRunnable(m))
    return err;
  auto options = partitionForPlan(m, partitioned, twoPhase);
  if (!options)
    return options.takeError();
  po = *options;
  auto p = emitPlan(m, po);
  if (!p)
    return p.takeError();
  if (fuseKernelsFlag)
    for (plan::DeviceProgram &prog : *p->mutable_programs())
      runtime::generateKernels(prog);
  return p;
}

/// --emit=kernels: each generated kernel of the plan as FOLDER/NAME.cu.
static int writeKernels(Module &m, bool partitioned, bool twoPhase) {
  if (outputPath == "-")
    return fail("--emit=kernels writes a folder of .cu files: name it with "
                "-o DIR");
  if (!fuseKernelsFlag)
    return fail("--emit=kernels: --fuse-kernels=false generates no kernels");
  PlanOptions po;
  auto p = buildPlan(m, partitioned, twoPhase, po);
  if (!p)
    return fail(llvm::toString(p.takeError()));
  if (auto ec = llvm::sys::fs::create_directories(outputPath))
    return fail("cannot create '" + outputPath + "': " + ec.message());
  unsigned n = 0;
  for (const plan::DeviceProgram &prog : p->programs())
    for (const plan::GeneratedKernel &k : prog.kernels()) {
      llvm::SmallString<256> path(outputPath.getValue());
      llvm::sys::path::append(path, k.name() + ".cu");
      std::error_code ec;
      llvm::raw_fd_ostream os(path, ec);
      if (ec)
        return fail("cannot write '" + path + "': " + ec.message());
      os << k.source();
      ++n;
    }
  if (!quiet)
    llvm::errs() << "paxc: wrote " << n << " generated kernel(s) to "
                 << outputPath << "\n";
  return 0;
}

/// The model of --input read into the IR, its warnings printed, with
/// paxc's graph-level rewrites (fuseImported).
static llvm::Expected<ImportResult> importModel() {
  auto options = importOptionsFromFlags();
  if (!options)
    return options.takeError();
  auto imported = importOnnxFile(inputPath, *options);
  if (!imported)
    return imported.takeError();
  if (!quiet)
    for (const std::string &w : imported->warnings)
      llvm::WithColor::warning(llvm::errs(), "paxc") << w << "\n";
  Module &m = *imported->module;
  // Partitioned, a training step's master weights are cast on every device
  // that reads them (a replica dim of the device count).
  bool backward = mode == "train" || gradients;
  int64_t replicas = 1;
  if (backward &&
      ((gpus.getNumOccurrences() && gpus > 1) ||
       strategyPath.getNumOccurrences() || clusterName.getNumOccurrences())) {
    auto c = flagsCluster();
    if (!c)
      return c.takeError();
    replicas = (*c)->gpus;
  }
  if (auto err = paxc::rewriteImported(
          m, {/*trainMode=*/mode == "train", backward,
              /*onnxSharded=*/emit == Emit::OnnxSharded, quiet, replicas}))
    return err;
  if (mode == "train" &&
      llvm::none_of(m.globals, [](const std::unique_ptr<Global> &g) {
        return g->isParameter && isFloat(g->value.type.elem);
      }))
    return llvm::createStringError(inputPath +
                                   ": --mode=train: the model has no float "
                                   "parameters to train");
  return imported;
}

/// What the flags ask paxc to produce.
struct Target {
  /// A plan (-o FILE.paxplan, --emit=plan, plan-text or kernels).
  bool planning = false;
  /// Over more than one device, or a given cluster or strategy.
  bool partitioned = false;
  /// A searched strategy's report, JSON, trace, DOT or annotated model.
  bool sharding = false;
  /// A training step searched in two phases (searchForward).
  bool twoPhase = false;
};

static Target targetFromFlags() {
  Target t;
  t.planning = emit == Emit::Plan || emit == Emit::PlanText ||
               emit == Emit::Kernels ||
               (!emit.getNumOccurrences() &&
                llvm::StringRef(outputPath).ends_with(".paxplan"));
  t.partitioned = (gpus.getNumOccurrences() && gpus > 1) ||
                  strategyPath.getNumOccurrences() ||
                  clusterName.getNumOccurrences();
  t.sharding =
      emit == Emit::Report || emit == Emit::Strategy || emit == Emit::Trace ||
      emit == Emit::Dot || emit == Emit::OnnxSharded ||
      (!emit.getNumOccurrences() &&
       (gpus.getNumOccurrences() || strategyPath.getNumOccurrences() ||
        clusterName.getNumOccurrences() || costDbPath.getNumOccurrences()));
  // A training step searched in two phases: the forward program, priced as
  // a training step (forward, backward, gradient synchronization), decides
  // each op's configuration, which its backward ops then share; the search
  // graph does not grow. Only the ops that belong to no forward op (the
  // sums of gradients, the updates) are searched afterwards.
  t.twoPhase = trainingStep && !strategyPath.getNumOccurrences() &&
               ((t.planning && t.partitioned) || (!t.planning && t.sharding));
  return t;
}

/// --pipeline where stages are searched: a report, a strategy or a plan
/// of the forward program's search.
static llvm::Error checkPipelineTarget(const Target &t) {
  if (auto err = paxc::checkPipelineFlagsUsed())
    return err;
  if (paxc::pipelineOff() || emit == Emit::CostProbe)
    return llvm::Error::success();
  if (!t.planning && !t.sharding)
    return llvm::createStringError(
        "--pipeline searches stages: with --emit=report, strategy or trace, "
        "or a plan");
  if (t.planning && (!t.partitioned || strategyPath.getNumOccurrences()))
    return llvm::createStringError(
        "--pipeline: a pipelined plan's stages and their strategies are "
        "searched, on more than one device (--gpus, --cluster) and without "
        "--strategy");
  return llvm::Error::success();
}

/// A training step's first phase, and its split into \p perStep
/// microbatches (0: the search's count): the forward program's search
/// (its configurations set on the ops), or its pipeline search whose
/// choice a pipelined plan takes. A report's pipelines are of the forward
/// program before the split.
static llvm::Expected<ForwardChoices> firstPhase(Module &m, const Target &t,
                                                 int64_t perStep) {
  ForwardChoices chosen;
  bool stages = trainingStep && t.twoPhase && !paxc::pipelineOff();
  if (stages && t.planning) {
    auto first = choosePipeline(m);
    if (!first)
      return first.takeError();
    chosen = std::move(*first);
    if (pipelined)
      perStep = pipelined->plan.microbatches;
  } else if (stages) {
    auto first = searchForwardProgram(m, /*planning=*/false);
    if (!first)
      return first.takeError();
    forwardPipelines = first->pipeline;
  }
  if (trainingStep)
    if (auto err = splitRecomputing(m, perStep, t.twoPhase, t.planning,
                                    chosen.recompute))
      return err;
  if (pipelined) {
    markForward(m.main);
    return chosen;
  }
  if (t.twoPhase)
    return searchForward(m, t.planning);
  return chosen;
}

/// A training step's microbatches, forward choices, backward ops and ZeRO
/// stages (with --mode=train and a loss); a model's gradients (with
/// --gradients).
static llvm::Error buildStep(Module &m, const Target &t,
                             RecomputePolicy recomputing, int64_t perStep) {
  if (auto err = checkPipelineTarget(t))
    return err;
  if (mode == "infer" && t.planning && !paxc::pipelineOff())
    return pipelineInference(m);
  if (trainingStep && !t.twoPhase && recomputing == RecomputePolicy::Auto)
    return llvm::createStringError(
        "--recompute=auto takes the search's choice per op, and a training "
        "plan is searched only on more than one device (--gpus, --cluster) "
        "without --strategy; use none or all");
  auto chosen = firstPhase(m, t, perStep);
  if (!chosen)
    return chosen.takeError();
  bool pipelining = pipelined.has_value();
  // Partitioned, a lookup's gradient and the updates may run whole on
  // every device (replica dims of the plan's device count).
  int64_t replicas = 1;
  if (t.partitioned && (gradients || trainingStep)) {
    auto c = flagsCluster();
    if (!c)
      return c.takeError();
    replicas = (*c)->gpus;
  }
  if (auto err = buildBackward(m, replicas, recomputing, chosen->recompute))
    return err;
  if (trainingStep && replicas > 1)
    if (auto err = applyZero(m, replicas, [&](const Global &g) {
          auto fixed = parseZeroStage(zeroStage);
          return fixed && *fixed >= 0 ? unsigned(*fixed)
                                      : chosen->zero.lookup(&g);
        }))
      return err;
  return pipelining ? paxc::placePipeline(m, *pipelined)
                    : llvm::Error::success();
}

/// The plan of \p m, the step built (its options in \p po), with
/// --plan-stats written.
static llvm::Expected<plan::Plan> makePlan(Module &m, const Target &t,
                                           PlanOptions &po) {
  if (mode == "train" && !trainingStep)
    return llvm::createStringError(
        "a training plan needs a loss (--loss); --mode=train alone prices a "
        "training step of the model as it is");
  auto p = buildPlan(m, t.partitioned, t.twoPhase, po);
  if (!p)
    return p.takeError();
  if (auto err = writePlanStats(*p))
    return err;
  return p;
}

/// Writes the plan of \p m (-o FILE.paxplan, --emit=plan or plan-text) to
/// \p out, with --plan-stats.
static llvm::Error writePlan(Module &m, const Target &t,
                             llvm::ToolOutputFile &out) {
  PlanOptions po;
  auto p = makePlan(m, t, po);
  if (!p)
    return p.takeError();
  if (emit == Emit::PlanText) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(*p, &text);
    out.os() << text;
  } else {
    out.os() << encodePlan(*p);
  }
  out.keep();
  if (!quiet && emit != Emit::PlanText && outputPath != "-")
    printPlanSummary(m, *p, po, t.partitioned);
  return llvm::Error::success();
}

/// Writes \p m's IR or summary (no search) to \p out.
static void writeModel(const Module &m, llvm::ToolOutputFile &out) {
  if (emit == Emit::IR) {
    printModule(m, out.os());
  } else {
    ModelSummary s = summarize(m);
    if (format == Format::Json)
      out.os() << llvm::formatv("{0:2}", summaryToJson(s)) << "\n";
    else
      printSummaryText(s, out.os());
  }
  out.keep();
}

/// Searches \p m's strategy and writes what --emit asks of it (report,
/// strategy JSON, trace, DOT, annotated model) to \p out.
static llvm::Error writeSharding(Module &m, const Target &t,
                                 llvm::ToolOutputFile &out) {
  auto report = shardModel(m, /*forPlan=*/false, /*keepGiven=*/t.twoPhase);
  if (!report)
    return report.takeError();
  if (emit == Emit::Dot) {
    writeStrategyDot(m, report->strategy, out.os());
  } else if (emit == Emit::OnnxSharded) {
    if (auto err = paxc::writeOnnxSharded(m, *report, inputPath, outputPath,
                                          quiet, out.os()))
      return err;
  } else if (emit == Emit::Trace) {
    CostModel model(*report->cluster, report->mode);
    SimOptions so;
    so.delta = false;
    Simulator sim(m, model, so);
    sim.simulate(report->strategy.configs, report->strategy.offsets);
    writeTrace(sim, *report, out.os());
  } else if (emit == Emit::Strategy || format == Format::Json) {
    out.os() << llvm::formatv("{0:2}", strategyToJson(m, *report)) << "\n";
  } else {
    printReport(m, *report, out.os());
  }
  out.keep();
  return llvm::Error::success();
}

/// Writes what the flags ask of \p m, the step built.
static int writeOutput(Module &m, const Target &t) {
  if (t.planning && emit == Emit::Kernels)
    return writeKernels(m, t.partitioned, t.twoPhase);
  std::error_code ec;
  llvm::ToolOutputFile out(outputPath, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return fail("cannot write '" + outputPath + "': " + ec.message());
  llvm::Error err = llvm::Error::success();
  if (emit == Emit::CostProbe) {
    err = writeCostProbe(m, out.os());
    if (!err)
      out.keep();
  } else if (t.planning) {
    err = writePlan(m, t, out);
  } else if (!t.sharding) {
    writeModel(m, out);
  } else {
    err = writeSharding(m, t, out);
  }
  if (err)
    return fail(llvm::toString(std::move(err)));
  return 0;
}

namespace {
/// The step the options ask for, built: the imported module and what to
/// produce of it.
struct Built {
  ImportResult imported;
  Target target;
};
} // namespace

/// The model of the options imported and its step built (a training
/// step's backward pass, the search's first phase), verified.
static llvm::Expected<Built> buildFromFlags() {
  if (inputPath.empty())
    return llvm::createStringError(
        "no model given (paxc MODEL.onnx [options]; paxc --help)");
  if (auto err = checkFlagValues())
    return err;
  auto imported = importModel();
  if (!imported)
    return imported.takeError();
  Module &m = *imported->module;
  // A training step: --mode=train with a loss builds the backward pass and
  // the parameter updates into the program.
  trainingStep = mode == "train" && lossKind.getNumOccurrences();
  auto recomputing = checkStepFlags();
  if (!recomputing)
    return recomputing.takeError();
  // A training plan's microbatches: M copies of the forward program over
  // slices of the batch (the search and the plan see them all).
  auto perStep = microbatchesFromFlag();
  if (!perStep)
    return perStep.takeError();
  Target t = targetFromFlags();
  if (!planStatsPath.empty() && !t.planning)
    return llvm::createStringError(
        "--plan-stats describes a plan: write one (-o FILE.paxplan or "
        "--emit=plan)");
  if (auto err = buildStep(m, t, *recomputing, *perStep))
    return err;
  std::string verifyErrors;
  if (!verifyModule(m, [&](const Op *op, const llvm::Twine &msg) {
        verifyErrors +=
            (op ? "op '" + op->name().str() + "': " : "") + msg.str() + "\n";
      }))
    return llvm::createStringError(
        "internal: the imported IR does not verify:\n" + verifyErrors);
  return Built{std::move(*imported), t};
}

void paxc::parseCommandLine(int argc, char **argv) {
  cl::HideUnrelatedOptions(
      {&paxcCategory, &searchCategory, &paxc::trainCategory, &lossCategory});
  cl::SetVersionPrinter([](llvm::raw_ostream &os) { os << "paxc 0.1.0\n"; });
  cl::ParseCommandLineOptions(
      argc, argv,
      "paxc: an auto-parallelizing compiler for deep-learning models\n\n"
      "Reads an ONNX model (binary, or protobuf text for .onnxtxt files) into\n"
      "the iteration-space IR, searches how every layer is split over the\n"
      "devices (--gpus, --cluster; pipeline stages with --pipeline), and\n"
      "writes its summary, IR, report or strategy (--emit) or a plan for\n"
      "paxrun (-o FILE.paxplan); --mode=train with --loss compiles a\n"
      "training step.\n");
}

int paxc::runCommandLine() {
  if (listClusters) {
    llvm::outs() << describeClusters();
    return 0;
  }
  auto built = buildFromFlags();
  if (!built)
    return fail(llvm::toString(built.takeError()));
  return writeOutput(*built->imported.module, built->target);
}

bool paxc::isOption(llvm::StringRef name) {
  const auto &options = cl::getRegisteredOptions();
  auto it = options.find(name);
  if (it == options.end())
    return false;
  return llvm::any_of(it->second->Categories, [](cl::OptionCategory *c) {
    return c == &paxcCategory || c == &searchCategory ||
           c == &paxc::trainCategory || c == &lossCategory;
  });
}

/// The state one compile leaves behind, cleared for the next.
static void resetCompileState() {
  cl::ResetAllOptionOccurrences();
  theCluster.reset();
  trainingStep = false;
  choosingMicrobatches = false;
  pipelined.reset();
  wholeCluster.reset();
  forwardPipelines.reset();
  unfitWithoutStages.clear();
}

/// What \p parse writes to stderr, captured: LLVM's parser reports a
/// malformed value there whatever stream it is given. (Another thread's
/// write to stderr in that instant lands in the capture too.)
template <typename Parse>
static std::string capturingStderr(Parse parse, bool &ok) {
  llvm::errs().flush();
  FILE *capture = std::tmpfile();
  int saved = capture ? ::dup(2) : -1;
  if (saved < 0 || ::dup2(::fileno(capture), 2) < 0) {
    ok = parse();
    if (capture)
      std::fclose(capture);
    return "";
  }
  ok = parse();
  llvm::errs().flush();
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  std::rewind(capture);
  for (int c; (c = std::fgetc(capture)) != EOF;)
    text.push_back(char(c));
  std::fclose(capture);
  return text;
}

/// \p args parsed into the option table, as the command line `paxc ARGS`
/// would be; an error with the parser's message.
static llvm::Error parseArgs(llvm::ArrayRef<std::string> args) {
  std::vector<const char *> argv = {"paxc"};
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  std::string errors;
  llvm::raw_string_ostream os(errors);
  bool ok = false;
  std::string written = capturingStderr(
      [&] {
        return cl::ParseCommandLineOptions(int(argv.size()), argv.data(), "",
                                           &os);
      },
      ok);
  if (ok)
    return llvm::Error::success();
  std::string all = errors + written;
  llvm::StringRef message = llvm::StringRef(all).trim();
  message.consume_front("paxc: ");
  return llvm::createStringError(message.str());
}

llvm::Expected<paxc::CompiledPlan>
paxc::compilePlan(llvm::ArrayRef<std::string> args) {
  static std::mutex serial;
  std::lock_guard<std::mutex> lock(serial);
  resetCompileState();
  std::vector<std::string> all(args.begin(), args.end());
  all.push_back("--emit=plan");
  if (auto err = parseArgs(all))
    return err;
  auto built = buildFromFlags();
  if (!built)
    return built.takeError();
  CompiledPlan out;
  reportSink = &out;
  PlanOptions po;
  auto p = makePlan(*built->imported.module, built->target, po);
  reportSink = nullptr;
  if (!p)
    return p.takeError();
  out.plan = std::move(*p);
  return out;
}
