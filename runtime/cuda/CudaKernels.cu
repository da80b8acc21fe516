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
#include "runtime/ScalarMath.h"

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

// The generic and row kernels take their Generic (28 KB) as a kernel
// parameter: no copy to stage before each launch, and its maps are read
// through the constant cache, every thread of a warp the same field.
__global__ void genericKernel(const __grid_constant__ Generic g,
                              GenericStatus *status) {
  for (int64_t p = threadIndex(); p < g.space.outerPoints;
       p += threadStride())
    point::runOuterPoint(g, p, status);
}

/// The sum (or, with \p max, the maximum) of every thread's \p v in the
/// block, returned to all of them; \p shared holds a double per warp.
__device__ double blockAll(double v, bool max, double *shared) {
  auto fold = [max](double a, double b) {
    return max ? (a < b ? b : a) : a + b;
  };
  for (int o = 16; o > 0; o >>= 1)
    v = fold(v, __shfl_down_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double all = shared[0];
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
      all = fold(all, shared[w]);
    shared[0] = all;
  }
  __syncthreads();
  double all = shared[0];
  __syncthreads(); // shared is reused by the next call
  return all;
}

/// Softmax or norm rows, a block per outer point (the math of
/// point::softmaxRow and point::normRow, the inner points split among the
/// block's threads).
__global__ void rowsKernel(const __grid_constant__ Generic g) {
  __shared__ double shared[32];
  const flat::Space &s = g.space;
  int64_t n = s.innerPoints;
  int64_t point[flat::kMaxDims];
  for (int d = 0; d < flat::kMaxDims; ++d)
    point[d] = 0;
  for (int64_t row = blockIdx.x; row < s.outerPoints; row += gridDim.x) {
    flat::setOuter(s, row, point);
    if (g.op == GenericOp::SoftmaxRows) {
      double mx = -INFINITY;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        flat::setInner(s, j, point);
        double v = point::readIn(g, 0, point);
        mx = mx < v ? v : mx;
      }
      mx = blockAll(mx, true, shared);
      double sum = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        flat::setInner(s, j, point);
        sum += exp(point::readIn(g, 0, point) - mx);
      }
      sum = blockAll(sum, false, shared);
      double logSum = log(sum);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        flat::setInner(s, j, point);
        double d = point::readIn(g, 0, point) - mx;
        point::writeOut(g, point, g.logSoftmax ? d - logSum : exp(d) / sum);
      }
    } else {
      double count = double(n > 1 ? n : 1), mean = 0, var = 0;
      if (!g.rms) {
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
          flat::setInner(s, j, point);
          mean += point::readIn(g, 0, point);
        }
        mean = blockAll(mean, false, shared) / count;
      }
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        flat::setInner(s, j, point);
        double d = point::readIn(g, 0, point) - mean;
        var += d * d;
      }
      var = blockAll(var, false, shared);
      double inv = 1.0 / sqrt(var / count + g.eps);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        flat::setInner(s, j, point);
        double y = (point::readIn(g, 0, point) - mean) * inv;
        if (g.inputs > 1)
          y *= point::readIn(g, 1, point);
        if (g.inputs > 2)
          y += point::readIn(g, 2, point);
        point::writeOut(g, point, y);
      }
    }
  }
}

/// Elementwise ops and copies of linear maps (point::linearOnly): a thread
/// per point, its operands' indices in registers.
__global__ void linearKernel(const __grid_constant__ Generic g) {
  for (int64_t p = threadIndex(); p < g.space.outerPoints;
       p += threadStride())
    point::linearPoint(g, p);
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

__global__ void attentionKernel(const attention::Problem *pp, double *work) {
  const attention::Problem &p = *pp;
  int64_t each = attention::rowScratch(p);
  for (int64_t r = threadIndex(); r < p.space.outerPoints; r += threadStride())
    attention::runRows(p, r, 1, work + r * each);
}

__global__ void epilogueKernel(const uint8_t *product, const uint8_t *addend,
                               uint8_t *out, int32_t dtype, int64_t n,
                               int act) {
  for (int64_t i = threadIndex(); i < n; i += threadStride()) {
    double v = elements::readReal(product, dtype, i) +
               (addend ? elements::readReal(addend, dtype, i) : 0.0);
    ScalarParams params;
    params.tanhGelu = true;
    if (act != 0)
      v = scalar::activation(act == 1 ? ScalarOp::Relu : ScalarOp::Gelu, v,
                             0.0, params);
    elements::writeReal(out, dtype, i, v);
  }
}

} // namespace

cudaError_t launchEpilogue(const void *product, const void *addend, void *out,
                           int32_t dtype, int64_t n, int act,
                           cudaStream_t stream) {
  if (n <= 0)
    return cudaSuccess;
  int64_t blocks = (n + 255) / 256;
  epilogueKernel<<<unsigned(blocks > 65535 ? 65535 : blocks), 256, 0,
                   stream>>>(static_cast<const uint8_t *>(product),
                             static_cast<const uint8_t *>(addend),
                             static_cast<uint8_t *>(out), dtype, n, act);
  return cudaGetLastError();
}

cudaError_t launchAttention(const attention::Problem &p,
                            attention::Problem *scratch, double *work,
                            cudaStream_t stream) {
  if (cudaError_t e = cudaMemcpyAsync(scratch, &p, sizeof p,
                                      cudaMemcpyHostToDevice, stream))
    return e;
  if (p.space.outerPoints <= 0)
    return cudaSuccess;
  attentionKernel<<<blocksFor(p.space.outerPoints), kThreads, 0, stream>>>(
      scratch, work);
  return cudaGetLastError();
}

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
                          GenericStatus *status, cudaStream_t stream,
                          bool linear) {
  if (g.op == GenericOp::ScatterAdd) {
    // Pageable host memory: the copy is staged before the call returns,
    // so \p g may go away at once.
    if (cudaError_t e = cudaMemcpyAsync(scratch, &g, sizeof(Generic),
                                        cudaMemcpyHostToDevice, stream))
      return e;
    scatterAddKernel<<<1, 1, 0, stream>>>(scratch, status);
    return cudaGetLastError();
  }
  if (g.space.outerPoints <= 0)
    return cudaSuccess;
  if (linear && point::linearOnly(g)) {
    linearKernel<<<blocksFor(g.space.outerPoints), kThreads, 0, stream>>>(g);
    return cudaGetLastError();
  }
  genericKernel<<<blocksFor(g.space.outerPoints), kThreads, 0, stream>>>(
      g, status);
  return cudaGetLastError();
}

cudaError_t launchRows(const Generic &g, cudaStream_t stream) {
  if (g.space.outerPoints <= 0 || g.space.innerPoints <= 0)
    return cudaSuccess;
  // Warps enough for the row, 8 at most.
  int64_t warps = (g.space.innerPoints + 31) / 32;
  unsigned threads = unsigned(32 * (warps > 8 ? 8 : warps));
  int64_t rows = g.space.outerPoints;
  unsigned blocks = unsigned(rows > (1 << 20) ? (1 << 20) : rows);
  rowsKernel<<<blocks, threads, 0, stream>>>(g);
  return cudaGetLastError();
}

} // namespace pax::runtime::cuda
