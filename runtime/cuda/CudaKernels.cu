//===- CudaKernels.cu - Box copies and the generic kernel on the GPU -------===//
//
// The generic kernel follows the CPU's generic kernel point for point (one
// thread per outer point, the inner points in the same order, the same
// element math from ScalarMath.h / ReduceMath.h / Elements.h), so a value
// it computes is the CPU's value.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"

#include "runtime/Elements.h"

namespace pax::runtime::cuda {
namespace {

using namespace elements;

constexpr int kThreads = 256;

/// Blocks for \p n threads, at most a grid's worth (the kernels stride).
unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

__device__ int64_t threadIndex() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t threadStride() { return int64_t(gridDim.x) * blockDim.x; }

__global__ void boxCopyKernel(BoxCopy b, const uint8_t *src, uint8_t *dst) {
  int64_t n = bytes(b.dtype);
  for (int64_t e = threadIndex(); e < b.elements; e += threadStride()) {
    int64_t rest = e, s = b.srcOffset, d = b.dstOffset;
    for (int32_t i = b.rank; i-- > 0;) {
      int64_t x = rest % b.size[i];
      rest /= b.size[i];
      s += x * b.srcStride[i];
      d += x * b.dstStride[i];
    }
    if (!b.add) {
      memcpy(dst + d * n, src + s * n, size_t(n));
    } else if (b.dtype == F32) {
      // In float, as the CPU's partial sums.
      float *to = reinterpret_cast<float *>(dst) + d;
      *to += reinterpret_cast<const float *>(src)[s];
    } else if (isFloat(b.dtype)) {
      writeReal(dst, b.dtype, d,
                readReal(dst, b.dtype, d) + readReal(src, b.dtype, s));
    } else {
      writeInteger(dst, b.dtype, d,
                   int64_t(uint64_t(readInteger(dst, b.dtype, d)) +
                           uint64_t(readInteger(src, b.dtype, s))));
    }
  }
}

__global__ void genericKernel(const Generic *gp, GenericStatus *status) {
  const Generic &g = *gp;
  for (int64_t p = threadIndex(); p < g.space.outerPoints;
       p += threadStride())
    point::runOuterPoint(g, p, status);
}

/// scatter_add: one thread walks every point in order (point::scatterAddAll).
__global__ void scatterAddKernel(const Generic *gp, GenericStatus *status) {
  if (threadIndex() == 0)
    point::scatterAddAll(*gp, status);
}

__global__ void recurrentKernel(const recurrent::Layer *lp, bool grad,
                                double *work) {
  const recurrent::Layer &l = *lp;
  int64_t rows = l.dirs * l.batch;
  int64_t each = grad ? recurrent::gradScratch(l) : recurrent::forwardScratch(l);
  for (int64_t db = threadIndex(); db < rows; db += threadStride()) {
    double *mine = work + db * each;
    if (grad)
      recurrent::gradRow(l, db / l.batch, db % l.batch, mine);
    else
      recurrent::forwardRow(l, db / l.batch, db % l.batch, mine);
  }
}

} // namespace

cudaError_t launchRecurrent(const recurrent::Layer &l, bool grad,
                            recurrent::Layer *scratch, double *work,
                            cudaStream_t stream) {
  if (cudaError_t e = cudaMemcpyAsync(scratch, &l, sizeof l,
                                      cudaMemcpyHostToDevice, stream))
    return e;
  int64_t rows = l.dirs * l.batch;
  if (rows <= 0)
    return cudaSuccess;
  recurrentKernel<<<blocksFor(rows), kThreads, 0, stream>>>(scratch, grad,
                                                            work);
  return cudaGetLastError();
}

cudaError_t launchBoxCopy(const BoxCopy &b, const void *src, void *dst,
                          cudaStream_t stream) {
  if (b.elements <= 0)
    return cudaSuccess;
  boxCopyKernel<<<blocksFor(b.elements), kThreads, 0, stream>>>(
      b, static_cast<const uint8_t *>(src), static_cast<uint8_t *>(dst));
  return cudaGetLastError();
}

cudaError_t launchGeneric(const Generic &g, Generic *scratch,
                          GenericStatus *status, cudaStream_t stream) {
  // Pageable host memory: the copy is staged before the call returns, so
  // \p g may go away at once.
  if (cudaError_t e = cudaMemcpyAsync(scratch, &g, sizeof(Generic),
                                      cudaMemcpyHostToDevice, stream))
    return e;
  if (g.op == GenericOp::ScatterAdd) {
    scatterAddKernel<<<1, 1, 0, stream>>>(scratch, status);
    return cudaGetLastError();
  }
  if (g.space.outerPoints <= 0)
    return cudaSuccess;
  genericKernel<<<blocksFor(g.space.outerPoints), kThreads, 0, stream>>>(
      scratch, status);
  return cudaGetLastError();
}

} // namespace pax::runtime::cuda
