//===- CpuDevice.cpp - The CPU backend's device ----------------------------===//
#include "runtime/Backend.h"
#include "runtime/Exchange.h"
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cstring>

namespace pax::runtime {

namespace {

/// Host memory: the arena is a byte vector, buffers are views of it, and
/// computes run on the CPU kernels (Kernels.h).
class CpuDevice final : public Device {
public:
  Backend backend() const override { return Backend::Cpu; }
  bool hostAccessible() const override { return true; }

  llvm::Error reserve(int64_t bytes) override {
    if (bytes < 0)
      return llvm::createStringError("a negative arena size");
    if (arena.size() < size_t(bytes))
      arena.resize(size_t(bytes));
    return llvm::Error::success();
  }

  Tensor allocate(plan::DType dtype, std::vector<int64_t> shape,
                  int64_t offset, bool zero) override {
    return Tensor::view(dtype, std::move(shape), arena.data() + offset, zero);
  }

  llvm::Error upload(const Tensor &from, Tensor &to) override {
    return copy(from, to);
  }
  llvm::Error download(const Tensor &from, Tensor &to) override {
    return copy(from, to);
  }

  llvm::Error launch(const plan::Compute &c,
                     llvm::ArrayRef<const Tensor *> inputs,
                     llvm::ArrayRef<Tensor *> outputs) override {
    return runKernel(c, inputs, outputs);
  }

  llvm::Error copyOverlap(const Tensor &in, llvm::ArrayRef<int64_t> inLo,
                          Tensor &out, llvm::ArrayRef<int64_t> outLo,
                          bool add) override {
    moveOverlap(in, inLo, out, outLo, add);
    return llvm::Error::success();
  }

  llvm::Error zero(Tensor &t) override {
    std::fill(t.data.begin(), t.data.end(), 0);
    return llvm::Error::success();
  }

  bool canRead(const Device &other) const override {
    return other.backend() == Backend::Cpu;
  }

  llvm::Error synchronize() override { return llvm::Error::success(); }

private:
  static llvm::Error copy(const Tensor &from, Tensor &to) {
    if (from.dtype != to.dtype || from.data.size() != to.data.size())
      return llvm::createStringError(
          "a copy between tensors of different types or sizes");
    if (!from.data.empty())
      std::memcpy(to.data.data(), from.data.data(), from.data.size());
    return llvm::Error::success();
  }

  std::vector<uint8_t> arena;
};

} // namespace

std::unique_ptr<Device> makeCpuDevice() {
  return std::make_unique<CpuDevice>();
}

} // namespace pax::runtime
