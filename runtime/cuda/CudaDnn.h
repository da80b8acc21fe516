//===- CudaDnn.h - Convolutions on cuDNN ------------------------*- C++ -*-===//
#ifndef PAX_RUNTIME_CUDA_CUDADNN_H
#define PAX_RUNTIME_CUDA_CUDADNN_H

#include "runtime/Prepared.h"
#include "runtime/WindowShape.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <tuple>
#include <vector>

namespace pax::runtime::cuda {

/// A device's cuDNN handle on its stream, with a workspace that grows to
/// the largest convolution's need and the algorithm chosen per shape.
class CudaDnn {
public:
  static llvm::Expected<std::unique_ptr<CudaDnn>> create(cudaStream_t stream);
  ~CudaDnn();

  /// Enqueues \p p, a convolution of shape \p s (matchConv2D) with its
  /// optional bias, as cuDNN's forward convolution: f32 (with TF32 only
  /// when allowed), or bf16 or fp16 on tensor cores with fp32
  /// accumulation. False, having enqueued nothing, when cuDNN cannot take
  /// it as it is (windows that are not symmetrically padded, dims past
  /// int32, tensors of more than one type).
  llvm::Expected<bool> conv(const Prepared &p, const Window2DShape &s,
                            bool allowTf32);

private:
  CudaDnn() = default;
  /// The workspace, at least \p bytes.
  llvm::Error workspace(size_t bytes);

  void *handle = nullptr; // cudnnHandle_t
  cudaStream_t stream = nullptr;
  void *work = nullptr;
  size_t workBytes = 0;
  /// The algorithm (and its workspace) per convolution geometry and math.
  std::map<std::vector<int64_t>, std::pair<int, size_t>> algorithms;
};

} // namespace pax::runtime::cuda

#endif // PAX_RUNTIME_CUDA_CUDADNN_H
