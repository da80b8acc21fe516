//===- CudaKernels.h - The CUDA backend's own kernels -----------*- C++ -*-===//
//
// What CudaDevice launches besides cuBLAS: box copies between buffers (the
// collectives' and slices' overlaps), the generic kernel (PointKernels.h's
// walk, a thread per outer point), softmax and norm rows (a block per row)
// and LSTM / GRU rows (RecurrentMath.h, a
// thread per direction and batch row).
//
// Plain structs in, so the host side (CudaDevice.cpp) needs no CUDA
// compiler; the kernels are in CudaKernels.cu.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CUDA_CUDAKERNELS_H
#define PAX_RUNTIME_CUDA_CUDAKERNELS_H

#include "runtime/AttentionMath.h"
#include "runtime/PointKernels.h"
#include "runtime/RecurrentMath.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace pax::runtime::cuda {

/// Copies (or adds) the overlap of two row-major buffers of one dtype:
/// `size` elements per dim, starting at `srcOffset` / `dstOffset` elements,
/// stepping by the strides.
struct BoxCopy {
  int32_t rank = 0;
  int32_t dtype = 0; // elements::Type
  bool add = false;
  int64_t elements = 0; // the product of size
  int64_t size[flat::kMaxRank] = {};
  int64_t srcStride[flat::kMaxRank] = {}, dstStride[flat::kMaxRank] = {};
  int64_t srcOffset = 0, dstOffset = 0;
};

/// Launches \p b on \p stream.
cudaError_t launchBoxCopy(const BoxCopy &b, const void *src, void *dst,
                          cudaStream_t stream);

/// Runs \p g on \p stream (a kernel parameter; a scatter-add's is copied
/// to \p scratch, device memory of sizeof(Generic), reusable once the
/// stream passes this launch). With \p linear, elementwise ops and copies
/// of linear maps run point::linearPoint (point::linearOnly). \p status (device
/// memory, zeroed by the caller) receives the first bad lookup; read it after
/// synchronizing.
cudaError_t launchGeneric(const Generic &g, Generic *scratch,
                          GenericStatus *status, cudaStream_t stream,
                          bool linear = true);

/// Runs \p g, a SoftmaxRows or NormRows generic, a thread block per row
/// (outer point): the block's threads stride over the row's inner points
/// and combine their maxima and sums in shared memory.
cudaError_t launchRows(const Generic &g, cudaStream_t stream);

/// Runs every (direction, batch row) of LSTM or GRU layer \p l (its
/// gradient op with \p grad), a thread each, on \p stream: copies \p l
/// to \p scratch (device memory of sizeof(Layer)) and gives each row its
/// forwardScratch / gradScratch doubles of \p work (device memory).
cudaError_t launchRecurrent(const recurrent::Layer &l, bool grad,
                            recurrent::Layer *scratch, double *work,
                            cudaStream_t stream);

/// Runs every row of attention compute \p p (AttentionMath.h), a thread
/// each, on \p stream: copies \p p to \p scratch (device memory of
/// sizeof(Problem)) and gives each row its rowScratch doubles of \p work.
cudaError_t launchAttention(const attention::Problem &p,
                            attention::Problem *scratch, double *work,
                            cudaStream_t stream);

/// True where attention compute \p p (forward or a gradient) runs tiled
/// (CudaAttention.cu, AttentionTiles.h): linear accesses, head dims of at
/// most 128.
bool attentionTiled(const attention::Problem &p);

/// Runs attention compute \p p (attentionTiled) on \p stream, a thread
/// block per 64 rows of a batch point: copies \p p to \p scratch.
cudaError_t launchAttentionTiled(const attention::Problem &p,
                                 attention::Problem *scratch,
                                 cudaStream_t stream);

/// out[i] = act(product[i] + addend[i]) for \p n elements of \p dtype
/// (a plan DType: f32, bf16, f16; computed in double, rounded once;
/// \p addend null: none; it may be \p out), act 0: none, 1: relu, 2: tanh
/// GELU: a product's library epilogue where cuBLASLt does not take it.
cudaError_t launchEpilogue(const void *product, const void *addend, void *out,
                           int32_t dtype, int64_t n, int act,
                           cudaStream_t stream);

} // namespace pax::runtime::cuda

#endif // PAX_RUNTIME_CUDA_CUDAKERNELS_H
