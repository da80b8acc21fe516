//===- Session.h - A plan run or trained in this process --------*- C++ -*-===//
//
// paxrun's run and --train for other programs: a plan's devices made once
// (one thread each), its inputs fed by name and checked against the plan,
// its outputs returned by name; a training plan's steps one call each,
// the weights and optimizer state staying on the devices between them
// (a step brings the loss alone to the host; the updated weights are
// gathered from the devices' blocks when saved or run).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pax::driver {

/// An element type as numpy names it (`float32`, `int64`, `bool`).
std::string dtypeName(plan::DType dtype);

/// Tensors by name: a run's feeds or its outputs.
using NamedTensors = std::vector<std::pair<std::string, runtime::Tensor>>;

struct SessionOptions {
  /// A runtime backend (paxrun --backend): cpu, cuda, ...
  std::string backend = "cpu";
  /// How the plan's devices run: threads of this process (MPI runs go
  /// through paxrun under mpirun).
  std::string devices = "threads";
  /// Fused kernels' chains run as one (paxrun --fuse-kernels).
  bool fuseKernels = true;
};

class Session {
public:
  /// A session of \p plan, checked whole, its devices made; an error where
  /// the plan, its model or a device cannot be had.
  static llvm::Expected<std::unique_ptr<Session>>
  open(plan::Plan plan, const SessionOptions &options = {});
  ~Session();

  const plan::Plan &plan() const;
  /// The plan's outputs for \p feeds (every input of the plan by name, in
  /// its element type and shape; weights the model takes as graph inputs
  /// too): the weights trained so far.
  llvm::Expected<NamedTensors> run(const NamedTensors &feeds);
  /// A training plan's step on \p feeds (its data and labels): the loss.
  llvm::Expected<double> trainStep(const NamedTensors &feeds);
  /// Training steps taken (from a loaded checkpoint's on).
  unsigned step() const;
  /// The plan's model with its trained weights, as paxrun --save writes
  /// (gathered from the devices that own them).
  llvm::Error saveModel(const std::string &path);
  /// The weights and optimizer state and the step, as paxrun --checkpoint
  /// writes (after a step).
  llvm::Error saveCheckpoint(const std::string &dir);
  /// Continues from a checkpoint of the same plan (paxrun --resume).
  llvm::Error loadCheckpoint(const std::string &dir);

private:
  class State;
  explicit Session(std::unique_ptr<State> state);
  std::unique_ptr<State> state;
};

} // namespace pax::driver
