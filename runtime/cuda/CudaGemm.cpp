//===- CudaGemm.cpp - Matrix products on cuBLAS ---------------------------===//
#include "runtime/cuda/CudaGemm.h"

#include "runtime/PointKernelsHost.h"
#include "runtime/cuda/CudaKernels.h"

#include <cublasLt.h>
#include <cublas_v2.h>

namespace pax::runtime::cuda {

namespace {
llvm::Error blasError(const plan::Compute &c, cublasStatus_t s) {
  return computeError(c, llvm::Twine("cuBLAS: ") + cublasGetStatusName(s) +
                             " (" + cublasGetStatusString(s) + ")");
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
  if (ltHandle)
    cublasLtDestroy(static_cast<cublasLtHandle_t>(ltHandle));
  if (workspace)
    cudaFree(workspace);
}

namespace {
cudaDataType_t cudaType(plan::DType t) {
  switch (t) {
  case plan::F64:
    return CUDA_R_64F;
  case plan::BF16:
    return CUDA_R_16BF;
  case plan::F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}

/// cuBLASLt's workspace: what its heuristics are allowed to use.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

/// cuBLASLt's descriptors of one call, destroyed with it.
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~LtCall() {
    if (desc)
      cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l)
        cublasLtMatrixLayoutDestroy(l);
  }
};

/// A column-major layout of \p rows x \p cols elements of \p type
/// (leading dim \p ld), \p batch of them \p stride apart.
cublasStatus_t layout(cublasLtMatrixLayout_t &l, cudaDataType_t type,
                      int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                      int64_t stride) {
  cublasStatus_t st =
      cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), ld);
  if (st != CUBLAS_STATUS_SUCCESS || batch <= 1)
    return st;
  int32_t count = int32_t(batch);
  st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                        &count, sizeof(count));
  if (st != CUBLAS_STATUS_SUCCESS)
    return st;
  return cublasLtMatrixLayoutSetAttribute(
      l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
}

/// cuBLASLt's epilogue for \p e, with a bias or without.
cublasLtEpilogue_t epilogueOf(const plan::LibraryEpilogue &e, bool bias) {
  using A = plan::LibraryEpilogue::Activation;
  if (e.activation == A::Relu)
    return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  if (e.activation == A::GeluTanh)
    return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

/// The descriptors of \p s on A and B of type \p in, C and D of type
/// \p out (f32, or 16-bit operands with fp32 accumulation) with epilogue
/// \p epi (and \p bias, of \p biasType) into \p call.
cublasStatus_t describe(const GemmShape &s, cudaDataType_t in,
                        cudaDataType_t out, bool allowTf32,
                        cublasLtEpilogue_t epi, const void *bias,
                        cudaDataType_t biasType, LtCall &call) {
  auto compute = allowTf32 && in == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32
                                               : CUBLAS_COMPUTE_32F;
  cublasStatus_t st = cublasLtMatmulDescCreate(&call.desc, compute, CUDA_R_32F);
  cublasOperation_t ta = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                    tb = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const void *v,
                 size_t bytes) {
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulDescSetAttribute(call.desc, attr, v, bytes);
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  set(CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
  if (bias) {
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType, sizeof(biasType));
  }
  if (st == CUBLAS_STATUS_SUCCESS)
    st = layout(call.a, in, s.transA ? s.k : s.m, s.transA ? s.m : s.k, s.lda,
                s.batch, s.strideA);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = layout(call.b, in, s.transB ? s.n : s.k, s.transB ? s.k : s.n, s.ldb,
                s.batch, s.strideB);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = layout(call.c, out, s.m, s.n, s.ldc, s.batch, s.strideC);
  return st;
}
} // namespace

llvm::Error CudaGemm::startLt(const plan::Compute &c) {
  if (ltHandle)
    return llvm::Error::success();
  cublasLtHandle_t h = nullptr;
  if (cublasStatus_t st = cublasLtCreate(&h); st != CUBLAS_STATUS_SUCCESS)
    return blasError(c, st);
  ltHandle = h;
  if (cudaError_t err = cudaMalloc(&workspace, kWorkspaceBytes))
    return computeError(c, cudaGetErrorString(err));
  return llvm::Error::success();
}

llvm::Expected<bool> CudaGemm::runWithEpilogue(const Prepared &p,
                                               const GemmShape &s,
                                               bool allowTf32,
                                               const plan::LibraryEpilogue &e,
                                               const Tensor *addend) {
  const plan::Compute &c = p.c;
  // GemmTypes, with f32 the only type wider than 16 bits; the bias and
  // the addend of the result's type.
  auto types = gemmTypes(p, s);
  if (!types) {
    llvm::consumeError(types.takeError());
    return false;
  }
  plan::DType t = types->out;
  if (types->in == plan::F64 || !s.loops.empty() ||
      (addend && addend->dtype != t))
    return false;
  // The product's own C: the bias (a vector over BLAS's rows, the result's
  // last dim), unless it is the addend.
  const void *bias = nullptr;
  cudaDataType_t biasType = cudaType(t);
  if (p.ins.size() == 3 && e.bias >= 0) {
    if (p.ins[2]->numel() != s.m)
      return false;
    bias = p.ins[2]->data.data();
    biasType = cudaType(p.ins[2]->dtype);
  } else if (p.ins.size() == 3 && p.ins[2]->dtype != t) {
    return false;
  }
  if (auto err = startLt(c))
    return err;
  LtCall call;
  if (cublasStatus_t st =
          describe(s, cudaType(types->in), cudaType(t), allowTf32,
                   epilogueOf(e, bias), bias, biasType, call);
      st != CUBLAS_STATUS_SUCCESS)
    return st == CUBLAS_STATUS_NOT_SUPPORTED ? llvm::Expected<bool>(false)
                                             : blasError(c, st);
  float alpha = float(c.kind() == "gemm" ? attrReal(c, "alpha", 1.0) : 1.0);
  float beta = addend ? 1.0f : 0.0f;
  int64_t inBytes = dtypeBytes(types->in), outBytes = dtypeBytes(t);
  const uint8_t *A = p.ins[size_t(s.aInput)]->data.data() + s.offsetA * inBytes;
  const uint8_t *B = p.ins[size_t(s.bInput)]->data.data() + s.offsetB * inBytes;
  uint8_t *D = p.outs[0]->data.data() + s.offsetC * outBytes;
  const uint8_t *C = addend ? addend->data.data() + s.offsetC * outBytes : D;
  cublasStatus_t st =
      cublasLtMatmul(static_cast<cublasLtHandle_t>(ltHandle), call.desc, &alpha,
                     A, call.a, B, call.b, &beta, C, call.c, D, call.c, nullptr,
                     workspace, kWorkspaceBytes, stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED)
    return false;
  if (st != CUBLAS_STATUS_SUCCESS)
    return blasError(c, st);
  return true;
}

/// The types of a BLAS call on GemmTypes: A and B's, C's, the compute
/// type, and whether alpha and beta are doubles.
struct BlasTypes {
  cudaDataType_t in = CUDA_R_32F, out = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  int64_t inBytes = 4, outBytes = 4;
  bool doubles = false;
};

namespace {

BlasTypes blasTypes(GemmTypes t, bool allowTf32) {
  BlasTypes b;
  b.in = cudaType(t.in);
  b.out = cudaType(t.out);
  b.inBytes = dtypeBytes(t.in);
  b.outBytes = dtypeBytes(t.out);
  b.doubles = t.in == plan::F64;
  // 16-bit operands accumulate in fp32 on the tensor cores.
  b.compute = b.doubles                        ? CUBLAS_COMPUTE_64F
              : t.in == plan::F32 && allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                               : CUBLAS_COMPUTE_32F;
  return b;
}

/// gemm's C broadcast into the output through the maps (the generic
/// kernel, converting its type); BLAS then adds alpha A B to it.
llvm::Error copyBias(const Prepared &p, cudaStream_t stream) {
  const plan::Compute &c = p.c;
  Generic g;
  describeGemmBias(p, g);
  void *scratch = nullptr;
  if (cudaError_t e = cudaMallocAsync(&scratch, sizeof(Generic), stream))
    return computeError(c, cudaGetErrorString(e));
  cudaError_t e =
      launchGeneric(g, static_cast<Generic *>(scratch), nullptr, stream);
  cudaFreeAsync(scratch, stream);
  if (e != cudaSuccess)
    return computeError(c, cudaGetErrorString(e));
  return llvm::Error::success();
}
} // namespace

llvm::Error CudaGemm::run(const Prepared &p, const GemmShape &s,
                          bool allowTf32) {
  const plan::Compute &c = p.c;
  auto types = gemmTypes(p, s);
  if (!types)
    return types.takeError();
  double alpha = c.kind() == "gemm" ? attrReal(c, "alpha", 1.0) : 1.0;
  double beta = 0;
  if (p.ins.size() == 3) {
    beta = attrReal(c, "beta", 1.0);
    if (auto err = copyBias(p, stream))
      return err;
  }
  if (s.m == 0 || s.n == 0 || s.batch == 0)
    return llvm::Error::success();
  for (int64_t v : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc, s.batch})
    if (v > int64_t(INT32_MAX))
      return computeError(c, "a matrix dim past cuBLAS's 32-bit sizes");
  return stridedBatches(p, s, blasTypes(*types, allowTf32), alpha, beta);
}

llvm::Error CudaGemm::stridedBatches(const Prepared &p, const GemmShape &s,
                                     const BlasTypes &t, double alpha,
                                     double beta) {
  float alpha32 = float(alpha), beta32 = float(beta);
  const void *a = t.doubles ? static_cast<const void *>(&alpha)
                            : static_cast<const void *>(&alpha32);
  const void *b = t.doubles ? static_cast<const void *>(&beta)
                            : static_cast<const void *>(&beta32);
  auto h = static_cast<cublasHandle_t>(handle);
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
        A + oa * t.inBytes, t.in, int(s.lda), s.strideA, B + ob * t.inBytes,
        t.in, int(s.ldb), s.strideB, b, C + oc * t.outBytes, t.out, int(s.ldc),
        s.strideC, int(s.batch), t.compute, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
      return blasError(p.c, st);
    size_t l = s.loops.size();
    while (l > 0 && ++at[l - 1] == s.loops[l - 1].extent)
      at[--l] = 0;
    if (l == 0)
      return llvm::Error::success();
  }
}

} // namespace pax::runtime::cuda
