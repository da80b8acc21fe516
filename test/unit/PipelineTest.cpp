//===- PipelineTest.cpp - Stage cuts, schedules, bubbles -----------------===//
#include "passes/sharding/Pipeline.h"
#include "IrText.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

using namespace pax;

namespace {

std::vector<LayerCost> equalLayers(int n, double seconds, double statics,
                                   double acts) {
  LayerCost c;
  c.seconds = seconds;
  c.staticBytes = statics;
  c.activationBytes = acts;
  return std::vector<LayerCost>(size_t(n), c);
}

TEST(PipelineTest, EqualLayersCutEvenlyWithTheTextbookBubble) {
  auto layers = equalLayers(8, 1.0, 0, 0);
  auto plan = planStages(layers, 4, 8, Schedule::OneFOneB, 0);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_EQ(plan->stages.size(), 4u);
  for (const PipelineStage &s : plan->stages)
    EXPECT_DOUBLE_EQ(s.seconds, 2.0);
  // (M + S - 1) beats of one stage; (S - 1) / (M + S - 1) of it idle.
  EXPECT_DOUBLE_EQ(plan->stepSeconds, (8 + 4 - 1) * 2.0);
  EXPECT_NEAR(plan->bubble, 3.0 / 11.0, 1e-12);
}

TEST(PipelineTest, SchedulesKeepTheirMicrobatchesInFlight) {
  auto layers = equalLayers(4, 1.0, 10, 1);
  auto gpipe = planStages(layers, 4, 8, Schedule::GPipe, 0);
  auto ofob = planStages(layers, 4, 8, Schedule::OneFOneB, 0);
  ASSERT_TRUE(gpipe && ofob);
  for (size_t s = 0; s < 4; ++s) {
    EXPECT_EQ(gpipe->stages[s].inFlight, 8);
    EXPECT_DOUBLE_EQ(gpipe->stages[s].peakBytes, 10 + 8);
    EXPECT_EQ(ofob->stages[s].inFlight, int64_t(4 - s));
    EXPECT_DOUBLE_EQ(ofob->stages[s].peakBytes, 10.0 + double(4 - s));
  }
  EXPECT_DOUBLE_EQ(gpipe->stepSeconds, ofob->stepSeconds);
  // 14 bytes fit 1F1B's first stage (10 + 4), not GPipe's (10 + 8).
  EXPECT_TRUE(bool(planStages(layers, 4, 8, Schedule::OneFOneB, 14)));
  auto tight = planStages(layers, 4, 8, Schedule::GPipe, 14);
  ASSERT_FALSE(bool(tight));
  EXPECT_NE(llvm::toString(tight.takeError())
                .find("no cut of 4 layers into 4 stages"),
            std::string::npos);
}

TEST(PipelineTest, AHeavyLayerBeatsMegatronsEvenCut) {
  // An embedding as heavy as three layers first, a head as heavy as two
  // last: the even cut puts both on their stages' other layers.
  auto layers = equalLayers(8, 1.0, 0, 0);
  layers.front().seconds = 3;
  layers.back().seconds = 2;
  auto even = evenStages(layers, 4, 16, Schedule::OneFOneB);
  auto best = planStages(layers, 4, 16, Schedule::OneFOneB, 0);
  ASSERT_TRUE(even && best);
  EXPECT_DOUBLE_EQ(even->stages[0].seconds, 4.0);
  double slowest = 0;
  for (const PipelineStage &s : best->stages)
    slowest = std::max(slowest, s.seconds);
  EXPECT_DOUBLE_EQ(slowest, 3.0);
  EXPECT_LT(best->stepSeconds, even->stepSeconds);
}

TEST(PipelineTest, SendsAndTheFirstStagesSyncCount) {
  auto layers = equalLayers(4, 1.0, 0, 0);
  for (LayerCost &c : layers) {
    c.sendSeconds = 0.25;
    c.syncSeconds = 0.5;
  }
  auto plan = planStages(layers, 2, 4, Schedule::OneFOneB, 0);
  ASSERT_TRUE(bool(plan));
  // Stage 0 sends its output on; the last stage sends nothing.
  EXPECT_DOUBLE_EQ(plan->stages[0].seconds, 2.25);
  EXPECT_DOUBLE_EQ(plan->stages[1].seconds, 2.0);
  // fill/drain + 3 beats of the slowest + stage 0's two layers' sync.
  EXPECT_DOUBLE_EQ(plan->stepSeconds, 4.25 + 3 * 2.25 + 1.0);
}

/// The slowest stage of the best cut that fits, by trying every cut.
double bruteForce(const std::vector<LayerCost> &layers, int stages, int64_t m,
                  Schedule k, double limit) {
  int L = int(layers.size());
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> cuts;
  std::function<void(int)> go = [&](int at) {
    if (int(cuts.size()) == stages - 1) {
      std::vector<int> edges{0};
      edges.insert(edges.end(), cuts.begin(), cuts.end());
      edges.push_back(L);
      double slowest = 0;
      for (int s = 0; s < stages; ++s) {
        double secs = 0, statics = 0, acts = 0;
        for (int l = edges[s]; l < edges[s + 1]; ++l) {
          secs += layers[size_t(l)].seconds;
          statics += layers[size_t(l)].staticBytes;
          acts += layers[size_t(l)].activationBytes;
        }
        if (edges[s + 1] < L)
          secs += layers[size_t(edges[s + 1] - 1)].sendSeconds;
        double peak = statics + double(inFlight(k, s, stages, m)) * acts;
        if (limit > 0 && peak > limit)
          return;
        slowest = std::max(slowest, secs);
      }
      best = std::min(best, slowest);
      return;
    }
    for (int c = at; c < L; ++c) {
      cuts.push_back(c);
      go(c + 1);
      cuts.pop_back();
    }
  };
  go(1);
  return best;
}

TEST(PipelineTest, TheCutIsTheBestOfEveryCut) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 3.0);
  int checked = 0, infeasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int L = 2 + int(rng() % 8);
    int S = 1 + int(rng() % std::min(L, 4));
    int64_t m = 1 + int64_t(rng() % 8);
    Schedule k = rng() % 2 ? Schedule::GPipe : Schedule::OneFOneB;
    std::vector<LayerCost> layers(static_cast<size_t>(L));
    for (LayerCost &c : layers) {
      c.seconds = u(rng);
      c.staticBytes = u(rng);
      c.activationBytes = u(rng) / 4;
      c.sendSeconds = u(rng) / 10;
    }
    double limit = trial % 3 ? u(rng) * 4 : 0;
    double want = bruteForce(layers, S, m, k, limit);
    auto plan = planStages(layers, S, m, k, limit);
    if (want == std::numeric_limits<double>::infinity()) {
      EXPECT_FALSE(bool(plan)) << "trial " << trial;
      if (!plan)
        llvm::consumeError(plan.takeError());
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(bool(plan))
        << "trial " << trial << ": " << llvm::toString(plan.takeError());
    double slowest = 0;
    for (const PipelineStage &s : plan->stages) {
      slowest = std::max(slowest, s.seconds);
      if (limit > 0) {
        EXPECT_LE(s.peakBytes, limit);
      }
    }
    EXPECT_NEAR(slowest, want, 1e-12) << "trial " << trial;
    EXPECT_EQ(plan->stages.front().first, 0);
    EXPECT_EQ(plan->stages.back().last, L);
    ++checked;
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(infeasible, 10);
}

/// A stage of \p forward and \p backward seconds per microbatch.
PipelineStage stageOf(double forward, double backward, double send = 0,
                      double sync = 0) {
  PipelineStage s;
  s.forwardSeconds = forward;
  s.sendSeconds = send;
  s.seconds = forward + backward + send;
  s.syncSeconds = sync;
  return s;
}

TEST(PipelineTest, AmongCutsAsFastTheWorkIsEven) {
  // A last layer of 12 s alone on the last stage sets the slowest stage;
  // every cut of the five 1 s layers before it into two stages is as fast,
  // and the even one (2 and 3 layers) is taken, not 1 and 4.
  std::vector<LayerCost> layers(6);
  for (LayerCost &c : layers) {
    c.seconds = 1;
    c.sendSeconds = 0.5;
  }
  layers.back().seconds = 12;
  layers.back().sendSeconds = 0;
  auto plan = planStages(layers, 3, 4, Schedule::OneFOneB, 0);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_DOUBLE_EQ(plan->stages[2].seconds, 12);
  EXPECT_EQ(plan->stages[2].first, 5);
  int first = plan->stages[0].last - plan->stages[0].first;
  EXPECT_TRUE(first == 2 || first == 3) << first;
}

TEST(PipelineTest, PassesStartInTheSchedulesOrder) {
  std::vector<PipelineStage> stages(2, stageOf(1, 2));
  PassTimes t = simulatePasses(stages, 3, Schedule::OneFOneB);
  ASSERT_EQ(t.forward.size(), 6u);
  // Stage 1 starts microbatch 0 when stage 0 has computed it; its backward
  // follows at once; stage 0's backward of 0 after its forward of 1.
  EXPECT_DOUBLE_EQ(t.forward[3], 1);
  EXPECT_DOUBLE_EQ(t.backward[3], 2);
  EXPECT_DOUBLE_EQ(t.forward[1], 1);
  EXPECT_DOUBLE_EQ(t.backward[0], 4);
  EXPECT_LT(t.forward[2], t.backward[1]);
}

TEST(PipelineTest, InterleavingShrinksTheBubble) {
  // 8 equal layers on 4 ranks, 8 microbatches: 1F1B's stages of two
  // layers against interleaved chunks of one (two per rank).
  auto layers = equalLayers(8, 1.0, 0, 0);
  auto ofob = planStages(layers, 4, 8, Schedule::OneFOneB, 0);
  auto inter = planStages(layers, 4, 8, Schedule::Interleaved, 0, 2);
  ASSERT_TRUE(ofob && inter);
  ASSERT_EQ(inter->stages.size(), 8u);
  EXPECT_EQ(inter->ranks(), 4);
  EXPECT_EQ(inter->chunks, 2);
  // (M + S - 1) beats of 2 s against M beats of 2 s and S - 1 of 1 s.
  EXPECT_DOUBLE_EQ(ofob->simulatedSeconds, (8 + 3) * 2.0);
  EXPECT_DOUBLE_EQ(inter->stepSeconds, 8 * 2.0 + 3 * 1.0);
  EXPECT_LT(inter->simulatedSeconds, ofob->simulatedSeconds);
  EXPECT_LT(inter->bubble, ofob->bubble);
  // Microbatches must be a multiple of the ranks; chunks go with
  // interleaving only.
  auto odd = planStages(layers, 4, 6, Schedule::Interleaved, 0, 2);
  ASSERT_FALSE(bool(odd));
  EXPECT_NE(llvm::toString(odd.takeError()).find("a multiple of the stages"),
            std::string::npos);
  auto one = planStages(layers, 4, 8, Schedule::Interleaved, 0, 1);
  ASSERT_FALSE(bool(one));
  llvm::consumeError(one.takeError());
}

TEST(PipelineTest, MegatronsEvenCutInterleaves) {
  // 12 equal layers on 2 ranks of 3 chunks: six stages of two layers,
  // rank r running stages r, r + 2 and r + 4, as the exact cut of equal
  // layers does; each rank's chunks together within a limit or not.
  auto layers = equalLayers(12, 1.0, 1.0, 0);
  auto even = evenStages(layers, 2, 4, Schedule::Interleaved, 3);
  auto best = planStages(layers, 2, 4, Schedule::Interleaved, 0, 3);
  ASSERT_TRUE(even && best);
  ASSERT_EQ(even->stages.size(), 6u);
  EXPECT_EQ(even->ranks(), 2);
  EXPECT_EQ(even->chunks, 3);
  for (const PipelineStage &st : even->stages)
    EXPECT_EQ(st.last - st.first, 2);
  EXPECT_DOUBLE_EQ(even->simulatedSeconds, best->simulatedSeconds);
  double rank0 = 0;
  for (size_t s = 0; s < even->stages.size(); s += 2)
    rank0 += even->stages[s].peakBytes;
  EXPECT_TRUE(ranksFit(*even, rank0));
  EXPECT_FALSE(ranksFit(*even, rank0 - 1));
  EXPECT_TRUE(ranksFit(*even, 0));
  // Stages x chunks over the layers, or microbatches the ranks do not
  // divide, are errors as for planStages.
  auto many = evenStages(layers, 2, 4, Schedule::Interleaved, 7);
  ASSERT_FALSE(bool(many));
  llvm::consumeError(many.takeError());
  auto odd = evenStages(layers, 2, 3, Schedule::Interleaved, 3);
  ASSERT_FALSE(bool(odd));
  llvm::consumeError(odd.takeError());
}

namespace {
/// Layers [a, b) of \p layers as a stage, for simulatePipeline: its time
/// with the send after its last layer (none after the model's last).
PipelineStage stageOf(llvm::ArrayRef<LayerCost> layers, int a, int b) {
  PipelineStage st;
  st.first = a;
  st.last = b;
  for (int l = a; l < b; ++l) {
    st.seconds += layers[size_t(l)].seconds;
    st.forwardSeconds += layers[size_t(l)].forwardSeconds;
  }
  st.sendSeconds =
      b < int(layers.size()) ? layers[size_t(b - 1)].sendSeconds : 0.0;
  st.seconds += st.sendSeconds;
  return st;
}
} // namespace

TEST(PipelineTest, McmcOverTheCutNeverLosesAndFindsTheSimulatedBest) {
  // Random layers, each with its own split of forward and backward: the
  // exact cut of the slowest stage, then the chain over its boundaries.
  // The chain's cut simulates no slower, tiles the layers, is the same
  // for the same seed, and reaches the best simulated step of every cut
  // (brute force).
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  int improved = 0, optimal = 0, cases = 0;
  for (int c = 0; c < 60; ++c, ++cases) {
    std::vector<LayerCost> layers(8);
    for (LayerCost &l : layers) {
      l.seconds = u(rng);
      l.forwardSeconds = l.seconds * u(rng);
      l.sendSeconds = 0.05 * u(rng);
    }
    Schedule k = c % 2 ? Schedule::GPipe : Schedule::OneFOneB;
    auto exact = planStages(layers, 3, 4, k, 0);
    ASSERT_TRUE(bool(exact));
    PipelinePlan refined = refineCut(layers, *exact, 0, 400, 3);
    EXPECT_LE(refined.simulatedSeconds, exact->simulatedSeconds);
    EXPECT_EQ(refined.stages.front().first, 0);
    EXPECT_EQ(refined.stages.back().last, 8);
    for (size_t s = 1; s < refined.stages.size(); ++s)
      EXPECT_EQ(refined.stages[s].first, refined.stages[s - 1].last);
    EXPECT_EQ(refineCut(layers, *exact, 0, 400, 3).simulatedSeconds,
              refined.simulatedSeconds);
    EXPECT_EQ(refined.refinedFrom > 0,
              refined.simulatedSeconds < exact->simulatedSeconds);
    improved += refined.refinedFrom > 0;
    double best = exact->simulatedSeconds;
    for (int a = 1; a < 8; ++a)
      for (int b = a + 1; b < 8; ++b) {
        std::vector<PipelineStage> cut = {stageOf(layers, 0, a),
                                          stageOf(layers, a, b),
                                          stageOf(layers, b, 8)};
        best = std::min(best, simulatePipeline(cut, 4, k));
      }
    optimal += refined.simulatedSeconds <= best * (1 + 1e-12);
  }
  // (23 of the 60 cuts move; every one reaches the best of all cuts.)
  EXPECT_GE(improved, 10) << "the chain seldom beats the exact cut";
  EXPECT_EQ(optimal, cases);
}

TEST(PipelineTest, SimulatedSchedulesByHand) {
  // Two stages, two microbatches, forward 1, backward 2: GPipe runs
  // F0 F1 | B0 B1 on each stage, 1F1B F0 F1 B0 B1 on stage 0 (one
  // warm-up forward) and F0 B0 F1 B1 on stage 1; both end at 9.
  std::vector<PipelineStage> two{stageOf(1, 2), stageOf(1, 2)};
  EXPECT_DOUBLE_EQ(simulatePipeline(two, 2, Schedule::GPipe), 9);
  EXPECT_DOUBLE_EQ(simulatePipeline(two, 2, Schedule::OneFOneB), 9);
  // One stage: its passes back to back, then its sync.
  std::vector<PipelineStage> one{stageOf(1, 1, 0, 5)};
  EXPECT_DOUBLE_EQ(simulatePipeline(one, 3, Schedule::OneFOneB), 11);
}

TEST(PipelineTest, BalancedStagesSimulateAsTheFormula) {
  std::vector<PipelineStage> four(4, stageOf(1, 2));
  for (Schedule k : {Schedule::GPipe, Schedule::OneFOneB})
    EXPECT_DOUBLE_EQ(simulatePipeline(four, 8, k), (8 + 4 - 1) * 3.0);
  EXPECT_DOUBLE_EQ(pipelineStep(four, 8, 0), (8 + 4 - 1) * 3.0);
}

// Neither formula bounds an unbalanced pipeline from above (a stage slow
// forward and another slow backward make the fill and drain longer than
// the formula's); the simulation stays above what any schedule needs: the
// slowest stage's passes, one microbatch's trip through every stage, and
// each link's M transfers.
TEST(PipelineTest, SimulationIsAtLeastWhatEveryScheduleNeeds) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.1, 2.0);
  for (int trial = 0; trial < 200; ++trial) {
    int S = 1 + int(rng() % 6);
    int64_t m = 1 + int64_t(rng() % 12);
    std::vector<PipelineStage> stages;
    double slowest = 0, trip = 0;
    for (int s = 0; s < S; ++s) {
      stages.push_back(stageOf(u(rng), u(rng), s + 1 < S ? u(rng) / 4 : 0));
      slowest =
          std::max(slowest, stages.back().seconds - stages.back().sendSeconds);
      trip += stages.back().seconds;
    }
    for (Schedule k : {Schedule::GPipe, Schedule::OneFOneB}) {
      double sim = simulatePipeline(stages, m, k);
      EXPECT_GE(sim, double(m) * slowest - 1e-9) << "trial " << trial;
      EXPECT_GE(sim, trip - 1e-9) << "trial " << trial;
      for (const PipelineStage &st : stages) // each link, M transfers a way
        EXPECT_GE(sim, double(m) * st.sendSeconds / 2 - 1e-9);
      EXPECT_LT(sim, 1e9) << "trial " << trial; // no deadlock
    }
  }
}

TEST(PipelineTest, EachStageTakesTheFastestVariantThatFitsIt) {
  // Four layers priced under two strategies: keeping activations (1 s,
  // 4 bytes a microbatch) or recomputing them (1.3 s, 1 byte); 1 byte of
  // weights each. Under 1F1B with 2 stages the first keeps 2 microbatches
  // in flight, the second 1; 12 bytes fit the first's two layers only
  // recomputed (2 + 2 x 2), the second's as they are (2 + 8).
  LayerVariants both{{equalLayers(4, 1.0, 1, 4), equalLayers(4, 1.3, 1, 1)}};
  auto plan = planStages(both, 2, 8, Schedule::OneFOneB, 12);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_EQ(plan->stages.size(), 2u);
  EXPECT_EQ(plan->stages[0].last, 2);
  EXPECT_EQ(plan->stages[0].variant, 1);
  EXPECT_EQ(plan->stages[1].variant, 0);
  EXPECT_DOUBLE_EQ(plan->stages[0].peakBytes, 6);
  EXPECT_DOUBLE_EQ(plan->stages[1].peakBytes, 10);
  // Keeping everything fits no cut; recomputing everything fits but every
  // stage pays for it.
  EXPECT_FALSE(
      bool(planStages(both.variants[0], 2, 8, Schedule::OneFOneB, 12)));
  auto recomputed = planStages(both.variants[1], 2, 8, Schedule::OneFOneB, 12);
  ASSERT_TRUE(bool(recomputed));
  EXPECT_LT(plan->stepSeconds, recomputed->stepSeconds);
  EXPECT_LT(plan->simulatedSeconds, recomputed->simulatedSeconds);
  // Without a limit every stage keeps its activations; MCMC over the cut
  // keeps each stage's choice within the limit.
  auto free = planStages(both, 2, 8, Schedule::OneFOneB, 0);
  ASSERT_TRUE(bool(free));
  for (const PipelineStage &st : free->stages)
    EXPECT_EQ(st.variant, 0);
  PipelinePlan moved = refineCut(both, *plan, 12, 100);
  for (const PipelineStage &st : moved.stages)
    EXPECT_LE(st.peakBytes, 12);
  EXPECT_LE(moved.simulatedSeconds, plan->simulatedSeconds);
}

TEST(PipelineTest, ImpossibleShapesAreErrors) {
  auto layers = equalLayers(4, 1.0, 0, 0);
  for (auto [stages, m] : {std::pair<int64_t, int64_t>{5, 4}, {0, 4}, {2, 0}}) {
    auto plan = planStages(layers, stages, m, Schedule::GPipe, 0);
    ASSERT_FALSE(bool(plan));
    EXPECT_NE(llvm::toString(plan.takeError()).find("needs 1 to 4 stages"),
              std::string::npos);
  }
  // Three stages of four layers: two, one and one.
  auto uneven = evenStages(layers, 3, 4, Schedule::GPipe);
  ASSERT_TRUE(bool(uneven));
  EXPECT_EQ(uneven->stages[0].last, 2);
  EXPECT_EQ(uneven->stages[1].last, 3);
  EXPECT_EQ(uneven->stages[2].last, 4);
  EXPECT_EQ(parseSchedule("1f1b"), Schedule::OneFOneB);
  EXPECT_EQ(parseSchedule("gpipe"), Schedule::GPipe);
  EXPECT_FALSE(parseSchedule("zigzag").has_value());
}

} // namespace

namespace {

/// Three residual blocks x + relu(x W_k) over [4, 8], then a mean: a
/// single activation crosses each block's end, two inside a block.
constexpr const char *kBlocks = R"(module @blocks {
  param @W0 : tensor<8x8xf32> = fill(0.1)
  param @W1 : tensor<8x8xf32> = fill(0.1)
  param @W2 : tensor<8x8xf32> = fill(0.1)
  func @main(%x: tensor<4x8xf32>) -> (y: tensor<f32>) {
    %0 = compute "matmul" iter [m: 4 par, n: 8 par, k: 8 red]
        ins(%x[m, k], @W0[k, n]) outs([m, n] : tensor<4x8xf32>) {name = "b0/mm"}
    %1 = compute "relu" iter [a: 4 par, b: 8 par]
        ins(%0[a, b]) outs([a, b] : tensor<4x8xf32>) {name = "b0/relu"}
    %2 = compute "add" iter [a: 4 par, b: 8 par]
        ins(%x[a, b], %1[a, b]) outs([a, b] : tensor<4x8xf32>) {name = "b0/add"}
    %3 = compute "matmul" iter [m: 4 par, n: 8 par, k: 8 red]
        ins(%2[m, k], @W1[k, n]) outs([m, n] : tensor<4x8xf32>) {name = "b1/mm"}
    %4 = compute "relu" iter [a: 4 par, b: 8 par]
        ins(%3[a, b]) outs([a, b] : tensor<4x8xf32>) {name = "b1/relu"}
    %5 = compute "add" iter [a: 4 par, b: 8 par]
        ins(%2[a, b], %4[a, b]) outs([a, b] : tensor<4x8xf32>) {name = "b1/add"}
    %6 = compute "matmul" iter [m: 4 par, n: 8 par, k: 8 red]
        ins(%5[m, k], @W2[k, n]) outs([m, n] : tensor<4x8xf32>) {name = "b2/mm"}
    %7 = compute "relu" iter [a: 4 par, b: 8 par]
        ins(%6[a, b]) outs([a, b] : tensor<4x8xf32>) {name = "b2/relu"}
    %8 = compute "add" iter [a: 4 par, b: 8 par]
        ins(%5[a, b], %7[a, b]) outs([a, b] : tensor<4x8xf32>) {name = "b2/add"}
    %9 = compute "reduce_mean" iter [a: 4 red, b: 8 red]
        ins(%8[a, b]) outs([] : tensor<f32>) {name = "mean"}
    return %9
  }
}
)";

TEST(PipelineTest, LayersEndWhereOneActivationCrosses) {
  auto m = test::parse(kBlocks);
  ASSERT_TRUE(m);
  const Func &f = m->main;
  auto none = [](const Value *) { return false; };
  std::vector<LayerSpan> layers = findLayers(f, none);
  // Inside a block its input and its branch cross; after each add only
  // the block's output does.
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0].first, 0u);
  EXPECT_EQ(layers[0].last, 3u);
  EXPECT_EQ(layers[0].output, f.ops[2]->results[0].value.get());
  EXPECT_EQ(layers[1].last, 6u);
  EXPECT_EQ(layers[2].last, 9u);
  EXPECT_EQ(layers[3].last, 10u);
  EXPECT_EQ(layers[3].output, nullptr);
  // At most two: the four runs merged evenly.
  std::vector<LayerSpan> two = findLayers(f, none, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].last, 6u);
  EXPECT_EQ(two[1].first, 6u);
  EXPECT_EQ(two[1].last, 10u);
}

} // namespace
