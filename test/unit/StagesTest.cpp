//===- StagesTest.cpp - A pipelined plan's stages, placed and ordered -----===//
#include "passes/sharding/Stages.h"
#include "IrText.h"
#include "ir/Module.h"

#include <gtest/gtest.h>

#include <string>

using namespace pax;

namespace {

/// A forward op, a gradient's sum (no stage, no microbatch) and an
/// update reading it, and a graph input's slice read by stage 1 only.
constexpr const char *kStep = R"(module @step {
  param @W : tensor<4x4xf32> = fill(0.1)
  func @main(%x: tensor<4x4xf32>) -> (y: tensor<4x4xf32>, z: tensor<4x4xf32>) {
    %0 = compute "relu" iter [a: 4 par, b: 4 par]
        ins(%x[a, b]) outs([a, b] : tensor<4x4xf32>) {name = "slice"}
    %1 = compute "relu" iter [a: 4 par, b: 4 par]
        ins(@W[a, b]) outs([a, b] : tensor<4x4xf32>) {name = "fwd0", stage = 0}
    %2 = compute "add" iter [a: 4 par, b: 4 par]
        ins(%1[a, b], %0[a, b]) outs([a, b] : tensor<4x4xf32>) {name = "fwd1", stage = 1}
    %3 = compute "relu" iter [a: 4 par, b: 4 par]
        ins(%2[a, b]) outs([a, b] : tensor<4x4xf32>) {name = "sum"}
    %4 = compute "relu" iter [a: 4 par, b: 4 par]
        ins(%1[a, b]) outs([a, b] : tensor<4x4xf32>) {name = "update"}
    return %3, %4
  }
})";

int64_t stageOf(const Func &f, llvm::StringRef name) {
  for (const auto &op : f.ops)
    if (op->name() == name)
      return op->intAttr("stage", -1);
  return -2;
}

TEST(StagesTest, OpsWithoutAStageTakeTheirProducersOrReaders) {
  auto m = test::parse(kStep);
  ASSERT_TRUE(m);
  placeStages(m->main, 4, 2);
  // The latest stage it reads, else the first that reads it.
  EXPECT_EQ(stageOf(m->main, "slice"), 1);
  EXPECT_EQ(stageOf(m->main, "sum"), 1);
  EXPECT_EQ(stageOf(m->main, "update"), 0);
  for (const auto &op : m->main.ops)
    EXPECT_EQ(op->intAttr("offset", -1), op->intAttr("stage", -1) * 4)
        << op->name().str();
}

/// One independent op per (stage, microbatch, pass), in program order
/// stage by stage, forwards first.
Module passOps(int64_t stages, int64_t microbatches) {
  Module m;
  for (int64_t s = 0; s < stages; ++s)
    for (int backward = 0; backward < 2; ++backward)
      for (int64_t k = 0; k < microbatches; ++k) {
        Op *op = m.main.addOp(OpKind::Relu);
        op->attrs["stage"] = s;
        op->attrs["microbatch"] = k;
        if (!backward)
          op->attrs["forward"] = int64_t(1);
        op->attrs["name"] = (backward ? "B" : "F") + std::to_string(k);
      }
  return m;
}

/// Stage \p s's passes in program order.
std::string passesOf(const Func &f, int64_t s) {
  std::string out;
  for (const auto &op : f.ops)
    if (op->intAttr("stage", -1) == s)
      out += (out.empty() ? "" : " ") + op->name().str();
  return out;
}

TEST(StagesTest, OneFOneBAndGPipeOrderEachStagesPasses) {
  Module m = passOps(3, 4);
  ASSERT_FALSE(bool(orderStages(m.main, 3, 4, Schedule::OneFOneB)));
  EXPECT_EQ(passesOf(m.main, 0), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(passesOf(m.main, 1), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(passesOf(m.main, 2), "F0 B0 F1 B1 F2 B2 F3 B3");
  Module g = passOps(2, 3);
  ASSERT_FALSE(bool(orderStages(g.main, 2, 3, Schedule::GPipe)));
  EXPECT_EQ(passesOf(g.main, 0), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(passesOf(g.main, 1), "F0 F1 F2 B0 B1 B2");
  // Globally, a stage's forward of a microbatch after the stage before's.
  size_t f00 = 0, f10 = 0;
  for (size_t i = 0; i < g.main.ops.size(); ++i) {
    const Op &op = *g.main.ops[i];
    if (op.name() == "F0")
      (op.intAttr("stage", -1) ? f10 : f00) = i;
  }
  EXPECT_LT(f00, f10);
}

TEST(StagesTest, InterleavedRanksRunTheirChunksInMegatronsOrder) {
  // 2 ranks of 2 chunks: stages 0 and 2 on rank 0, 4 microbatches.
  Module m = passOps(4, 4);
  ASSERT_FALSE(bool(orderStages(m.main, 4, 4, Schedule::Interleaved, 2)));
  std::string rank0;
  for (const auto &op : m.main.ops)
    if (op->intAttr("stage", -1) % 2 == 0)
      rank0 += (rank0.empty() ? "" : " ") +
               std::to_string(op->intAttr("stage", -1)) + ":" +
               op->name().str();
  // Warm-up (2 - 0 - 1) * 2 + (2 - 1) * 2 = 4 forwards: microbatches 0
  // and 1 through chunk 0, then chunk 1; then one forward, one backward
  // (chunk 1's backwards first).
  EXPECT_EQ(rank0, "0:F0 0:F1 2:F0 2:F1 0:F2 2:B0 0:F3 2:B1 2:F2 0:B0 2:F3 "
                   "0:B1 2:B2 2:B3 0:B2 0:B3");
  placeStages(m.main, 3, 2);
  for (const auto &op : m.main.ops)
    EXPECT_EQ(op->intAttr("offset", -1), op->intAttr("stage", -1) % 2 * 3);
}

TEST(StagesTest, AStageOrMicrobatchOutOfRangeIsAnError) {
  Module m = passOps(2, 2);
  auto err = orderStages(m.main, 1, 2, Schedule::OneFOneB);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err))
                .find("stage 1 and microbatch 0 "
                      "are outside the pipeline's "
                      "1 stages"),
            std::string::npos);
}

} // namespace
