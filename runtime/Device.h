//===- Device.h - One device's program on a backend's device ------------===//
#ifndef PAX_RUNTIME_DEVICE_H
#define PAX_RUNTIME_DEVICE_H

#include "runtime/Backend.h"
#include "runtime/Communicator.h"

#include <map>
#include <string>
#include <vector>

namespace pax::runtime {

/// Where a device's weights and inputs come from: the tool that runs a
/// plan knows the source model and the input files.
class DataFeed {
public:
  virtual ~DataFeed() = default;
  /// Fills \p out, the box of the weight starting at `load.offset`: every
  /// element of it that lies inside the weight (the device does not zero
  /// a buffer such a load fills whole).
  virtual llvm::Error loadWeight(const plan::LoadWeight &load, Tensor &out) = 0;
  /// Fills \p out, the box of graph input `b.index` starting at `b.offset`.
  virtual llvm::Error input(const plan::Binding &b, Tensor &out) = 0;
};

/// One instruction as it ran on a device (RunOptions::trace): seconds
/// since the process's first traced instruction.
struct TraceEvent {
  std::string name;
  const char *category = "compute"; ///< compute, collective, load, slice
  double start = 0, end = 0;
  /// The instructions it stands for: more than one for computes that ran
  /// fused as one kernel (Device::launchChain).
  int instructions = 1;
};

/// What one device did.
struct DeviceStats {
  /// Per exchange: the bytes this device counted (Exchange.h).
  std::map<uint32_t, int64_t> exchangeBytes;
  /// Most bytes of buffers alive at once (persistent ones, the weights a
  /// repeated run keeps, from the start).
  int64_t peakBytes = 0;
  /// The arena the buffers lived in (the program's planned peak).
  int64_t arenaBytes = 0;
  int64_t instructions = 0;
  /// Weight loads not run: the buffer carried the update of the step
  /// before (RunOptions::carryWeights).
  int64_t carriedLoads = 0;
  /// Wall seconds of the program, where the caller timed it (an MPI rank).
  double seconds = 0;
  /// Its instructions' times, with RunOptions::trace.
  std::vector<TraceEvent> trace;
};

/// How runDevice treats what the device's previous run left.
/// A block a device keeps past its program's arena from one run to the
/// next (RunOptions::keptBlocks): a decoding loop's fed-back cache, the
/// block one output binding computes being the block an input binding of
/// the next run reads, on the same device, in the same layout.
struct KeptBlock {
  /// Index into DeviceProgram.outputs: its buffer is copied into the block
  /// at the end of every run.
  uint32_t output = 0;
  /// Index into DeviceProgram.inputs: under RunOptions::keptInputs its
  /// buffer is copied from the block instead of fed from the host.
  uint32_t input = 0;
  /// Where the block lies: an arena offset at or past the program's
  /// arena_bytes (the device reserves the arena that far).
  int64_t offset = 0;
};

struct RunOptions {
  /// The device's previous run was this program, with the same constant
  /// weights: weight buffers are persistent (at fixed offsets, alive for
  /// the whole program, in an arena kept from run to run), so the weights
  /// loaded from initializers, external data and fills are still there and
  /// are not loaded (nor zero-filled) again. Graph inputs that are weights
  /// are loaded every run. Repeated inference runs; never a training step,
  /// whose weights change.
  bool weightsResident = false;
  /// The device's previous run was this training step's program, in the
  /// same session: the program's carried buffers (DeviceProgram.carried,
  /// persistent) hold the weights that run updated, so they are not
  /// loaded (nor zero-filled) again. Unlike weightsResident, the values
  /// changed: kernels keep nothing derived from them between runs.
  bool carryWeights = false;
  /// Runs the chains of computes the device fuses (Device::fuses) as one
  /// kernel each; false: every compute on its own.
  bool fuseChains = true;
  /// Records each instruction's start and end (DeviceStats::trace); a
  /// device whose work is asynchronous is synchronized after each.
  bool trace = false;
  /// Outputs the run leaves on the devices instead of gathering them (by
  /// output index; empty: gather all): a training step's updates, which
  /// the devices keep, between checkpoints.
  std::vector<bool> leaveOutputs;
  bool gathers(uint32_t output) const {
    return output >= leaveOutputs.size() || !leaveOutputs[output];
  }
  /// The blocks each device (by DeviceProgram.device) keeps past its arena
  /// between runs, written at every run's end.
  std::map<uint32_t, std::vector<KeptBlock>> keptBlocks;
  /// The kept blocks hold the previous run's outputs: the input bindings
  /// they name are read from them, not from the feed.
  bool keptInputs = false;
};

/// Runs \p prog, a program of \p plan, on \p device: each buffer is the
/// device's buffer at its planned offset of an arena of the program's
/// `arena_bytes` (zero-filled when first written), dropped after its last
/// use except the output bindings', which \p buffers keeps (indexed by
/// buffer id; valid until the device's next run). A buffer outside the
/// arena is an error. Weights and inputs are staged through host tensors
/// where the device's memory is not the host's. \p comm may be null for a
/// program without collectives.
llvm::Error runDevice(const plan::Plan &plan, const plan::DeviceProgram &prog,
                      DataFeed &feed, Communicator *comm, Device &device,
                      std::vector<Tensor> &buffers, DeviceStats &stats,
                      const RunOptions &options = {});

} // namespace pax::runtime

#endif // PAX_RUNTIME_DEVICE_H
