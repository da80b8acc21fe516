//===- GeneratedKernel.h - What codegen's generated kernels include -*- C++
//-*-===//
//
// The frame of a kernel codegen generates for a run of a fused group's
// computes (runtime/GenerateKernels.h): an entry point taking the buffers it
// addresses and a range of points, and a loop over the points it owns. The
// same source builds three ways: NVRTC (the CUDA backend, at load), nvcc
// (`paxc --emit=kernels` files checked in CI) and the host compiler (the
// cuda-emulated backend), so the generated code's numerics are tested on
// any machine. The element math is the runtime's own (Elements.h,
// ScalarMath.h): a generated kernel computes what the generic kernels do.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_GENERATEDKERNEL_H
#define PAX_RUNTIME_GENERATEDKERNEL_H

#include "runtime/Elements.h"
#include "runtime/ReduceMath.h"
#include "runtime/ScalarMath.h"

namespace pax::gen {

/// The most buffers one generated kernel addresses.
inline constexpr int kMaxParams = 24;
/// The threads of a row kernel's block (a power of two).
inline constexpr int kRowThreads = 256;

/// A generated kernel's buffers, passed by value (a kernel parameter).
struct Args {
  uint8_t *buf[kMaxParams];
};

/// \p v as a buffer of type \p t holds it once stored (what a compute that
/// reads the buffer back would see), for the float types.
PAX_HD inline double stored(int32_t t, double v) {
  using namespace pax::runtime::elements;
  switch (t) {
  case F32:
    return double(float(v));
  case F16:
    return double(halfToFloat(floatToHalf(float(v))));
  case BF16:
    return double(floatOfBits(uint32_t(floatToBf16(float(v))) << 16));
  default:
    return v;
  }
}

/// Combines the partial reductions of a row kernel's threads: every thread
/// of the block calls it, and every thread gets the row's whole reduction
/// (\p scratch: kRowThreads doubles of shared memory). On the host a block
/// is one thread, and there is nothing to combine.
template <typename T>
PAX_HD inline void blockMerge(pax::runtime::Accumulator<T> &a,
                              double *scratch) {
#if defined(__CUDA_ARCH__)
  unsigned t = threadIdx.x, n = blockDim.x;
  __syncthreads(); // the scratch is free (an earlier merge has read it)
  scratch[t] = double(a.acc);
  __syncthreads();
  for (unsigned s = 1; s < n; s <<= 1) {
    if (t % (2 * s) == 0 && t + s < n) {
      pax::runtime::Accumulator<T> o = a;
      o.acc = T(scratch[t + s]);
      a.merge(o);
      scratch[t] = double(a.acc);
    }
    __syncthreads();
  }
  a.acc = T(scratch[0]);
#else
  (void)a;
  (void)scratch;
#endif
}

} // namespace pax::gen

/// The entry point: `void NAME(Args a, int64_t begin, int64_t end)`, over
/// the points [begin, end).
#if defined(__CUDACC__)
#define PAX_GENERATED_KERNEL(name)                                             \
  extern "C" __global__ void name(pax::gen::Args a, int64_t begin, int64_t end)
/// The points this thread computes: a grid-stride loop.
#define PAX_FOR_POINTS(p)                                                      \
  for (int64_t p = begin + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;     \
       p < end; p += int64_t(gridDim.x) * blockDim.x)
#else
#define PAX_GENERATED_KERNEL(name)                                             \
  extern "C" void name(pax::gen::Args a, int64_t begin, int64_t end)
#define PAX_FOR_POINTS(p) for (int64_t p = begin; p < end; ++p)
#endif

/// A row kernel's frame: a block per row, its threads striding the
/// columns; the shared scratch blockMerge uses; the one thread that stores
/// a row's values. On the host, each row's columns in order.
#if defined(__CUDA_ARCH__)
#define PAX_FOR_ROWS(p)                                                        \
  for (int64_t p = begin + int64_t(blockIdx.x); p < end; p += gridDim.x)
#define PAX_FOR_COLUMNS(c, n)                                                  \
  for (int64_t c = threadIdx.x; c < (n); c += blockDim.x)
#define PAX_ROW_SCRATCH __shared__ double pax_scratch[pax::gen::kRowThreads]
#define PAX_FIRST_THREAD (threadIdx.x == 0)
#else
#define PAX_FOR_ROWS(p) for (int64_t p = begin; p < end; ++p)
#define PAX_FOR_COLUMNS(c, n) for (int64_t c = 0; c < (n); ++c)
#define PAX_ROW_SCRATCH double pax_scratch[1]
#define PAX_FIRST_THREAD true
#endif

#endif // PAX_RUNTIME_GENERATEDKERNEL_H
