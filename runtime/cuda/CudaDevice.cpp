//===- CudaDevice.cpp - The CUDA backend's device -------------------------===//
//
// Finds the GPU a device runs on. The backend's kernels, arena and
// communicators are not built yet, so a CUDA device is refused after the
// GPU is found, with a message saying so.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"

#include <cuda_runtime_api.h>

namespace pax::runtime {

llvm::Expected<std::unique_ptr<Device>> makeCudaDevice(unsigned ordinal) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return llvm::createStringError(
        llvm::Twine("--backend=cuda: no CUDA device on this machine (") +
        (err != cudaSuccess ? cudaGetErrorString(err) : "none found") + ")");
  if (ordinal >= unsigned(count))
    return llvm::createStringError(
        "--backend=cuda: device " + llvm::Twine(ordinal) + " asked for, " +
        llvm::Twine(count) + " CUDA device(s) on this machine");
  return llvm::createStringError(
      "--backend=cuda: this paxrun finds the machine's " + llvm::Twine(count) +
      " CUDA device(s) but cannot run plans on them yet: the CUDA kernels "
      "and communicators are not implemented");
}

} // namespace pax::runtime
