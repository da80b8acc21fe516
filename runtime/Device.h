//===- Device.h - One device's program on the CPU -------------------------===//
#ifndef PAX_RUNTIME_DEVICE_H
#define PAX_RUNTIME_DEVICE_H

#include "runtime/Communicator.h"

#include <map>

namespace pax::runtime {

/// Where a device's weights and inputs come from: the tool that runs a
/// plan knows the source model and the input files.
class DataFeed {
public:
  virtual ~DataFeed() = default;
  /// Fills \p out, the box of the weight starting at `load.offset`.
  virtual llvm::Error loadWeight(const plan::LoadWeight &load,
                                 Tensor &out) = 0;
  /// Fills \p out, the box of graph input `b.index` starting at `b.offset`.
  virtual llvm::Error input(const plan::Binding &b, Tensor &out) = 0;
};

/// What one device did.
struct DeviceStats {
  /// Per exchange: the bytes this device counted (Exchange.h).
  std::map<uint32_t, int64_t> exchangeBytes;
  /// Most bytes of buffers alive at once.
  int64_t peakBytes = 0;
  /// The arena the buffers lived in (the program's planned peak).
  int64_t arenaBytes = 0;
  int64_t instructions = 0;
};

/// A device's memory for its program: one arena of the program's
/// `arena_bytes`, every buffer a view at its planned offset. Kept by the
/// caller from run to run (a training session's steps reuse it) and until
/// it has read the output buffers.
struct DeviceMemory {
  std::vector<uint8_t> arena;
  /// Indexed by buffer id: views into the arena while a buffer is live
  /// (after the run: the output bindings' buffers only).
  std::vector<Tensor> buffers;
};

/// Runs \p prog, a program of \p plan, on the CPU kernels: each buffer is
/// a view of \p memory's arena at its planned offset, zero-filled when
/// first written and dropped after its last use, except the output
/// bindings' buffers. An arena smaller than the plan says, or a buffer
/// outside it, is an error. \p comm may be null for a program without
/// collectives.
llvm::Error runDevice(const plan::Plan &plan, const plan::DeviceProgram &prog,
                      DataFeed &feed, Communicator *comm, DeviceMemory &memory,
                      DeviceStats &stats);

} // namespace pax::runtime

#endif // PAX_RUNTIME_DEVICE_H
