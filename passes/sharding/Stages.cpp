//===- Stages.cpp - A pipelined plan's stages, placed and ordered ---------===//
#include "passes/sharding/Stages.h"

#include "ir/Module.h"
#include "ir/Order.h"
#include "passes/sharding/Simulator.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>

namespace pax {

void markStages(Func &f, llvm::ArrayRef<LayerSpan> layers,
                llvm::ArrayRef<PipelineStage> stages) {
  for (size_t s = 0; s < stages.size(); ++s)
    for (int l = stages[s].first; l < stages[s].last; ++l)
      for (size_t i = layers[size_t(l)].first;
           i < layers[size_t(l)].last && i < f.ops.size(); ++i)
        f.ops[i]->attrs["stage"] = int64_t(s);
}

void markForward(Func &f) {
  for (auto &op : f.ops)
    op->attrs["forward"] = int64_t(1);
}

/// Each op's stage: its own, else the latest of the ops it reads, else the
/// first of the ops that read it, else the first.
static std::vector<int64_t> stagesOf(const Func &f) {
  size_t n = f.ops.size();
  auto producers = producersOf(f);
  std::vector<int64_t> stage(n, -1);
  for (size_t i = 0; i < n; ++i) {
    stage[i] = f.ops[i]->intAttr("stage", -1);
    if (stage[i] < 0)
      for (size_t p : producers[i])
        stage[i] = std::max(stage[i], stage[p]);
  }
  // Readers come later in program order: the last op first.
  std::vector<int64_t> firstReader(n, std::numeric_limits<int64_t>::max());
  for (size_t i = n; i-- > 0;) {
    if (stage[i] < 0)
      stage[i] = firstReader[i] == std::numeric_limits<int64_t>::max()
                     ? 0
                     : firstReader[i];
    for (size_t p : producers[i])
      firstReader[p] = std::min(firstReader[p], stage[i]);
  }
  return stage;
}

void placeStages(Func &f, int64_t stageDevices, int64_t ranks) {
  std::vector<int64_t> stage = stagesOf(f);
  for (size_t i = 0; i < f.ops.size(); ++i) {
    f.ops[i]->attrs["stage"] = stage[i];
    f.ops[i]->attrs["offset"] = stage[i] % ranks * stageDevices;
  }
}

llvm::Error orderStages(Func &f, int64_t stages, int64_t microbatches,
                        Schedule k, int64_t chunks) {
  // The schedule's passes timed with a forward of 1 and a backward of 2,
  // transfers free: the order of their starts.
  PipelineStage unit;
  unit.forwardSeconds = 1;
  unit.seconds = 3;
  std::vector<PipelineStage> unitStages(size_t(stages), unit);
  PassTimes t = simulatePasses(unitStages, microbatches, k, chunks);
  auto producers = producersOf(f);
  std::vector<double> key(f.ops.size(), 0);
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op &op = *f.ops[i];
    int64_t s = op.intAttr("stage", 0), mb = op.intAttr("microbatch", -1);
    if (s < 0 || s >= stages || mb >= microbatches)
      return llvm::createStringError(llvm::formatv(
          "op '{0}': stage {1} and microbatch {2} are outside the "
          "pipeline's {3} stages and {4} microbatches",
          op.name(), s, mb, stages, microbatches));
    bool forward = op.attrs.count("forward") && !op.attrs.count("recomputed");
    if (mb >= 0) {
      key[i] =
          (forward ? t.forward : t.backward)[size_t(s * microbatches + mb)];
      continue;
    }
    // No microbatch of its own (a gradient's sum, an update): as soon as
    // what it reads is there.
    for (size_t p : producers[i])
      key[i] = std::max(key[i], key[p]);
  }
  orderByKey(f, key);
  return llvm::Error::success();
}

double simulatePlacedStep(const Module &m, const Cluster &cluster,
                          llvm::ArrayRef<Config> configs) {
  std::vector<int64_t> offsets;
  for (const auto &op : m.main.ops)
    offsets.push_back(op->intAttr("offset", 0));
  CostModel model(cluster, CostMode::Infer);
  SimOptions so;
  so.delta = false;
  return Simulator(m, model, so).simulate(configs, offsets);
}

} // namespace pax
