//===- CudaGemm.h - Matrix products on cuBLAS -------------------*- C++ -*-===//
#ifndef PAX_RUNTIME_CUDA_CUDAGEMM_H
#define PAX_RUNTIME_CUDA_CUDAGEMM_H

#include "codegen/plan/LibraryEpilogue.h"
#include "runtime/GemmShape.h"
#include "runtime/Prepared.h"

#include <cuda_runtime_api.h>

#include <memory>

namespace pax::runtime::cuda {

/// A device's cuBLAS handle on its stream. run() takes a matmul or gemm
/// compute whose buffers are on the device and its strided batched GEMMs
/// (matchGemm) and enqueues them: f32 in f32 (TF32 only when allowed) and
/// f64 in f64; gemm's C is copied into the output first and scaled by
/// beta.
struct BlasTypes;

class CudaGemm {
public:
  static llvm::Expected<std::unique_ptr<CudaGemm>> create(cudaStream_t stream);
  ~CudaGemm();
  /// Enqueues \p p's product: f32 or f64 alone, or bf16 or fp16 operands
  /// into their type or f32 with fp32 accumulation (GemmTypes).
  llvm::Error run(const Prepared &p, const GemmShape &s, bool allowTf32);
  /// Enqueues \p p's product with epilogue \p e as one cuBLASLt call:
  /// act(alpha A B + bias + addend) into p.outs[0], \p p's C (when it has
  /// one) the bias unless it is \p addend. False, having enqueued nothing,
  /// where cuBLASLt does not take it (loops outside the batch, a dtype other
  /// than f32, no algorithm).
  llvm::Expected<bool> runWithEpilogue(const Prepared &p, const GemmShape &s,
                                       bool allowTf32,
                                       const plan::LibraryEpilogue &e,
                                       const Tensor *addend);

private:
  CudaGemm() = default;
  /// cuBLASLt's handle and workspace, made on first use (\p c names the
  /// compute in an error).
  llvm::Error startLt(const plan::Compute &c);
  /// The strided batched BLAS calls of \p s, one per point of its loops.
  llvm::Error stridedBatches(const Prepared &p, const GemmShape &s,
                             const BlasTypes &t, double alpha, double beta);
  void *handle = nullptr;    // cublasHandle_t
  void *ltHandle = nullptr;  // cublasLtHandle_t
  void *workspace = nullptr; // cuBLASLt's, kWorkspaceBytes
  cudaStream_t stream = nullptr;
};

} // namespace pax::runtime::cuda

#endif // PAX_RUNTIME_CUDA_CUDAGEMM_H
