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
#include "runtime/ScalarMath.h"

namespace pax::gen {

/// The most buffers one generated kernel addresses.
inline constexpr int kMaxParams = 24;

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

#endif // PAX_RUNTIME_GENERATEDKERNEL_H
