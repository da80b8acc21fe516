//===- Run.h - A plan's programs run as threads of one process --*- C++ -*-===//
//
// The orchestration the tools share: every program of a plan on a device
// of this process, each in a thread, the outputs gathered from their
// owners' blocks and every replica checked against them.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_RUN_H
#define PAX_RUNTIME_RUN_H

#include "runtime/Backend.h"
#include "runtime/Device.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>
#include <vector>

namespace pax::runtime {

/// This process's devices and the buffers each one's last run left (its
/// output bindings'), valid until that device runs again.
struct DeviceSet {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::vector<Tensor>> buffers;
};

/// Grows \p set to \p n devices of backend \p b (GPU ordinals from
/// \p first on), each with its buffers.
llvm::Error addDevices(Backend b, size_t n, unsigned first, DeviceSet &set);

struct ThreadRunOptions : RunOptions {
  /// Testing: flip the lowest bit of this device's first replica of an
  /// output before the replicas are compared (-1: none).
  int injectReplicaFault = -1;
  /// False: leave the outputs on the devices and \p outputs empty (a timed
  /// run whose outputs the next run overwrites; the devices are still
  /// synchronized at the run's end).
  bool gatherOutputs = true;
};

/// Runs \p progs of \p plan, program d on `set.devices[d]` in a thread of
/// its own with `feedOf(d)` and the threads' communicator. A device that
/// fails stops the others; the first device's own error is returned. Fills
/// \p outputs (whole tensors on the host, from the owners' blocks) and
/// \p stats, and checks that every other copy of an output block equals
/// the owner's bit for bit (one update per parameter).
llvm::Error runThreads(const plan::Plan &plan,
                       llvm::ArrayRef<const plan::DeviceProgram *> progs,
                       DeviceSet &set,
                       llvm::function_ref<DataFeed &(size_t)> feedOf,
                       std::vector<Tensor> &outputs,
                       std::vector<DeviceStats> &stats,
                       const ThreadRunOptions &options = {});

/// Buffer \p b of \p device on the host: itself where the device's memory
/// is the host's, else a downloaded copy.
llvm::Expected<Tensor> hostCopy(Device &device, const Tensor &b);

} // namespace pax::runtime

#endif // PAX_RUNTIME_RUN_H
