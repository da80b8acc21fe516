//===- HostMemoryDevice.h - A device whose memory is the host's -*- C++ -*-===//
//
// The arena, buffers, copies and synchronization of a device that runs on
// the host: the CPU backend, and the cuda-emulated backend that runs the
// CUDA kernels' walk on the host. Each adds its backend and its kernels.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_HOSTMEMORYDEVICE_H
#define PAX_RUNTIME_HOSTMEMORYDEVICE_H

#include "runtime/Backend.h"

#include <vector>

namespace pax::runtime {

class HostMemoryDevice : public Device {
public:
  bool hostAccessible() const override { return true; }
  llvm::Error reserve(int64_t bytes) override;
  Tensor allocate(plan::DType dtype, std::vector<int64_t> shape,
                  int64_t offset, bool zero) override;
  llvm::Error upload(const Tensor &from, Tensor &to) override;
  llvm::Error download(const Tensor &from, Tensor &to) override;
  llvm::Error copyOverlap(const Tensor &in, llvm::ArrayRef<int64_t> inLo,
                          Tensor &out, llvm::ArrayRef<int64_t> outLo,
                          bool add) override;
  llvm::Error zero(Tensor &t) override;
  /// Every device whose memory is the host's.
  bool canRead(const Device &other) const override {
    return other.hostAccessible();
  }
  llvm::Error synchronize() override { return llvm::Error::success(); }

private:
  std::vector<uint8_t> arena;
};

} // namespace pax::runtime

#endif // PAX_RUNTIME_HOSTMEMORYDEVICE_H
