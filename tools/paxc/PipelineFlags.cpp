//===- PipelineFlags.cpp - paxc's pipeline options ------------------------===//
#include "tools/paxc/PipelineFlags.h"

#include "passes/sharding/Stages.h"

#include "llvm/Support/FormatVariadic.h"

namespace cl = llvm::cl;
using pax::paxc::searchCategory;

cl::OptionCategory pax::paxc::searchCategory("paxc sharding options");

static cl::opt<std::string> pipelineFlag(
    "pipeline",
    cl::desc("Training: pipeline stages (Alpa's inter-op pass on uniform "
             "submeshes): auto (the best of every stage count that divides "
             "the GPUs), N stages, or off; the report and strategy JSON show "
             "the best pipeline against the step without stages, and a "
             "training plan (--loss) runs it"),
    cl::value_desc("off|auto|N"), cl::init("off"), cl::cat(searchCategory));
static cl::opt<std::string> scheduleFlag(
    "schedule",
    cl::desc("With --pipeline: the microbatch schedule, 1f1b (each stage "
             "keeps at most its distance to the end in flight), gpipe (every "
             "microbatch's forward first), interleaved (Megatron's 1F1B over "
             "--chunks chunks of layers per stage: a shorter fill and drain, "
             "more sends; microbatches a multiple of the stages) or auto "
             "(each that applies)"),
    cl::value_desc("auto|1f1b|gpipe|interleaved"), cl::init("auto"),
    cl::cat(searchCategory));

static cl::opt<std::string> chunksFlag(
    "chunks",
    cl::desc("With --pipeline and the interleaved schedule: the chunks of "
             "layers each stage's devices run (Megatron's virtual pipeline "
             "size): V (at least 2) or auto (each from 2 to 8 that the "
             "layers allow)"),
    cl::value_desc("auto|V"), cl::init("auto"), cl::cat(searchCategory));

namespace pax::paxc {

/// --chunks into \p p (after --schedule).
static llvm::Error chunksFromFlags(PipelineOptions &p) {
  if (chunksFlag == "auto")
    return llvm::Error::success();
  if (llvm::StringRef(chunksFlag).getAsInteger(10, p.chunks) || p.chunks < 2)
    return llvm::createStringError("--chunks=" + chunksFlag +
                                   ": expected auto or a count of at least 2");
  if (p.schedule && *p.schedule != Schedule::Interleaved)
    return llvm::createStringError("--chunks=" + chunksFlag +
                                   ": chunks are the interleaved schedule's, "
                                   "not --schedule=" +
                                   scheduleFlag);
  return llvm::Error::success();
}

bool pipelineOff() { return pipelineFlag == "off"; }

llvm::Error checkPipelineFlagsUsed() {
  if (!pipelineOff())
    return llvm::Error::success();
  for (const cl::Option *o : {static_cast<const cl::Option *>(&scheduleFlag),
                              static_cast<const cl::Option *>(&chunksFlag)})
    if (o->getNumOccurrences())
      return llvm::createStringError("--" + o->ArgStr +
                                     " applies to a pipeline: give --pipeline");
  return llvm::Error::success();
}

bool pipelineAuto() { return pipelineFlag == "auto"; }

llvm::Error checkPipelineFlagValues() {
  // (The options' parse, whose messages are the checks'.)
  auto p = pipelineOptionsFromFlags(0);
  return p ? llvm::Error::success() : p.takeError();
}

llvm::Expected<std::optional<int64_t>> pipelineStages() {
  int64_t stages = 0;
  if (pipelineOff() || pipelineAuto())
    return std::nullopt;
  if (llvm::StringRef(pipelineFlag).getAsInteger(10, stages) || stages < 1)
    return llvm::createStringError("--pipeline=" + pipelineFlag +
                                   ": expected off, auto or a stage count");
  return stages;
}

llvm::Expected<Cluster> probedStage(const Cluster &cluster) {
  auto stages = pipelineStages();
  if (!stages)
    return stages.takeError();
  if (pipelineAuto())
    return llvm::createStringError(
        "--emit=cost-probe probes one stage's blocks: give --pipeline the "
        "stage count, not auto");
  if (!*stages)
    return cluster;
  if (**stages > int64_t(cluster.gpus) || cluster.gpus % **stages)
    return llvm::createStringError(
        llvm::formatv("--pipeline={0}: the stages must divide the {1} devices",
                      **stages, cluster.gpus));
  return subCluster(cluster, int64_t(cluster.gpus) / **stages);
}

llvm::Expected<PipelineOptions> pipelineOptionsFromFlags(int64_t microbatches) {
  PipelineOptions p;
  auto stages = pipelineStages();
  if (!stages)
    return stages.takeError();
  p.stages = stages->value_or(0);
  if (scheduleFlag != "auto") {
    p.schedule = parseSchedule(scheduleFlag);
    if (!p.schedule)
      return llvm::createStringError("--schedule=" + scheduleFlag +
                                     ": expected auto, 1f1b, gpipe or "
                                     "interleaved");
  }
  if (auto err = chunksFromFlags(p))
    return err;
  p.microbatches = microbatches;
  return p;
}

llvm::Expected<PipelineChoice> chosenPipeline(const PipelineSearchResult &r) {
  if (r.best)
    return *r.best;
  std::string why;
  for (const std::string &line : r.tried)
    why += "\n  " + line;
  return llvm::createStringError("--pipeline=" + pipelineFlag +
                                 ": no pipeline fits the devices" + why);
}

llvm::Error placePipeline(Module &m, const PipelineChoice &c) {
  placeStages(m.main, c.stageDevices, c.plan.ranks());
  return orderStages(m.main, int64_t(c.plan.stages.size()), c.plan.microbatches,
                     c.plan.schedule, c.plan.chunks);
}

plan::Pipeline pipelineRecord(const PipelineChoice &c) {
  plan::Pipeline p;
  p.set_stages(uint32_t(c.plan.ranks()));
  p.set_chunks(uint32_t(c.plan.chunks));
  p.set_stage_devices(uint32_t(c.stageDevices));
  p.set_microbatches(c.plan.microbatches);
  p.set_schedule(scheduleName(c.plan.schedule).str());
  return p;
}

} // namespace pax::paxc
