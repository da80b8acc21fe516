//===- Training.cpp - paxrun --train: training sessions -------------------===//
#include "tools/paxrun/Training.h"

#ifdef PAX_HAVE_MPI
#include "runtime/mpi/MpiWorld.h"
#endif

#include "tools/common/Checkpoint.h"

#include "frontend/TensorProto.h"
#include "passes/autodiff/Optimizer.h"
#include "tools/common/TensorFiles.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <fstream>

namespace pax {

/// Writes the source model with its initializers replaced by \p feed's
/// updated values (same names, shapes and types).
llvm::Error saveModel(const std::string &path, const onnx::ModelProto &source,
                      const Feed &feed) {
  onnx::ModelProto model = source;
  for (onnx::TensorProto &init :
       *model.mutable_graph()->mutable_initializer()) {
    auto it = feed.updated().find(init.name());
    if (it == feed.updated().end())
      continue;
    onnx::TensorProto t = toTensorProto(init.name(), it->second);
    if (t.data_type() != init.data_type())
      return llvm::createStringError("weight '" + init.name() +
                                     "' changed its element type");
    init = t;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out))
    return llvm::createStringError("cannot write '" + path + "'");
  return llvm::Error::success();
}

/// Whether output \p name is the loss scale's update (paxc --loss-scale).
static bool isLossScaleUpdate(llvm::StringRef name) {
  return name.consume_front("update/") && name == kLossScaleName;
}

bool gatheredEveryStep(llvm::StringRef name) {
  return name == "loss" || isLossScaleUpdate(name);
}

namespace {
/// A step that scales its loss (paxc --loss-scale): its next scale, an
/// output; a scale lower than the step's own marks a skipped step.
class LossScaleWatch {
public:
  explicit LossScaleWatch(const plan::Plan &plan) {
    for (int i = 0; i < plan.outputs_size(); ++i)
      if (isLossScaleUpdate(plan.outputs(i).name()))
        index = i;
    // The first scale: the state's fill, where the step starts from it.
    for (const plan::DeviceProgram &p : plan.programs())
      for (const plan::Instruction &inst : p.instructions())
        if (inst.has_load() && inst.load().tensor() == kLossScaleName &&
            inst.load().source() == plan::LoadWeight::FILL)
          last = inst.load().fill();
  }
  /// What `step K: loss X` adds after a step with \p outputs.
  std::string note(const std::vector<runtime::Tensor> &outputs, bool resumed) {
    if (index < 0 || size_t(index) >= outputs.size() ||
        outputs[size_t(index)].numel() != 1)
      return "";
    double next = outputs[size_t(index)].real(0);
    bool skipped = !resumed && next < last;
    last = next;
    if (!skipped)
      return "";
    std::string text;
    llvm::raw_string_ostream(text) << llvm::format(
        " (skipped: inf or NaN gradients; loss scale now %g)", next);
    return text;
  }

private:
  int index = -1;
  double last = 0;
};
} // namespace

llvm::Expected<std::vector<std::pair<int, std::string>>>
trainingUpdates(const plan::Plan &plan, llvm::StringRef who) {
  if (plan.outputs_size() < 2 || plan.outputs(0).name() != "loss")
    return llvm::createStringError(
        who + " needs a training plan: the loss first, then the updates "
              "(paxc MODEL --mode=train --loss=... -o PLAN)");
  std::vector<std::pair<int, std::string>> updates;
  for (int i = 1; i < plan.outputs_size(); ++i) {
    llvm::StringRef name = plan.outputs(i).name();
    if (!name.consume_front("update/"))
      return llvm::createStringError("output '" + plan.outputs(i).name() +
                                     "' of a training plan is not an update");
    updates.push_back({i, name.str()});
  }
  return updates;
}

llvm::Error
runTraining(const plan::Plan &plan, Feed &feed, const onnx::ModelProto &model,
            const TrainingOptions &o,
            llvm::function_ref<llvm::Error(const std::string &dir)> loadInputs,
            StepRunner runStep, std::vector<runtime::Tensor> &outputs) {
  auto found = trainingUpdates(plan, "--train");
  if (!found)
    return found.takeError();
  const std::vector<std::pair<int, std::string>> &updates = *found;
  unsigned first = 0;
  if (!o.resumeDir.empty()) {
    auto reader = CheckpointReader::open(o.resumeDir, plan);
    if (!reader)
      return reader.takeError();
    first = (*reader)->step();
    feed.resumeFrom(std::move(*reader));
  }
  // step_0, step_1, ... in turn, or the one folder every step.
  unsigned folders = 0;
  while (llvm::sys::fs::exists(o.dataDir + "/step_" + std::to_string(folders)))
    ++folders;
  LossScaleWatch scale(plan);
  for (unsigned step = first; step < o.steps; ++step) {
    std::string dir =
        folders ? o.dataDir + "/step_" + std::to_string(step % folders)
                : o.dataDir;
    if (auto err = loadInputs(dir))
      return err;
    if (o.beforeStep)
      o.beforeStep(step);
    bool last = step + 1 == o.steps;
    bool checkpoint = !o.checkpointDir.empty() &&
                      (last || (o.every > 0 && (step + 1) % o.every == 0));
    if (auto err = runStep(outputs, last))
      return err;
    if (o.afterStep)
      o.afterStep(step);
    if (o.reports)
      llvm::outs() << llvm::formatv(
          "step {0}: loss {1:F6}{2}\n", step, outputs[0].real(0),
          scale.note(outputs, /*resumed=*/step == first && first > 0));
    if (checkpoint && o.checkpoint)
      if (auto err = o.checkpoint(o.checkpointDir, step + 1))
        return err;
    if (o.reports && last)
      for (auto &[index, name] : updates)
        feed.set(name, outputs[size_t(index)]);
  }
  if (o.reports && !o.savePath.empty())
    if (auto err = saveModel(o.savePath, model, feed))
      return err;
  return llvm::Error::success();
}

/// Writes this process's shards of the checkpoint resuming at \p next into
/// \p dir (each device's own blocks, kept in \p resident), and once every
/// process has (under MPI, rank 0 learns it), commits it.
llvm::Error writeShards(const plan::Plan &plan,
                        llvm::ArrayRef<const plan::DeviceProgram *> progs,
                        const std::vector<ResidentFeed> &resident,
                        runtime::MpiWorld *world, const std::string &dir,
                        unsigned next) {
  llvm::Error err = llvm::Error::success();
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    err =
        llvm::createStringError("cannot create '" + dir + "': " + ec.message());
    // Under MPI this process runs one device: its rank's, kept in the first
    // feed.
#ifdef PAX_HAVE_MPI
  int rank = world ? world->rank() : -1;
#else
  int rank = -1;
#endif
  size_t local = rank >= 0 ? 1 : progs.size();
  for (size_t d = 0; d < local && !err; ++d) {
    unsigned device = rank >= 0 ? unsigned(rank) : progs[d]->device();
    err = writeCheckpointShard(dir, next, device, resident[d].ownedBlocks());
  }
  std::string why = err ? llvm::toString(std::move(err)) : "";
#ifdef PAX_HAVE_MPI
  if (world) {
    // Rank 0 commits once every rank's shard is written, and every rank
    // learns whether it did.
    auto all =
        world->gatherOnRoot(std::vector<uint8_t>(why.begin(), why.end()));
    if (!all)
      return all.takeError();
    for (const auto &bytes : *all)
      if (why.empty() && !bytes.empty())
        why.assign(bytes.begin(), bytes.end());
    if (world->rank() == 0 && why.empty())
      if (auto e = commitCheckpoint(dir, plan, next, plan.devices()))
        why = llvm::toString(std::move(e));
    std::vector<uint8_t> verdict(why.begin(), why.end());
    if (auto e = world->broadcastFromRoot(verdict))
      return e;
    why.assign(verdict.begin(), verdict.end());
    return why.empty() ? llvm::Error::success() : llvm::createStringError(why);
  }
#else
  (void)world;
#endif
  if (why.empty())
    if (auto e = commitCheckpoint(dir, plan, next, plan.devices()))
      why = llvm::toString(std::move(e));
  return why.empty() ? llvm::Error::success() : llvm::createStringError(why);
}

} // namespace pax
