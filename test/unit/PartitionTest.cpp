//===- PartitionTest.cpp - Partitioned plans equal the unpartitioned one --===//
//
// Random op graphs (matmuls with weights, relus, adds, 3-wide windows with
// padding, transposes) under random configurations on 4 or 6 devices go
// through insert-collectives, codegen and the thread runtime; every output
// must equal the plan's unpartitioned reference program, and every
// collective must move the bytes its exchange predicts, which sum to the
// cost model's communication volume for the strategy.
//
//===----------------------------------------------------------------------===//
#include "IrText.h"
#include "codegen/EmitPlan.h"
#include "passes/cost/Cluster.h"
#include "passes/sharding/InsertCollectives.h"
#include "passes/sharding/Solve.h"
#include "runtime/Device.h"
#include "runtime/Exchange.h"
#include "runtime/PlanCheck.h"
#include "runtime/Run.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

using namespace pax;

namespace {

/// Serves dense weights and whole inputs; each device copies its box.
class TestFeed : public runtime::DataFeed {
public:
  explicit TestFeed(std::vector<runtime::Tensor> inputs)
      : inputs(std::move(inputs)) {}
  llvm::Error loadWeight(const plan::LoadWeight &load,
                         runtime::Tensor &out) override {
    std::vector<int64_t> lo(load.offset().begin(), load.offset().end());
    runtime::Tensor whole = runtime::Tensor::zeros(
        out.dtype, {load.global_shape().begin(), load.global_shape().end()});
    if (load.source() == plan::LoadWeight::DENSE)
      std::memcpy(whole.data.data(), load.dense().data(), load.dense().size());
    else
      for (int64_t i = 0; i < whole.numel(); ++i)
        whole.setReal(i, load.fill());
    runtime::moveOverlap(whole, std::vector<int64_t>(lo.size(), 0), out, lo,
                         false);
    return llvm::Error::success();
  }
  llvm::Error input(const plan::Binding &b, runtime::Tensor &out) override {
    std::vector<int64_t> lo(b.offset().begin(), b.offset().end());
    runtime::moveOverlap(inputs[b.index()], std::vector<int64_t>(lo.size(), 0),
                         out, lo, false);
    return llvm::Error::success();
  }

private:
  std::vector<runtime::Tensor> inputs;
};

/// Runs \p progs as threads; returns output 0 assembled, and the most
/// bytes any device counted per exchange.
runtime::Tensor runAll(const plan::Plan &p,
                       std::vector<const plan::DeviceProgram *> progs,
                       TestFeed &feed, std::map<uint32_t, int64_t> &bytes) {
  runtime::DeviceSet set;
  for (size_t d = 0; d < progs.size(); ++d)
    set.devices.push_back(runtime::makeCpuDevice());
  std::vector<runtime::Tensor> outputs;
  std::vector<runtime::DeviceStats> stats;
  llvm::Error err = runtime::runThreads(
      p, progs, set, [&](size_t) -> runtime::DataFeed & { return feed; },
      outputs, stats);
  EXPECT_FALSE(bool(err)) << llvm::toString(std::move(err));
  for (const runtime::DeviceStats &s : stats)
    for (const auto &[x, b] : s.exchangeBytes)
      bytes[x] = std::max(bytes[x], b);
  if (outputs.empty()) {
    const plan::TensorInfo &info = p.outputs(0);
    return runtime::Tensor::zeros(info.dtype(),
                                  {info.shape().begin(), info.shape().end()});
  }
  return outputs[0];
}

class RandomGraph {
public:
  explicit RandomGraph(unsigned seed) : rng(seed) {}

  std::unique_ptr<Module> build(unsigned numOps) {
    auto m = std::make_unique<Module>();
    TensorType act{DType::F32, {kRows, kCols}};
    values.push_back(m->main.addArg("x", act));
    auto d = AccessExpr::dim;
    for (unsigned i = 0; i < numOps; ++i) {
      unsigned kind = pick(values.size() > 1 ? 5 : 4);
      static const OpKind kinds[] = {OpKind::MatMul, OpKind::Relu,
                                     OpKind::MaxPool, OpKind::Transpose,
                                     OpKind::Add};
      Op *op = m->main.addOp(kinds[kind]);
      op->attrs["name"] = "op" + std::to_string(i);
      if (kind == 0) { // [rows, cols] x [cols, cols]
        Global *w =
            m->addGlobal("w" + std::to_string(i), {DType::F32, {kCols, kCols}});
        w->isParameter = true;
        w->source = DataSource::Dense;
        std::vector<float> vals(kCols * kCols);
        for (float &v : vals)
          v = real(rng) / 3;
        w->bytes.resize(vals.size() * 4);
        std::memcpy(w->bytes.data(), vals.data(), w->bytes.size());
        op->iters = {{"m", kRows, IterKind::Parallel},
                     {"n", kCols, IterKind::Parallel},
                     {"k", kCols, IterKind::Reduction}};
        op->operands = {{input(), {d(0), d(2)}}, {&w->value, {d(2), d(1)}}};
        values.push_back(op->addResult(act, {d(0), d(1)}));
      } else if (kind == 2) { // a window of 3 rows, padded
        op->iters = {{"r", kRows, IterKind::Parallel},
                     {"c", kCols, IterKind::Parallel},
                     {"k", 3, IterKind::Reduction}};
        op->operands = {{input(), {AccessExpr::window(0, 2, 1, 1, -1), d(1)}}};
        op->attrs["kernel_shape"] = std::vector<int64_t>{3, 1};
        op->attrs["pads"] = std::vector<int64_t>{1, 0, 1, 0};
        values.push_back(op->addResult(act, {d(0), d(1)}));
      } else if (kind == 3) { // transpose twice round: [r, c] -> [c, r] -> ...
        Value *in = input();
        op->iters = {{"a", kRows, IterKind::Parallel},
                     {"b", kCols, IterKind::Parallel}};
        op->operands = {{in, {d(0), d(1)}}};
        Value *t = op->addResult({DType::F32, {kCols, kRows}}, {d(1), d(0)});
        Op *back = m->main.addOp(OpKind::Transpose);
        back->attrs["name"] = "op" + std::to_string(i) + "b";
        back->iters = {{"a", kCols, IterKind::Parallel},
                       {"b", kRows, IterKind::Parallel}};
        back->operands = {{t, {d(0), d(1)}}};
        values.push_back(back->addResult(act, {d(1), d(0)}));
      } else {
        op->iters = {{"d0", kRows, IterKind::Parallel},
                     {"d1", kCols, IterKind::Parallel}};
        op->operands.push_back({input(), {d(0), d(1)}});
        if (kind == 4)
          op->operands.push_back({input(), {d(0), d(1)}});
        values.push_back(op->addResult(act, {d(0), d(1)}));
      }
    }
    m->main.returns = {values.back()};
    m->main.returnNames = {"y"};
    return m;
  }

  /// A random configuration a plan can run, on at most \p devices.
  Config config(const Op &op, int64_t devices) {
    ConfigOptions o;
    o.devices = devices;
    o.executable = true;
    std::vector<Config> all = enumerateConfigs(op, o);
    return all[pick(unsigned(all.size()))];
  }

  static constexpr int64_t kRows = 12, kCols = 8;
  std::mt19937 rng;
  std::uniform_real_distribution<float> real{-1, 1};

private:
  unsigned pick(unsigned n) {
    return std::uniform_int_distribution<unsigned>(0, n - 1)(rng);
  }
  Value *input() {
    return pick(3) ? values.back() : values[pick(unsigned(values.size()))];
  }
  std::vector<Value *> values;
};

/// \p g's graph of \p ops ops, each op in a random configuration on 4
/// devices, with its collectives, as a plan.
llvm::Expected<plan::Plan> randomPlan(RandomGraph &g, unsigned ops) {
  auto m = g.build(ops);
  for (auto &op : m->main.ops) {
    Config c = g.config(*op, 4);
    op->attrs["config"] = std::vector<int64_t>(c.begin(), c.end());
  }
  if (auto err = insertCollectives(*m, 4, 2))
    return err;
  return emitPlan(*m, PlanOptions());
}

} // namespace

/// The graph input of \p g's models, seeded from \p g.
runtime::Tensor randomInput(RandomGraph &g) {
  runtime::Tensor x = runtime::Tensor::zeros(
      plan::F32, {RandomGraph::kRows, RandomGraph::kCols});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setReal(i, g.real(g.rng));
  return x;
}

/// The device programs of \p p.
std::vector<const plan::DeviceProgram *> programsOf(const plan::Plan &p) {
  std::vector<const plan::DeviceProgram *> progs;
  for (const plan::DeviceProgram &prog : p.programs())
    progs.push_back(&prog);
  return progs;
}

TEST(PartitionTest, RandomStrategiesEqualTheReference) {
  auto cluster = makeCluster("dgx1-p100", 8, 2);
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  int collectives = 0;
  for (unsigned seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RandomGraph g(seed);
    auto m = g.build(2 + seed % 6);
    int64_t devices = seed % 2 ? 6 : 4;
    std::vector<Config> configs;
    for (auto &op : m->main.ops) {
      configs.push_back(g.config(*op, devices));
      op->attrs["config"] =
          std::vector<int64_t>(configs.back().begin(), configs.back().end());
    }
    CostModel model(*cluster, CostMode::Infer);
    double predicted = evaluateStrategy(*m, model, configs).commBytes;
    ASSERT_FALSE(bool(insertCollectives(*m, devices, 2)));
    auto p = emitPlan(*m, PlanOptions());
    ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
    TestFeed feed({randomInput(g)});
    std::vector<const plan::DeviceProgram *> progs = programsOf(*p);
    std::map<uint32_t, int64_t> bytes, refBytes;
    runtime::Tensor got = runAll(*p, progs, feed, bytes);
    runtime::Tensor want = runAll(*p, {&p->reference()}, feed, refBytes);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      err = std::max(err, std::fabs(got.real(i) - want.real(i)));
      norm = std::max(norm, std::fabs(want.real(i)));
    }
    EXPECT_LE(err, 1e-5 * std::max(1.0, norm)) << test::print(*m);
    int64_t performed = 0;
    for (int x = 0; x < p->exchanges_size(); ++x) {
      EXPECT_EQ(bytes[uint32_t(x)], p->exchanges(x).predicted_bytes())
          << p->exchanges(x).what();
      performed += bytes[uint32_t(x)];
      ++collectives;
    }
    EXPECT_EQ(double(performed), predicted);
  }
  EXPECT_GT(collectives, 100); // the strategies do move data
}

/// A TestFeed that counts the weight loads it serves.
class CountingFeed : public TestFeed {
public:
  using TestFeed::TestFeed;
  llvm::Error loadWeight(const plan::LoadWeight &load,
                         runtime::Tensor &out) override {
    ++loads;
    return TestFeed::loadWeight(load, out);
  }
  std::atomic<int> loads{0};
};

// Repeated inference runs keep the constant weights in the devices' arenas
// (persistent buffers): the second run loads none and computes the same
// bits.
TEST(PartitionTest, ResidentWeightsAreNotLoadedAgain) {
  RandomGraph g(5);
  auto p = randomPlan(g, 6);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  CountingFeed feed({randomInput(g)});
  std::vector<const plan::DeviceProgram *> progs = programsOf(*p);
  runtime::DeviceSet set;
  for (size_t d = 0; d < progs.size(); ++d)
    set.devices.push_back(runtime::makeCpuDevice());
  auto run = [&](bool resident) {
    std::vector<runtime::Tensor> outputs;
    std::vector<runtime::DeviceStats> stats;
    runtime::ThreadRunOptions options;
    options.weightsResident = resident;
    llvm::Error err = runtime::runThreads(
        *p, progs, set, [&](size_t) -> runtime::DataFeed & { return feed; },
        outputs, stats, options);
    EXPECT_FALSE(bool(err)) << llvm::toString(std::move(err));
    return outputs.empty() ? runtime::Tensor() : outputs[0];
  };
  runtime::Tensor first = run(false);
  int loads = feed.loads.exchange(0);
  EXPECT_GT(loads, 0);
  runtime::Tensor second = run(true);
  EXPECT_EQ(feed.loads.load(), 0);
  EXPECT_TRUE(first.data == second.data);
  EXPECT_GT(first.numel(), 0);
}

TEST(PartitionTest, OverlapsMoveAndAdd) {
  // A 4x6 tensor holding rows 2..5, cols 0..5 of a global tensor; copy its
  // overlap with the box rows 4..7, cols 3..8, then add it again.
  runtime::Tensor src = runtime::Tensor::zeros(plan::F32, {4, 6});
  for (int64_t i = 0; i < src.numel(); ++i)
    src.setReal(i, double(i));
  runtime::Tensor dst = runtime::Tensor::zeros(plan::F32, {4, 6});
  EXPECT_EQ(runtime::moveOverlap(src, {2, 0}, dst, {4, 3}, false), 6);
  // dst(r, c) holds global (4 + r, 3 + c) = src(2 + r, 3 + c) where r < 2.
  EXPECT_EQ(dst.real(0), src.real(2 * 6 + 3));
  EXPECT_EQ(dst.real(1 * 6 + 2), src.real(3 * 6 + 5));
  EXPECT_EQ(dst.real(2 * 6), 0);
  runtime::moveOverlap(src, {2, 0}, dst, {4, 3}, true);
  EXPECT_EQ(dst.real(0), 2 * src.real(2 * 6 + 3));
  auto packed = runtime::packOverlap(src, {2, 0}, {4, 3}, {4, 6});
  EXPECT_EQ(packed.size(), 6u * 4);
  runtime::Tensor back = runtime::Tensor::zeros(plan::F32, {4, 6});
  // The receiver names the sender's box: the same overlap on its side.
  runtime::unpackOverlap(packed, {2, 0}, {4, 6}, back, {4, 3}, false);
  EXPECT_EQ(back.real(1 * 6 + 2), src.real(3 * 6 + 5));
}

TEST(PartitionTest, BadProgramsAreErrorsNotCrashesOrHangs) {
  // Two devices, one group, one all_reduce exchange of a 2-element buffer.
  plan::Plan p;
  p.set_devices(2);
  plan::Group *g = p.add_groups();
  g->set_id(0);
  g->add_devices(0);
  g->add_devices(1);
  plan::Exchange *x = p.add_exchanges();
  x->set_kind(plan::Collective::ALL_REDUCE);
  x->set_reduce(true);
  for (int d = 0; d < 2; ++d) {
    for (plan::Box *b : {x->add_in(), x->add_out()}) {
      b->add_lo(0);
      b->add_size(2);
    }
    plan::DeviceProgram *prog = p.add_programs();
    prog->set_device(uint32_t(d));
    for (uint32_t id = 0; id < 2; ++id) {
      plan::Buffer *b = prog->add_buffers();
      b->set_id(id);
      b->add_shape(2);
      b->set_offset(64 * id);
    }
    prog->set_arena_bytes(128);
    plan::LoadWeight *load = prog->add_instructions()->mutable_load();
    load->set_source(plan::LoadWeight::FILL);
    load->set_fill(d + 1);
    load->add_global_shape(2);
    load->add_offset(0);
    load->set_buffer(0);
    plan::Collective *c = prog->add_instructions()->mutable_collective();
    c->set_kind(plan::Collective::ALL_REDUCE);
    c->set_input(0);
    c->set_output(1);
    plan::Binding *o = prog->add_outputs();
    o->set_buffer(1);
    o->set_owner(d == 0);
    o->add_offset(0);
  }
  p.add_outputs()->add_shape(2);
  TestFeed feed({});
  auto run = [&](const plan::Plan &plan) {
    std::vector<std::string> errors(2);
    std::vector<std::unique_ptr<runtime::Device>> devices;
    std::vector<std::vector<runtime::Tensor>> buffers(2);
    for (int d = 0; d < 2; ++d)
      devices.push_back(runtime::makeCpuDevice());
    auto comm = runtime::makeThreadCommunicator(plan);
    std::vector<std::thread> threads;
    for (int d = 0; d < 2; ++d)
      threads.emplace_back([&, d] {
        runtime::DeviceStats stats;
        if (auto err =
                runtime::runDevice(plan, plan.programs(d), feed, comm.get(),
                                   *devices[d], buffers[d], stats)) {
          errors[d] = llvm::toString(std::move(err));
          comm->abort("device " + std::to_string(d) + " failed");
        }
      });
    for (auto &t : threads)
      t.join();
    if (errors[0].empty() && errors[1].empty()) {
      EXPECT_EQ(buffers[0][1].real(0), 3.0); // 1 + 2
      // The output lives in the device's arena, at its planned offset.
      EXPECT_TRUE(buffers[0][1].data.view());
      EXPECT_EQ(devices[0]->allocate(plan::F32, {2}, 64, true).data.data(),
                buffers[0][1].data.data());
    }
    return errors;
  };
  auto ok = run(p);
  EXPECT_EQ(ok[0] + ok[1], "");

  // A buffer the plan places past its arena: an error, before anything runs.
  plan::Plan outside = p;
  outside.mutable_programs(1)->mutable_buffers(1)->set_offset(124);
  auto o = run(outside);
  EXPECT_NE(o[1].find("buffer 1 (8 bytes at 124) lies outside the arena of "
                      "128 bytes"),
            std::string::npos)
      << o[1];

  // A buffer id past the table: device 1 fails, device 0 is released.
  plan::Plan bad = p;
  bad.mutable_programs(1)
      ->mutable_instructions(1)
      ->mutable_collective()
      ->set_output(7);
  auto e = run(bad);
  EXPECT_NE(e[1].find("names buffer 7 of 2"), std::string::npos) << e[1];
  EXPECT_NE(e[0].find("stopped: device 1 failed"), std::string::npos) << e[0];

  // A collective on an exchange that does not exist.
  bad = p;
  bad.mutable_programs(0)
      ->mutable_instructions(1)
      ->mutable_collective()
      ->set_exchange(3);
  e = run(bad);
  EXPECT_NE(e[0].find("no such exchange"), std::string::npos) << e[0];

  // A device outside the collective's group.
  bad = p;
  bad.mutable_groups(0)->mutable_devices()->RemoveLast();
  e = run(bad);
  EXPECT_NE(e[1].find("not in group 0"), std::string::npos) << e[1];

  // Reading a buffer nothing wrote.
  bad = p;
  bad.mutable_programs(0)->mutable_instructions()->DeleteSubrange(0, 1);
  e = run(bad);
  EXPECT_NE(e[0].find("before anything writes it"), std::string::npos) << e[0];
}

// Every plan codegen writes passes checkPlan; each way of breaking one is
// refused with an error that names where.
TEST(PlanCheckTest, PlansPassAndBrokenOnesSayWhere) {
  for (unsigned seed = 0; seed < 30; ++seed) {
    RandomGraph g(seed);
    auto p = randomPlan(g, 2 + seed % 6);
    ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
    EXPECT_FALSE(bool(runtime::checkPlan(*p))) << "seed " << seed;
  }
  RandomGraph g(3);
  auto good = randomPlan(g, 4);
  ASSERT_TRUE(bool(good)) << llvm::toString(good.takeError());
  auto broken = [&](llvm::function_ref<void(plan::Plan &)> edit) {
    plan::Plan p = *good;
    edit(p);
    llvm::Error err = runtime::checkPlan(p);
    return err ? llvm::toString(std::move(err)) : std::string("(passed)");
  };
  EXPECT_EQ(broken([](plan::Plan &p) { p.set_devices(0); }),
            "the plan has 0 devices (1 to 65536)");
  EXPECT_EQ(broken([](plan::Plan &p) { p.mutable_programs()->RemoveLast(); }),
            "the plan has 3 programs for 4 devices");
  EXPECT_EQ(
      broken([](plan::Plan &p) { p.mutable_programs(0)->set_arena_bytes(-1); }),
      "device 0: an arena of -1 bytes (at most 1099511627776)");
  EXPECT_EQ(broken([](plan::Plan &p) {
              p.mutable_programs(1)->mutable_buffers(0)->set_offset(1 << 30);
            }).rfind("device 1: buffer 0 (", 0),
            0u);
  EXPECT_EQ(broken([](plan::Plan &p) {
              auto *s =
                  p.mutable_programs(0)->mutable_buffers(0)->mutable_shape();
              s->Clear();
              s->Add(int64_t(1) << 40);
              s->Add(int64_t(1) << 40);
            }),
            "device 0: buffer 0 has a negative dim or more than 2^48 "
            "elements");
  EXPECT_EQ(broken([](plan::Plan &p) {
              for (plan::Instruction &inst :
                   *p.mutable_programs(0)->mutable_instructions())
                if (inst.has_compute()) {
                  inst.mutable_compute()->mutable_inputs(0)->set_buffer(999);
                  break;
                }
            }).rfind("device 0: instruction ", 0),
            0u);
  EXPECT_EQ(broken([](plan::Plan &p) { p.mutable_groups(0)->add_devices(9); }),
            "group 0 names device 9");
  ASSERT_GT(good->exchanges_size(), 0);
  EXPECT_EQ(broken([](plan::Plan &p) {
              p.mutable_exchanges(0)->mutable_in()->RemoveLast();
            }),
            "exchange 0 does not give every device a box");
  std::string kernel = broken([](plan::Plan &p) {
    for (plan::Instruction &inst :
         *p.mutable_programs(0)->mutable_instructions())
      if (inst.has_compute()) {
        inst.mutable_compute()->set_kernel("no-such-kernel");
        break;
      }
  });
  EXPECT_EQ(kernel.rfind("device 0: instruction ", 0), 0u) << kernel;
  EXPECT_NE(kernel.find("no-such-kernel"), std::string::npos) << kernel;
}
