//===- SolveTest.cpp - Searching strategies of real op graphs -------------===//
#include "passes/sharding/Solve.h"
#include "IrText.h"
#include "ir/Printer.h"
#include "passes/sharding/Simulator.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
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
  relu->iters = {{"d0", 64, IterKind::Parallel},
                 {"d1", 64, IterKind::Parallel}};
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

namespace {
/// A random configuration for every op of \p m, from its configuration
/// space over \p devices.
std::vector<Config> randomConfigs(const Module &m, int64_t devices,
                                  std::mt19937 &rng) {
  ConfigOptions o;
  o.devices = devices;
  std::vector<Config> configs;
  for (const auto &op : m.main.ops) {
    std::vector<Config> all = enumerateConfigs(*op, o);
    configs.push_back(
        all[std::uniform_int_distribution<size_t>(0, all.size() - 1)(rng)]);
  }
  return configs;
}

/// A random device offset for each of \p configs (Layout.h's placements).
std::vector<int64_t> randomOffsets(llvm::ArrayRef<Config> configs,
                                   int64_t devices, std::mt19937 &rng) {
  std::vector<int64_t> offsets;
  for (const Config &c : configs) {
    std::vector<int64_t> ps = placements(configDevices(c), devices);
    offsets.push_back(ps[rng() % ps.size()]);
  }
  return offsets;
}

/// A random graph of \p ops ops on \p devices devices of a DGX-1, priced
/// for training (odd seeds) or inference.
struct SimCase {
  RandomGraph gen;
  std::unique_ptr<Module> m;
  Cluster cluster;
  std::optional<CostModel> model;
  SimCase(unsigned seed, unsigned ops, unsigned devices) : gen(seed) {
    m = gen.build(ops);
    auto c = makeCluster("dgx1-p100", devices, std::nullopt);
    EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
    cluster = c ? *c : Cluster();
    model.emplace(cluster, seed % 2 ? CostMode::Train : CostMode::Infer);
  }
};
} // namespace

// Without overlap every task runs on one resource, one after another: the
// simulated step is the additive cost model's sum. With overlap it is never
// longer.
TEST(SimulatorTest, WithoutOverlapItIsTheAdditiveCost) {
  for (unsigned seed = 1; seed <= 200; ++seed) {
    unsigned devices = 2 + seed % 7;
    SimCase sc(seed, 2 + seed % 10, devices);
    const Module *m = sc.m.get();
    const CostModel &model = *sc.model;
    std::mt19937 rng(seed);
    std::vector<Config> configs = randomConfigs(*m, devices, rng);
    // Every op from device 0, then each at a random offset.
    std::vector<int64_t> offsets = randomOffsets(configs, devices, rng);
    for (llvm::ArrayRef<int64_t> at :
         {llvm::ArrayRef<int64_t>(), llvm::ArrayRef<int64_t>(offsets)}) {
      double additive = evaluateStrategy(*m, model, configs, at).seconds;
      Simulator serial(*m, model, SimOptions{false});
      EXPECT_NEAR(serial.simulate(configs, at), additive, 1e-12 * additive)
          << "seed " << seed;
      Simulator overlapped(*m, model);
      EXPECT_LE(overlapped.simulate(configs, at), additive * (1 + 1e-12))
          << "seed " << seed;
    }
  }
}

// An op computed from constants runs on every device by itself: ops placed
// on other devices do not wait for it to start (a pipeline's stages, or
// branches placed apart, overlap around it).
TEST(SimulatorTest, OpsOfConstantsDoNotHoldTheDevicesTogether) {
  auto m = test::parse(R"(module @apart {
  param @W0 : tensor<256x256xf32> = fill(0.1)
  param @W1 : tensor<256x256xf32> = fill(0.1)
  const @K : tensor<256x256xf32> = fill(0.5)
  func @main(%x: tensor<256x256xf32>, %y: tensor<256x256xf32>) -> (a: tensor<256x256xf32>, b: tensor<256x256xf32>) {
    %0 = compute "matmul" iter [m: 256 par, n: 256 par, k: 256 red]
        ins(%x[m, k], @W0[k, n]) outs([m, n] : tensor<256x256xf32>) {name = "left"}
    %1 = compute "relu" iter [a: 256 par, b: 256 par]
        ins(@K[a, b]) outs([a, b] : tensor<256x256xf32>) {name = "constant"}
    %2 = compute "matmul" iter [m: 256 par, n: 256 par, k: 256 red]
        ins(%y[m, k], @W1[k, n]) outs([m, n] : tensor<256x256xf32>) {name = "right"}
    %3 = compute "add" iter [a: 256 par, b: 256 par]
        ins(%2[a, b], %1[a, b]) outs([a, b] : tensor<256x256xf32>) {name = "join"}
    return %0, %3
  }
})");
  ASSERT_TRUE(m);
  auto cluster = makeCluster("pase", 2u, std::nullopt);
  ASSERT_TRUE(bool(cluster));
  CostModel model(*cluster, CostMode::Infer);
  std::vector<Config> configs;
  for (const auto &op : m->main.ops)
    configs.push_back(Config(op->iters.size(), 1));
  std::vector<int64_t> at = {0, 0, 1, 1};
  Simulator sim(*m, model);
  double step = sim.simulate(configs, at);
  double left = model.opCost(*m->main.ops[0], configs[0], {}).compute;
  double right = model.opCost(*m->main.ops[2], configs[2], {}).compute;
  // "right" starts with "left", not after it.
  EXPECT_LT(step, left + right);
  EXPECT_GE(step, std::max(left, right));
}

namespace {
/// Seconds of \p sim's tasks of kind \p kind.
double taskSeconds(const Simulator &sim, SimTask::Kind kind) {
  double t = 0;
  for (const auto &sec : sim.sections())
    for (const SimTask &task : sec)
      t += task.kind == kind ? task.seconds : 0;
  return t;
}

/// "first" on the devices \p firstAt gives "later", which an op on device
/// 0 ("between", independent of both) separates in program order.
std::unique_ptr<Module> betweenModule() {
  return test::parse(R"(module @between {
  param @W0 : tensor<256x256xf32> = fill(0.1)
  param @W1 : tensor<256x256xf32> = fill(0.1)
  func @main(%x: tensor<256x256xf32>, %y: tensor<256x256xf32>) -> (a: tensor<256x256xf32>, b: tensor<256x256xf32>) {
    %0 = compute "matmul" iter [m: 256 par, n: 256 par, k: 256 red]
        ins(%x[m, k], @W0[k, n]) outs([m, n] : tensor<256x256xf32>) {name = "first"}
    %1 = compute "matmul" iter [m: 256 par, n: 256 par, k: 256 red]
        ins(%y[m, k], @W1[k, n]) outs([m, n] : tensor<256x256xf32>) {name = "between"}
    %2 = compute "relu" iter [a: 256 par, b: 256 par]
        ins(%0[a, b]) outs([a, b] : tensor<256x256xf32>) {name = "later"}
    return %1, %2
  }
})");
}
} // namespace

// As paxrun runs a plan, a device executes its instructions in order: a
// collective holds its devices until it ends (the op placed between its
// producer and consumer runs before it or after it, not during it), while a
// point-to-point send leaves its sender free. On a cluster whose runtime
// overlaps collectives, the op runs during it.
TEST(SimulatorTest, CollectivesHoldTheirDevicesSendsDoNot) {
  auto m = betweenModule();
  ASSERT_TRUE(m);
  auto cluster = makeCluster("dgx1-p100", 2u, std::nullopt);
  ASSERT_TRUE(bool(cluster));
  CostModel model(*cluster, CostMode::Infer);
  double first = 0, between = 0, later = 0;
  // "first" split over its reduction (partial sums on both devices),
  // "later" by rows: a reduce-scatter between them.
  std::vector<Config> configs = {{1, 1, 2}, {1, 1, 1}, {2, 1}};
  first = model.opCost(*m->main.ops[0], configs[0]).compute;
  between = model.opCost(*m->main.ops[1], configs[1]).compute;
  later = model.opCost(*m->main.ops[2], configs[2]).compute;
  Cluster overlapping = *cluster;
  overlapping.overlapCollectives = true;
  CostModel overlapModel(overlapping, CostMode::Infer);
  Simulator blocking(*m, model), free(*m, overlapModel);
  double held = blocking.simulate(configs);
  double comm = taskSeconds(blocking, SimTask::Kind::Communicate);
  ASSERT_GT(comm, 0);
  EXPECT_NEAR(held, first + between + comm + later, 1e-12 * held);
  EXPECT_NEAR(free.simulate(configs),
              first + std::max(between, comm) + later, 1e-12 * held);
  // Unsplit, "later" on device 1: the send leaves device 0 to "between".
  configs = {{1, 1, 1}, {1, 1, 1}, {1, 1}};
  std::vector<int64_t> at = {0, 0, 1};
  double sent = blocking.simulate(configs, at);
  comm = taskSeconds(blocking, SimTask::Kind::Communicate);
  ASSERT_GT(comm, 0);
  first = model.opCost(*m->main.ops[0], configs[0]).compute;
  between = model.opCost(*m->main.ops[1], configs[1]).compute;
  later = model.opCost(*m->main.ops[2], configs[2]).compute;
  EXPECT_NEAR(sent, first + std::max(between, comm + later), 1e-12 * sent);
}

// Delta simulation after any sequence of single-op changes gives the full
// simulation's timeline, task for task, to the bit.
TEST(SimulatorTest, DeltaSimulationIsTheFullOne) {
  unsigned changes = 0;
  for (unsigned seed = 1; seed <= 60; ++seed) {
    unsigned devices = 2 + seed % 7;
    SimCase sc(seed, 3 + seed % 10, devices);
    const Module *m = sc.m.get();
    const CostModel &model = *sc.model;
    std::mt19937 rng(seed);
    std::vector<Config> configs = randomConfigs(*m, devices, rng);
    for (bool overlap : {true, false}) {
      Simulator delta(*m, model, SimOptions{overlap});
      delta.simulate(configs);
      std::vector<Config> now = configs;
      std::vector<int64_t> at(now.size(), 0);
      for (int k = 0; k < 20; ++k) {
        std::vector<Config> other = randomConfigs(*m, devices, rng);
        unsigned i = std::uniform_int_distribution<unsigned>(
            0, unsigned(now.size() - 1))(rng);
        now[i] = other[i];
        // Half the changes also move the op (placed ops run at once).
        at[i] = k % 2 ? randomOffsets({now[i]}, devices, rng)[0] : 0;
        double got = delta.change(i, now[i], at[i]);
        Simulator full(*m, model, SimOptions{overlap});
        double want = full.simulate(now, at);
        ASSERT_EQ(got, want) << "seed " << seed << " change " << k;
        ASSERT_EQ(delta.sections().size(), full.sections().size());
        for (size_t s = 0; s < full.sections().size(); ++s) {
          ASSERT_EQ(delta.sections()[s].size(), full.sections()[s].size());
          for (size_t t = 0; t < full.sections()[s].size(); ++t) {
            EXPECT_EQ(delta.sections()[s][t].start,
                      full.sections()[s][t].start);
            EXPECT_EQ(delta.sections()[s][t].end, full.sections()[s][t].end);
            EXPECT_EQ(delta.sections()[s][t].name, full.sections()[s][t].name);
          }
        }
        ++changes;
      }
    }
  }
  EXPECT_EQ(changes, 2400u);
}

// FlexFlow's MCMC: never simulates slower than the DP's strategy (a chain
// starts there), and its answer depends on the seed, not on the threads.
TEST(SimulatorTest, McmcIsNeverWorseThanTheDpAndDeterministic) {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    unsigned devices = 2 + seed % 7;
    SimCase sc(seed, 3 + seed % 8, devices);
    const Module *m = sc.m.get();
    const CostModel &model = *sc.model;
    ShardingOptions o;
    o.configs.devices = devices;
    o.solver = SolverKind::Mcmc;
    o.seed = seed;
    o.mcmcSteps = 500;
    o.threads = 1;
    auto one = solveSharding(*m, model, o);
    ASSERT_TRUE(bool(one)) << llvm::toString(one.takeError());
    o.threads = 0;
    auto many = solveSharding(*m, model, o);
    ASSERT_TRUE(bool(many)) << llvm::toString(many.takeError());
    EXPECT_EQ(one->configs, many->configs) << "seed " << seed;
    EXPECT_EQ(one->proposals, many->proposals) << "seed " << seed;
    EXPECT_LE(one->cost.simulatedSeconds, one->dpSimulatedSeconds)
        << "seed " << seed;
    // The simulated time it reports is its strategy's.
    Simulator sim(*m, model);
    EXPECT_EQ(sim.simulate(one->configs), one->cost.simulatedSeconds);
    EXPECT_GT(one->proposals, 0u);
  }
}

// A block's cost key depends on what it computes: the same op under
// another name (another layer) has the same key, a configuration with other
// local extents another one.
TEST(CostDbTest, KeysNameWhatABlockComputes) {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    RandomGraph gen(seed);
    auto m = gen.build(6);
    ConfigOptions o;
    o.devices = 4;
    for (const auto &op : m->main.ops) {
      std::vector<Config> configs = enumerateConfigs(*op, o);
      std::map<std::string, llvm::SmallVector<int64_t, 6>> byKey;
      for (const Config &c : configs) {
        auto local = localExtents(*op, c);
        std::string key = opBlockKey(*op, local);
        EXPECT_EQ(key.size(), 16u);
        auto [it, fresh] = byKey.try_emplace(key, local);
        EXPECT_EQ(it->second, local) << "two local shapes share key " << key;
        // Neither its source, its configuration nor where and when it
        // runs (a pipeline stage's microbatch) changes the block.
        auto saved = op->attrs;
        op->attrs["name"] = std::string("another layer");
        op->attrs["config"] = std::vector<int64_t>(c.begin(), c.end());
        for (const char *placed : {"offset", "stage", "microbatch", "forward",
                                   "recomputed", "gradient_of", "onnx_node"})
          op->attrs[placed] = int64_t(3);
        EXPECT_EQ(opBlockKey(*op, local), key);
        op->attrs["epsilon"] = 0.5f; // what it computes does
        EXPECT_NE(opBlockKey(*op, local), key);
        op->attrs = saved;
      }
    }
  }
}

// With a cost database, a measured block's compute is its measurement (three
// times it for a training step), any other block's the peak rate's; the
// simulator and the additive cost agree on the measured costs.
TEST(CostDbTest, MeasuredBlocksArePricedByTheirMeasurement) {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    SimCase sc(seed, 2 + seed % 8, 4);
    const Module &m = *sc.m;
    ConfigOptions o;
    o.devices = 4;
    auto db = std::make_shared<CostDb>();
    std::mt19937 rng(seed);
    unsigned n = 0;
    for (const auto &op : m.main.ops)
      for (const Config &c : enumerateConfigs(*op, o))
        if (rng() % 2) // about half of the blocks measured
          db->ops.try_emplace(opBlockKey(*op, localExtents(*op, c)),
                              CostDb::Entry{"", 1e-3 * ++n, 1});
    Cluster measured = sc.cluster;
    measured.measured = db;
    for (CostMode mode : {CostMode::Infer, CostMode::Train}) {
      CostModel peak(sc.cluster, mode), model(measured, mode);
      for (const auto &op : m.main.ops)
        for (const Config &c : enumerateConfigs(*op, o)) {
          auto s = db->seconds(opBlockKey(*op, localExtents(*op, c)));
          double passes = mode == CostMode::Train ? 3 : 1;
          EXPECT_EQ(model.opCost(*op, c).compute,
                    s ? passes * *s : peak.opCost(*op, c).compute);
          EXPECT_EQ(model.measuredSeconds(*op, c).has_value(), s.has_value());
        }
      std::vector<Config> configs = randomConfigs(m, 4, rng);
      Simulator serial(m, model, SimOptions{false});
      double additive = evaluateStrategy(m, model, configs).seconds;
      EXPECT_NEAR(serial.simulate(configs), additive, 1e-12 * additive);
    }
  }
}

TEST(CostDbTest, FileRoundTripsAndBadFilesSayWhere) {
  CostDb db;
  db.backend = "cpu";
  db.threads = 1;
  db.runs = 5;
  db.ops.try_emplace("00000000000000aa", CostDb::Entry{"matmul", 2e-6, 5});
  db.ops.try_emplace("00000000000000bb", CostDb::Entry{"add", 0, 5});
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(costDbToJson(db));
  auto back = parseCostDb(text, "db.json");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->backend, "cpu");
  EXPECT_EQ(back->threads, 1u);
  EXPECT_EQ(back->ops.size(), 2u);
  EXPECT_EQ(back->seconds("00000000000000aa"), 2e-6);
  EXPECT_FALSE(back->seconds("00000000000000cc").has_value());
  auto error = [](llvm::StringRef text) {
    auto db = parseCostDb(text, "db.json");
    return db ? std::string() : llvm::toString(db.takeError());
  };
  std::string head = R"({"format": "paxc-cost-db", "version": 1, )";
  EXPECT_EQ(error("{"),
            "db.json: not JSON: [1:1, byte=1]: Expected object key");
  EXPECT_EQ(error("[]"), "db.json: expected a JSON object");
  EXPECT_EQ(error(R"({"format": "paxc-strategy", "ops": []})"),
            "db.json: not a cost database (\"format\" must be "
            "\"paxc-cost-db\")");
  EXPECT_EQ(error(R"({"format": "paxc-cost-db", "version": 2, "ops": []})"),
            "db.json: cost database version 2; this paxc reads version 1");
  EXPECT_EQ(error(head + "\"ops\": 3}"), "db.json: \"ops\" must be an array");
  EXPECT_EQ(error(head + R"("ops": [{"seconds": 1}]})"),
            "db.json: ops[0]: \"key\" must be a non-empty string");
  EXPECT_EQ(error(head + R"("ops": [{"key": "a", "seconds": -1}]})"),
            "db.json: ops[0]: \"seconds\" must be a finite, non-negative "
            "number");
  EXPECT_EQ(error(head + R"("ops": [{"key": "a", "seconds": 1, "calls": 0}]})"),
            "db.json: ops[0]: \"calls\" must be a positive integer");
  EXPECT_EQ(
      error(
          head +
          R"("ops": [{"key": "a", "seconds": 1}, {"key": "a", "seconds": 2}]})"),
      "db.json: ops[1]: key 'a' appears twice");
  EXPECT_EQ(error(head + R"("threads": -1, "ops": []})"),
            "db.json: \"threads\" must be a non-negative integer");
}

// Layouts placed at different devices move point to point; at the same
// offset the plan is the one of the same layouts from device 0.
TEST(PlacementTest, LayoutsPlacedApartMovePointToPoint) {
  RandomGraph gen(7);
  auto m = gen.build(8);
  ConfigOptions o;
  o.devices = 8;
  EXPECT_EQ(placements(2, 8), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(placements(3, 8), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(placements(8, 8), (std::vector<int64_t>{0}));
  unsigned checked = 0;
  for (const Use &u : usesOf(*m)) {
    const Op &p = *m->main.ops[u.producer], &q = *m->main.ops[u.consumer];
    const TensorType &t = p.results[u.result].value->type;
    for (const Config &pc : enumerateConfigs(p, o))
      for (const Config &qc : enumerateConfigs(q, o)) {
        if (configDevices(pc) > 4 || configDevices(qc) > 4)
          continue;
        TensorLayout from = resultLayout(p, pc, u.result),
                     to = operandLayout(q, qc, u.operand);
        auto same = planReshard(from, to, t, 8);
        auto shifted = planReshard(placedAt(from, 4), placedAt(to, 4), t, 8);
        ASSERT_EQ(same.size(), shifted.size());
        for (size_t i = 0; i < same.size(); ++i) {
          EXPECT_EQ(same[i].kind, shifted[i].kind);
          EXPECT_EQ(same[i].bytes, shifted[i].bytes);
        }
        auto apart = planReshard(from, placedAt(to, 4), t, 8);
        ASSERT_FALSE(apart.empty());
        EXPECT_EQ(apart.back().kind, ReshardStep::Kind::SendRecv);
        EXPECT_EQ(apart.back().bytes,
                  neededElements(to, t) * dtypeBytes(t.elem));
        ++checked;
      }
  }
  EXPECT_GT(checked, 100u);
}

// priceEachOp splits a strategy's additive cost op by op: its prices sum
// to what evaluateStrategy adds up, less the moves of the returned values.
TEST(SolveTest, PricesOfEachOpSumToTheStrategysCost) {
  for (unsigned seed = 1; seed <= 60; ++seed) {
    RandomGraph gen(seed);
    auto m = gen.build(2 + seed % 8);
    unsigned devices = 2 + seed % 7;
    auto cluster = makeCluster("pase", devices, std::nullopt);
    ASSERT_TRUE(bool(cluster));
    CostModel model(*cluster, seed % 2 ? CostMode::Train : CostMode::Infer);
    ShardingOptions o;
    o.configs.devices = devices;
    SearchSpace space(*m, o.configs);
    auto s = solveSharding(space, model, o);
    ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
    std::vector<OpPrice> prices =
        priceEachOp(space, model, s->configs, s->choices);
    const Func &f = m->main;
    ASSERT_EQ(prices.size(), f.ops.size());
    double sum = 0, returns = 0;
    for (const OpPrice &p : prices)
      sum += p.seconds + p.syncSeconds;
    llvm::DenseSet<const Op *> constants = constantOps(*m);
    for (size_t i = 0; i < f.ops.size(); ++i)
      for (unsigned r = 0; r < f.ops[i]->results.size(); ++r)
        if (llvm::is_contained(f.returns, f.ops[i]->results[r].value.get()) &&
            !constants.count(f.ops[i].get()))
          returns +=
              model.stepSeconds(model.returnStep(*f.ops[i], s->configs[i], r));
    StrategyCost c = evaluateStrategy(space, model, s->configs, {}, s->choices);
    EXPECT_NEAR(sum + returns, c.computeSeconds + c.commSeconds,
                1e-9 * (1 + c.seconds))
        << "seed " << seed;
  }
}
