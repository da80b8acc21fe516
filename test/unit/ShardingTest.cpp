//===- ShardingTest.cpp - Configurations, layouts and resharding plans ----===//
#include "passes/sharding/ConfigSpace.h"
#include "passes/sharding/Layout.h"
#include "passes/sharding/Reshard.h"

#include "IrText.h"

#include <gtest/gtest.h>

using namespace pax;
using namespace pax::test;

namespace {

/// Two fully connected layers, y = x W1, z = y W2 (PaSE Table II's case).
const char *kTwoFc = R"(module @fc {
  param @w1 : tensor<512x1024xf32> = fill(0.1)
  param @w2 : tensor<1024x256xf32> = fill(0.1)
  func @main(%x: tensor<64x512xf32>) -> (z: tensor<64x256xf32>) {
    %0 = compute "matmul" iter [m: 64 par, n: 1024 par, k: 512 red]
        ins(%x[m, k], @w1[k, n])
        outs([m, n] : tensor<64x1024xf32>)
    %1 = compute "matmul" iter [m: 64 par, n: 256 par, k: 1024 red]
        ins(%0[m, k], @w2[k, n])
        outs([m, n] : tensor<64x256xf32>)
    return %1
  }
})";

/// A strided 3x3 conv and a relu.
const char *kConv = R"(module @conv {
  param @w : tensor<16x8x3x3xf32> = fill(0.1)
  param @w2 : tensor<16x16x3x3xf32> = fill(0.1)
  func @main(%x: tensor<4x8x32x32xf32>) -> (y: tensor<4x16x32x32xf32>) {
    %0 = compute "conv" iter [n: 4 par, co: 16 par, oh: 32 par, ow: 32 par, ci: 8 red, kh: 3 red, kw: 3 red]
        ins(%x[n, ci, oh + kh - 1, ow + kw - 1], @w[co, ci, kh, kw])
        outs([n, co, oh, ow] : tensor<4x16x32x32xf32>)
    %1 = compute "conv" iter [n: 4 par, co: 16 par, oh: 32 par, ow: 32 par, ci: 16 red, kh: 3 red, kw: 3 red]
        ins(%0[n, ci, oh + kh - 1, ow + kw - 1], @w2[co, ci, kh, kw])
        outs([n, co, oh, ow] : tensor<4x16x32x32xf32>)
    return %1
  }
})";

std::string kinds(llvm::ArrayRef<ReshardStep> steps) {
  std::string s;
  for (const ReshardStep &st : steps)
    s += (s.empty() ? "" : " ") + reshardStepName(st.kind).str() + "/" +
         std::to_string(st.groupSize);
  return s;
}

const TensorType &typeOf(const Op &op) { return op.results[0].value->type; }

} // namespace

TEST(ConfigSpaceTest, EnumeratesDivisorsUnderTheDeviceCount) {
  auto m = parse(kTwoFc);
  ASSERT_TRUE(m);
  const Op &mm = *m->main.ops[0];
  ConfigOptions o;
  o.devices = 4;
  auto all = enumerateConfigs(mm, o);
  // Factors 1, 2, 4 on three dims with product <= 4: 1 + 3 + 3 + 3 = 10.
  EXPECT_EQ(all.size(), 10u);
  EXPECT_EQ(configStr(mm, all.front()), "<>");
  for (const Config &c : all)
    EXPECT_LE(configDevices(c), 4);
  o.exact = true;
  auto exact = enumerateConfigs(mm, o);
  // <> plus the 6 with product exactly 4.
  EXPECT_EQ(exact.size(), 7u);
  o.exact = false;
  o.maxPerDim = 2;
  for (const Config &c : enumerateConfigs(mm, o))
    for (int64_t f : c)
      EXPECT_LE(f, 2);
}

TEST(ConfigSpaceTest, PowersOfTwoAndDivisibility) {
  auto m = parse(R"(module @m {
  func @main(%x: tensor<12x5xf32>) -> (y: tensor<12x5xf32>) {
    %0 = compute "relu" iter [d0: 12 par, d1: 5 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<12x5xf32>)
    return %0
  }
})");
  ASSERT_TRUE(m);
  const Op &op = *m->main.ops[0];
  ConfigOptions o;
  o.devices = 6;
  std::vector<std::string> got;
  for (const Config &c : enumerateConfigs(op, o))
    got.push_back(configStr(op, c));
  EXPECT_EQ(got, (std::vector<std::string>{"<>", "<d1: 5>", "<d0: 2>",
                                           "<d0: 3>", "<d0: 4>", "<d0: 6>"}));
  o.powersOfTwo = true;
  EXPECT_EQ(enumerateConfigs(op, o).size(), 3u); // <>, <d0: 2>, <d0: 4>
}

TEST(ConfigSpaceTest, KernelDimsAndMinorGroupDimsAreNotSplit) {
  auto m = parse(kConv);
  ASSERT_TRUE(m);
  auto split = splittableDims(*m->main.ops[0]);
  // n co oh ow ci kh kw
  EXPECT_EQ(split, (llvm::SmallVector<bool, 6>{true, true, true, true, true,
                                               false, false}));
}

TEST(LayoutTest, PartialSumsFromASplitReduction) {
  auto m = parse(kTwoFc);
  ASSERT_TRUE(m);
  const Op &mm = *m->main.ops[0];
  // <m: 2, k: 2>: rows split in two, partial over k.
  TensorLayout l = resultLayout(mm, Config{2, 1, 2}, 0);
  EXPECT_EQ(l.str(), "[2, 1] partial 2");
  EXPECT_EQ(l.devices(), 4);
  ASSERT_EQ(l.digits.size(), 2u);
  EXPECT_EQ(l.digits[0].role, Digit::Role::Partial); // k: innermost
  EXPECT_EQ(l.digits[1].role, Digit::Role::Split);
  // The weight is replicated along m and split along k.
  EXPECT_EQ(operandLayout(mm, Config{2, 1, 2}, 1).str(), "[2, 1] rep 2");
}

TEST(ReshardTest, AlternatingFcSplitsMoveNothing) {
  auto m = parse(kTwoFc);
  ASSERT_TRUE(m);
  const Op &fc1 = *m->main.ops[0], &fc2 = *m->main.ops[1];
  // fc1 splits its output channels n by 4; fc2 splits its input channels k
  // by 4: each device already holds the slice of y it reads.
  TensorLayout out = resultLayout(fc1, Config{1, 4, 1}, 0);
  TensorLayout in = operandLayout(fc2, Config{1, 1, 4}, 0);
  EXPECT_EQ(kinds(planReshard(out, in, typeOf(fc1), 8)), "");
  // fc2 splitting its rows instead needs an all_to_all.
  EXPECT_EQ(kinds(planReshard(out, operandLayout(fc2, Config{4, 1, 1}, 0),
                              typeOf(fc1), 8)),
            "all_to_all/4");
  // Replicated use of a split tensor gathers it.
  EXPECT_EQ(kinds(planReshard(out, operandLayout(fc2, Config{1, 4, 1}, 0),
                              typeOf(fc1), 8)),
            "all_gather/4");
}

TEST(ReshardTest, PartialSumsAreReducedOrScattered) {
  auto m = parse(kTwoFc);
  ASSERT_TRUE(m);
  const Op &fc1 = *m->main.ops[0], &fc2 = *m->main.ops[1];
  TensorLayout partial = resultLayout(fc1, Config{1, 1, 4}, 0);
  auto toRep = planReshard(partial, operandLayout(fc2, Config{1, 4, 1}, 0),
                           typeOf(fc1), 8);
  EXPECT_EQ(kinds(toRep), "all_reduce/4");
  EXPECT_EQ(toRep[0].bytes, 64 * 1024 * 4); // the whole partial block
  auto toSplit = planReshard(partial, operandLayout(fc2, Config{1, 1, 4}, 0),
                             typeOf(fc1), 8);
  EXPECT_EQ(kinds(toSplit), "reduce_scatter/4");
  EXPECT_EQ(kinds(planReshard(reducedLayout(partial),
                              operandLayout(fc2, Config{1, 1, 4}, 0),
                              typeOf(fc1), 8)),
            "slice/4");
}

TEST(ReshardTest, DifferentDeviceCounts) {
  auto m = parse(kTwoFc);
  ASSERT_TRUE(m);
  const Op &fc1 = *m->main.ops[0], &fc2 = *m->main.ops[1];
  // A 4-way split read by an unsplit op: gathered.
  EXPECT_EQ(kinds(planReshard(resultLayout(fc1, Config{4, 1, 1}, 0),
                              operandLayout(fc2, Config{1, 1, 1}, 0),
                              typeOf(fc1), 8)),
            "all_gather/4");
  // An unsplit result read by a 4-way op: broadcast, then each slices.
  EXPECT_EQ(kinds(planReshard(resultLayout(fc1, Config{1, 1, 1}, 0),
                              operandLayout(fc2, Config{4, 1, 1}, 0),
                              typeOf(fc1), 8)),
            "broadcast/4 slice/4");
}

TEST(ReshardTest, GroupsInsideAndAcrossNodes) {
  auto m = parse(kTwoFc);
  ASSERT_TRUE(m);
  const Op &fc1 = *m->main.ops[0], &fc2 = *m->main.ops[1];
  // 16 devices, 4 per node: gathering the innermost 4-way split stays in a
  // node, the outer one crosses nodes.
  TensorLayout out = resultLayout(fc1, Config{4, 4, 1}, 0);
  auto inner =
      planReshard(out, operandLayout(fc2, Config{4, 1, 4}, 0), typeOf(fc1), 4);
  EXPECT_EQ(kinds(inner), "");
  auto gatherN =
      planReshard(out, operandLayout(fc2, Config{4, 4, 1}, 0), typeOf(fc1), 4);
  ASSERT_EQ(kinds(gatherN), "all_gather/4");
  EXPECT_EQ(gatherN[0].groupPerNode, 4);
  // Dropping the row split gathers across nodes, one device per node.
  auto gatherM =
      planReshard(out, operandLayout(fc2, Config{1, 4, 4}, 0), typeOf(fc1), 4);
  ASSERT_EQ(kinds(gatherM), "all_gather/4");
  EXPECT_EQ(gatherM[0].groupPerNode, 1);
}

TEST(ReshardTest, SpatialSplitsExchangeHalos) {
  auto m = parse(kConv);
  ASSERT_TRUE(m);
  const Op &c1 = *m->main.ops[0], &c2 = *m->main.ops[1];
  Config byRows{1, 1, 4, 1, 1, 1, 1};
  TensorLayout in = operandLayout(c2, byRows, 0);
  EXPECT_EQ(in.haloLo[2], 1);
  EXPECT_EQ(in.haloHi[2], 1);
  auto steps = planReshard(resultLayout(c1, byRows, 0), in, typeOf(c1), 8);
  ASSERT_EQ(kinds(steps), "halo_exchange/2");
  // Two rows of 32 columns, 16 channels, 4 images, f32.
  EXPECT_EQ(steps[0].bytes, 2 * 32 * 16 * 4 * 4);
}
