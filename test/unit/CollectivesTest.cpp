//===- CollectivesTest.cpp - Alpha-beta costs of collectives --------------===//
#include "passes/cost/Collectives.h"

#include <gtest/gtest.h>

#include <functional>

using namespace pax;

namespace {

using Algo = CollectiveAlgo;

/// Round numbers, so the expected costs can be computed by hand: 4 nodes of
/// 4 devices, 1 GB/s and 1 us inside a node, 0.25 GB/s and 10 us across.
Cluster toyCluster() {
  return {"toy", 16, 4, 1e12, 1e9, {1e9, 1e-6}, {0.25e9, 10e-6}, 0, nullptr};
}

/// Every collective priced at one group and size, by name.
using CostFn = std::function<double(const Cluster &, Group, double)>;
std::vector<std::pair<const char *, CostFn>> allCollectives() {
  return {
      {"allReduce",
       [](const Cluster &c, Group g, double b) { return allReduce(c, g, b); }},
      {"allGather",
       [](const Cluster &c, Group g, double b) { return allGather(c, g, b); }},
      {"reduceScatter", [](const Cluster &c, Group g,
                           double b) { return reduceScatter(c, g, b); }},
      {"allToAll", allToAll},
      {"broadcast", broadcast},
  };
}

/// 1 byte to 16 GiB, by factors of 4.
std::vector<double> sizes() {
  std::vector<double> v;
  for (double b = 1; b <= 16.0 * (1u << 30); b *= 4)
    v.push_back(b);
  return v;
}

TEST(CollectivesTest, RingsInsideANode) {
  Cluster c = toyCluster();
  // 2 * 3/4 * 4 GB / 1 GB/s + 2 * 3 * 1 us
  EXPECT_DOUBLE_EQ(allReduce(c, {4, 4}, 4e9, Algo::Ring), 6 + 6e-6);
  // Inner rings that fill the node: the same flat ring.
  EXPECT_DOUBLE_EQ(allReduce(c, {4, 4}, 4e9, Algo::Hierarchical), 6 + 6e-6);
  // 3/4 * 4 GB / 1 GB/s + 3 * 1 us
  EXPECT_DOUBLE_EQ(allGather(c, {4, 4}, 4e9, Algo::Ring), 3 + 3e-6);
  EXPECT_DOUBLE_EQ(reduceScatter(c, {4, 4}, 4e9, Algo::Ring), 3 + 3e-6);
  // 3/4 * 4 GB / 1 GB/s + 3 * 1 us
  EXPECT_DOUBLE_EQ(allToAll(c, {4, 4}, 4e9), 3 + 3e-6);
  // 1 GB / 1 GB/s + 3 hops of 1 us
  EXPECT_DOUBLE_EQ(broadcast(c, {4, 4}, 1e9), 1 + 3e-6);
  // 2 * 1/2 * 4 GB / 1 GB/s + 2 * 1 us
  EXPECT_DOUBLE_EQ(allReduce(c, {2, 2}, 4e9), 4 + 2e-6);
}

TEST(CollectivesTest, BestSplitsANodeIntoRingsOfRings) {
  Cluster c = toyCluster();
  // A 2x2 ring of rings moves as many bytes in fewer steps:
  // 2 * (1/2 * 4 GB / 1 GB/s + 1 us) + 2 * (1/2 * 2 GB / 1 GB/s + 1 us).
  EXPECT_DOUBLE_EQ(allReduce(c, {4, 4}, 4e9), 6 + 4e-6);
  // (1/2 * 2 GB + 1 us) + (1/2 * 4 GB + 1 us)
  EXPECT_DOUBLE_EQ(allGather(c, {4, 4}, 4e9), 3 + 2e-6);
  EXPECT_DOUBLE_EQ(reduceScatter(c, {4, 4}, 4e9), 3 + 2e-6);
}

TEST(CollectivesTest, AllReduceAcrossNodes) {
  Cluster c = toyCluster();
  // Flat ring over the slowest link: 2 * 7/8 * 8 GB / 0.25 GB/s + 14 * 10us.
  EXPECT_DOUBLE_EQ(allReduce(c, {8, 4}, 8e9, Algo::Ring), 56 + 140e-6);
  // Reduce-scatter in the node: 3/4 * 8 GB / 1 GB/s + 3 * 1us, twice (with
  // the all-gather); all-reduce of 2 GB over 2 nodes: 2 * 1/2 * 2 GB /
  // 0.25 GB/s + 2 * 10us.
  EXPECT_DOUBLE_EQ(allReduce(c, {8, 4}, 8e9, Algo::Hierarchical),
                   12 + 6e-6 + 8 + 20e-6);
  // Inner rings of 2 would cost 2 * (4 + 1us) + 2 * 3 * (4 + 10us) = 32 s.
  EXPECT_DOUBLE_EQ(allReduce(c, {8, 4}, 8e9), 20 + 26e-6);
  // One device per node: inter-node links only, either way.
  EXPECT_DOUBLE_EQ(allReduce(c, {4, 1}, 4e9, Algo::Ring), 24 + 60e-6);
  EXPECT_DOUBLE_EQ(allReduce(c, {4, 1}, 4e9), 24 + 60e-6);
}

TEST(CollectivesTest, GathersAndScattersAcrossNodes) {
  Cluster c = toyCluster();
  // 7/8 * 8 GB / 0.25 GB/s + 7 * 10us
  EXPECT_DOUBLE_EQ(allGather(c, {8, 4}, 8e9, Algo::Ring), 28 + 70e-6);
  // Across nodes on 2 GB: 1/2 * 2 / 0.25 + 10us; in the node on 8 GB:
  // 3/4 * 8 / 1 + 3us.
  EXPECT_DOUBLE_EQ(allGather(c, {8, 4}, 8e9, Algo::Hierarchical),
                   4 + 10e-6 + 6 + 3e-6);
  EXPECT_DOUBLE_EQ(reduceScatter(c, {8, 4}, 8e9), 10 + 13e-6);
  // All-to-all of 8 GB per member: 7/8 * 8 GB / 0.25 GB/s + 7 * 10us.
  EXPECT_DOUBLE_EQ(allToAll(c, {8, 4}, 8e9), 28 + 70e-6);
  // 1 GB / 0.25 GB/s, 1 inter-node hop and 6 intra-node hops.
  EXPECT_DOUBLE_EQ(broadcast(c, {8, 4}, 1e9), 4 + 10e-6 + 6e-6);
}

TEST(CollectivesTest, PointToPointAndCompute) {
  Cluster c = toyCluster();
  EXPECT_DOUBLE_EQ(sendRecv(c, /*acrossNodes=*/false, 1e9), 1 + 1e-6);
  EXPECT_DOUBLE_EQ(sendRecv(c, /*acrossNodes=*/true, 1e9), 4 + 10e-6);
  EXPECT_DOUBLE_EQ(sendRecv(c, /*acrossNodes=*/true, 0), 0);
  EXPECT_DOUBLE_EQ(computeSeconds(c, 5e12), 5);
  EXPECT_DOUBLE_EQ(computeSeconds(*clusterPreset("dgx-h100"), 495e12), 1);
}

TEST(CollectivesTest, GroupOfOneIsFree) {
  Cluster c = *clusterPreset("p100-nvlink");
  for (auto &[name, fn] : allCollectives())
    EXPECT_EQ(fn(c, {1, 1}, 1e9), 0) << name;
  for (Algo a : {Algo::Best, Algo::Ring, Algo::Hierarchical}) {
    EXPECT_EQ(allReduce(c, {1, 1}, 1e9, a), 0);
    EXPECT_EQ(allGather(c, {1, 1}, 1e9, a), 0);
    EXPECT_EQ(reduceScatter(c, {1, 1}, 1e9, a), 0);
  }
  // Nothing to move is free too.
  for (auto &[name, fn] : allCollectives())
    EXPECT_EQ(fn(c, {4, 4}, 0), 0) << name;
}

TEST(CollectivesTest, MoreBytesNeverCheaper) {
  for (llvm::StringRef preset : clusterPresetNames()) {
    Cluster c = *makeCluster(preset, 64, std::nullopt);
    for (unsigned perNode = 1; perNode <= c.gpusPerNode; perNode *= 2)
      for (unsigned size = perNode; size <= 64; size *= 2)
        for (auto &[name, fn] : allCollectives()) {
          double last = 0;
          for (double bytes : sizes()) {
            double t = fn(c, {size, perNode}, bytes);
            EXPECT_GE(t, last) << preset.str() << " " << name << " " << size
                               << "/" << perNode << " " << bytes;
            last = t;
          }
        }
  }
}

TEST(CollectivesTest, CrossingNodesNeverCheaper) {
  for (llvm::StringRef preset : clusterPresetNames()) {
    Cluster c = *makeCluster(preset, 64, std::nullopt);
    for (unsigned size = 2; size <= c.gpusPerNode; size *= 2)
      for (unsigned perNode = 1; perNode < size; perNode *= 2)
        for (double bytes : sizes()) {
          for (auto &[name, fn] : allCollectives())
            EXPECT_GE(fn(c, {size, perNode}, bytes), fn(c, {size, size}, bytes))
                << preset.str() << " " << name << " " << size << "/" << perNode
                << " " << bytes;
          EXPECT_GE(sendRecv(c, true, bytes), sendRecv(c, false, bytes));
        }
  }
}

TEST(CollectivesTest, BestIsNeverWorseThanEitherSchedule) {
  for (llvm::StringRef preset : clusterPresetNames()) {
    Cluster c = *makeCluster(preset, 64, std::nullopt);
    for (unsigned perNode = 1; perNode <= c.gpusPerNode; perNode *= 2)
      for (unsigned size = perNode; size <= 64; size *= 2)
        for (double bytes : sizes()) {
          Group g{size, perNode};
          double best = allReduce(c, g, bytes);
          EXPECT_LE(best, allReduce(c, g, bytes, Algo::Ring));
          EXPECT_LE(best, allReduce(c, g, bytes, Algo::Hierarchical));
          best = allGather(c, g, bytes);
          EXPECT_LE(best, allGather(c, g, bytes, Algo::Ring));
          EXPECT_LE(best, allGather(c, g, bytes, Algo::Hierarchical));
        }
  }
}

TEST(CollectivesTest, HierarchicalAllReduceWinsAcrossDgxH100Nodes) {
  Cluster c = *makeCluster("dgx-h100", 32, std::nullopt);
  Group g{32, 8};
  double bytes = 1u << 30;
  double ring = allReduce(c, g, bytes, Algo::Ring);
  double hier = allReduce(c, g, bytes, Algo::Hierarchical);
  // The flat ring pushes 2 * 31/32 GiB through 50 GB/s NICs; the hierarchy
  // sends only 1/8 of it across nodes.
  EXPECT_LT(hier, ring / 4);
  EXPECT_DOUBLE_EQ(allReduce(c, g, bytes), hier);
  // A small buffer is latency bound: fewer steps, still hierarchical.
  EXPECT_LT(allReduce(c, g, 1024, Algo::Hierarchical),
            allReduce(c, g, 1024, Algo::Ring));
}

TEST(CollectivesTest, InnerRingIsTheOneBestPrices) {
  Cluster c = *makeCluster("dgx-h100", 32, std::nullopt);
  for (Group g : {Group{32, 8}, Group{16, 8}, Group{8, 8}, Group{4, 2}})
    for (double bytes : {1024.0, 1e6, double(1u << 30)}) {
      unsigned inner = allReduceInnerRing(c, g, bytes);
      EXPECT_EQ(g.perNode % inner, 0u);
      // Best's cost is the two-level schedule with that inner ring.
      double ring = allReduce(c, g, bytes, Algo::Ring);
      double best = allReduce(c, g, bytes);
      if (inner == 1)
        EXPECT_DOUBLE_EQ(best, ring);
      else
        EXPECT_LT(best, ring);
    }
  // Across nodes a large buffer reduces inside each node first.
  EXPECT_GT(allReduceInnerRing(c, {32, 8}, double(1u << 30)), 1u);
}

} // namespace
