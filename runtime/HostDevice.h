//===- HostDevice.h - Code the host compiler and nvcc both build -*- C++ -*-===//
//
// PAX_HD marks a function the CPU kernels call on the host and the CUDA
// kernels call on the device: one definition serves both backends.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_HOSTDEVICE_H
#define PAX_RUNTIME_HOSTDEVICE_H

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
