//===- SolveTest.cpp - Searching strategies of real op graphs -------------===//
#include "passes/sharding/Solve.h"

#include <gtest/gtest.h>

#include <random>

using namespace pax;

namespace {

/// Builds random graphs of matmuls (with weights), relus and adds (joins)
/// over [rows, cols] activations: chains, diamonds, skips and multi-branch
/// joins all arise from each op picking earlier values as inputs.
class RandomGraph {
public:
  explicit RandomGraph(unsigned seed) : rng(seed) {}

  std::unique_ptr<Module> build(unsigned numOps) {
    auto m = std::make_unique<Module>();
    TensorType act{DType::F32, {4, 4}};
    values.push_back(m->main.addArg("x", act));
    for (unsigned i = 0; i < numOps; ++i) {
      unsigned kind = pick(values.size() > 1 ? 3 : 2);
      Op *op = m->main.addOp(kind == 0   ? OpKind::MatMul
                             : kind == 1 ? OpKind::Relu
                                         : OpKind::Add);
      op->attrs["name"] = "op" + std::to_string(i);
      auto d = AccessExpr::dim;
      if (kind == 0) {
        Global *w = m->addGlobal("w" + std::to_string(i), {DType::F32, {4, 4}});
        w->isParameter = true;
        op->iters = {{"m", 4, IterKind::Parallel},
                     {"n", 4, IterKind::Parallel},
                     {"k", 4, IterKind::Reduction}};
        op->operands = {{input(), {d(0), d(2)}}, {&w->value, {d(2), d(1)}}};
      } else {
        op->iters = {{"d0", 4, IterKind::Parallel},
                     {"d1", 4, IterKind::Parallel}};
        op->operands.push_back({input(), {d(0), d(1)}});
        if (kind == 2)
          op->operands.push_back({input(), {d(0), d(1)}});
      }
      values.push_back(op->addResult(act, {d(0), d(1)}));
    }
    m->main.returns = {values.back()};
    m->main.returnNames = {"y"};
    return m;
  }

private:
  unsigned pick(unsigned n) {
    return std::uniform_int_distribution<unsigned>(0, n - 1)(rng);
  }
  /// Mostly the latest value (chains), sometimes an older one (skips).
  Value *input() {
    return pick(3) ? values.back() : values[pick(values.size())];
  }
  std::mt19937 rng;
  std::vector<Value *> values;
};

} // namespace

TEST(SolveTest, DpEqualsExhaustiveOnRandomOpGraphs) {
  unsigned tested = 0;
  for (unsigned seed = 1; tested < 300; ++seed) {
    RandomGraph gen(seed);
    auto m = gen.build(2 + seed % 8);
    unsigned devices = 2 + seed % 7;
    auto cluster = makeCluster("pase", devices, std::nullopt);
    ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
    CostModel model(*cluster, seed % 2 ? CostMode::Train : CostMode::Infer);
    ShardingOptions o;
    o.configs.devices = devices;
    o.maxStates = 2'000'000;
    o.solver = SolverKind::Exhaustive;
    auto exhaustive = solveSharding(*m, model, o);
    if (!exhaustive) {
      llvm::consumeError(exhaustive.takeError()); // too large to enumerate
      continue;
    }
    for (SolverKind k : {SolverKind::Dp, SolverKind::DpBfs}) {
      o.solver = k;
      auto dp = solveSharding(*m, model, o);
      ASSERT_TRUE(bool(dp)) << llvm::toString(dp.takeError());
      EXPECT_EQ(dp->searchCost, exhaustive->searchCost)
          << "seed " << seed << " solver " << solverName(k).str();
    }
    // Never worse than the baselines, which search subsets of the same space
    // in the same integer costs.
    for (SolverKind k : {SolverKind::DataParallel, SolverKind::Expert}) {
      o.solver = k;
      auto base = solveSharding(*m, model, o);
      ASSERT_TRUE(bool(base)) << llvm::toString(base.takeError());
      EXPECT_LE(exhaustive->searchCost, base->searchCost)
          << "seed " << seed << " " << solverName(k).str();
    }
    ++tested;
  }
  EXPECT_EQ(tested, 300u);
}

// With keepGiven, an op with a `config` keeps it as its only candidate, with
// the splits it may not take undone, and ops alike but kept at different
// splits are each priced at their own: the searched cost is the strategy's.
TEST(SolveTest, KeptConfigurationsArePricedEach) {
  auto m = std::make_unique<Module>();
  auto d = AccessExpr::dim;
  TensorType act{DType::F32, {64, 64}};
  Value *v = m->main.addArg("x", act);
  std::vector<std::vector<int64_t>> given = {{4, 1, 1}, {1, 1, 4}, {1, 4, 1}};
  for (size_t i = 0; i < given.size(); ++i) {
    Global *w = m->addGlobal("w" + std::to_string(i), {DType::F32, {64, 64}});
    w->isParameter = true;
    Op *op = m->main.addOp(OpKind::MatMul);
    op->attrs["name"] = "mm" + std::to_string(i);
    op->iters = {{"m", 64, IterKind::Parallel},
                 {"n", 64, IterKind::Parallel},
                 {"k", 64, IterKind::Reduction}};
    op->operands = {{v, {d(0), d(2)}}, {&w->value, {d(2), d(1)}}};
    op->attrs["config"] = given[i];
    v = op->addResult(act, {d(0), d(1)});
  }
  // A relu without a configuration: the search places it.
  Op *relu = m->main.addOp(OpKind::Relu);
  relu->iters = {{"d0", 64, IterKind::Parallel}, {"d1", 64, IterKind::Parallel}};
  relu->operands = {{v, {d(0), d(1)}}};
  m->main.returns = {relu->addResult(act, {d(0), d(1)})};
  m->main.returnNames = {"y"};
  auto cluster = makeCluster("pase", 4, std::nullopt);
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  CostModel model(*cluster, CostMode::Infer);
  ShardingOptions o;
  o.configs.devices = 4;
  o.configs.keepGiven = true;
  auto s = solveSharding(*m, model, o);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  for (size_t i = 0; i < given.size(); ++i)
    EXPECT_EQ(std::vector<int64_t>(s->configs[i].begin(), s->configs[i].end()),
              given[i]);
  EXPECT_NEAR(double(s->searchCost) * 1e-12, s->cost.seconds,
              1e-9 * s->cost.seconds + 1e-12);
}
