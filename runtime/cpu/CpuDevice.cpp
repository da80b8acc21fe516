//===- CpuDevice.cpp - The CPU backend's device
//----------------------------===//
#include "runtime/Exchange.h"
#include "runtime/HostMemoryDevice.h"
#include "runtime/cpu/ConvChain.h"
#include "runtime/cpu/DnnlConv.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/MatmulChain.h"
#include "runtime/cpu/MaxPoolGrad.h"
#include "runtime/cpu/PointwiseChain.h"
#include "runtime/cpu/Widen.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include <unistd.h>

namespace pax::runtime {

/// The machine's memory, bytes (0 where the system does not say).
static int64_t physicalMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? int64_t(pages) * int64_t(size) : 0;
}

llvm::Error HostMemoryDevice::reserve(int64_t bytes) {
  if (bytes < 0)
    return llvm::createStringError("a negative arena size");
  if (arena.size() >= size_t(bytes))
    return llvm::Error::success();
  // A plan too large for the host is an error, not an allocation that
  // fails (under LLVM's handler, the process's end).
  int64_t memory = physicalMemory();
  auto tooLarge = [&] {
    return llvm::createStringError(
        "an arena of " + std::to_string(bytes) + " bytes does not fit in " +
        "this machine's memory (" + std::to_string(memory) +
        " bytes): compile it for more devices");
  };
  if (memory > 0 && bytes > memory)
    return tooLarge();
  try {
    arena.resize(size_t(bytes));
  } catch (const std::bad_alloc &) {
    return tooLarge();
  }
  return llvm::Error::success();
}

Tensor HostMemoryDevice::allocate(plan::DType dtype, std::vector<int64_t> shape,
                                  int64_t offset, bool zero) {
  return Tensor::view(dtype, std::move(shape), arena.data() + offset, zero);
}

/// Copies \p from into \p to (same type and size).
static llvm::Error copyBytes(const Tensor &from, Tensor &to) {
  if (from.dtype != to.dtype || from.data.size() != to.data.size())
    return llvm::createStringError(
        "a copy between tensors of different types or sizes");
  if (!from.data.empty())
    std::memcpy(to.data.data(), from.data.data(), from.data.size());
  return llvm::Error::success();
}

llvm::Error HostMemoryDevice::upload(const Tensor &from, Tensor &to) {
  return copyBytes(from, to);
}

llvm::Error HostMemoryDevice::download(const Tensor &from, Tensor &to) {
  return copyBytes(from, to);
}

llvm::Error HostMemoryDevice::copyOverlap(const Tensor &in,
                                          llvm::ArrayRef<int64_t> inLo,
                                          Tensor &out,
                                          llvm::ArrayRef<int64_t> outLo,
                                          bool add) {
  moveOverlap(in, inLo, out, outLo, add);
  return llvm::Error::success();
}

llvm::Error HostMemoryDevice::zero(Tensor &t) {
  std::fill(t.data.begin(), t.data.end(), 0);
  return llvm::Error::success();
}

namespace {

/// Host memory and the CPU kernels (Kernels.h), with the convolutions'
/// primitives and packed weights kept while the program and its resident
/// weights stay the same; a convolution or a matrix product and its
/// epilogue run as one (cpu/ConvChain.h, cpu/MatmulChain.h), a max pool's
/// gradient as one pass (cpu/MaxPoolGrad.h), and chains of elementwise ops
/// tile by tile (cpu/PointwiseChain.h).
class CpuDevice final : public HostMemoryDevice {
public:
  Backend backend() const override { return Backend::Cpu; }
  void beginRun(bool resident) override {
    if (!resident)
      primitives.clear();
  }
  llvm::Error launch(const plan::Compute &c,
                     llvm::ArrayRef<const Tensor *> inputs,
                     llvm::ArrayRef<Tensor *> outputs) override {
    return runDeviceKernel(c, inputs, outputs, primitives);
  }
  size_t fuses(llvm::ArrayRef<const plan::Compute *> chain,
               llvm::ArrayRef<plan::DType> results) override {
    size_t n = cpu::convChainLength(chain, results[0] != plan::F32);
    if (n < 2)
      n = cpu::matmulChainLength(chain);
    if (n < 2)
      n = cpu::maxPoolGradChainLength(chain);
    return n > 1 ? n : cpu::pointwiseChainLength(chain);
  }
  llvm::Expected<bool> launchChain(llvm::ArrayRef<ChainLink> chain) override {
    llvm::Expected<bool> fused = runChain(chain);
    if (!fused || *fused || !cpu::holds16BitFloats(chain))
      return fused;
    // 16-bit tensors the chain's kernel does not take: its f32 kernel on
    // f32 copies.
    return cpu::runChainWidened(
        chain, &primitives,
        [&](llvm::ArrayRef<ChainLink> wide) { return runChain(wide); });
  }

private:
  llvm::Expected<bool> runChain(llvm::ArrayRef<ChainLink> chain) {
    const std::string &kind = chain[0].compute->kind();
    if (kind == "conv")
      return cpu::runConvChain(chain, primitives);
    if (kind == "matmul" || kind == "gemm")
      return cpu::runMatmulChain(chain, primitives);
    if (kind == "equal")
      return cpu::runMaxPoolGradChain(chain);
    return cpu::runPointwiseChain(chain);
  }

  cpu::DnnlCache primitives;
};

} // namespace

std::unique_ptr<Device> makeCpuDevice() {
  return std::make_unique<CpuDevice>();
}

} // namespace pax::runtime
