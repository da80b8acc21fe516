//===- Training.h - paxrun --train: training sessions -----------*- C++ -*-===//
//
// Runs a training plan (paxc --mode=train with a loss) step after step:
// every output `update/NAME` is NAME's weight at the next step; writes
// checkpoints (the updated tensors, the next step and a fingerprint of the
// plan), resumes from them bit-identically, and saves the source model
// with its trained initializers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/paxrun/Feed.h"

#include "codegen/plan/Plan.pb.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace pax::runtime {
class MpiWorld;
} // namespace pax::runtime

namespace pax {

struct TrainingOptions {
  unsigned steps = 1;
  /// input_K.pb files used every step, or folders step_0, step_1, ...
  std::string dataDir;
  std::string savePath, checkpointDir, resumeDir;
  /// Checkpoint every this many steps (0: at the end only).
  unsigned every = 0;
  /// Whether this process prints, checkpoints and saves (rank 0 under MPI).
  bool reports = true;
  /// Called before and after each step's run (--time, --profile), with the
  /// step's number as `step K: loss X` prints it.
  std::function<void(unsigned step)> beforeStep, afterStep;
  /// Writes the sharded checkpoint that resumes at \p nextStep into DIR
  /// (called on every process: each writes its devices' blocks).
  std::function<llvm::Error(const std::string &dir, unsigned nextStep)>
      checkpoint;
};

/// Whether a training step brings output \p name to the host every step
/// (the loss, and the loss scale paxrun reports skipped steps by), not only
/// with the updates.
bool gatheredEveryStep(llvm::StringRef name);

/// A training plan's updates: each output `update/NAME` after the loss, by
/// output index and weight name; an error (\p who needs a training plan)
/// for any other plan.
llvm::Expected<std::vector<std::pair<int, std::string>>>
trainingUpdates(const plan::Plan &plan, llvm::StringRef who);

/// Writes \p source with its initializers replaced by \p feed's updated
/// values (same names, shapes and types) to \p path.
llvm::Error saveModel(const std::string &path, const onnx::ModelProto &source,
                      const Feed &feed);

/// Runs one step on this process's devices, filling the loss and, when
/// asked (\p updates: a checkpoint is due, or the last step), the updates;
/// otherwise the devices keep the updated blocks and nothing else of them
/// leaves the devices.
using StepRunner =
    std::function<llvm::Error(std::vector<runtime::Tensor> &, bool updates)>;

/// The training session. \p loadInputs reads the graph inputs of a data
/// folder for the next step. Prints `step K: loss X` per step.
llvm::Error
runTraining(const plan::Plan &plan, Feed &feed, const onnx::ModelProto &model,
            const TrainingOptions &options,
            llvm::function_ref<llvm::Error(const std::string &dir)> loadInputs,
            StepRunner runStep, std::vector<runtime::Tensor> &outputs);

/// Writes this process's shards of the checkpoint resuming at \p next into
/// \p dir (each device's own blocks, kept in \p resident), and once every
/// process has (under MPI, rank 0 learns it), commits it.
llvm::Error writeShards(const plan::Plan &plan,
                        llvm::ArrayRef<const plan::DeviceProgram *> progs,
                        const std::vector<ResidentFeed> &resident,
                        runtime::MpiWorld *world, const std::string &dir,
                        unsigned next);

} // namespace pax
