//===- CudaGemm.cpp - Matrix products on cuBLAS ---------------------------===//
#include "runtime/cuda/CudaGemm.h"

#include "runtime/PointKernelsHost.h"
#include "runtime/cuda/CudaKernels.h"

#include <cublas_v2.h>

namespace pax::runtime::cuda {

namespace {
llvm::Error blasError(const plan::Compute &c, cublasStatus_t s) {
  return computeError(c, llvm::Twine("cuBLAS: ") +
                                  cublasGetStatusName(s) + " (" +
                                  cublasGetStatusString(s) + ")");
}
} // namespace

llvm::Expected<std::unique_ptr<CudaGemm>>
CudaGemm::create(cudaStream_t stream) {
  std::unique_ptr<CudaGemm> g(new CudaGemm());
  cublasHandle_t h = nullptr;
  if (cublasStatus_t s = cublasCreate(&h); s != CUBLAS_STATUS_SUCCESS)
    return llvm::createStringError(llvm::Twine("cuBLAS: cannot start (") +
                                   cublasGetStatusString(s) + ")");
  g->handle = h;
  g->stream = stream;
  if (cublasStatus_t s = cublasSetStream(h, stream); s != CUBLAS_STATUS_SUCCESS)
    return llvm::createStringError(llvm::Twine("cuBLAS: no stream (") +
                                   cublasGetStatusString(s) + ")");
  return g;
}

CudaGemm::~CudaGemm() {
  if (handle)
    cublasDestroy(static_cast<cublasHandle_t>(handle));
}

llvm::Error CudaGemm::run(const Prepared &p, const GemmShape &s,
                          bool allowTf32) {
  const plan::Compute &c = p.c;
  plan::DType t = p.outs[0]->dtype;
  for (size_t k = 0; k < p.ins.size(); ++k)
    if (p.ins[k]->dtype != t)
      return computeError(c, "operands of different types on cuda");
  cudaDataType_t type;
  cublasComputeType_t compute;
  if (t == plan::F32) {
    type = CUDA_R_32F;
    compute = allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  } else if (t == plan::F64) {
    type = CUDA_R_64F;
    compute = CUBLAS_COMPUTE_64F;
  } else {
    return computeError(c, "the cuda backend multiplies f32 and f64 "
                                "matrices, not this dtype");
  }
  double alpha = c.kind() == "gemm" ? attrReal(c, "alpha", 1.0) : 1.0;
  double beta = 0;
  if (p.ins.size() == 3) {
    // gemm's C, broadcast into the output through the maps; BLAS then
    // computes alpha A B + beta C in place.
    beta = attrReal(c, "beta", 1.0);
    Generic g;
    describeGemmBias(p, g);
    void *scratch = nullptr;
    if (cudaError_t e = cudaMallocAsync(&scratch, sizeof(Generic), stream))
      return computeError(c, cudaGetErrorString(e));
    cudaError_t e = launchGeneric(g, static_cast<Generic *>(scratch), nullptr,
                                  stream);
    cudaFreeAsync(scratch, stream);
    if (e != cudaSuccess)
      return computeError(c, cudaGetErrorString(e));
  }
  if (s.m == 0 || s.n == 0 || s.batch == 0)
    return llvm::Error::success();
  for (int64_t v : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc, s.batch})
    if (v > int64_t(INT32_MAX))
      return computeError(c, "a matrix dim past cuBLAS's 32-bit sizes");
  float alpha32 = float(alpha), beta32 = float(beta);
  const void *a = t == plan::F32 ? static_cast<const void *>(&alpha32)
                                 : static_cast<const void *>(&alpha);
  const void *b = t == plan::F32 ? static_cast<const void *>(&beta32)
                                 : static_cast<const void *>(&beta);
  auto h = static_cast<cublasHandle_t>(handle);
  int64_t bytes = t == plan::F32 ? 4 : 8;
  const uint8_t *A = p.ins[size_t(s.aInput)]->data.data();
  const uint8_t *B = p.ins[size_t(s.bInput)]->data.data();
  uint8_t *C = p.outs[0]->data.data();
  // The loops over the batch dims the strided batch does not take.
  std::vector<int64_t> at(s.loops.size(), 0);
  while (true) {
    int64_t oa = s.offsetA, ob = s.offsetB, oc = s.offsetC;
    for (size_t l = 0; l < s.loops.size(); ++l) {
      oa += at[l] * s.loops[l].stepA;
      ob += at[l] * s.loops[l].stepB;
      oc += at[l] * s.loops[l].stepC;
    }
    cublasStatus_t st = cublasGemmStridedBatchedEx(
        h, s.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
        s.transB ? CUBLAS_OP_T : CUBLAS_OP_N, int(s.m), int(s.n), int(s.k), a,
        A + oa * bytes, type, int(s.lda), s.strideA, B + ob * bytes, type,
        int(s.ldb), s.strideB, b, C + oc * bytes, type, int(s.ldc), s.strideC,
        int(s.batch), compute, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
      return blasError(c, st);
    size_t l = s.loops.size();
    while (l > 0 && ++at[l - 1] == s.loops[l - 1].extent)
      at[--l] = 0;
    if (l == 0)
      return llvm::Error::success();
  }
}

} // namespace pax::runtime::cuda
