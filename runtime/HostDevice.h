//===- HostDevice.h - Code the host compiler and nvcc both build -*- C++ -*-===//
//
// PAX_HD marks a function the CPU kernels call on the host and the CUDA
// kernels call on the device: one definition serves both backends.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_HOSTDEVICE_H
#define PAX_RUNTIME_HOSTDEVICE_H

// The standard headers the shared code uses. NVRTC, which compiles the
// kernels codegen generates at load time, has none: it gets the fixed-width
// integers here and the math functions from its builtins.
#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
#define INT64_MAX 0x7fffffffffffffffL
#define INT64_MIN (-INT64_MAX - 1)
#define UINT64_MAX 0xffffffffffffffffUL
#define INFINITY (__int_as_float(0x7f800000))
#define NAN (__int_as_float(0x7fffffff))
namespace std {
using ::int64_t;
using ::uint64_t;
__device__ inline bool isnan(double x) { return ::isnan(x); }
} // namespace std
#else
#include <cmath>
#include <cstdint>
#include <cstring>
#endif

#if defined(__CUDACC__)
#define PAX_HD __host__ __device__
#else
#define PAX_HD
#endif

// Unrolls the loop after it in device code (its bound a constant); nothing
// on the host.
#if defined(__CUDA_ARCH__)
#define PAX_UNROLL _Pragma("unroll")
#else
#define PAX_UNROLL
#endif

#endif // PAX_RUNTIME_HOSTDEVICE_H
