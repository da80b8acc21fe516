//===- CudaDevice.h - What the CUDA communicators see of a device -*- C++ -*-===//
#ifndef PAX_RUNTIME_CUDA_CUDADEVICE_H
#define PAX_RUNTIME_CUDA_CUDADEVICE_H

#include "runtime/Backend.h"

#include <cuda_runtime_api.h>

#include <optional>

namespace pax::runtime::cuda {

/// A CUDA device's GPU and the stream its work is ordered on.
struct StreamOf {
  int gpu = 0;
  cudaStream_t stream = nullptr;
};

/// \p d's GPU and stream, when it is a CUDA backend device.
std::optional<StreamOf> streamOf(Device &d);

} // namespace pax::runtime::cuda

#endif // PAX_RUNTIME_CUDA_CUDADEVICE_H
