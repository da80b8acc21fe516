//===- Feed.h - Weights and inputs for paxrun's devices ---------*- C++ -*-===//
//
// The data every device of the process reads: weight blocks from the model
// the plan names (initializers, external data, weights fed as inputs,
// fills and dense values) and the whole graph inputs. A training session
// replaces weights by their updated values (set()).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Device.h"
#include "runtime/Tensor.h"
#include "tools/common/Checkpoint.h"

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace pax {

/// A plan's repeated dims (a shape, an offset) as a vector.
inline std::vector<int64_t>
shapeOf(const google::protobuf::RepeatedField<int64_t> &s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

/// The graph inputs of ONNX's test-data layout: those without an
/// initializer, in graph order (input_0 is the first of them).
std::vector<std::string> dataInputs(const onnx::ModelProto &model);

/// Reads the ONNX model \p plan names (binary, or text for names ending in
/// "txt") into \p model; false where it cannot.
bool readSourceModel(const plan::Plan &plan, onnx::ModelProto &model);

/// Weights from the source model and the whole graph inputs, shared by
/// every device of the process; each device copies out its box.
class Feed : public runtime::DataFeed {
public:
  /// Reads a weight the model takes as a graph input (no initializer).
  using InputWeight = std::function<llvm::Expected<runtime::Tensor>(
      const plan::LoadWeight &, plan::DType)>;

  Feed(const onnx::ModelProto &model, std::string modelDir,
       const std::vector<runtime::Tensor> &inputs, InputWeight inputWeight)
      : model(model), modelDir(std::move(modelDir)), inputs(inputs),
        inputWeight(std::move(inputWeight)) {}

  /// From now on, weight \p name (any source) has the values of \p t: a
  /// training step's update.
  void set(const std::string &name, runtime::Tensor t) {
    std::lock_guard<std::mutex> lock(m);
    overrides[name] = std::move(t);
  }
  const std::map<std::string, runtime::Tensor> &updated() const {
    return overrides;
  }
  /// Forgets every set() value (a checkpoint's values replace them).
  void clearUpdates() {
    std::lock_guard<std::mutex> lock(m);
    overrides.clear();
  }
  /// Forgets the whole tensor \p name read before (a weight fed as a
  /// graph input, whose next run feeds another).
  void forget(const std::string &name) {
    std::lock_guard<std::mutex> lock(m);
    cache.erase(name);
  }
  /// From now on, the weights \p checkpoint holds load from it (unless
  /// set() gives them other values).
  void resumeFrom(std::unique_ptr<CheckpointReader> checkpoint) {
    resumed = std::move(checkpoint);
  }

  llvm::Error loadWeight(const plan::LoadWeight &load,
                         runtime::Tensor &out) override;
  llvm::Error input(const plan::Binding &b, runtime::Tensor &out) override;

private:
  /// The whole initializer, read once for all devices.
  llvm::Expected<const runtime::Tensor *>
  initializer(const plan::LoadWeight &load, plan::DType dtype);

  const onnx::ModelProto &model;
  std::string modelDir;
  const std::vector<runtime::Tensor> &inputs;
  InputWeight inputWeight;
  std::mutex m;
  std::map<std::string, runtime::Tensor> cache, overrides;
  std::unique_ptr<CheckpointReader> resumed;
};

/// One device's view of the weights during a training session: the blocks
/// of each updated weight (output `update/NAME`) the device itself computed
/// at the last step stay on it, and a load of NAME that one of them covers
/// is served from it; any other load falls through to the shared Feed (the
/// host's gathered copy). So weights and optimizer state persist on the
/// devices that own their shards, and the host copy only backs loads in
/// another layout, checkpoints and --save.
class ResidentFeed : public runtime::DataFeed {
public:
  explicit ResidentFeed(Feed &host) : host(&host) {}

  /// Keeps \p block, the box of weight \p name starting at \p lo (\p owner:
  /// the one copy of that box a checkpoint writes); blocks kept before this
  /// step are dropped by beginStep().
  void keep(const std::string &name, std::vector<int64_t> lo,
            runtime::Tensor block, bool owner);
  /// The blocks this device owns, for a sharded checkpoint.
  std::vector<const TensorBlock *> ownedBlocks() const;
  /// Forgets the blocks kept before (called before keeping a step's).
  void beginStep() { blocks.clear(); }

  llvm::Error loadWeight(const plan::LoadWeight &load,
                         runtime::Tensor &out) override;
  llvm::Error input(const plan::Binding &b, runtime::Tensor &out) override {
    return host->input(b, out);
  }

  /// Whether the host's copies of the updated tensors are this step's
  /// (gathered at the last step's end); a stray load from a stale copy is
  /// an error, never old values.
  bool hostCurrent = true;

  /// Notes that the plan updates \p name: from the next step on, a load of
  /// it that the device's own blocks do not serve is counted stray.
  void updated(const std::string &name) { updatedNames.insert(name); }

  /// Loads served from the device's own blocks, and from the host; of
  /// those from the host, loads of an updated tensor after the first step
  /// (blocks the device does not keep: the host's gathered copy).
  int64_t residentLoads = 0, hostLoads = 0, strayLoads = 0;
  /// Loads the device did not run: the buffer carried the update of the
  /// step before (DeviceProgram.carried).
  int64_t carriedLoads = 0;

private:
  struct Block {
    TensorBlock b;
    bool owner;
  };
  Feed *host;
  std::map<std::string, std::vector<Block>> blocks;
  std::set<std::string> updatedNames;
};

/// Keeps, on \p resident, the blocks of the updated weights (outputs
/// `update/NAME`) that \p prog's device computed into \p buffers: on a
/// host arena, a view of the carried buffer that holds a block from step
/// to step (valid while the session's arena stays), else moved off it;
/// downloaded off a GPU's.
llvm::Error keepUpdates(const plan::Plan &plan, const plan::DeviceProgram &prog,
                        runtime::Device &device,
                        std::vector<runtime::Tensor> &buffers,
                        ResidentFeed &resident);

} // namespace pax
