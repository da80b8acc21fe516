//===- GemmShape.h - A contraction as strided batched BLAS calls -*- C++
//-*-===//
//
// How a matmul or gemm compute, with linear access maps, maps onto BLAS's
// column-major strided batched GEMM (cuBLAS's cublasGemmStridedBatchedEx):
// each iteration dim gets its role from which operands its maps use (M: A
// and C, N: B and C, K: A and B, batch: C and at least one input), the
// dims of each role are merged into one run, and the transposes and
// leading dims come from the map coefficients. Backend-neutral host code,
// so the CPU tests check the mapping against the CPU kernel.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_GEMMSHAPE_H
#define PAX_RUNTIME_GEMMSHAPE_H

#include "runtime/Prepared.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace pax::runtime {

/// One batch dim walked outside the BLAS call: its extent and the element
/// steps it takes in BLAS's A, B and C.
struct GemmLoop {
  int64_t extent = 1, stepA = 0, stepB = 0, stepC = 0;
};

/// C (m x n, column-major, ldc) = alpha op(A) op(B) + beta C, `batch` times
/// at the batch strides, once per point of `loops`. `aInput` / `bInput`
/// say which of the compute's inputs BLAS's A and B are (a row-major
/// product is computed as its transpose, B^T A^T).
struct GemmShape {
  int aInput = 0, bInput = 1;
  bool transA = false, transB = false;
  int64_t m = 1, n = 1, k = 1;
  int64_t lda = 1, ldb = 1, ldc = 1;
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  int64_t offsetA = 0, offsetB = 0, offsetC = 0; // first elements
  std::vector<GemmLoop> loops;
};

/// The BLAS calls of \p p (a matmul or gemm: inputs A, B[, C], one
/// output), or why there are none: a map that is not linear, a dim of one
/// role whose operands do not step through it as one run, no unit stride
/// in a matrix.
llvm::Expected<GemmShape> matchGemm(const Prepared &p);

/// The element types of a library product: A and B of one type; f32 or
/// f64 with the result of the same type, bf16 or fp16 with the result of
/// the same or f32 (fp32 accumulation either way: paxc --precision). C
/// (gemm's third input) is copied into the result first, of any type.
struct GemmTypes {
  plan::DType in = plan::F32, out = plan::F32;
};

/// \p p's GemmTypes, or an error naming the compute where a library
/// product does not take them.
llvm::Expected<GemmTypes> gemmTypes(const Prepared &p, const GemmShape &s);

/// Runs \p s on host buffers of doubles in BLAS's order of operations (for
/// tests: what a BLAS would compute), C = alpha op(A) op(B) + beta C (C
/// not read where beta is 0).
void referenceGemm(const GemmShape &s, double alpha, const double *a,
                   const double *b, double beta, double *c);

} // namespace pax::runtime

#endif // PAX_RUNTIME_GEMMSHAPE_H
