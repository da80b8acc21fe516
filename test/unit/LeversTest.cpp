//===- LeversTest.cpp - Microbatches, recomputation, ZeRO in the cost model
//===//
#include "passes/cost/CostModel.h"
#include "passes/sharding/Layout.h"
#include "passes/sharding/Solve.h"
#include "passes/sharding/StrategyIO.h"

#include <gtest/gtest.h>

using namespace pax;

namespace {

constexpr int64_t kBatch = 64, kWidth = 256;

/// x [64, 256] -> matmul w [256, 256] (a parameter) -> relu: the sample dim
/// m of both ops comes from the input's dim 0.
std::unique_ptr<Module> mlp(Global **weight = nullptr) {
  auto m = std::make_unique<Module>();
  m->name = "mlp";
  TensorType act{DType::F32, {kBatch, kWidth}};
  Value *x = m->main.addArg("x", act);
  Global *w = m->addGlobal("w", {DType::F32, {kWidth, kWidth}});
  w->isParameter = true;
  auto d = AccessExpr::dim;
  Op *mm = m->main.addOp(OpKind::MatMul);
  mm->attrs["name"] = std::string("mm");
  mm->iters = {{"m", kBatch, IterKind::Parallel},
               {"n", kWidth, IterKind::Parallel},
               {"k", kWidth, IterKind::Reduction}};
  mm->operands = {{x, {d(0), d(2)}}, {&w->value, {d(2), d(1)}}};
  Value *y = mm->addResult(act, {d(0), d(1)});
  Op *relu = m->main.addOp(OpKind::Relu);
  relu->attrs["name"] = std::string("relu");
  relu->iters = {{"d0", kBatch, IterKind::Parallel},
                 {"d1", kWidth, IterKind::Parallel}};
  relu->operands = {{y, {d(0), d(1)}}};
  m->main.returns = {relu->addResult(act, {d(0), d(1)})};
  m->main.returnNames = {"out"};
  if (weight)
    *weight = w;
  return m;
}

Cluster eightGpus() {
  auto c = makeCluster("dgx-h100", 8, std::nullopt);
  EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
  return c ? *c : Cluster();
}

struct Fixture {
  std::unique_ptr<Module> m = mlp();
  Cluster cluster = eightGpus();
  ShardingOptions o;
  std::optional<SearchSpace> space;
  Fixture() {
    o.configs.devices = 8;
    space.emplace(*m, o.configs);
  }
  const Op &op(int i) const { return *m->main.ops[i]; }
  CostModel model(LeverOptions l, int64_t micro) const {
    return leveredModel(*space, CostModel(cluster, CostMode::Train), l, micro);
  }
};

constexpr double kWeightBytes = double(kWidth) * kWidth * 4;

} // namespace

// A data-parallel matmul holds the whole weight on each of 8 devices: each
// ZeRO stage shards more of its state over them (Adam: 2 slots).
TEST(LeversTest, ZeroStagesShardTheWeightsState) {
  Fixture f;
  LeverOptions l;
  l.zero = -1;
  CostModel model = f.model(l, 1);
  Config dp = {8, 1, 1};
  double w = kWeightBytes, act = double(kBatch / 8) * kWidth * 4;
  double expected[4] = {4 * w, 2 * w + 2 * w / 8, w + 3 * w / 8, 4 * w / 8};
  for (uint8_t z = 0; z < 4; ++z) {
    OpMemory mem = model.opMemory(f.op(0), dp, {false, z});
    EXPECT_DOUBLE_EQ(mem.persistent, expected[z] + act) << "stage " << int(z);
    EXPECT_DOUBLE_EQ(mem.gathered, z == 3 ? w : 0) << "stage " << int(z);
  }
  // ZeRO-1 moves what an all-reduce moves (reduce-scatter + all-gather);
  // ZeRO-3 gathers the weight twice more.
  double sync[4];
  for (uint8_t z = 0; z < 4; ++z)
    sync[z] = model.opCost(f.op(0), dp, {false, z}).gradientSync;
  EXPECT_GT(sync[0], 0);
  EXPECT_NEAR(sync[1], sync[0], 0.2 * sync[0]);
  EXPECT_DOUBLE_EQ(sync[2], sync[1]);
  EXPECT_GT(sync[3], sync[1] * 1.3);
  // A weight split over every device has no replicas to shard over.
  Config tp = {1, 8, 1};
  EXPECT_DOUBLE_EQ(model.opMemory(f.op(0), tp, {false, 3}).persistent,
                   model.opMemory(f.op(0), tp, {false, 0}).persistent);
}

// M microbatches: a result carrying the sample dim is held 1/M at a time,
// a sample op's compute is unchanged, gradients are still synchronized
// once (ZeRO-2 reduce-scatters every microbatch).
TEST(LeversTest, MicrobatchesShrinkActivationsNotCompute) {
  Fixture f;
  LeverOptions l;
  l.zero = -1;
  CostModel one = f.model(l, 1), four = f.model(l, 4);
  Config dp = {8, 1, 1};
  EXPECT_EQ(four.repeats(f.op(0).results[0].value.get()), 4);
  EXPECT_EQ(one.repeats(f.op(0).results[0].value.get()), 1);
  OpMemory m1 = one.opMemory(f.op(1), Config{8, 1}),
           m4 = four.opMemory(f.op(1), Config{8, 1});
  EXPECT_DOUBLE_EQ(m4.persistent * 4, m1.persistent);
  EXPECT_DOUBLE_EQ(four.opCost(f.op(0), dp).compute,
                   one.opCost(f.op(0), dp).compute);
  EXPECT_DOUBLE_EQ(four.opCost(f.op(0), dp, {false, 0}).gradientSync,
                   one.opCost(f.op(0), dp, {false, 0}).gradientSync);
  EXPECT_GT(four.opCost(f.op(0), dp, {false, 2}).gradientSync,
            one.opCost(f.op(0), dp, {false, 2}).gradientSync * 2);
  // A tensor moved 4 times at a quarter of its bytes pays 4 latencies.
  TensorLayout split = resultLayout(f.op(0), Config{8, 1, 1}, 0);
  TensorLayout whole = operandLayout(f.op(1), Config{1, 1}, 0);
  TensorType t = f.op(0).results[0].value->type;
  EXPECT_GT(four.edgeSeconds(split, whole, t, 4),
            one.edgeSeconds(split, whole, t, 1));
  // Only counts that divide the batch (64) are offered, and a count that
  // does not divide it names the op.
  auto counts = microbatchCounts(*f.space, 0);
  ASSERT_TRUE(bool(counts));
  EXPECT_EQ(*counts, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
  auto bad = microbatchCounts(*f.space, 3);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError())
                .find("3 microbatches do not divide the sample dim 'm' (64) "
                      "of op 'mm'"),
            std::string::npos);
}

// Recomputing costs one more forward and holds the result only while its
// segment's backward runs; `all` keeps the results of contractions.
TEST(LeversTest, RecomputationTradesAForwardForMemory) {
  Fixture f;
  LeverOptions l;
  l.recompute = RecomputePolicy::Auto;
  CostModel model = f.model(l, 1);
  Config c = {8, 1};
  OpCost keep = model.opCost(f.op(1), c, {false, 0}),
         redo = model.opCost(f.op(1), c, {true, 0});
  EXPECT_DOUBLE_EQ(redo.compute, keep.compute * 4 / 3);
  OpMemory kept = model.opMemory(f.op(1), c, {false, 0}),
           recomputed = model.opMemory(f.op(1), c, {true, 0});
  EXPECT_DOUBLE_EQ(recomputed.persistent, 0);
  EXPECT_DOUBLE_EQ(recomputed.recomputed, kept.persistent);
  // Priced high enough, memory makes auto recompute; unpriced it keeps.
  EXPECT_FALSE(model.choose(f.op(1), c, 0).recompute);
  EXPECT_TRUE(model.choose(f.op(1), c, 1).recompute);
  l.recompute = RecomputePolicy::All;
  CostModel all = f.model(l, 1);
  EXPECT_EQ(all.choices(f.op(0)).size(), 1u);
  EXPECT_FALSE(all.choices(f.op(0))[0].recompute); // the matmul contracts
  EXPECT_TRUE(all.choices(f.op(1))[0].recompute);
  // A step's peak: persistent bytes, the largest recomputed segment (two
  // recomputed ops in a row add up), two gathered blocks, one gradient.
  std::vector<OpMemory> ops = {
      {10, 0, 0, 1}, {0, 4, 0, 4}, {0, 3, 2, 3}, {5, 0, 0, 2}, {0, 6, 0, 6}};
  std::vector<OpChoice> choices = {
      {false, 0}, {true, 0}, {true, 0}, {false, 0}, {true, 0}};
  EXPECT_DOUBLE_EQ(stepPeakBytes(ops, choices), 15 + 7 + 2 * 2 + 6);
}

// Under a limit the unlevered data-parallel step cannot meet (every device
// holds the weight's whole state), the search fits it with the levers;
// without them the error names the leanest.
TEST(LeversTest, TheSearchFitsTheLimitWithLevers) {
  Fixture f;
  CostModel base(f.cluster, CostMode::Train);
  f.o.solver = SolverKind::DataParallel;
  f.o.levers.zero = 0;
  f.o.levers.microbatches = 1;
  auto free = solveSharding(*f.space, base, f.o);
  ASSERT_TRUE(bool(free)) << llvm::toString(free.takeError());
  double unlevered = free->cost.memoryBytes;
  f.o.memoryLimit = unlevered * 0.6;
  auto none = solveSharding(*f.space, base, f.o);
  ASSERT_FALSE(bool(none));
  EXPECT_NE(llvm::toString(none.takeError()).find("no strategy fits"),
            std::string::npos);
  f.o.levers.zero = -1;
  f.o.levers.microbatches = 0;
  f.o.levers.recompute = RecomputePolicy::Auto;
  auto fit = solveSharding(*f.space, base, f.o);
  ASSERT_TRUE(bool(fit)) << llvm::toString(fit.takeError());
  EXPECT_LE(fit->cost.memoryBytes, f.o.memoryLimit);
  EXPECT_EQ(fit->choices.size(), f.m->main.ops.size());
  bool levered = fit->microbatches > 1 ||
                 llvm::any_of(fit->choices, [](const OpChoice &c) {
                   return c.recompute || c.zero;
                 });
  EXPECT_TRUE(levered);
  // The strategy is priced as searched.
  CostModel at = leveredModel(*f.space, base, f.o.levers, fit->microbatches);
  StrategyCost again =
      evaluateStrategy(*f.space, at, fit->configs, {}, fit->choices);
  EXPECT_DOUBLE_EQ(again.memoryBytes, fit->cost.memoryBytes);
  EXPECT_DOUBLE_EQ(again.seconds, fit->cost.seconds);
}

// Checkpoints cut runs of recomputed ops: eight equal results recomputed
// in a row keep two (runs of two or three, against one run of eight);
// an op that keeps its results already ends a run.
TEST(LeversTest, CheckpointsCutLongRunsOfRecomputedOps) {
  std::vector<double> eight(8, 1.0);
  EXPECT_EQ(checkpoints(eight), (std::vector<size_t>{2, 5}));
  std::vector<double> split = {1, 1, -1, 1, 1};
  EXPECT_TRUE(checkpoints(split).empty());
  EXPECT_TRUE(checkpoints({-1, -1}).empty());
  // The kept result is the smallest of its run.
  std::vector<double> mixed = {4, 4, 1, 4, 4, 4, 4};
  auto kept = checkpoints(mixed);
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.front(), 2u);
}

// MCMC prices no memory in its chains: under a limit its answer takes the
// levers that fit, or is the DP's strategy.
TEST(LeversTest, McmcAnswersWithinTheLimit) {
  Fixture f;
  CostModel base(f.cluster, CostMode::Train);
  f.o.levers.zero = 0;
  f.o.levers.microbatches = 1;
  auto free = solveSharding(*f.space, base, f.o);
  ASSERT_TRUE(bool(free)) << llvm::toString(free.takeError());
  // The DP's fastest strategy splits the weight over every device: the
  // least any strategy holds. The chains' faster ones must fit it too.
  f.o.memoryLimit = free->cost.memoryBytes;
  f.o.levers.zero = -1;
  f.o.levers.microbatches = 0;
  f.o.levers.recompute = RecomputePolicy::Auto;
  auto dp = solveSharding(*f.space, base, f.o);
  ASSERT_TRUE(bool(dp)) << llvm::toString(dp.takeError());
  f.o.solver = SolverKind::Mcmc;
  f.o.mcmcSteps = 300;
  auto s = solveSharding(*f.space, base, f.o);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  EXPECT_LE(s->cost.memoryBytes, f.o.memoryLimit);
  EXPECT_EQ(s->choices.size(), f.m->main.ops.size());
}

// Megatron's grid: at its tensor degree t every op is data parallel on 8/t
// devices, and splits at most one other dim, by t; under a limit it takes
// the levers that fit, and a limit nothing meets names the leanest point.
TEST(LeversTest, MegatronKeepsEveryOpOnItsGrid) {
  Fixture f;
  CostModel base(f.cluster, CostMode::Train);
  f.o.solver = SolverKind::Megatron;
  f.o.levers.zero = -1;
  f.o.levers.microbatches = 0;
  f.o.levers.recompute = RecomputePolicy::Auto;
  auto s = solveSharding(*f.space, base, f.o);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  EXPECT_GT(s->cost.simulatedSeconds, 0);
  EXPECT_DOUBLE_EQ(s->cost.simulatedSeconds,
                   simulateStrategy(*f.space, base, f.o.levers, *s));
  // Both ops' dim 0 is the sample dim.
  int64_t data = s->configs[0][0], tensor = 8 / data;
  for (const Config &c : s->configs) {
    EXPECT_EQ(c[0], data);
    int64_t others = 1;
    for (size_t d = 1; d < c.size(); ++d)
      others *= c[d];
    EXPECT_TRUE(others == 1 || others == tensor) << others;
  }
  f.o.memoryLimit = s->cost.memoryBytes * 0.9;
  auto fit = solveSharding(*f.space, base, f.o);
  if (fit)
    EXPECT_LE(fit->cost.memoryBytes, f.o.memoryLimit);
  else
    llvm::consumeError(fit.takeError());
  f.o.memoryLimit = 1024;
  auto none = solveSharding(*f.space, base, f.o);
  ASSERT_FALSE(bool(none));
  EXPECT_NE(llvm::toString(none.takeError())
                .find("megatron: no point of the grid fits"),
            std::string::npos);
}

// A report's strategy simulates no slower than any baseline it lists: a
// baseline that simulates faster than the search's strategy is chosen,
// and the search's is listed in its place. Chosen by cost, the strategy is
// the search's.
TEST(LeversTest, TheReportChoosesTheFastestSimulated) {
  Fixture f;
  f.o.levers.zero = -1;
  f.o.levers.microbatches = 0;
  f.o.levers.recompute = RecomputePolicy::Auto;
  auto r = buildReport(*f.m, f.cluster, CostMode::Train, f.o, std::nullopt);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(r->baselines.size() + r->baselineErrors.size(), 3u);
  for (const auto &[name, b] : r->baselines)
    EXPECT_LE(r->strategy.cost.simulatedSeconds, b.simulatedSeconds) << name;
  if (!r->chosenFrom.empty()) {
    EXPECT_TRUE(r->baselines.count("dp"));
    EXPECT_FALSE(r->strategy.stats.exact);
  }
  f.o.chooseBySimulation = false;
  auto byCost =
      buildReport(*f.m, f.cluster, CostMode::Train, f.o, std::nullopt);
  ASSERT_TRUE(bool(byCost)) << llvm::toString(byCost.takeError());
  EXPECT_TRUE(byCost->chosenFrom.empty());
  auto searched =
      solveSharding(*f.space, CostModel(f.cluster, CostMode::Train), f.o);
  ASSERT_TRUE(bool(searched)) << llvm::toString(searched.takeError());
  EXPECT_EQ(byCost->strategy.configs, searched->configs);
}

// A program's chosen strategy is refined by a short MCMC chain: never
// slower by the simulator than without it, its memory priced as the
// program holds it, and a refinement that took says from what.
TEST(LeversTest, RefinementNeverSimulatesSlower) {
  Fixture f;
  f.o.refineSteps = 0;
  auto plain = buildReport(*f.m, f.cluster, CostMode::Infer, f.o, std::nullopt);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_EQ(plain->refinedFrom, 0);
  f.o.refineSteps = 500;
  auto refined =
      buildReport(*f.m, f.cluster, CostMode::Infer, f.o, std::nullopt);
  ASSERT_TRUE(bool(refined)) << llvm::toString(refined.takeError());
  EXPECT_LE(refined->strategy.cost.simulatedSeconds,
            plain->strategy.cost.simulatedSeconds);
  EXPECT_GT(refined->refineProposals, 0u);
  if (refined->refinedFrom > 0) {
    EXPECT_EQ(refined->refinedFrom, plain->strategy.cost.simulatedSeconds);
    EXPECT_LT(refined->strategy.cost.simulatedSeconds, refined->refinedFrom);
    EXPECT_FALSE(refined->strategy.stats.exact);
  }
  EXPECT_GT(refined->strategy.cost.memoryBytes, 0);
}
